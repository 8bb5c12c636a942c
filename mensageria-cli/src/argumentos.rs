//! The command line: every command, option and default, as clap parses them.

use std::time::Duration;

use clap::{Args, Parser, Subcommand};
use uuid::Uuid;

use crate::duracao::analisar;

/// Operate a mensageria outbox: see and repair the saída, its dead letters and the receptores'
/// dedup records without writing SQL.
#[derive(Debug, Parser)]
#[command(
    name = "mensageria",
    version,
    after_help = "Exit codes: 0 done (doctor: healthy); 1 a problem was found (doctor) or the \
                  command failed (one line on stderr says why); 2 bad arguments."
)]
pub(crate) struct Cli {
    /// The database: `postgres://user[:password]@host[:port]/db` or `sqlite:<path>`.
    #[arg(long, env = "DATABASE_URL", global = true, hide_env_values = true)]
    pub(crate) database_url: Option<String>,

    /// PostgreSQL schema holding the mensageria tables (sets the search_path); default: the
    /// connection's search_path.
    #[arg(long, env = "MENSAGERIA_SCHEMA", global = true)]
    pub(crate) schema: Option<String>,

    /// Print JSON (for scripts) instead of tables.
    #[arg(long, global = true)]
    pub(crate) json: bool,

    /// What to do.
    #[command(subcommand)]
    pub(crate) comando: Comando,
}

/// The commands.
#[derive(Debug, Subcommand)]
pub(crate) enum Comando {
    /// Create or upgrade the mensageria tables (the schema owner's job; idempotent).
    Migrar,
    /// Check, without changing anything, that the tables exist and are new enough (what an app
    /// that does not own the schema checks at start).
    Verificar,
    /// Per tipo: pending and in-flight rows, oldest message, attempts, dead letters, and which
    /// app claims it.
    Status,
    /// Dead letters: list, show, replay, discard.
    Mortas {
        /// What to do with them.
        #[command(subcommand)]
        acao: AcaoMortas,
    },
    /// Delete the receptores' dedup records older than the retention, in batches.
    Purgar(ArgsPurgar),
    /// Look for what will silently go wrong on a shared schema; exits 1 when it finds a problem.
    Doctor(ArgsDoctor),
}

/// `mensageria mortas ...`.
#[derive(Debug, Subcommand)]
pub(crate) enum AcaoMortas {
    /// List dead letters, newest first.
    Listar {
        /// Only this tipo.
        #[arg(long)]
        tipo: Option<String>,
        /// At most this many.
        #[arg(long, default_value_t = 100)]
        limite: i64,
    },
    /// Show one dead letter in full, payload included.
    Mostrar {
        /// Its message id.
        id: Uuid,
    },
    /// Put dead letters back in the saída with their attempts reset: one, every one of a tipo,
    /// or all.
    Reenfileirar(AlvoReenfileirar),
    /// Delete one dead letter for good (asks for confirmation on stdin unless --sim).
    Descartar {
        /// Its message id.
        id: Uuid,
        /// Do not ask: yes, discard it.
        #[arg(long)]
        sim: bool,
    },
}

/// Which dead letters to replay: exactly one of the three.
#[derive(Debug, Args)]
#[group(required = true, multiple = false)]
pub(crate) struct AlvoReenfileirar {
    /// The message id of one dead letter.
    pub(crate) id: Option<Uuid>,
    /// Every dead letter of this tipo.
    #[arg(long)]
    pub(crate) tipo: Option<String>,
    /// Every dead letter.
    #[arg(long)]
    pub(crate) todas: bool,
}

/// `mensageria purgar`.
#[derive(Debug, Args)]
pub(crate) struct ArgsPurgar {
    /// Keep dedup records younger than this (7d, 36h, 1d12h, or hours).
    #[arg(long, value_parser = analisar, default_value = "30d")]
    pub(crate) retencao: Duration,
    /// The senders' redelivery horizon; the retention must be longer. Default: the relay's
    /// defaults (7 days of attempts + backoff cap + lease).
    #[arg(long, value_parser = analisar)]
    pub(crate) horizonte: Option<Duration>,
    /// Records deleted per statement (short locks).
    #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(i64).range(1..))]
    pub(crate) lote: i64,
}

/// `mensageria doctor`.
#[derive(Debug, Args)]
pub(crate) struct ArgsDoctor {
    /// An app whose relay has not heart-beaten for this long is stopped (relays beat every 15 s).
    #[arg(long, value_parser = analisar, default_value = "1m")]
    pub(crate) parado_apos: Duration,
    /// The receptores' dedup retention, to check it against the senders' horizon (the database
    /// does not record it; without it that check is skipped, and said so).
    #[arg(long, value_parser = analisar)]
    pub(crate) retencao: Option<Duration>,
    /// The senders' redelivery horizon. Default: the relay's defaults.
    #[arg(long, value_parser = analisar)]
    pub(crate) horizonte: Option<Duration>,
}

/// The redelivery horizon of a relay with default settings.
pub(crate) fn horizonte_padrao() -> Duration {
    mensageria_core::relay::Config::new("mensageria-cli").horizonte_de_reentrega()
}

#[cfg(test)]
mod testes {
    use clap::CommandFactory;

    #[test]
    fn a_linha_de_comando_e_coerente() {
        super::Cli::command().debug_assert();
    }
}
