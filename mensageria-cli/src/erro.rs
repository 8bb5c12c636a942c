//! What can go wrong in a command, said in one line.

use std::time::Duration;

use mensageria_core::operacoes::ErroOperacao;

use crate::duracao::humana;

/// Why a command could not do its job. Printed as one line on stderr (exit code 1).
///
/// An operation's error (`mensageria_core::operacoes::ErroOperacao`) becomes the variant that
/// says the same in the CLI's words (a database error is [`ErroCli::Banco`]).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub(crate) enum ErroCli {
    /// A receiver-side dead letter could not be published again.
    #[error("cannot replay the receiver-side dead letter: {motivo}")]
    Reenvio {
        /// Why.
        motivo: String,
    },

    /// The URL names no backend this command knows.
    #[error(
        "unsupported database URL `{url}`: use postgres://… (or postgresql://…) or sqlite:<path>"
    )]
    UrlInvalida {
        /// The URL, password hidden.
        url: String,
    },

    /// The database could not be reached or refused the connection.
    #[error("cannot connect to the database at {url}: {fonte}")]
    Conexao {
        /// The URL, password hidden.
        url: String,
        /// sqlx's error.
        #[source]
        fonte: sqlx::Error,
    },

    /// A directory of contracts could not be read.
    #[error("contracts: {0}")]
    Contratos(String),

    /// A statement failed.
    #[error("database error: {0}")]
    Banco(#[from] sqlx::Error),

    /// mensageria-core refused (schema missing or too old, migration failed, ...).
    #[error("{0}")]
    Core(#[from] mensageria_core::Erro),

    /// PostgreSQL without `--schema`, and no mensageria tables in the connection's
    /// search_path: on a database with a schema per app they are in another schema, and
    /// `mensageria migrar` would create empty ones here.
    #[error(
        "the mensageria schema is missing from this connection's search_path (no \
         `_mensageria_migrations` table there); if each app keeps its tables in a schema of its \
         own, pass --schema <name> (or set MENSAGERIA_SCHEMA); run `mensageria migrar` only as \
         the schema's owner, and only to create the tables in the search_path's first schema"
    )]
    SchemaAusenteSemSchema,

    /// No dead letter has this message id.
    #[error(
        "no dead letter with message id {id}; `mensageria mortas listar` shows the ones there are"
    )]
    MortaNaoEncontrada {
        /// The id asked for.
        id: uuid::Uuid,
    },

    /// The id names no sender's dead letter, but a receiving app's.
    #[error(
        "message id {id} is not a dead letter of a relay (`mortas`): it is a receiver-side dead \
         letter of app(s) {} (an event a JetStream consumer's receptor refused); replay it with \
         `mensageria mortas-recebidas reenviar {id} --app <app>`, or see it with \
         `mensageria mortas-recebidas mostrar {id} --app <app>`",
        apps.join(", ")
    )]
    MortaDoLadoQueRecebe {
        /// The id asked for.
        id: uuid::Uuid,
        /// The receiving apps that keep it.
        apps: Vec<String>,
    },

    /// No receiver-side dead letter has this message id (of this app, when one was named).
    #[error(
        "no receiver-side dead letter with message id {id}{}; `mensageria mortas-recebidas \
         listar` shows the ones there are",
        app.as_deref().map(|a| format!(" of app `{a}`")).unwrap_or_default()
    )]
    MortaRecebidaNaoEncontrada {
        /// The id asked for.
        id: uuid::Uuid,
        /// The app asked for, if one.
        app: Option<String>,
    },

    /// Several receiving apps keep a dead letter with this message id (fan-out).
    #[error(
        "receiver-side dead letters with message id {id} are kept by {} apps ({}): pass --app \
         <name> to pick one; nothing was changed",
        apps.len(),
        apps.join(", ")
    )]
    MortaRecebidaAmbigua {
        /// The id asked for.
        id: uuid::Uuid,
        /// The apps that keep one.
        apps: Vec<String>,
    },

    /// The operator did not confirm a destructive command. The answer it names is the one
    /// [`crate::confirmacao::confirmar`] accepts and every prompt offers (`[y/N]`), so the two
    /// cannot disagree.
    #[error("not confirmed: nothing was changed (answer `y` to confirm, or pass {opcao})")]
    NaoConfirmado {
        /// The command's "do not ask" flag.
        opcao: &'static str,
    },

    /// `apps remover` of an app that neither table knows.
    #[error(
        "no app `{app}` in mensageria_apps or mensageria_instancias; `mensageria apps listar` \
         shows the ones there are"
    )]
    AppDesconhecido {
        /// The name asked for.
        app: String,
    },

    /// `apps remover` of an app that is still running.
    #[error(
        "refusing to remove app `{app}`: it is alive ({detalhe}); stop its relays first (a \
         graceful shutdown records each instance as stopped), then run this again; nothing was \
         changed"
    )]
    AppVivo {
        /// The app.
        app: String,
        /// What shows it alive.
        detalhe: String,
    },

    /// Reading the confirmation from stdin failed.
    #[error("could not read the confirmation from stdin: {0}")]
    Entrada(#[from] std::io::Error),

    /// Unowned records would be given away from a registered receiving app of their tipo.
    #[error(
        "tipo `{tipo}` is also received by {} on this schema: given only to the apps named, its \
         unowned records would stop counting for {} (old keys applied again on a redelivery or a \
         replay); name them too (--app, once each), or pass --so-estes if that is what you mean",
        faltam.join(", "),
        if faltam.len() == 1 { "it" } else { "them" }
    )]
    AdocaoIncompleta {
        /// The tipo.
        tipo: String,
        /// The registered receiving apps not named.
        faltam: Vec<String>,
    },

    /// Purging with this retention would let a replay of the stream be applied twice.
    #[error(
        "refusing to purge: the retention ({}) is not longer than the max_age ({max_age}) of the \
         stream receiving app `{app}` consumes: a durable created anew replays the stream from its \
         start, and an event whose record was purged would be applied twice; keep a longer \
         --retencao",
        humana(*retencao)
    )]
    RetencaoCurtaParaOFluxo {
        /// The retention asked for.
        retencao: Duration,
        /// The stream's max_age, as a person reads it.
        max_age: String,
        /// The receiving app whose stream it is.
        app: String,
    },

    /// Purging with this retention would let a late redelivery be applied twice.
    #[error(
        "refusing to purge: the retention ({}) is not longer than the senders' redelivery horizon \
         ({}), so a redelivery arriving after its dedup record was deleted would be applied twice; \
         keep a longer --retencao, or pass --horizonte with your senders' real horizon",
        humana(*retencao), humana(*horizonte)
    )]
    RetencaoCurta {
        /// The retention asked for.
        retencao: Duration,
        /// The senders' horizon in force.
        horizonte: Duration,
    },
}

impl From<ErroOperacao> for ErroCli {
    fn from(erro: ErroOperacao) -> Self {
        match erro {
            ErroOperacao::Banco(fonte) => Self::Banco(fonte),
            ErroOperacao::MortaNaoEncontrada { id_mensagem } => {
                Self::MortaNaoEncontrada { id: id_mensagem }
            }
            ErroOperacao::MortaRecebidaNaoEncontrada { id_mensagem, app } => {
                Self::MortaRecebidaNaoEncontrada {
                    id: id_mensagem,
                    app,
                }
            }
            ErroOperacao::MortaRecebidaAmbigua { id_mensagem, apps } => {
                Self::MortaRecebidaAmbigua {
                    id: id_mensagem,
                    apps,
                }
            }
            ErroOperacao::AppVivo { app, instancias } => Self::AppVivo {
                detalhe: format!("instance(s) {}", instancias.join(", ")),
                app,
            },
            outro => Self::Core(outro.into()),
        }
    }
}
