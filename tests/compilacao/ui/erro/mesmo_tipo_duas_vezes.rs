use mensageria_core::{ContextoEnvio, FalhaEnvio, enviador};
use serde::{Deserialize, Serialize};

#[derive(Serialize, Deserialize)]
struct Encerramento;

#[derive(Serialize, Deserialize)]
struct EncerramentoNovo;

#[enviador(tipo = "mdfe.encerramento")]
async fn enviar(_e: Encerramento, _ctx: &ContextoEnvio) -> Result<(), FalhaEnvio> {
    Ok(())
}

mod noutro_modulo {
    use super::*;

    #[enviador(tipo = "mdfe.encerramento")]
    async fn enviar(_e: EncerramentoNovo, _ctx: &ContextoEnvio) -> Result<(), FalhaEnvio> {
        Ok(())
    }
}

fn main() {}
