//! `idempotencia.rs` on PostgreSQL: the same scenario (`idempotencia/comum.rs`) in a schema of
//! this test's own (`PgIsolado`), on the server at `DATABASE_URL`.

#[path = "idempotencia/comum.rs"]
mod comum;

use comum::Pagamento;
use mensageria_axum::{Rejeicao, receptor};
use mensageria_core::teste::PgIsolado;
use sqlx::{Postgres, Transaction};

/// The receptor under test, as in `idempotencia.rs`, on PostgreSQL.
#[receptor(tipo = "loja.pagamento", chave_natural = (evento.pedido))]
async fn receber_pagamento(
    tx: &mut Transaction<'_, Postgres>,
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
    let db = PgIsolado::novo().await.unwrap(); // a migrated schema of this test's own
    let receptores = db.outro_pool(3).await.unwrap(); // the router's pool, apart from the relay's
    comum::cada_pagamento_aplica_uma_vez(db.pool().clone(), receptores.clone()).await;
    receptores.close().await;
    db.fechar().await.unwrap();
}
