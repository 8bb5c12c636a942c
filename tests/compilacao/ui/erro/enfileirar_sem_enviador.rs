use serde::{Deserialize, Serialize};

#[derive(Serialize, Deserialize)]
struct Encerramento {
    chave_mdfe: String,
}

async fn gravar(pool: &sqlx::PgPool) -> Result<(), mensageria_core::Erro> {
    let mut tx = pool.begin().await?;
    mensageria_core::enfileirar(&mut *tx, &Encerramento { chave_mdfe: "1".into() }).await?;
    tx.commit().await?;
    Ok(())
}

fn main() {
    let _ = gravar;
}
