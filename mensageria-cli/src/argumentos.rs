//! The command line: every command, option and default, as clap parses them.

use std::time::Duration;

use clap::{Args, Parser, Subcommand};
use uuid::Uuid;

use crate::conexao::analisar_schema;
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
    /// connection's search_path. An unquoted identifier: up to 63 ASCII letters, digits, `_` or
    /// `$`, not starting with a digit or `$`.
    #[arg(long, env = "MENSAGERIA_SCHEMA", global = true, hide_env_values = true, value_parser = analisar_schema)]
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
    /// Contracts: compare two directories of an app's contracts (one file per tipo, written by
    /// `mensageria_axum::contratos`) and refuse a change an old receiver cannot read, or a new
    /// receiver cannot read from an old sender. Needs no database.
    Contratos {
        /// What to do with them.
        #[command(subcommand)]
        acao: AcaoContratos,
    },
    /// Per tipo: pending and in-flight rows, oldest message, attempts, dead letters, and which
    /// app claims it.
    ///
    /// The columns: PENDING, rows waiting for a relay (due now, or scheduled for a retry) and
    /// not leased; IN FLIGHT, rows a relay has leased and is delivering right now; BLOCKED, rows
    /// of an ordering key waiting behind a dead letter of their key (the relay's default policy
    /// holds them until that letter is replayed or discarded: `mortas listar --tipo`); HELD, rows
    /// of an ordering key waiting behind the key's head when that head is a row of another tipo
    /// (keys are shared by every tipo and app of the schema: `doctor` names the head's tipo,
    /// `ordem mostrar <key>` shows the key's queue); OLDEST, the
    /// age of the oldest message of the tipo still in the saída; ATTEMPTS, the saída's rows per
    /// number of attempts so far, as `range:rows` (`2-4:1` is one message that has been tried
    /// 2 to 4 times; the ranges are 0, 1, 2-4, 5-9, 10-24 and 25+, empty ones left out); DEAD,
    /// the tipo's dead letters (`mortas listar --tipo`); RECEIVED DEAD, events of the tipo that a
    /// broker consumer's receptor refused for good, every receiving app's (`mortas-recebidas
    /// listar`); CLAIMED BY, the apps whose relay sends the tipo; LAST SEEN, when each last said
    /// so.
    ///
    /// Then the receiving apps registered on this schema (each says so every 15 s at most): its
    /// tipo and transport (`http`, `nats`), LAST SEEN (`!`: over a minute ago, it is not
    /// running), and for a JetStream consumer its lag as it last measured it: WAITING (messages
    /// in the stream not delivered to it yet), IN FLIGHT (delivered, not settled), REDELIVERED,
    /// OLDEST (its oldest unsettled message; `!`: over half the stream's max age, past which the
    /// stream deletes it) and MAX AGE. With --json, the same figures under the keys of the "JSON
    /// output" table in the guide's operating chapter (docs/guide/src/operating.md).
    Status,
    /// Dead letters: list, show, replay, discard.
    Mortas {
        /// What to do with them.
        #[command(subcommand)]
        acao: AcaoMortas,
    },
    /// The receiving side's dead letters: events a broker consumer (mensageria-nats) delivered
    /// and this schema's receptor refused for good; list, show, discard.
    ///
    /// A JetStream consumer's receptor that refuses an event for good (a payload that does not
    /// decode, a key that cannot be built, a permanent rejection, or a message that kept
    /// failing until its consumer gave up) tells the broker to stop redelivering it and keeps it
    /// in `mensageria_mortas_recebidas`, in the receiving app's database, as received. Once the
    /// cause is fixed, `reenviar` publishes it again to its subject (with a new message id, so
    /// the stream's duplicate window does not drop it); the receiving app can also replay its
    /// own in process (`mensageria_axum::recepcao::reaplicar_mortas_recebidas`). `descartar`
    /// forgets one dealt with otherwise.
    #[command(name = "mortas-recebidas")]
    MortasRecebidas {
        /// What to do with them.
        #[command(subcommand)]
        acao: AcaoMortasRecebidas,
    },
    /// The receptores' dedup records: how many each receiving app keeps of each tipo, and
    /// giving the unowned ones (written before the records had an app) to their owners.
    ///
    /// From schema version 10 (PostgreSQL; 6 on SQLite) a dedup record belongs to a receiving
    /// app: two apps that receive one tipo on one schema each apply every event. Records written
    /// before have no app (`(unowned)` below) and count as every app's own, so no old key is
    /// applied again, until `adotar` gives them to their owner(s).
    Recebidas {
        /// What to do.
        #[command(subcommand)]
        acao: AcaoRecebidas,
    },
    /// Ordering keys: who holds a key and who waits behind it.
    Ordem {
        /// What to do.
        #[command(subcommand)]
        acao: AcaoOrdem,
    },
    /// Delete the receptores' dedup records older than the retention, in batches.
    Purgar(ArgsPurgar),
    /// Look for what will silently go wrong on a shared schema; exits 1 when it finds a problem.
    ///
    /// For a deploy pipeline, add limits on what the relays left behind: `--max-dead-letters 0
    /// --max-pending-age 30s --max-attempts 5` makes any dead letter, a message waiting over
    /// 30 s or one tried more than 5 times a problem (exit 1). Without them these figures are
    /// notes and do not change the exit code.
    Doctor(ArgsDoctor),
    /// The apps whose relays run on this schema: list them with their instances, or forget a
    /// retired one.
    Apps {
        /// What to do.
        #[command(subcommand)]
        acao: AcaoApps,
    },
}

