//! A ready HTTP destination for enviadores: one shared client, a base URL, a Bearer token and a
//! timeout, with the HTTP outcome mapped to what the relay should do.
//!
//! ```no_run
//! use mensageria_core::{ContextoEnvio, Destino, FalhaEnvio, enviador};
//! # #[derive(serde::Serialize, serde::Deserialize)] struct EncerramentoMdfe;
//!
//! #[enviador(tipo = "mdfe.encerramento")]
//! async fn enviar(evento: EncerramentoMdfe, ctx: &ContextoEnvio) -> Result<(), FalhaEnvio> {
//!     ctx.exigir::<Destino>()?.postar(&evento, ctx).await // POST {base}/m2m/mdfe.encerramento
//! }
//!
//! # async fn iniciar(pool: sqlx::SqlitePool) -> Result<(), Box<dyn std::error::Error>> {
//! let fiscal = Destino::new("http://fiscal.interno:8080")?.com_token("segredo");
//! let relay = mensageria_core::relay::Relay::new(pool, mensageria_core::relay::Config::new("emissor"))
//!     .recurso(fiscal)
//!     .spawn()?;
//! # Ok(()) }
//! ```
//!
//! # Outcomes
//!
//! | answer | result | the relay |
//! |---|---|---|
//! | 2xx | `Ok` | deletes the row |
//! | 400, 405, 410, 413, 414, 415, 422 | `Permanente` | dead-letters at once (the payload itself is refused) |
//! | 401, 403, 404 | `Temporaria`, logged as an error | retries: during a deploy these are states, not poison |
//! | 408, 429, 5xx, any other status, connection error, timeout | `Temporaria` (with `Retry-After` when sent) | retries with backoff |
//!
//! Each request carries `x-request-id` (the message id, stable across redeliveries),
//! `x-mensageria-tipo`, `x-mensageria-tentativa` and `x-correlation-id`.
//! To send to several services, wrap one `Destino` per service in a newtype of yours and hand
//! each to the relay as its own resource.

use std::time::Duration;

use reqwest::StatusCode;
use reqwest::header::{AUTHORIZATION, CONTENT_TYPE, HeaderValue, RETRY_AFTER};
use serde::Serialize;

use crate::{ContextoEnvio, Erro, FalhaEnvio};

/// An HTTP service that receives M2M messages.
#[derive(Clone, Debug)]
pub struct Destino {
    cliente: reqwest::Client,
    base: reqwest::Url,
    token: Option<HeaderValue>,
    tempo_limite: Duration,
}

impl Destino {
    /// A destination at `base_url` (e.g. `http://fiscal:8080`), with a 10 s timeout and no token.
    pub fn new(base_url: &str) -> Result<Self, Erro> {
        let base = reqwest::Url::parse(base_url).map_err(|erro| {
            Erro::Configuracao(format!("invalid destination URL {base_url:?}: {erro}"))
        })?;
        if !matches!(base.scheme(), "http" | "https") {
            return Err(Erro::Configuracao(format!(
                "destination URL {base_url:?} must be http or https"
            )));
        }
        Ok(Self {
            cliente: reqwest::Client::new(),
            base,
            token: None,
            tempo_limite: Duration::from_secs(10),
        })
    }

    /// Sends `Authorization: Bearer <token>`.
    pub fn com_token(mut self, token: &str) -> Self {
        let mut valor = HeaderValue::from_str(&format!("Bearer {token}"))
            .unwrap_or_else(|_| HeaderValue::from_static("Bearer invalid-token-characters"));
        valor.set_sensitive(true);
        self.token = Some(valor);
        self
    }

    /// The longest one request may take (keep it below the relay's send timeout).
    pub fn com_tempo_limite(mut self, tempo: Duration) -> Self {
        self.tempo_limite = tempo;
        self
    }

