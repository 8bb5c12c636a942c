//! The canonical shape compiles, and enqueueing its payload compiles on both backends.
use mensageria_core::{ContextoEnvio, FalhaEnvio, enviador};
use serde::{Deserialize, Serialize};

#[derive(Serialize, Deserialize)]
pub struct Encerramento {
    pub chave_mdfe: String,
}

#[enviador(tipo = "mdfe.encerramento")]
async fn enviar(evento: Encerramento, ctx: &ContextoEnvio) -> Result<(), FalhaEnvio> {
    let _ = (evento.chave_mdfe, ctx.tentativa());
    Ok(())
}

mod outro_modulo {
    use super::*;

    #[derive(Serialize, Deserialize)]
    pub struct Push(pub u32);

    #[mensageria_core::enviador(tipo = "xadm-push")]
    pub async fn enviar(_e: Push, _ctx: &ContextoEnvio) -> Result<(), FalhaEnvio> {
        Ok(())
    }
}

async fn gravar(pg: &sqlx::PgPool, lite: &sqlx::SqlitePool) -> Result<(), mensageria_core::Erro> {
    let mut tx = pg.begin().await?;
    mensageria_core::enfileirar(
        &mut *tx,
        &Encerramento {
            chave_mdfe: "1".into(),
        },
    )
    .await?;
    tx.commit().await?;
    let mut tx = lite.begin().await?;
    mensageria_core::enfileirar(&mut *tx, &outro_modulo::Push(1)).await?;
    tx.commit().await?;
    // The user's function stays callable for their own tests.
    drop(enviar(
        Encerramento {
            chave_mdfe: "1".into(),
        },
        &ContextoEnvio::new(uuid::Uuid::nil(), "x"),
    ));
    Ok(())
}

// A transaction handed by reference (as a receptor's is): the same `&mut *tx`, and the future
// stays `Send` (it can be spawned).
async fn responder(
    tx: &mut sqlx::Transaction<'_, sqlx::Postgres>,
) -> Result<(), mensageria_core::Erro> {
    mensageria_core::enfileirar(
        &mut *tx,
        &Encerramento {
            chave_mdfe: "2".into(),
        },
    )
    .await?;
    Ok(())
}

fn exige_send<F: std::future::Future + Send>(_: F) {}

#[test]
fn compila() {
    let _ = gravar;
    let _ = responder;
    exige_send(async {
        let pool = sqlx::PgPool::connect_lazy("postgres://x@127.0.0.1/x").unwrap();
        let mut tx = pool.begin().await.unwrap();
        let _ = responder(&mut tx).await;
        let _ = mensageria_core::enfileirar(
            &mut tx,
            &Encerramento {
                chave_mdfe: "3".into(),
            },
        )
        .await;
        let _ = mensageria_core::enfileirar(
            &pool,
            &Encerramento {
                chave_mdfe: "4".into(),
            },
        )
        .await;
    });
}
