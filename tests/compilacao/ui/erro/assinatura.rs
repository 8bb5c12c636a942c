use mensageria_core::{ContextoEnvio, FalhaEnvio, enviador};
use serde::{Deserialize, Serialize};

#[derive(Serialize, Deserialize)]
struct A;

#[enviador(tipo = "nao-async")]
fn nao_async(_e: A, _ctx: &ContextoEnvio) -> Result<(), FalhaEnvio> {
    Ok(())
}

#[enviador(tipo = "payload-por-referencia")]
async fn payload_por_referencia(_e: &A, _ctx: &ContextoEnvio) -> Result<(), FalhaEnvio> {
    Ok(())
}

#[enviador(tipo = "sem-contexto")]
async fn sem_contexto(_e: A) -> Result<(), FalhaEnvio> {
    Ok(())
}

#[enviador(tipo = "contexto-por-valor")]
async fn contexto_por_valor(_e: A, _ctx: ContextoEnvio) -> Result<(), FalhaEnvio> {
    Ok(())
}

#[enviador(tipo = "parametro-a-mais")]
async fn parametro_a_mais(_e: A, _ctx: &ContextoEnvio, _x: u32) -> Result<(), FalhaEnvio> {
    Ok(())
}

#[enviador(tipo = "generico")]
async fn generico<T>(_e: T, _ctx: &ContextoEnvio) -> Result<(), FalhaEnvio> {
    Ok(())
}

#[enviador(tipo = "sem-retorno")]
async fn sem_retorno(_e: A, _ctx: &ContextoEnvio) {}

struct Servico;

impl Servico {
    #[enviador(tipo = "metodo")]
    async fn metodo(&self, _ctx: &ContextoEnvio) -> Result<(), FalhaEnvio> {
        Ok(())
    }
}

fn main() {}
