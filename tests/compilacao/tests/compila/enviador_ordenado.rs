//! Ordered delivery: `ordem = <expr>` over the payload parameter (integers, strings, UUIDs,
//! a formatted key), and `enfileirar_ordenado` with the key at the call.
use mensageria_core::{ContextoEnvio, FalhaEnvio, enviador};
use serde::{Deserialize, Serialize};

#[derive(Serialize, Deserialize)]
pub struct PedidoCriado {
    pub pedido_id: i64,
}

#[derive(Serialize, Deserialize)]
pub struct PedidoCancelado {
    pub pedido: String,
}

#[derive(Serialize, Deserialize)]
pub struct Nota {
    pub emitente: uuid::Uuid,
    pub serie: u32,
}

#[enviador(tipo = "pedido.criado", ordem = evento.pedido_id)]
async fn enviar_criado(evento: PedidoCriado, _ctx: &ContextoEnvio) -> Result<(), FalhaEnvio> {
    let _ = evento.pedido_id;
    Ok(())
}

#[enviador(tipo = "pedido.cancelado", ordem = evento.pedido)]
async fn enviar_cancelado(evento: PedidoCancelado, _ctx: &ContextoEnvio) -> Result<(), FalhaEnvio> {
    let _ = evento.pedido;
    Ok(())
}

#[enviador(tipo = "nota.emitida", ordem = format!("{}:{}", nota.emitente, nota.serie))]
async fn enviar_nota(nota: Nota, _ctx: &ContextoEnvio) -> Result<(), FalhaEnvio> {
    let _ = nota.emitente;
    Ok(())
}

async fn gravar(pool: &sqlx::PgPool) -> Result<(), mensageria_core::Erro> {
    let mut tx = pool.begin().await?;
    mensageria_core::enfileirar(&mut *tx, &PedidoCriado { pedido_id: 42 }).await?;
    mensageria_core::enfileirar_ordenado(
        &mut *tx,
        &PedidoCancelado {
            pedido: "42".into(),
        },
        "pedido:42",
    )
    .await?;
    tx.commit().await?;
    Ok(())
}

#[test]
fn compila() {
    let _ = gravar;
}
