use std::rc::Rc;

use mensageria_axum::{Rejeicao, receptor};
use mensageria_core::sqlx::{Postgres, Transaction};
use serde::Deserialize;

#[derive(Deserialize)]
struct Evento {
    id: String,
}

async fn algo() {}

#[receptor(tipo = "nao.send", chave_natural = evento.id)]
async fn nao_send(_tx: &mut Transaction<'_, Postgres>, evento: Evento) -> Result<(), Rejeicao> {
    let contador = Rc::new(evento.id);
    algo().await;
    let _ = contador;
    Ok(())
}

fn main() {}
