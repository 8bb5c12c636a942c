use mensageria_axum::{Rejeicao, receptor};
use mensageria_core::sqlx::{Postgres, Transaction};
use serde::Deserialize;

#[derive(Deserialize)]
struct Evento {
    id: String,
}

#[receptor(tipo = "nao.async", chave_natural = evento.id)]
fn nao_async(_tx: &mut Transaction<'_, Postgres>, evento: Evento) -> Result<(), Rejeicao> {
    let _ = evento.id;
    Ok(())
}

#[receptor(tipo = "sem.transacao", chave_natural = evento.id)]
async fn sem_transacao(evento: Evento) -> Result<(), Rejeicao> {
    let _ = evento.id;
    Ok(())
}

#[receptor(tipo = "ordem.trocada", chave_natural = evento.id)]
async fn ordem_trocada(evento: Evento, _tx: &mut Transaction<'_, Postgres>) -> Result<(), Rejeicao> {
    let _ = evento.id;
    Ok(())
}

#[receptor(tipo = "payload.por.referencia", chave_natural = evento.id)]
async fn payload_por_referencia(_tx: &mut Transaction<'_, Postgres>, evento: &Evento) -> Result<(), Rejeicao> {
    let _ = &evento.id;
    Ok(())
}

#[receptor(tipo = "payload.desestruturado", chave_natural = id)]
async fn payload_desestruturado(_tx: &mut Transaction<'_, Postgres>, Evento { id }: Evento) -> Result<(), Rejeicao> {
    let _ = id;
    Ok(())
}

#[receptor(tipo = "sem.retorno", chave_natural = evento.id)]
async fn sem_retorno(_tx: &mut Transaction<'_, Postgres>, evento: Evento) {
    let _ = evento.id;
}

#[receptor(tipo = "generico", chave_natural = evento.id)]
async fn generico<T>(_tx: &mut Transaction<'_, Postgres>, evento: Evento) -> Result<(), Rejeicao> {
    let _ = evento.id;
    Ok(())
}

#[receptor(tipo = "parametro.a.mais", chave_natural = evento.id)]
async fn parametro_a_mais(_tx: &mut Transaction<'_, Postgres>, evento: Evento, _x: u32) -> Result<(), Rejeicao> {
    let _ = evento.id;
    Ok(())
}

fn main() {}
