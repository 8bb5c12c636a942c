use std::rc::Rc;

use mensageria_core::{ContextoEnvio, FalhaEnvio, enviador};
use serde::{Deserialize, Serialize};

#[derive(Serialize, Deserialize)]
struct A;

async fn algo() {}

#[enviador(tipo = "nao-send")]
async fn nao_send(_e: A, _ctx: &ContextoEnvio) -> Result<(), FalhaEnvio> {
    let contador = Rc::new(1);
    algo().await;
    drop(contador);
    Ok(())
}

fn main() {}
