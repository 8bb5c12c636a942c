// The sending app's library already has an enviador for `PedidoCriado`; a second one in the
// binary leaves `enfileirar` unable to choose (and both would register "pedido.criado").
use contratos_exemplo::PedidoCriado;
use mensageria_core::{ContextoEnvio, FalhaEnvio, enviador};
use remetente_exemplo as _;

#[enviador]
async fn enviar_de_novo(_e: PedidoCriado, _ctx: &ContextoEnvio) -> Result<(), FalhaEnvio> {
    Ok(())
}

async fn gravar(pool: &sqlx::SqlitePool) -> Result<(), mensageria_core::Erro> {
    let evento = PedidoCriado { pedido: 1, cliente: "ana".into() };
    mensageria_core::enfileirar(pool, &evento).await?;
    Ok(())
}

fn main() {
    let _ = gravar;
}