/// `mensageria apps ...`.
#[derive(Debug, Subcommand)]
pub(crate) enum AcaoApps {
    /// Per app: its state, the rows of its tipos waiting in the saída, the tipos it claims, and
    /// its relay instances with their state and last heartbeat.
    ///
    /// An instance (one process of an app) is `alive` while it heart-beats (every lease/4, 1.5 s
    /// by default; it counts as alive until max(its dead-after period, 10 s) without one),
    /// `stopped` when it shut down gracefully, `taken over` when a sibling found it dead and
    /// took its rows back, `dead` otherwise. An app is alive when one of its instances is,
    /// stopped when its latest instances stopped gracefully, dead when one of its latest
    /// instances died (a dead instance stops counting, `replaced`, once a newer instance of the
    /// app started after its last heartbeat). An app whose relay predates instances is judged
    /// by its `mensageria_apps` heartbeat (every 15 s): alive, or `silent` after 1 minute.
    ///
    /// Instances that ended (stopped, taken over, or dead and replaced) over a day ago are
    /// hidden, and counted (`hidden_instances`); --all shows them. The states are judged on
    /// every instance either way. `apps remover` forgets a retired app's rows.
    Listar {
        /// Show every instance, those that ended long ago included.
        #[arg(long)]
        all: bool,
    },
    /// Forget a retired app: delete its rows from `mensageria_apps` and `mensageria_instancias`
    /// (never the saída's nor the dead letters').
    ///
    /// Refused while an instance of the app is alive (stop its relays first). Never touches the
    /// saída or the dead letters: rows of its tipos stay where they are, and doctor reports them
    /// as orphans unless another app claims those tipos. Asks for confirmation on stdin unless
    /// --yes.
    Remover {
        /// The app's name (its relay's `Config::app`), as `apps listar` shows it.
        app: String,
        /// Do not ask: yes, remove it.
        #[arg(long, short = 'y')]
        yes: bool,
    },
}

/// `mensageria ordem ...`.
#[derive(Debug, Subcommand)]
pub(crate) enum AcaoOrdem {
    /// One ordering key's messages, saída and dead letters, in the key's order: the head (the
    /// message every later one waits for) first, then the rest, each with its tipo, state
    /// (`in-flight`, `due`, `retrying`, `waiting`, `dead`), attempts, the apps that claim its
    /// tipo and its last error.
    ///
    /// Keys are shared by every tipo and app of the schema: a head of another tipo holds the
    /// key's later messages until it is delivered, and a dead head until it is replayed or
    /// discarded (`mortas reenfileirar` / `mortas descartar`, under the relay's default policy).
    Mostrar {
        /// The ordering key, exactly as the sender gave it (`pedido:42`).
        chave: String,
        /// At most this many messages.
        #[arg(long, default_value_t = 100)]
        limite: i64,
    },
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
    /// Show one dead letter in full, payload included. Control characters in its text (an
    /// escape sequence in the receptor's error answer, say) are shown escaped (`\x1b`,
    /// `\u{9b}`), never sent to the terminal.
    Mostrar {
        /// Its message id.
        id: Uuid,
        /// Print only the payload, byte for byte as enqueued and unescaped (for `> file` or
        /// `| jq`): control characters in it reach your terminal as they are.
        #[arg(long, conflicts_with = "json")]
        raw: bool,
    },
    /// Put dead letters back in the saída with their attempts reset: one, every one of a tipo,
    /// or all.
    Reenfileirar(AlvoReenfileirar),
    /// Delete one dead letter for good (asks for confirmation on stdin unless --yes).
    Descartar {
        /// Its message id.
        id: Uuid,
        /// Do not ask: yes, discard it.
        #[arg(long, short = 'y')]
        yes: bool,
    },
}

