use mensageria_core::{ContextoEnvio, FalhaEnvio, enviador};
use serde::{Deserialize, Serialize};

#[derive(Serialize, Deserialize)]
struct Encerramento {
    chave_mdfe: String,
}

#[enviador(tipo = "mdfe.encerramento")]
async fn enviar(_evento: Encerramento, _ctx: &ContextoEnvio) -> Result<(), FalhaEnvio> {
    Ok(())
}

// The pool by value (it wants `&pool`): not something `enfileirar` writes through.
async fn gravar(pool: sqlx::PgPool) -> Result<(), mensageria_core::Erro> {
    mensageria_core::enfileirar(pool, &Encerramento { chave_mdfe: "1".into() }).await?;
    Ok(())
}

fn main() {
    let _ = gravar;
}
