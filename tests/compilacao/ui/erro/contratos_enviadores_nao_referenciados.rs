// The enviadores live in a library crate (`remetente_exemplo`) that this binary depends on but
// never names: the crate is not loaded, so neither its `Enviador` impls nor its registrations
// exist here. The typed enqueue says so at compile time; `use remetente_exemplo as _;` fixes it.
use contratos_exemplo::PedidoCriado;

async fn gravar(pool: &sqlx::SqlitePool) -> Result<(), mensageria_core::Erro> {
    let evento = PedidoCriado { pedido: 1, cliente: "ana".into() };
    mensageria_core::enfileirar(pool, &evento).await?;
    Ok(())
}

fn main() {
    let _ = gravar;
}