/// `mensageria mortas-recebidas ...`.
#[derive(Debug, Subcommand)]
pub(crate) enum AcaoMortasRecebidas {
    /// List the receiving side's dead letters, newest first: message id, receiving app, tipo,
    /// deliveries (how many times the broker had delivered it), when it was kept and why.
    Listar {
        /// Only this receiving app's (its consumer's `app`).
        #[arg(long)]
        app: Option<String>,
        /// At most this many.
        #[arg(long, default_value_t = 100, value_parser = clap::value_parser!(i64).range(0..))]
        limite: i64,
    },
    /// Show one in full, payload included (as received: it may not even be JSON). Control
    /// characters in its text are shown escaped, never sent to the terminal.
    Mostrar {
        /// Its message id.
        id: Uuid,
        /// The receiving app, when several refused the same event (fan-out).
        #[arg(long)]
        app: Option<String>,
        /// Print only the payload, as received and unescaped (for `> file` or `| jq`): control
        /// characters in it reach your terminal as they are.
        #[arg(long, conflicts_with = "json")]
        raw: bool,
    },
    /// Publish one again to the subject it came from, with a new message id (so the stream's
    /// duplicate window does not drop it), then forget it here.
    ///
    /// Every receiving app consuming that subject gets it again: those that applied it answer
    /// `duplicate` (their natural-key dedup), the app that refused it applies it now, or keeps
    /// it again as a dead letter if the cause is still there. It carries its correlation id and
    /// trace context, and a `Mensageria-Reenvio-De` header naming the dead letter's id. A record
    /// of messages the stream deleted (`possibly_expired`) cannot be replayed: those events are
    /// gone from the stream; replay them from their source.
    Reenviar {
        /// Its message id.
        id: Uuid,
        /// The receiving app, when several refused the same event (fan-out).
        #[arg(long)]
        app: Option<String>,
        /// The NATS server (a comma-separated list is tried in turn).
        #[arg(
            long,
            env = "NATS_URL",
            hide_env_values = true,
            default_value = "nats://127.0.0.1:4222"
        )]
        nats: String,
    },
    /// Delete one for good (asks for confirmation on stdin unless --yes).
    Descartar {
        /// Its message id.
        id: Uuid,
        /// The receiving app, when several refused the same event (fan-out).
        #[arg(long)]
        app: Option<String>,
        /// Do not ask: yes, discard it.
        #[arg(long, short = 'y')]
        yes: bool,
    },
}

