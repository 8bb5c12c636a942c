//! The main job on the embedded default: an app closes an MDF-e and, in the same SQLite
//! transaction, enqueues the `mdfe.encerramento` message for the relay; then prints what the
//! saída holds.
//!
//! ```text
//! cargo run --example enfileirar                # a fresh SQLite file in a temporary directory
//! cargo run --example enfileirar -- app.db      # or a file of yours (kept, so runs accumulate)
//! ```

use mensageria_core::{ContextoEnvio, FalhaEnvio, enviador};
use serde::{Deserialize, Serialize};

/// The event: an MDF-e was closed. Its natural key is (cnpj, chave_mdfe).
#[derive(Debug, Serialize, Deserialize)]
struct EncerramentoMdfe {
    cnpj: String,
    chave_mdfe: String,
    encerrado_em: String,
}

/// How the event is sent. The relay calls this; here we only enqueue.
#[enviador(tipo = "mdfe.encerramento")]
async fn enviar_encerramento(
    evento: EncerramentoMdfe,
    ctx: &ContextoEnvio,
) -> Result<(), FalhaEnvio> {
    println!(
        "would deliver {} (attempt {})",
        evento.chave_mdfe,
        ctx.tentativa()
    );
    Ok(())
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = tempfile_dir()?;
    let caminho = std::env::args()
        .nth(1)
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| dir.join("emissor.db"));
    let pool = mensageria_core::banco::sqlite::abrir(&caminho).await?;
    mensageria_core::migrar(&pool).await?;
    sqlx::query("CREATE TABLE IF NOT EXISTS mdfe (chave TEXT PRIMARY KEY, situacao TEXT NOT NULL)")
        .execute(&pool)
        .await?;

    for n in 1..=3 {
        let evento = EncerramentoMdfe {
            cnpj: "12345678000190".into(),
            chave_mdfe: format!("4119081234567800019058001000000{n:03}1000000019"),
            encerrado_em: "2026-12-02T12:00:00-03:00".into(),
        };
        // The business write and the message commit together, or not at all.
        let mut tx = pool.begin().await?;
        sqlx::query("INSERT OR REPLACE INTO mdfe (chave, situacao) VALUES ($1, 'encerrado')")
            .bind(&evento.chave_mdfe)
            .execute(&mut *tx)
            .await?;
        let id = mensageria_core::enfileirar(&mut *tx, &evento).await?;
        tx.commit().await?;
        println!("enqueued {id} for MDF-e {}", evento.chave_mdfe);
    }

    // A tipo nobody in this app can send is refused before any row is written.
    match mensageria_core::enfileirar_json(&pool, "nfe.autorizada", &serde_json::json!({})).await {
        Err(erro) => println!("refused as expected: {erro}"),
        Ok(id) => return Err(format!("an unregistered tipo was enqueued as {id}").into()),
    }

    println!("\nthe saída in {}:", caminho.display());
    let linhas: Vec<(String, String, String, i64)> = sqlx::query_as(
        "SELECT id_mensagem, tipo, payload, tentativas FROM mensageria_saida ORDER BY id",
    )
    .fetch_all(&pool)
    .await?;
    for (id, tipo, payload, tentativas) in linhas {
        println!("  {id}  {tipo}  attempts={tentativas}  {payload}");
    }
    println!(
        "\nthis binary's relay would claim: {:?}",
        mensageria_core::Registro::global().tipos()
    );
    Ok(())
}

/// A directory of this run's own, so the default run starts from an empty database.
fn tempfile_dir() -> std::io::Result<std::path::PathBuf> {
    let dir = std::env::temp_dir().join(format!("mensageria-exemplo-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    Ok(dir)
}
