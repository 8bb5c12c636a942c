//! One receptor of a tipo per backend in one crate: each backend's router mounts its own.
use mensageria_axum::{Rejeicao, receptor};
use mensageria_core::sqlx::{Postgres, Sqlite, Transaction};
use serde::Deserialize;

#[derive(Deserialize)]
struct Evento {
    id: String,
}

#[receptor(tipo = "mdfe.encerramento", chave_natural = evento.id)]
async fn no_postgres(_tx: &mut Transaction<'_, Postgres>, evento: Evento) -> Result<(), Rejeicao> {
    let _ = evento.id;
    Ok(())
}

#[receptor(tipo = "mdfe.encerramento", chave_natural = evento.id)]
async fn no_sqlite(_tx: &mut Transaction<'_, Sqlite>, evento: Evento) -> Result<(), Rejeicao> {
    let _ = evento.id;
    Ok(())
}

#[test]
fn compila() {}
