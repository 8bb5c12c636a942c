//! The receiving side's settings.

use std::time::Duration;

use mensageria_core::configuracao::{ErroConfiguracao, exigir_nome_de_app, exigir_retencao};

/// Settings of the receptores' router: first of all, which receiving app this is.
///
/// A receiving app owns its dedup records: they are keyed by the app, the tipo and the natural
/// key, so two apps that receive one tipo on one schema each apply every event. Every replica of
/// an app gives the same name (its relay's, when it also sends).
///
/// ```
/// use std::time::Duration;
/// use mensageria_axum::Config;
///
/// let config = Config::new("estoque", ["token-atual-6Yq2vN8rTz", "token-anterior-Kp4sW9xLm"])
///     .com_limite_corpo(256 * 1024);
/// assert!(config.validar().is_ok());
/// // A retention shorter than the senders' redelivery horizon would apply a late redelivery twice.
/// let curta = Config::new("estoque", ["token-atual-6Yq2vN8rTz"])
///     .com_retencao(Duration::from_secs(3600));
/// assert!(curta.validar().is_err());
/// // A token shorter than `Config::TOKEN_MINIMO` (16) characters is refused.
/// assert!(Config::new("estoque", ["segredo"]).validar().is_err());
/// // The app's name is one printable word, as a relay's.
/// assert!(Config::new("", ["token-atual-6Yq2vN8rTz"]).validar().is_err());
/// // Tokens never appear in `Debug` output.
/// assert!(!format!("{config:?}").contains("token-atual"));
/// ```
#[derive(Clone)]
pub struct Config {
    /// The receiving app: its dedup records, registration, metrics and dead letters.
    pub(crate) app: String,
    /// SHA-256 of each accepted token: the tokens themselves are not kept, and comparing
    /// fixed-size digests takes the same time whatever the presented token's length.
    pub(crate) tokens: Vec<[u8; 32]>,
    /// How many characters the shortest accepted token has (checked by `validar`).
    menor_token: Option<usize>,
    pub(crate) limite_corpo: usize,
    pub(crate) limite_lote: LimiteLote,
    pub(crate) retencao: Duration,
    pub(crate) horizonte_remetente: Duration,
    pub(crate) caminho_base: String,
    pub(crate) caminho_openapi: String,
    pub(crate) tempo_limite: Duration,
    pub(crate) espera_por_conexao: Duration,
}

/// The SHA-256 of a bearer token, as configured tokens are kept and presented ones compared.
/// The bounds of one batch request.
#[derive(Debug, Clone, Copy)]
pub(crate) struct LimiteLote {
    pub(crate) eventos: usize,
    pub(crate) bytes: usize,
}

pub(crate) fn resumo_do_token(token: &[u8]) -> [u8; 32] {
    use sha2::Digest;
    sha2::Sha256::digest(token).into()
}

/// Tokens are never printed: only how many there are.
impl std::fmt::Debug for Config {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Config")
            .field("app", &self.app)
            .field("tokens", &format_args!("[{} hidden]", self.tokens.len()))
            .field("limite_corpo", &self.limite_corpo)
            .field("limite_lote", &self.limite_lote)
            .field("retencao", &self.retencao)
            .field("horizonte_remetente", &self.horizonte_remetente)
            .field("caminho_base", &self.caminho_base)
            .field("caminho_openapi", &self.caminho_openapi)
            .field("tempo_limite", &self.tempo_limite)
            .finish()
    }
}

impl Config {
    /// The fewest characters a bearer token may have. 16 random characters of the base64
    /// alphabet are 96 bits, beyond any guessing over HTTP; a shorter token is more likely a
    /// placeholder (`"t"`, `"secret"`, a dev default) than a secret, and is refused by
    /// [`validar`](Self::validar) (so by [`router`](crate::router) and
    /// [`Estado::new`](crate::Estado::new)).
    pub const TOKEN_MINIMO: usize = 16;

