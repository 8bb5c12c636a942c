//! Two apps in one process over real HTTP, with acks lost and the relay killed and restarted:
//! nothing lost, nothing applied twice. The logic is `mensageria_exemplos::demo`.
//!
//! ```text
//! cargo run --example demo                                  # SQLite, no server
//! cargo run --example demo -- --mensagens 10000 --perda 0.4 --semente 7
//! cargo run --example demo -- --postgres postgres://postgres@127.0.0.1:5432/postgres
//! ```

use clap::Parser;
use mensageria_exemplos::demo::{self, Opcoes};

#[tokio::main]
async fn main() -> Result<(), demo::Erro> {
    let opcoes = Opcoes::parse();
    let banco = match &opcoes.postgres {
        Some(_) => "PostgreSQL (a fresh schema per app)",
        None => "SQLite (two files in a temporary directory)",
    };
    println!(
        "emissor → proxy losing {:.0}% of acks → fiscal, {} messages, seed {}, on {banco}",
        opcoes.perda * 100.0,
        opcoes.mensagens,
        opcoes.semente
    );
    let relatorio = demo::executar(&opcoes).await?;
    println!("{relatorio}");
    if !relatorio.ok() {
        std::process::exit(1);
    }
    Ok(())
}
