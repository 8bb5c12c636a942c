//! What makes a configuration invalid: [`ErroConfiguracao`], one variant per rule, and the
//! rules every side shares: [`exigir_nome_de_app`] (an app's name is one printable word) and
//! [`exigir_retencao`] (dedup records must outlive the senders' redelivery horizon).

use std::time::Duration;

/// A setting that does not hang together, with what to change. Wrapped in
/// [`Erro::Configuracao`](crate::erro::Erro::Configuracao) by the calls that check it.
#[derive(Clone, Debug, thiserror::Error)]
#[non_exhaustive]
#[doc(alias = "ConfigError")]
pub enum ErroConfiguracao {
    /// The app name (a relay's, a receptor router's, a consumer's) is empty.
    #[error(
        "the app name is empty; name the app (it keys the registration tables, the leader lock \
         and a receiving app's dedup records)"
    )]
    AppSemNome,

    /// An app or instance name that would not read as one name in a log line or a table.
    #[error(
        "the {campo} name {nome:?} {motivo}; use letters, digits and `-_.:@/`, at most 128 \
         characters (e.g. the service's or pod's name)"
    )]
    NomeInvalido {
        /// `app` or `instance`.
        campo: &'static str,
        /// The name given, escaped.
        nome: String,
        /// What is wrong with it.
        motivo: &'static str,
    },

    /// A count that must be at least 1 is 0.
    #[error("{campo} is 0; it must be at least 1")]
    Zero {
        /// Which setting (`lote`, `concorrencia`, `max_tentativas`).
        campo: &'static str,
    },

    /// The relay's lease is too short to be renewed in time.
    #[error("the lease ({lease:?}) must be at least 400 ms: it is renewed every quarter of it")]
    LeaseCurto {
        /// The lease asked for.
        lease: Duration,
    },

    /// The backoff's base is zero or above its cap.
    #[error("the backoff base ({base:?}) must be above zero and at most its cap ({maximo:?})")]
    Backoff {
        /// The first retry delay.
        base: Duration,
        /// The cap.
        maximo: Duration,
    },

    /// The dedup retention does not outlive the senders' redelivery horizon. See
    /// [`exigir_retencao`].
    #[error(
        "the dedup retention ({retencao:?}) must be longer than the senders' redelivery horizon \
         ({horizonte:?}): a redelivery that arrives after its record was purged would be applied \
         twice; keep the records longer, or state the senders' real horizon"
    )]
    RetencaoCurta {
        /// How long dedup records are kept.
        retencao: Duration,
        /// How long a sender may still redeliver.
        horizonte: Duration,
    },

    /// A receptor configuration without any bearer token.
    #[error("no bearer token configured: every request would be refused; pass at least one")]
    SemToken,

    /// A receptor's bearer token too short to resist guessing (the token itself is not shown).
    #[error(
        "a bearer token is shorter than {minimo} characters, too short to resist guessing: use \
         at least {minimo} random characters (e.g. the output of `openssl rand -base64 32`), and \
         give the senders' `Destino::com_token` the same"
    )]
    TokenCurto {
        /// The fewest characters a token may have.
        minimo: usize,
    },

    /// A route path that does not start with `/`.
    #[error("the path {caminho:?} must start with '/'")]
    Caminho {
        /// The path given.
        caminho: String,
    },

    /// Two receptores (in different crates of this binary) for one tipo on one backend.
    #[error(
        "tipo `{tipo}` has two receptores on this database backend: `{primeiro}` and \
         `{segundo}`; keep one"
    )]
    ReceptorDuplicado {
        /// The tipo received twice.
        tipo: &'static str,
        /// The first receptor.
        primeiro: String,
        /// The second receptor.
        segundo: String,
    },

    /// Two resources of one Rust type were handed to a relay.
    #[error(
        "two resources of type `{tipo}` were handed to the relay, and resources are found by \
         type: the second would replace the first. Hand each tipo its own with \
         `recurso_para(tipo, ...)`, or wrap each in a newtype of yours (e.g. \
         `struct Fiscal(Destino);`) and ask the enviador for that type"
    )]
    RecursoRepetido {
        /// The resource's Rust type.
        tipo: &'static str,
    },

    /// Two resources of one Rust type were handed to a relay for one tipo.
    #[error(
        "two resources of type `{recurso}` were handed to the relay for tipo `{tipo}`: the \
         second would replace the first; keep one"
    )]
    RecursoRepetidoParaTipo {
        /// The tipo.
        tipo: String,
        /// The resource's Rust type.
        recurso: &'static str,
    },

    /// A resource was handed for a tipo that no enviador of this binary sends (a typo, or the
    /// enviador's crate is not linked).
    #[error(
        "a resource was handed to the relay for tipo `{tipo}`, but no enviador of this binary \
         sends it (enviadores here: {conhecidos}); check the tipo's spelling, or that the \
         crate with its #[enviador] is linked into this binary"
    )]
    RecursoSemEnviador {
        /// The tipo given.
        tipo: String,
        /// The tipos this binary sends, comma-separated (or `none`).
        conhecidos: String,
    },

    /// A destination URL that cannot be used.
    #[error("invalid destination URL {url:?}: {motivo}")]
    UrlDeDestino {
        /// The URL, without credentials.
        url: String,
        /// Why it cannot be used.
        motivo: String,
    },

    /// The HTTP client could not be built (TLS backend, system configuration).
    #[error("the HTTP client could not be built: {0}")]
    ClienteHttp(String),
}

