//! The test an adopter writes to prove a receptor idempotent: no proxy, no sleep. The relay's
//! `Ensaio` switches send every message twice per attempt and lose its first ack, so each
//! message reaches the receptor four times; `drenar` returns when nothing is due.
//!
//! On SQLite; `idempotencia_postgres.rs` runs the same scenario (`idempotencia/comum.rs`) on
//! PostgreSQL.

#[path = "idempotencia/comum.rs"]
mod comum;

use comum::Pagamento;
use mensageria_axum::{Rejeicao, receptor};
use mensageria_core::teste::SqliteIsolado;
use sqlx::{Sqlite, Transaction};

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
    let db = SqliteIsolado::novo().await.unwrap(); // a migrated file of this test's own
    comum::cada_pagamento_aplica_uma_vez(db.pool().clone(), db.pool().clone()).await;
    db.fechar().await.unwrap();
}
