use mensageria_core::evento;
use serde::{Deserialize, Serialize};

#[evento(tipo = "Pedido Criado")]
#[derive(Serialize, Deserialize)]
pub struct TipoForaDoAlfabeto;

#[evento]
#[derive(Serialize, Deserialize)]
pub struct SemTipo;

#[evento(tipo = "pedido.criado", versao = 2)]
#[derive(Serialize, Deserialize)]
pub struct ArgumentoDesconhecido;

#[evento(tipo = "pedido.generico")]
#[derive(Serialize, Deserialize)]
pub struct Generico<T>(T);

#[evento(tipo = "pedido.funcao")]
pub fn nao_e_um_tipo() {}

#[evento(tipo = "pedido.sem-serde")]
pub struct SemSerde;

fn main() {}