/// The rule every receiving side enforces before it purges dedup records: they must be kept
/// longer than the senders may redeliver, or a late redelivery would be applied twice.
///
/// ```
/// use std::time::Duration;
/// use mensageria_core::configuracao::{ErroConfiguracao, exigir_retencao};
///
/// let dia = Duration::from_secs(86_400);
/// assert!(exigir_retencao(30 * dia, 8 * dia).is_ok());
/// assert!(matches!(
///     exigir_retencao(dia, 8 * dia),
///     Err(ErroConfiguracao::RetencaoCurta { .. })
/// ));
/// ```
pub fn exigir_retencao(retencao: Duration, horizonte: Duration) -> Result<(), ErroConfiguracao> {
    if retencao > horizonte {
        Ok(())
    } else {
        Err(ErroConfiguracao::RetencaoCurta {
            retencao,
            horizonte,
        })
    }
}

/// An app's name (a relay's, a receiving app's) is one printable word: it keys the registration
/// tables, the leader lock and a receiving app's dedup records, and goes into every log line,
/// the instance id (`app@name`) and the CLI's tables, so a CR/LF must not forge a log line.
///
/// ```
/// use mensageria_core::configuracao::{ErroConfiguracao, exigir_nome_de_app};
///
/// assert!(exigir_nome_de_app("estoque").is_ok());
/// assert!(matches!(exigir_nome_de_app(""), Err(ErroConfiguracao::AppSemNome)));
/// assert!(exigir_nome_de_app("estoque\r\nINFO forged").is_err());
/// ```
pub fn exigir_nome_de_app(app: &str) -> Result<(), ErroConfiguracao> {
    if app.trim().is_empty() {
        return Err(ErroConfiguracao::AppSemNome);
    }
    exigir_nome("app", app)
}

/// A name (`campo`: `app` or `instance`) that reads as one word in a log line or a table.
pub(crate) fn exigir_nome(campo: &'static str, nome: &str) -> Result<(), ErroConfiguracao> {
    let motivo = if nome.trim().is_empty() {
        Some("is blank")
    } else if nome.chars().count() > 128 {
        Some("is longer than 128 characters")
    } else if nome.chars().any(char::is_control) {
        Some("holds control characters (a CR or LF would split log lines)")
    } else if nome.chars().any(char::is_whitespace) {
        Some("holds whitespace")
    } else {
        None
    };
    match motivo {
        Some(motivo) => Err(ErroConfiguracao::NomeInvalido {
            campo,
            nome: nome.escape_debug().to_string(),
            motivo,
        }),
        None => Ok(()),
    }
}