/// `mensageria recebidas ...`.
#[derive(Debug, Subcommand)]
pub(crate) enum AcaoRecebidas {
    /// Per receiving app and tipo: the dedup records kept and the newest one's age; unowned
    /// records (from before the records had an app) show as `(unowned)`. Also the receiving apps
    /// registered on this schema (tipo, transport, last seen).
    Listar,
    /// Give the unowned dedup records to their owner(s), in short batches (asks unless --yes).
    ///
    /// When one app received on this schema, name it: the records become its own, exactly as
    /// before the upgrade. When several apps received one tipo, the history does not say which
    /// applied which key (before the upgrade each key went to whichever came first): name them
    /// all, and each keeps every old key as applied (none is applied again; the events one app
    /// missed before the upgrade stay missed, as they were). Use --tipo to settle one tipo at a
    /// time when the apps differ per tipo.
    Adotar {
        /// A receiving app that gets the records (repeat for several).
        #[arg(long = "app", required = true)]
        apps: Vec<String>,
        /// Only this tipo's unowned records.
        #[arg(long)]
        tipo: Option<String>,
        /// Records moved per transaction.
        #[arg(long, default_value_t = 10_000, value_parser = clap::value_parser!(i64).range(1..))]
        lote: i64,
        /// Give them to the apps named even when another registered receiving app receives the
        /// tipo too (it would then apply those old keys again on a redelivery or a replay).
        #[arg(long = "so-estes")]
        so_estes: bool,
        /// Do not ask: yes, give them.
        #[arg(long, short = 'y')]
        yes: bool,
    },
    /// Forget a retired receiving app's registrations (so `doctor` stops calling it silent);
    /// its dedup records and dead letters stay.
    Esquecer {
        /// The receiving app.
        #[arg(long)]
        app: String,
        /// Do not ask: yes, forget it.
        #[arg(long, short = 'y')]
        yes: bool,
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
    /// Only this receiving app's records (each app may keep its own retention); without it,
    /// every app's, and the unowned ones.
    #[arg(long)]
    pub(crate) app: Option<String>,
}

/// `mensageria contratos …`.
#[derive(Debug, Subcommand)]
pub(crate) enum AcaoContratos {
    /// Compare the contracts in OLD (the last release's, say) with the ones in NEW, tipo by
    /// tipo, under each tipo's mode as NEW's file says it (BACKWARD, FORWARD, FULL, NONE): one
    /// line per problem naming the tipo, the side, the JSON path, the rule and the direction;
    /// exit 1 when there is any.
    Verificar {
        /// The directory of the contracts before the change.
        antigo: std::path::PathBuf,
        /// The directory of the contracts after it.
        novo: std::path::PathBuf,
    },
    /// Print the AsyncAPI 3.0 document (JSON) of an app's JetStream channels, from its
    /// contracts: a channel per subject (`{prefixo}.{tipo}`, and the ordered lanes
    /// `{prefixo}._ordem.{faixa}.{tipo}`), a message per tipo with its payload's schema and
    /// headers, a send or receive operation per side.
    Asyncapi {
        /// The directory of the app's contracts.
        dir: std::path::PathBuf,
        /// The app's name.
        #[arg(long)]
        app: String,
        /// The stream's name.
        #[arg(long)]
        fluxo: String,
        /// The stream's subject prefix.
        #[arg(long)]
        prefixo: String,
        /// The app's version, for the document's info.
        #[arg(long, default_value = "0.0.0")]
        versao: String,
    },
}

/// `mensageria doctor`.
#[derive(Debug, Args)]
pub(crate) struct ArgsDoctor {
    /// For relays that record no instances (older than schema version 2): an app that has not
    /// refreshed its `mensageria_apps` rows for this long is silent, a problem (they do every
    /// 15 s). For every app: a tipo whose row is this old no longer counts as claimed by it.
    #[arg(long, value_parser = analisar, default_value = "1m")]
    pub(crate) parado_apos: Duration,
    /// The receptores' dedup retention, to check it against the senders' horizon (the database
    /// does not record it; without it that check is skipped, and said so).
    #[arg(long, value_parser = analisar)]
    pub(crate) retencao: Option<Duration>,
    /// The senders' redelivery horizon. Default: the relay's defaults.
    #[arg(long, value_parser = analisar)]
    pub(crate) horizonte: Option<Duration>,
    /// A problem when a tipo has more dead letters than this (0: any dead letter fails a deploy
    /// check), counted apart on each side: the relays' (`mortas`) per tipo, and the receiving
    /// side's (`mortas-recebidas`) per receiving app and tipo. Without it both are counted in a
    /// note.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(i64).range(0..))]
    pub(crate) max_dead_letters: Option<i64>,
    /// A problem when the oldest message of a tipo has waited in the saída longer than this
    /// (30s, 5m, 1h): a destination that redirects, refuses or is down keeps messages there.
    /// Without it the oldest age is given in a note.
    #[arg(long, value_name = "DURATION", value_parser = analisar)]
    pub(crate) max_pending_age: Option<Duration>,
    /// A problem when a message in the saída has been attempted more times than this. Without
    /// it the most attempts are given in a note.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(i64).range(0..))]
    pub(crate) max_attempts: Option<i64>,
    /// Also check this JetStream stream: its topology record against the stream (drift), a
    /// single replica, ordered lanes no durable consumes and tipos published that no receiving
    /// app consumes. The servers come from `--nats`.
    #[arg(long, value_name = "STREAM")]
    pub(crate) fluxo: Option<String>,
    /// The NATS servers `--fluxo` is read from (a comma-separated list is tried in turn).
    #[arg(
        long,
        env = "NATS_URL",
        hide_env_values = true,
        default_value = "nats://127.0.0.1:4222"
    )]
    pub(crate) nats: String,
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
