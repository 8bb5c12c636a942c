//! Sharing a contracts crate's types: the sending app puts `#[enviador]` on them (the tipo comes
//! from the type's `#[evento]`, or is written and agrees), enqueues them, and a receptor takes
//! them without a tipo too. A local `#[evento]` works the same way.
use contratos_exemplo::{PedidoCancelado, PedidoCriado};
use mensageria_axum::{Rejeicao, receptor};
use mensageria_core::{ContextoEnvio, Evento, FalhaEnvio, enviador, evento};
use serde::{Deserialize, Serialize};

#[enviador]
async fn enviar_criado(_e: PedidoCriado, _ctx: &ContextoEnvio) -> Result<(), FalhaEnvio> {
    Ok(())
}

#[enviador(tipo = "pedido.cancelado", ordem = evento.pedido())]
async fn enviar_cancelado(evento: PedidoCancelado, _ctx: &ContextoEnvio) -> Result<(), FalhaEnvio> {
    let _ = evento;
    Ok(())
}

#[evento(tipo = "estoque.reservado")]
#[derive(Serialize, Deserialize)]
pub struct Reservado {
    pub pedido: i64,
}

#[enviador]
async fn enviar_reservado(_e: Reservado, _ctx: &ContextoEnvio) -> Result<(), FalhaEnvio> {
    Ok(())
}

#[receptor(chave_natural = (evento.pedido))]
async fn receber_criado(
    tx: &mut sqlx::Transaction<'_, sqlx::Postgres>,
    evento: PedidoCriado,
) -> Result<(), Rejeicao> {
    mensageria_core::enfileirar(
        &mut **tx,
        &Reservado {
            pedido: evento.pedido,
        },
    )
    .await?;
    Ok(())
}

// A written receptor tipo wins: the same type received under a second tipo.
#[receptor(tipo = "pedido.criado-copia", chave_natural = (evento.pedido))]
async fn receber_copia(
    _tx: &mut sqlx::Transaction<'_, sqlx::Sqlite>,
    evento: PedidoCriado,
) -> Result<(), Rejeicao> {
    let _ = evento;
    Ok(())
}

async fn gravar(pool: &sqlx::SqlitePool) -> Result<(), mensageria_core::Erro> {
    let mut tx = pool.begin().await?;
    let criado = PedidoCriado {
        pedido: 1,
        cliente: "ana".into(),
    };
    mensageria_core::enfileirar(&mut *tx, &criado).await?;
    mensageria_core::enfileirar(&mut *tx, &PedidoCancelado::PeloCliente { pedido: 1 }).await?;
    mensageria_core::Saida::new()
        .enfileirar_ordenado(&mut *tx, &criado, "pedido:1")
        .await?;
    tx.commit().await?;
    Ok(())
}

#[test]
fn compila() {
    assert_eq!(<Reservado as Evento>::TIPO, "estoque.reservado");
    assert_eq!(
        mensageria_core::Registro::global().tipos(),
        ["estoque.reservado", "pedido.cancelado", "pedido.criado"]
    );
    use mensageria_axum::Receptor;
    assert_eq!(<ReceptorReceberCriado as Receptor>::TIPO, "pedido.criado");
    assert_eq!(
        <ReceptorReceberCopia as Receptor>::TIPO,
        "pedido.criado-copia"
    );
    let _ = gravar;
}
