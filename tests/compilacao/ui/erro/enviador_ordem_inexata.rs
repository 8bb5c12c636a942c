use mensageria_core::{ContextoEnvio, FalhaEnvio, enviador};
use serde::{Deserialize, Serialize};

#[derive(Serialize, Deserialize)]
struct Leitura {
    sensor: f64,
}

#[derive(Serialize, Deserialize)]
struct Outra {
    n: i64,
}

// A float is not an exact key.
#[enviador(tipo = "leitura.nova", ordem = evento.sensor)]
async fn enviar(evento: Leitura, _ctx: &ContextoEnvio) -> Result<(), FalhaEnvio> {
    let _ = evento.sensor;
    Ok(())
}

// `ordem` given twice.
#[enviador(tipo = "outra.coisa", ordem = evento.n, ordem = evento.n)]
async fn enviar_outra(evento: Outra, _ctx: &ContextoEnvio) -> Result<(), FalhaEnvio> {
    let _ = evento.n;
    Ok(())
}

fn main() {}