    /// Uses this client (share one across destinations to share its connection pool).
    pub fn com_cliente(mut self, cliente: reqwest::Client) -> Self {
        self.cliente = cliente;
        self
    }

    /// POSTs `evento` as JSON to `{base}/m2m/{tipo}`, the receptores' default route.
    pub async fn postar<T: Serialize + ?Sized>(
        &self,
        evento: &T,
        ctx: &ContextoEnvio,
    ) -> Result<(), FalhaEnvio> {
        self.postar_em(&format!("/m2m/{}", ctx.tipo()), evento, ctx)
            .await
    }

    /// POSTs `evento` as JSON to `{base}{caminho}`.
    pub async fn postar_em<T: Serialize + ?Sized>(
        &self,
        caminho: &str,
        evento: &T,
        ctx: &ContextoEnvio,
    ) -> Result<(), FalhaEnvio> {
        let url = self
            .base
            .join(caminho)
            .map_err(|erro| FalhaEnvio::permanente(format!("invalid path {caminho:?}: {erro}")))?;
        let corpo = serde_json::to_vec(evento).map_err(|erro| {
            FalhaEnvio::permanente(format!("payload does not serialize: {erro}"))
        })?;
        let mut pedido = self
            .cliente
            .post(url.clone())
            .timeout(self.tempo_limite)
            .header(CONTENT_TYPE, "application/json")
            .header("x-request-id", ctx.id_mensagem().to_string())
            .header("x-mensageria-tipo", ctx.tipo())
            .header("x-mensageria-tentativa", ctx.tentativa().to_string())
            .header("x-correlation-id", ctx.correlacao())
            .body(corpo);
        if let Some(token) = &self.token {
            pedido = pedido.header(AUTHORIZATION, token.clone());
        }
        let resposta = pedido
            .send()
            .await
            .map_err(|erro| FalhaEnvio::temporaria(format!("POST {url} failed: {erro}")))?;
        let status = resposta.status();
        if status.is_success() {
            return Ok(());
        }
        let tentar_apos = resposta
            .headers()
            .get(RETRY_AFTER)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.trim().parse::<u64>().ok())
            .map(Duration::from_secs);
        let corpo: String = resposta
            .text()
            .await
            .unwrap_or_default()
            .chars()
            .take(500)
            .collect();
        let motivo = format!("POST {url} answered {status}: {corpo}");
        Err(classificar(status, motivo, tentar_apos))
    }
}

/// What a non-2xx status means for the relay.
fn classificar(status: StatusCode, motivo: String, tentar_apos: Option<Duration>) -> FalhaEnvio {
    match status.as_u16() {
        400 | 405 | 410 | 413 | 414 | 415 | 422 => FalhaEnvio::Permanente { motivo },
        401 | 403 | 404 => {
            tracing::error!(%status, motivo = %motivo, "mensageria: the destination refuses us (auth or route); retrying, but check the deployment: token, URL, receptor mounted?");
            FalhaEnvio::Temporaria {
                motivo,
                tentar_apos,
            }
        }
        _ => FalhaEnvio::Temporaria {
            motivo,
            tentar_apos,
        },
    }
}

#[cfg(test)]
mod testes {
    use super::*;

    #[test]
    fn status_viram_a_acao_certa() {
        let permanente = |s: u16| {
            matches!(
                classificar(StatusCode::from_u16(s).unwrap(), String::new(), None),
                FalhaEnvio::Permanente { .. }
            )
        };
        for s in [400, 413, 422, 410] {
            assert!(permanente(s), "{s}");
        }
        for s in [401, 403, 404, 408, 409, 429, 500, 502, 503, 504, 302] {
            assert!(!permanente(s), "{s}");
        }
    }

    #[test]
    fn url_invalida_e_erro_de_configuracao() {
        assert!(Destino::new("nao é url").is_err());
        assert!(Destino::new("ftp://x").is_err());
        assert!(Destino::new("http://127.0.0.1:1").is_ok());
    }
}
