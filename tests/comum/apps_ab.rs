//! The tipos of the child apps `app-a` and `app-b` as the rest of the suite sees them: this
//! binary may enqueue them (each has an enviador here that never runs, since only the child
//! apps run relays on the schemas where they are enqueued) and receives them (the receptors
//! write the suite's `efeito` table).

use mensageria_axum::{Rejeicao, receptor};
use mensageria_core::{ContextoEnvio, FalhaEnvio, enviador};
use serde::{Deserialize, Serialize};
use sqlx::{Postgres, Transaction};

/// The payload of `faltas.a`, delivered by the child app `app-a` (this binary can enqueue it).
#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct EventoA {
    pub(crate) n: i64,
}

/// The payload of `faltas.b`, delivered by the child app `app-b`.
#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct EventoB {
    pub(crate) n: i64,
}

#[enviador(tipo = "faltas.a")]
async fn nao_enviar_a(_evento: EventoA, _ctx: &ContextoEnvio) -> Result<(), FalhaEnvio> {
    Err(FalhaEnvio::temporaria("faltas.a is delivered by app-a"))
}

#[enviador(tipo = "faltas.b")]
async fn nao_enviar_b(_evento: EventoB, _ctx: &ContextoEnvio) -> Result<(), FalhaEnvio> {
    Err(FalhaEnvio::temporaria("faltas.b is delivered by app-b"))
}

/// The effect of both tipos: one row in `efeito`.
async fn aplicar_n(tx: &mut Transaction<'_, Postgres>, n: i64) -> Result<(), Rejeicao> {
    sqlx::query("INSERT INTO efeito (n) VALUES ($1)")
        .bind(n)
        .execute(&mut **tx)
        .await?;
    Ok(())
}

#[receptor(tipo = "faltas.a", chave_natural = evento.n)]
async fn aplicar_a(tx: &mut Transaction<'_, Postgres>, evento: EventoA) -> Result<(), Rejeicao> {
    aplicar_n(tx, evento.n).await
}

#[receptor(tipo = "faltas.b", chave_natural = evento.n)]
async fn aplicar_b(tx: &mut Transaction<'_, Postgres>, evento: EventoB) -> Result<(), Rejeicao> {
    aplicar_n(tx, evento.n).await
}