    /// The receptores of receiving app `app` (every replica gives the same name; validated as a
    /// relay's app name), accepting requests bearing any of `tokens` (several, so they can be
    /// rotated), each of at least [`TOKEN_MINIMO`](Self::TOKEN_MINIMO) characters (blank ones
    /// are dropped). Defaults:
    /// body limit 1 MiB, dedup retention 30 days, senders' redelivery horizon as the relay's
    /// defaults give it, routes at `POST /m2m/{tipo}`, OpenAPI at `GET /m2m/openapi.json`,
    /// 30 s per request.
    pub fn new<T: Into<String>>(
        app: impl Into<String>,
        tokens: impl IntoIterator<Item = T>,
    ) -> Self {
        let tokens: Vec<String> = tokens
            .into_iter()
            .map(Into::into)
            .filter(|token: &String| !token.trim().is_empty())
            .collect();
        Self {
            app: app.into(),
            menor_token: tokens.iter().map(|token| token.chars().count()).min(),
            tokens: tokens
                .iter()
                .map(|token| resumo_do_token(token.as_bytes()))
                .collect(),
            limite_corpo: 1024 * 1024,
            limite_lote: LimiteLote {
                eventos: 256,
                bytes: 4 * 1024 * 1024,
            },
            retencao: Duration::from_secs(30 * 24 * 3600),
            horizonte_remetente: mensageria_core::relay::Config::new("padrao")
                .horizonte_de_reentrega(),
            caminho_base: "/m2m".to_owned(),
            caminho_openapi: "/m2m/openapi.json".to_owned(),
            tempo_limite: Duration::from_secs(30),
            espera_por_conexao: Duration::from_secs(1),
        }
    }

    /// The largest request body accepted, in bytes (413 above it).
    pub fn com_limite_corpo(mut self, bytes: usize) -> Self {
        self.limite_corpo = bytes;
        self
    }

    /// The largest batch `POST {base}/{tipo}/lote` accepts: at most `eventos` events in at
    /// most `bytes` of body (413 above either; each event's payload is also bound by
    /// [`com_limite_corpo`](Self::com_limite_corpo)). Defaults: 256 events, 4 MiB.
    pub fn com_limite_lote(mut self, eventos: usize, bytes: usize) -> Self {
        self.limite_lote = LimiteLote { eventos, bytes };
        self
    }

    /// How long dedup records are kept before [`purgar`](crate::purgar) may delete them.
    pub fn com_retencao(mut self, retencao: Duration) -> Self {
        self.retencao = retencao;
        self
    }

    /// The longest the senders may redeliver an event (their relay's
    /// `Config::horizonte_de_reentrega`). The retention must be longer.
    pub fn com_horizonte_remetente(mut self, horizonte: Duration) -> Self {
        self.horizonte_remetente = horizonte;
        self
    }

    /// Mounts the receptores at `{base}/{tipo}` instead of `/m2m/{tipo}`.
    pub fn com_caminho_base(mut self, base: impl Into<String>) -> Self {
        self.caminho_base = base.into().trim_end_matches('/').to_owned();
        self
    }

    /// Serves the OpenAPI document at this path.
    pub fn com_caminho_openapi(mut self, caminho: impl Into<String>) -> Self {
        self.caminho_openapi = caminho.into();
        self
    }

    /// The longest one request may take (408 after it).
    pub fn com_tempo_limite(mut self, tempo: Duration) -> Self {
        self.tempo_limite = tempo;
        self
    }

    /// How long a request waits for a connection of the pool before the receptor answers
    /// `503 busy` (`Retry-After: 1`) with nothing applied: 1 s by default. A pool that has no
    /// connection free for that long is overloaded, and the sender's relay answers a `busy` by
    /// keeping fewer deliveries in flight; waiting for the pool's own acquire timeout (30 s by
    /// default in sqlx) would outlive the relay's request timeout (10 s), and the relay would
    /// send again what the receptor then applies anyway.
    ///
    /// ```
    /// use std::time::Duration;
    ///
    /// let config = mensageria_axum::Config::new("estoque", ["a-token-of-32-characters-or-more!"])
    ///     .com_espera_por_conexao(Duration::from_millis(100));
    /// # let _ = config;
    /// ```
    pub fn com_espera_por_conexao(mut self, espera: Duration) -> Self {
        self.espera_por_conexao = espera;
        self
    }

    /// The receiving app's name.
    pub fn app(&self) -> &str {
        &self.app
    }

    /// The dedup retention.
    pub fn retencao(&self) -> Duration {
        self.retencao
    }

    /// Checks the settings hang together.
    pub fn validar(&self) -> Result<(), ErroConfiguracao> {
        exigir_nome_de_app(&self.app)?;
        if self.tokens.is_empty() {
            return Err(ErroConfiguracao::SemToken);
        }
        if self
            .menor_token
            .is_some_and(|tamanho| tamanho < Self::TOKEN_MINIMO)
        {
            return Err(ErroConfiguracao::TokenCurto {
                minimo: Self::TOKEN_MINIMO,
            });
        }
        exigir_retencao(self.retencao, self.horizonte_remetente)?;
        for caminho in [&self.caminho_base, &self.caminho_openapi] {
            if !caminho.starts_with('/') {
                return Err(ErroConfiguracao::Caminho {
                    caminho: caminho.clone(),
                });
            }
        }
        Ok(())
    }
}
