// The contracts crate declares `PedidoCriado` as "pedido.criado"; an enviador that sends it as
// another tipo would reach no receptor of the type.
use contratos_exemplo::PedidoCriado;
use mensageria_core::{ContextoEnvio, FalhaEnvio, enviador};

#[enviador(tipo = "pedido.novo")]
async fn enviar(_e: PedidoCriado, _ctx: &ContextoEnvio) -> Result<(), FalhaEnvio> {
    Ok(())
}

fn main() {}
