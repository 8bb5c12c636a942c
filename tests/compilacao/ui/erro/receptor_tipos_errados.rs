use mensageria_axum::{Rejeicao, receptor};
use mensageria_core::sqlx::{Postgres, Transaction};
use serde::Deserialize;

#[derive(Deserialize)]
struct Evento {
    id: String,
    revisao: String,
}

/// Not `Deserialize`: the handler could not decode it.
struct SemSerde {
    id: String,
}

#[receptor(tipo = "versao.texto", chave_natural = evento.id, versao = evento.revisao)]
async fn versao_texto(_tx: &mut Transaction<'_, Postgres>, evento: Evento) -> Result<(), Rejeicao> {
    let _ = evento.id;
    Ok(())
}

#[receptor(tipo = "payload.sem.serde", chave_natural = evento.id)]
async fn payload_sem_serde(_tx: &mut Transaction<'_, Postgres>, evento: SemSerde) -> Result<(), Rejeicao> {
    let _ = evento.id;
    Ok(())
}

#[receptor(tipo = "erro.errado", chave_natural = evento.id)]
async fn erro_errado(_tx: &mut Transaction<'_, Postgres>, evento: Evento) -> Result<(), String> {
    let _ = (evento.id, evento.revisao);
    Ok(())
}

#[receptor(tipo = "campo.inexistente", chave_natural = evento.chave)]
async fn campo_inexistente(_tx: &mut Transaction<'_, Postgres>, evento: Evento) -> Result<(), Rejeicao> {
    let _ = evento.id;
    Ok(())
}

fn main() {}
