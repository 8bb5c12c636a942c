use mensageria_core::{ContextoEnvio, FalhaEnvio, enviador};
use serde::{Deserialize, Serialize};

#[derive(Serialize, Deserialize)]
struct A;
#[derive(Serialize, Deserialize)]
struct B;

// A context of the wrong type.
#[enviador(tipo = "contexto-errado")]
async fn contexto_errado(_e: A, _ctx: &String) -> Result<(), FalhaEnvio> {
    Ok(())
}

// An error type the relay cannot act on.
#[enviador(tipo = "erro-errado")]
async fn erro_errado(_e: B, _ctx: &ContextoEnvio) -> Result<(), String> {
    Ok(())
}

fn main() {}
