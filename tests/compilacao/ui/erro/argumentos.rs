use mensageria_core::{ContextoEnvio, FalhaEnvio, enviador};
use serde::{Deserialize, Serialize};

#[derive(Serialize, Deserialize)]
struct A;
#[derive(Serialize, Deserialize)]
struct B;
#[derive(Serialize, Deserialize)]
struct C;
#[derive(Serialize, Deserialize)]
struct D;
#[derive(Serialize, Deserialize)]
struct E;

#[enviador]
async fn sem_tipo(_e: A, _ctx: &ContextoEnvio) -> Result<(), FalhaEnvio> {
    Ok(())
}

#[enviador(tipo = "b", destino = "http://fiscal")]
async fn argumento_desconhecido(_e: B, _ctx: &ContextoEnvio) -> Result<(), FalhaEnvio> {
    Ok(())
}

#[enviador(tipo = mdfe.encerramento)]
async fn tipo_sem_aspas(_e: C, _ctx: &ContextoEnvio) -> Result<(), FalhaEnvio> {
    Ok(())
}

#[enviador(tipo = "MDFe Encerramento")]
async fn tipo_fora_do_alfabeto(_e: D, _ctx: &ContextoEnvio) -> Result<(), FalhaEnvio> {
    Ok(())
}

#[enviador(tipo = "")]
async fn tipo_vazio(_e: E, _ctx: &ContextoEnvio) -> Result<(), FalhaEnvio> {
    Ok(())
}

fn main() {}
