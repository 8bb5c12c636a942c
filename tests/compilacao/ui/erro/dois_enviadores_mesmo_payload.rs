use mensageria_core::{ContextoEnvio, FalhaEnvio, enviador};
use serde::{Deserialize, Serialize};

#[derive(Serialize, Deserialize)]
struct Encerramento;

#[enviador(tipo = "mdfe.encerramento")]
async fn enviar(_e: Encerramento, _ctx: &ContextoEnvio) -> Result<(), FalhaEnvio> {
    Ok(())
}

#[enviador(tipo = "mdfe.encerramento-v2")]
async fn enviar_de_novo(_e: Encerramento, _ctx: &ContextoEnvio) -> Result<(), FalhaEnvio> {
    Ok(())
}

fn main() {}
