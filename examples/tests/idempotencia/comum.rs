//! The scenario of the idempotency test, written once for both backends: the enviador, the
//! payload, and the ten lines that enqueue, drain under faults and check. Each backend's test
//! file (`idempotencia.rs` for SQLite, `idempotencia_postgres.rs` for PostgreSQL) declares its
//! receptor — the code under test, whose transaction type names the backend — and calls
//! [`cada_pagamento_aplica_uma_vez`] with a database of its own.

use mensageria_axum::teste::ServidorDeTeste;
use mensageria_core::banco::Banco;
use mensageria_core::relay::{Config, Relay};
use mensageria_core::teste::Ensaio;
use mensageria_core::{ContextoEnvio, Destino, FalhaEnvio, enfileirar, enviador};
use serde::{Deserialize, Serialize};
use sqlx::Pool;

/// The event: one payment of one order. Its natural key is the order.
#[derive(Serialize, Deserialize)]
pub(crate) struct Pagamento {
    pub(crate) pedido: String,
    pub(crate) valor_centavos: i64,
}

#[enviador(tipo = "loja.pagamento")]
async fn enviar_pagamento(evento: Pagamento, ctx: &ContextoEnvio) -> Result<(), FalhaEnvio> {
    ctx.exigir::<Destino>()?.postar(&evento, ctx).await
}

/// The receptor's effect table: no unique key of its own, so a second application of one
/// payment would show as a second row. The receptor inserts `(pedido, valor_centavos)`.
const TABELA: &str = "CREATE TABLE pago (pedido TEXT NOT NULL, valor_centavos BIGINT NOT NULL)";

/// Three payments, each sent twice per attempt with its first ack lost (four deliveries each),
/// are applied once each. `relay` is the sender's pool; `receptores` the router's (keep them
/// apart in production, so a burst of deliveries cannot starve the relay).
pub(crate) async fn cada_pagamento_aplica_uma_vez<DB: Banco>(relay: Pool<DB>, receptores: Pool<DB>)
where
    for<'c> &'c mut DB::Connection: sqlx::Executor<'c, Database = DB>,
    DB::Arguments: sqlx::IntoArguments<DB>,
    (String, i64): for<'r> sqlx::FromRow<'r, DB::Row>,
    (i64,): for<'r> sqlx::FromRow<'r, DB::Row>,
{
    sqlx::query(TABELA).execute(&relay).await.unwrap();
    let app = mensageria_axum::router(
        receptores,
        mensageria_axum::Config::new("receptor", ["t0k-de-teste-1234"]),
    )
    .unwrap();
    let servidor = ServidorDeTeste::iniciar(app).await.unwrap(); // 127.0.0.1:0, counts requests
    let pool = relay;

    // The ten lines: faults on, enqueue, drain, check.
    let ensaio = Ensaio::new().duplicar_entregas().perder_primeiro_ack();
    let relay = Relay::new(pool.clone(), Config::new("loja").com_ensaio(ensaio))
        // One request per delivery (no batches), so the count below counts deliveries.
        .recurso(
            Destino::new(&servidor.base())
                .unwrap()
                .com_token("t0k-de-teste-1234")
                .com_lote_maximo(1),
        );
    for pedido in ["p-1", "p-2", "p-3"] {
        let mut tx = pool.begin().await.unwrap();
        let evento = Pagamento {
            pedido: pedido.into(),
            valor_centavos: 990,
        };
        enfileirar(&mut *tx, &evento).await.unwrap();
        tx.commit().await.unwrap();
    }
    relay.drenar().await.unwrap();
    let pagos: Vec<(String, i64)> =
        sqlx::query_as("SELECT pedido, count(*) FROM pago GROUP BY pedido ORDER BY pedido")
            .fetch_all(&pool)
            .await
            .unwrap();
    assert_eq!(
        pagos,
        [("p-1".into(), 1), ("p-2".into(), 1), ("p-3".into(), 1)]
    );
    assert_eq!(
        servidor.pedidos(),
        3 * 4,
        "2 sends per attempt × 2 attempts"
    );
    let (na_saida,): (i64,) = sqlx::query_as("SELECT count(*) FROM mensageria_saida")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(na_saida, 0, "drained");

    servidor.parar().await.unwrap();
}
