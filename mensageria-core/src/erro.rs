//! The error type of mensageria-core.

/// What went wrong in mensageria, and what to do about it.
///
/// `Debug` says what `Display` says, so a `main() -> Result<(), Box<dyn Error>>` (which prints
/// its error with `{:?}`) shows the explanation and the fix, not only a variant's fields:
///
/// ```
/// let erro = mensageria_core::Erro::SchemaAusente { tabela: "_mensageria_migrations" };
/// assert!(format!("{erro:?}").contains("migrar"));
/// ```
#[derive(thiserror::Error)]
#[non_exhaustive]
#[doc(alias = "Error")]
pub enum Erro {
    /// `enfileirar_json` was called with a tipo that no `#[enviador]` in this binary handles.
    #[error(
        "no enviador is registered for tipo `{tipo}` in this binary, so nothing was enqueued; \
         add `#[enviador(tipo = \"{tipo}\")]` to an async fn of the crate that sends it and make \
         sure that crate is linked (registered tipos: {registrados:?})"
    )]
    TipoNaoRegistrado {
        /// The tipo that was asked for.
        tipo: String,
        /// The tipos this binary can send.
        registrados: Vec<&'static str>,
    },

    /// A tipo string does not follow the rules of [`crate::tipo`].
    #[error("invalid tipo {tipo:?}: {motivo}")]
    TipoInvalido {
        /// The offending tipo.
        tipo: String,
        /// Which rule it breaks.
        motivo: &'static str,
    },

    /// Two `#[enviador]` in different crates of this binary claim the same tipo.
    #[error(
        "tipo `{tipo}` has two enviadores in this binary: `{primeiro}` and `{segundo}`; \
         a tipo must have exactly one sender, remove or rename one of them"
    )]
    TipoDuplicado {
        /// The tipo registered twice.
        tipo: &'static str,
        /// `module::Type` of the first registration.
        primeiro: String,
        /// `module::Type` of the second registration.
        segundo: String,
    },

    /// The serialized payload is larger than the saída accepts.
    #[error(
        "payload of tipo `{tipo}` is {tamanho} bytes, over the limit of {limite} bytes, so nothing \
         was enqueued; send a reference to the data instead, or raise the limit with \
         `Saida::com_limite_payload`"
    )]
    PayloadGrande {
        /// The tipo of the payload.
        tipo: String,
        /// Its size in bytes, serialized.
        tamanho: usize,
        /// The limit in force.
        limite: usize,
    },

    /// An ordering key that cannot be stored (blank, a control character, or over
    /// [`crate::ordem::LIMITE_CHAVE_ORDEM`] bytes).
    #[error(
        "the ordering key of a message of tipo `{tipo}` is invalid ({motivo}), so nothing was \
         enqueued; give the identity of the entity whose messages must stay in order, e.g. \
         `pedido:42`"
    )]
    ChaveOrdemInvalida {
        /// The tipo of the payload.
        tipo: String,
        /// Which rule the key breaks.
        motivo: &'static str,
    },

    /// The payload could not be serialized to JSON.
    #[error("payload of tipo `{tipo}` does not serialize to JSON: {fonte}")]
    Serializacao {
        /// The tipo of the payload.
        tipo: String,
        /// serde_json's error.
        #[source]
        fonte: serde_json::Error,
    },

    /// The mensageria tables are missing from the database this pool points at.
    #[error(
        "the mensageria schema is missing (no `{tabela}` table in the current schema/search_path); \
         the app that owns this schema must run `mensageria_core::migrar(&pool)` (or \
         `mensageria migrar`) before the others start"
    )]
    SchemaAusente {
        /// The table that was looked for.
        tabela: &'static str,
    },

    /// [`migrar`](crate::migrar) on PostgreSQL: no schema of the connection's `search_path`
    /// exists, so there is nowhere to create the tables (checked before anything runs).
    #[error(
        "no schema of the connection's search_path ({search_path}) exists, so the mensageria \
         tables have nowhere to go and nothing was created; create the schema first (`CREATE \
         SCHEMA {sugerido}`, as a role allowed to, then grant the app's role USAGE and CREATE on \
         it) or point the search_path (the CLI's --schema) at a schema that exists"
    )]
    SchemaInexistente {
        /// The connection's `search_path`, as PostgreSQL shows it.
        search_path: String,
        /// The schema to create: the first one the `search_path` names (`"$user"` resolved).
        sugerido: String,
    },

    /// The mensageria schema exists but is older than this version of the library needs.
    #[error(
        "the mensageria schema is at version {aplicada} but this build needs version {esperada}; \
         upgrade and redeploy the app that owns the schema (it runs `migrar`) before this one"
    )]
    SchemaDesatualizado {
        /// The newest migration applied in the database.
        aplicada: i64,
        /// The newest migration this build knows.
        esperada: i64,
    },

    /// [`Relay::drenar_ate_vazia`](crate::relay::Relay::drenar_ate_vazia) ran out of time with
    /// messages of the relay's tipos still in the saída.
    #[error(
        "{restantes} message(s) of this relay's tipos still in the saída after {prazo:?} (a retry \
         not yet due, a lease another relay holds, or a key held behind a dead letter or another \
         tipo's row); give it longer, a shorter backoff, or look with `mensageria status`"
    )]
    DrenagemIncompleta {
        /// Rows of the relay's tipos left.
        restantes: i64,
        /// How long it tried.
        prazo: std::time::Duration,
    },

    /// A setting is invalid; the variant says which and what to change.
    #[error("invalid mensageria configuration: {0}")]
    Configuracao(#[from] crate::configuracao::ErroConfiguracao),

    /// Running the migrations failed.
    #[error("migrating the mensageria schema failed: {0}")]
    Migracao(#[from] sqlx::migrate::MigrateError),

    /// The database answered with an error or could not be reached.
    #[error("database error: {0}")]
    Banco(#[from] sqlx::Error),

    /// An operation of [`crate::operacoes`] refused (a database error is [`Erro::Banco`]).
    #[error(transparent)]
    Operacao(crate::operacoes::ErroOperacao),
}

impl From<crate::operacoes::ErroOperacao> for Erro {
    fn from(erro: crate::operacoes::ErroOperacao) -> Self {
        match erro {
            crate::operacoes::ErroOperacao::Banco(fonte) => Self::Banco(fonte),
            outro => Self::Operacao(outro),
        }
    }
}

impl std::fmt::Debug for Erro {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let texto = self.to_string();
        f.write_str(&texto)?;
        let mut fonte = std::error::Error::source(self);
        while let Some(causa) = fonte {
            let causa_texto = causa.to_string();
            if !texto.contains(&causa_texto) {
                write!(f, ": {causa_texto}")?;
            }
            fonte = causa.source();
        }
        Ok(())
    }
}
