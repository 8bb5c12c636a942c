// A natural key must be exact: a float, or a `serde_json::Value` (whose numbers past `u64` are
// floats), would let two different events share a key. Each is refused at the part's token.
use mensageria_axum::{Rejeicao, receptor};
use mensageria_core::sqlx::{Postgres, Transaction};
use serde::Deserialize;

#[derive(Deserialize)]
struct Pagamento {
    pedido: String,
    valor: f64,
    extra: serde_json::Value,
}

#[receptor(tipo = "pagamento.valor", chave_natural = (evento.pedido, evento.valor))]
async fn por_valor(_tx: &mut Transaction<'_, Postgres>, evento: Pagamento) -> Result<(), Rejeicao> {
    let _ = (evento.pedido, evento.extra);
    Ok(())
}

#[receptor(tipo = "pagamento.extra", chave_natural = evento.extra)]
async fn por_extra(_tx: &mut Transaction<'_, Postgres>, evento: Pagamento) -> Result<(), Rejeicao> {
    let _ = (evento.pedido, evento.valor);
    Ok(())
}

fn main() {}
