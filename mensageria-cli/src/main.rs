//! `mensageria`: operate a mensageria outbox from the shell.
//!
//! ```text
//! mensageria --database-url postgres://… status
//! mensageria mortas listar --tipo mdfe.encerramento
//! mensageria mortas reenfileirar --tipo mdfe.encerramento
//! mensageria mortas-recebidas listar --app estoque   # what a broker consumer's receptor refused
//! mensageria purgar --retencao 30d
//! mensageria doctor --retencao 30d   # exit 1 when it finds a problem
//! mensageria apps listar
//! mensageria apps remover emissor-antigo --yes
//! mensageria ordem mostrar pedido:42   # who holds an ordering key, who waits behind it
//! ```
//!
//! Every module is one command or one concept: [`argumentos`] (the command line),
//! [`conexao`] (PostgreSQL or SQLite), [`saida_formatada`] (tables and JSON), [`texto_seguro`]
//! (what a terminal may be shown), [`duracao`], [`erro`], [`confirmacao`], and the commands
//! [`schema`], [`status`], [`mortas`], [`mortas_recebidas`], [`ordem`], [`purga`], [`doctor`],
//! [`apps`]. The commands hold no SQL: they call `mensageria_core::operacoes` and format what it
//! returns.

mod apps;
mod argumentos;
mod conexao;
mod confirmacao;
mod contratos;
mod doctor;
mod duracao;
mod erro;
mod mortas;
mod mortas_recebidas;
mod ordem;
mod purga;
mod recebidas;
mod saida_formatada;
mod schema;
mod status;
mod texto_seguro;

use std::process::ExitCode;

use clap::{CommandFactory, Parser};

use crate::argumentos::{Cli, Comando};
use crate::conexao::{Conexao, Destino};
use crate::erro::ErroCli;

/// How a command that ran ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Desfecho {
    /// Done; nothing wrong.
    Feito,
    /// Done, and it found problems (doctor): exit 1.
    Problemas,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    // Files only: no database.
    if let Comando::Contratos { acao } = &cli.comando {
        return match contratos::executar(acao, cli.json) {
            Ok(Desfecho::Feito) => ExitCode::SUCCESS,
            Ok(Desfecho::Problemas) => ExitCode::FAILURE,
            Err(erro) => {
                eprintln!("mensageria: {}", texto_seguro::escapar(&erro.to_string()));
                ExitCode::FAILURE
            }
        };
    }
    let Some(url) = cli.database_url.clone() else {
        Cli::command()
            .error(
                clap::error::ErrorKind::MissingRequiredArgument,
                "no database: pass --database-url or set DATABASE_URL",
            )
            .exit();
    };
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(erro) => {
            eprintln!("mensageria: could not start the async runtime: {erro}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(executar(cli, &url)) {
        Ok(Desfecho::Feito) => ExitCode::SUCCESS,
        Ok(Desfecho::Problemas) => ExitCode::FAILURE,
        Err(erro) => {
            // One line, whatever the database's text in it holds.
            eprintln!("mensageria: {}", texto_seguro::escapar(&erro.to_string()));
            ExitCode::FAILURE
        }
    }
}

/// Connects, runs the command, closes the pool.
async fn executar(cli: Cli, url: &str) -> Result<Desfecho, ErroCli> {
    let conexao = Conexao::abrir(Destino {
        url,
        schema: cli.schema.as_deref().filter(|s| !s.trim().is_empty()),
        criar: matches!(cli.comando, Comando::Migrar),
    })
    .await?;
    let json = cli.json;
    let sem_schema = cli.schema.as_deref().is_none_or(|s| s.trim().is_empty());
    let resultado = match cli.comando {
        Comando::Migrar => schema::migrar(&conexao, json)
            .await
            .map(|()| Desfecho::Feito),
        Comando::Verificar => schema::verificar(&conexao, json)
            .await
            .map(|()| Desfecho::Feito),
        Comando::Status => status::executar(&conexao, json)
            .await
            .map(|()| Desfecho::Feito),
        Comando::Mortas { acao } => mortas::executar(&conexao, acao, json)
            .await
            .map(|()| Desfecho::Feito),
        Comando::MortasRecebidas { acao } => mortas_recebidas::executar(&conexao, acao, json)
            .await
            .map(|()| Desfecho::Feito),
        Comando::Recebidas { acao } => recebidas::executar(&conexao, acao, json)
            .await
            .map(|()| Desfecho::Feito),
        Comando::Ordem { acao } => ordem::executar(&conexao, acao, json)
            .await
            .map(|()| Desfecho::Feito),
        Comando::Apps { acao } => apps::executar(&conexao, acao, json)
            .await
            .map(|()| Desfecho::Feito),
        Comando::Purgar(args) => purga::executar(&conexao, args, json)
            .await
            .map(|()| Desfecho::Feito),
        // Answered before connecting (`main`).
        Comando::Contratos { acao } => contratos::executar(&acao, json),
        Comando::Doctor(args) => doctor::executar(&conexao, args, json)
            .await
            .map(|saudavel| {
                if saudavel {
                    Desfecho::Feito
                } else {
                    Desfecho::Problemas
                }
            }),
    };
    let resultado = match resultado {
        // PostgreSQL, no --schema: the tables may well be in the app's own schema.
        Err(ErroCli::Core(mensageria_core::Erro::SchemaAusente { .. }))
            if sem_schema && matches!(conexao, Conexao::Postgres(_)) =>
        {
            Err(ErroCli::SchemaAusenteSemSchema)
        }
        outro => outro,
    };
    conexao.fechar().await;
    resultado
}
