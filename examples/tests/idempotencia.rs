//! The test an adopter writes to prove a receptor idempotent: no proxy, no sleep. The relay's
//! `Ensaio` switches send every message twice per attempt and lose its first ack, so each
//! message reaches the receptor four times; `drenar` returns when nothing is due.

use std::future::IntoFuture as _;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use mensageria_axum::{Rejeicao, receptor};
use mensageria_core::relay::{Config, Relay};
use mensageria_core::teste::Ensaio;
use mensageria_core::{ContextoEnvio, Destino, FalhaEnvio, enfileirar, enviador};
use serde::{Deserialize, Serialize};
use sqlx::{Sqlite, SqlitePool, Transaction};

#[derive(Serialize, Deserialize)]
struct Pagamento {
    pedido: String,
    valor_centavos: i64,
}

#[enviador(tipo = "loja.pagamento")]
async fn enviar_pagamento(evento: Pagamento, ctx: &ContextoEnvio) -> Result<(), FalhaEnvio> {
    ctx.exigir::<Destino>()?.postar(&evento, ctx).await
}

/// The receptor under test. Its effect has no guard of its own (a plain INSERT into a table
/// with no unique key, so a second application would show as a second row): the dedup record
/// written in the same transaction is what keeps it single.
#[receptor(tipo = "loja.pagamento", chave_natural = (evento.pedido))]
async fn receber_pagamento(
    tx: &mut Transaction<'_, Sqlite>,
    evento: Pagamento,
) -> Result<(), Rejeicao> {
    sqlx::query("INSERT INTO pago (pedido, valor_centavos) VALUES ($1, $2)")
        .bind(&evento.pedido)
        .bind(evento.valor_centavos)
        .execute(&mut **tx)
        .await?;
    Ok(())
}

#[tokio::test]
async fn cada_pagamento_aplica_uma_vez_mesmo_entregue_quatro_vezes() {
    let dir = tempfile::tempdir().unwrap();
    let pool = mensageria_core::banco::sqlite::abrir(dir.path().join("loja.db"))
        .await
        .unwrap();
    mensageria_core::migrar(&pool).await.unwrap();
    sqlx::query("CREATE TABLE pago (pedido TEXT NOT NULL, valor_centavos INTEGER NOT NULL)")
        .execute(&pool)
        .await
        .unwrap();
    let (url, entregas) = servir_receptores(pool.clone()).await;

    // The ten lines: faults on, enqueue, drain, check.
    let ensaio = Ensaio::new().duplicar_entregas().perder_primeiro_ack();
    let relay = Relay::new(pool.clone(), Config::new("loja").com_ensaio(ensaio))
        // One request per delivery (no batches), so the count below counts deliveries.
        .recurso(
            Destino::new(&url)
                .unwrap()
                .com_token("t0k")
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
        entregas.load(Ordering::Relaxed),
        3 * 4,
        "2 sends per attempt × 2 attempts"
    );
    let na_saida: i64 = sqlx::query_scalar("SELECT count(*) FROM mensageria_saida")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(na_saida, 0, "drained");
}

/// Every registered SQLite receptor on 127.0.0.1, with a counter of the requests it receives.
async fn servir_receptores(pool: SqlitePool) -> (String, Arc<AtomicUsize>) {
    let entregas = Arc::new(AtomicUsize::new(0));
    let contador = Arc::clone(&entregas);
    let app = mensageria_axum::router(pool, mensageria_axum::Config::new(["t0k"]))
        .unwrap()
        .layer(axum::middleware::from_fn(
            move |pedido, proximo: axum::middleware::Next| {
                contador.fetch_add(1, Ordering::Relaxed);
                proximo.run(pedido)
            },
        ));
    let ouvinte = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", ouvinte.local_addr().unwrap());
    tokio::spawn(mensageria_axum::servir(ouvinte, app).into_future());
    (url, entregas)
}
