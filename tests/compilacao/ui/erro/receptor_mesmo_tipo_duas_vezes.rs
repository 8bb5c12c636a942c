use mensageria_axum::{Rejeicao, receptor};
use mensageria_core::sqlx::{Postgres, Transaction};
use serde::Deserialize;

#[derive(Deserialize)]
struct Evento {
    id: String,
}

#[receptor(tipo = "mdfe.encerramento", chave_natural = evento.id)]
async fn primeiro(_tx: &mut Transaction<'_, Postgres>, evento: Evento) -> Result<(), Rejeicao> {
    let _ = evento.id;
    Ok(())
}

#[receptor(tipo = "mdfe.encerramento", chave_natural = evento.id)]
async fn segundo(_tx: &mut Transaction<'_, Postgres>, evento: Evento) -> Result<(), Rejeicao> {
    let _ = evento.id;
    Ok(())
}

fn main() {}
