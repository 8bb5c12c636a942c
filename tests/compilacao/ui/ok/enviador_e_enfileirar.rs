// The canonical shape compiles, and enqueueing its payload compiles on both backends.
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
    mensageria_core::enfileirar(&mut *tx, &Encerramento { chave_mdfe: "1".into() }).await?;
    tx.commit().await?;
    let mut tx = lite.begin().await?;
    mensageria_core::enfileirar(&mut *tx, &outro_modulo::Push(1)).await?;
    tx.commit().await?;
    // The user's function stays callable for their own tests.
    let _ = enviar(Encerramento { chave_mdfe: "1".into() }, &ContextoEnvio::new(uuid::Uuid::nil(), "x"));
    Ok(())
}

fn main() {
    let _ = gravar;
}
