use mensageria_axum::{Rejeicao, receptor};
use mensageria_core::sqlx::{Postgres, Transaction};
use serde::Deserialize;

#[derive(Deserialize)]
struct Evento {
    id: String,
}

#[receptor(tipo = "sem.chave")]
async fn sem_chave(_tx: &mut Transaction<'_, Postgres>, evento: Evento) -> Result<(), Rejeicao> {
    let _ = evento.id;
    Ok(())
}

#[receptor(chave_natural = evento.id)]
async fn sem_tipo(_tx: &mut Transaction<'_, Postgres>, evento: Evento) -> Result<(), Rejeicao> {
    let _ = evento.id;
    Ok(())
}

#[receptor(tipo = "desconhecido", chave_natural = evento.id, prioridade = 1)]
async fn argumento_desconhecido(_tx: &mut Transaction<'_, Postgres>, evento: Evento) -> Result<(), Rejeicao> {
    let _ = evento.id;
    Ok(())
}

#[receptor(tipo = mdfe.encerramento, chave_natural = evento.id)]
async fn tipo_sem_aspas(_tx: &mut Transaction<'_, Postgres>, evento: Evento) -> Result<(), Rejeicao> {
    let _ = evento.id;
    Ok(())
}

#[receptor(tipo = "tem espaco", chave_natural = evento.id)]
async fn tipo_invalido(_tx: &mut Transaction<'_, Postgres>, evento: Evento) -> Result<(), Rejeicao> {
    let _ = evento.id;
    Ok(())
}

#[receptor(tipo = "chave.vazia", chave_natural = ())]
async fn chave_vazia(_tx: &mut Transaction<'_, Postgres>, evento: Evento) -> Result<(), Rejeicao> {
    let _ = evento.id;
    Ok(())
}

#[receptor(tipo = "chave.dupla", chave_natural = evento.id, chave_natural = evento.id)]
async fn chave_dupla(_tx: &mut Transaction<'_, Postgres>, evento: Evento) -> Result<(), Rejeicao> {
    let _ = evento.id;
    Ok(())
}

fn main() {}
