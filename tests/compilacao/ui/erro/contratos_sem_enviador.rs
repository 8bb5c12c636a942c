// A receiving app links the contracts crate; enqueueing one of its types does not compile,
// because this app has no enviador for it (only the app that owns the tipo sends it).
use contratos_exemplo::PedidoCriado;

async fn gravar(pool: &sqlx::PgPool) -> Result<(), mensageria_core::Erro> {
    let mut tx = pool.begin().await?;
    let evento = PedidoCriado { pedido: 1, cliente: "ana".into() };
    mensageria_core::enfileirar(&mut *tx, &evento).await?;
    tx.commit().await?;
    Ok(())
}

fn main() {
    let _ = gravar;
}
