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
//! let config = mensageria_core::relay::Config::new("emissor");
//! let relay = mensageria_core::relay::Relay::new(pool, config)
//!     .recurso(fiscal)
//!     .spawn()?;
//! # Ok(()) }
//! ```
//!
//! # Delivered means the receptor said so
//!
//! A `Destino` sends exactly one request to exactly the URL it was configured with (the base
//! URL's path is kept: `http://gw/fiscal` posts to `http://gw/fiscal/m2m/<tipo>`). Redirects are
//! never followed, so the payload never reaches a host nobody configured. By default the
//! destination is a mensageria receptor, and a 2xx is a delivery only when its body is the
//! receptor's own answer (`{"resultado": "applied" | "duplicate", "tipo": "<this tipo>"}`):
//! an SSO login page, an ingress' HTML or any other 2xx keeps the row and says what came back.
//! For a receiver that is not a mensageria receptor, opt in with
//! [`aceitar_qualquer_2xx`](Destino::aceitar_qualquer_2xx).
//!
//! # Outcomes
//!
//! | answer | result | the relay |
//! |---|---|---|
//! | 2xx with the receptor's answer for this tipo (any 2xx after [`aceitar_qualquer_2xx`](Destino::aceitar_qualquer_2xx)) | `Ok` | deletes the row |
//! | 2xx with any other body | `Temporaria`, the reason quoting what came back | retries: something that is not the receptor answered |
//! | 3xx | `Temporaria`, the reason naming the `Location` | retries: a redirect is a deployment state, never followed |
//! | 400, 405, 410, 413, 414, 415, 422 | `Permanente` | dead-letters at once (the payload itself is refused) |
//! | 401, 403, 404 | `Temporaria`, the reason saying to check the token (401, 403), or the URL and the receptor (404) | retries: during a deploy these are states, not poison |
//! | 429; 503 with a receptor's `busy` body (no database connection in time) | `Sobrecarga` (with `Retry-After` when sent) | retries after `Retry-After` without counting an attempt, and keeps fewer of the tipo's deliveries in flight |
//! | 408, 5xx, any other status, connection error, timeout | `Temporaria` (with `Retry-After` when sent) | retries with backoff |
//!
//! The reason (`motivo`) names the URL (without credentials) and the status, quotes what came
//! back (its content type and at most 300 characters of its body, control characters escaped,
//! or "with an empty body"), and says what to check; the relay logs it once per failed attempt, as the
//! `error` field of its own line (WARN on a retry, ERROR on a dead letter), and stores it as the
//! row's `ultimo_erro`. A `Destino` adds only debug-level lines.
//!
//! What the relay reads of an answer is bounded: at most [`LIMITE_RESPOSTA`] bytes, read chunk
//! by chunk, and the whole exchange within the timeout, so a destination that streams a huge or
//! endless body costs no memory. Messages and logs never show the URL's `user:password@` nor the
//! token.
//!
//! Each request carries `x-request-id` (the message id, stable across redeliveries),
//! `x-mensageria-tipo`, `x-mensageria-tentativa` and `x-correlation-id`; a message enqueued
//! in a trace also carries W3C Trace Context's `traceparent` and `tracestate` (see
//! [`crate::rastreamento`]), and, in a batch, each event its own.
//!
//! # Batches
//!
//! Deliveries of one tipo that are in flight at the same time leave together, in one request to
//! the receptor's batch route (`POST {base}/m2m/{tipo}/lote`), and each gets its own outcome
//! back (applied or duplicate: `Ok`; rejected, invalid payload or key: `Permanente`; the rest:
//! `Temporaria`). A delivery that finds its route idle leaves at once, alone, on the single
//! route; the ones that start together leave together, up to the route's limit; and while a
//! batch request of the route is out, a new batch lingers until it is answered (at most 10 ms),
//! so that what arrives meanwhile leaves in one request and one receiving transaction. That limit follows what the receptor takes: the events that fit a twentieth of
//! the timeout (500 ms by default) at the pace of the route's last answer, from 2 for a route
//! not yet measured, doubling at most per answer up to
//! [`com_lote_maximo`](Destino::com_lote_maximo) (64), lowered at once by a slow answer or a
//! timeout; a receptor that takes 250 ms per event gets one event per request. A receptor that
//! answers 404 or 405 on the batch route (an older one) gets one request per event from then on;
//! a receiver that is not a mensageria receptor
//! ([`aceitar_qualquer_2xx`](Destino::aceitar_qualquer_2xx)) always does.
//!
//! # Connections and HTTP/2
//!
//! The client keeps its connections and reuses them. Over HTTP/1.1 a connection carries one
//! request at a time, so a relay holds up to one connection per delivery in flight to a receiver
//! ([`Config::com_concorrencia`](crate::relay::Config::com_concorrencia), 128 by default), opened
//! as the load needs them and kept between requests (the bench's plain receiver accepted 128
//! connections for some 20,000 requests). The body of a 2xx taken after
//! [`aceitar_qualquer_2xx`](Destino::aceitar_qualquer_2xx) is not read: a short answer that came
//! with its head, as a webhook's usually does, leaves the connection reusable; a longer one closes
//! it.
//!
//! Over `https` the client offers HTTP/2 (ALPN) and uses it when the receiver accepts it: every
//! delivery in flight then shares one connection. Over plain `http` nothing says whether a
//! receiver speaks HTTP/2 without TLS (h2c): a client that assumes it fails against one that does
//! not, so it is never assumed. For a receiver known to speak it (a hyper or axum server, tonic,
//! nginx with `listen … http2` and no TLS), build the client for it:
//!
//! ```no_run
//! # fn montar() -> Result<mensageria_core::Destino, Box<dyn std::error::Error>> {
//! use mensageria_core::Destino;
//!
//! let cliente = Destino::construtor_de_cliente()
//!     .http2_prior_knowledge()
//!     .build()?;
//! let destino = Destino::new("http://ganchos.interno:8080")?
//!     .aceitar_qualquer_2xx()
//!     .com_cliente(cliente);
//! # Ok(destino) }
//! ```
//!
//! It saves connections, not much time: against the bench's plain receiver (one request per
//! event, an `INSERT` and a commit each) HTTP/2 delivered at about the rate of HTTP/1.1, with
//! about the same CPU per event on both sides (BENCHMARKS.md, end-to-end section).
//!
//! # CloudEvents
//!
//! Each single-event request is also a [CloudEvents 1.0](https://github.com/cloudevents/spec)
//! event in the HTTP binding's binary mode (a batch request is mensageria's own format: for a
//! consumer that is not a mensageria receptor, [`com_lote_maximo(1)`](Destino::com_lote_maximo)
//! or [`aceitar_qualquer_2xx`](Destino::aceitar_qualquer_2xx) keeps one request per event): the body is the event's data (`Content-Type: application/json`)
//! and the attributes travel as headers, so any CloudEvents consumer can take it:
//!
//! | header | value |
//! |---|---|
//! | `ce-specversion` | `1.0` |
//! | `ce-id` | the message id (the same UUID as `x-request-id`) |
//! | `ce-type` | the tipo |
//! | `ce-source` | the sending app's name ([`ContextoEnvio::app`]; `mensageria` in a context built by hand without one) |
//! | `ce-time` | when the message was enqueued, RFC 3339 in UTC with milliseconds |
//! | `ce-traceparent`, `ce-tracestate` | the distributed-tracing extension: the trace context it was enqueued under, when there was one (the same values as `traceparent`/`tracestate`) |
//!
//! `ce-time` is read from the message id, a UUIDv7 made at enqueue, whose timestamp is the
//! enqueue instant to the millisecond (the saída's `criada_em` is the same instant by the
//! database's clock); a context built by hand with an id of another version sends no
//! `ce-time` (the attribute is optional). Values outside printable ASCII are percent-encoded,
//! as the binding says.
//! To send to several services, wrap one `Destino` per service in a newtype of yours and hand
//! each to the relay as its own resource.

use std::error::Error as _;
use std::fmt;
use std::time::Duration;

use reqwest::header::{AUTHORIZATION, CONTENT_TYPE, HeaderValue, LOCATION, RETRY_AFTER};
use reqwest::{StatusCode, Url};
use serde::{Deserialize, Serialize};

use crate::configuracao::ErroConfiguracao;
use crate::enviador::{ContextoEnvio, FalhaEnvio};
use crate::erro::Erro;

/// The most bytes of an answer's body the relay reads (the receptor's answers are ~100 bytes);
/// the rest is never read.
pub const LIMITE_RESPOSTA: usize = 8 * 1024;

/// How much of a body that is not the receptor's answer is quoted in the error.
const TRECHO_CITADO: usize = 300;

mod lote;

/// An HTTP service that receives M2M messages.
#[derive(Clone)]
#[doc(alias("destination", "endpoint"))]
pub struct Destino {
    cliente: reqwest::Client,
    base: Url,
    token: Option<HeaderValue>,
    tempo_limite: Duration,
    confirmacao: Confirmacao,
    /// The queues of the batch route, shared by clones (`None`: one request per event).
    agrupador: Option<std::sync::Arc<lote::Agrupador>>,
    lote_maximo: usize,
}

/// Which 2xx answers count as a delivery.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Confirmacao {
    /// Only a mensageria receptor's answer for the message's tipo.
    Receptor,
    /// Any 2xx (a receiver that is not a mensageria receptor).
    Qualquer2xx,
}

impl fmt::Debug for Destino {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Destino")
            .field("base", &sem_credenciais(&self.base).as_str())
            .field("token", &self.token.as_ref().map(|_| "***"))
            .field("tempo_limite", &self.tempo_limite)
            .field("confirmacao", &self.confirmacao)
            .finish_non_exhaustive()
    }
}

impl Destino {
    /// A destination at `base_url` (e.g. `http://fiscal:8080`, or `http://gw/fiscal` behind a
    /// gateway), with a 10 s timeout, no token, redirects never followed, and only a mensageria
    /// receptor's answer taken as a delivery.
    pub fn new(base_url: &str) -> Result<Self, Erro> {
        let base = Url::parse(base_url).map_err(|erro| {
            Erro::from(ErroConfiguracao::UrlDeDestino {
                url: texto_sem_credenciais(base_url),
                motivo: erro.to_string(),
            })
        })?;
        if !matches!(base.scheme(), "http" | "https") {
            return Err(ErroConfiguracao::UrlDeDestino {
                url: sem_credenciais(&base).to_string(),
                motivo: "the scheme must be http or https".into(),
            }
            .into());
        }
        let cliente = Self::construtor_de_cliente()
            .build()
            .map_err(|erro| Erro::from(ErroConfiguracao::ClienteHttp(erro.to_string())))?;
        Ok(Self {
            cliente,
            base,
            token: None,
            tempo_limite: Duration::from_secs(10),
            confirmacao: Confirmacao::Receptor,
            agrupador: lote::novo_agrupador(),
            lote_maximo: 64,
        })
    }

    /// A `reqwest` client builder set up as a destination needs it (redirects never followed),
    /// for [`com_cliente`](Self::com_cliente) when you tune the client (pool size, TLS roots).
    pub fn construtor_de_cliente() -> reqwest::ClientBuilder {
        reqwest::Client::builder().redirect(reqwest::redirect::Policy::none())
    }

    /// Sends `Authorization: Bearer <token>`.
    pub fn com_token(mut self, token: &str) -> Self {
        let mut valor = HeaderValue::from_str(&format!("Bearer {token}"))
            .unwrap_or_else(|_| HeaderValue::from_static("Bearer invalid-token-characters"));
        valor.set_sensitive(true);
        self.token = Some(valor);
        self
    }

    /// The longest one request may take, answer included (keep it below the relay's send
    /// timeout).
    pub fn com_tempo_limite(mut self, tempo: Duration) -> Self {
        self.tempo_limite = tempo;
        self
    }

    /// Uses this client (share one across destinations to share its connection pool). Build it
    /// from [`construtor_de_cliente`](Self::construtor_de_cliente): a client that follows
    /// redirects is caught anyway (an answer from another URL is never a delivery), but only
    /// after it has sent the payload there.
    pub fn com_cliente(mut self, cliente: reqwest::Client) -> Self {
        self.cliente = cliente;
        self
    }

    /// Takes any 2xx as a delivery, for a receiver that is not a mensageria receptor (a third
    /// party's webhook). Only do this when that receiver answers 2xx only once it has kept the
    /// event: a proxy or login page that answers 200 would then lose messages.
    #[doc(alias = "webhook")]
    pub fn aceitar_qualquer_2xx(mut self) -> Self {
        self.confirmacao = Confirmacao::Qualquer2xx;
        self.agrupador = None;
        self
    }

    /// At most `eventos` deliveries of one tipo in one request to the receptor's batch route
    /// (default 64; 0 or 1: one request per event, always). Batches form only from deliveries
    /// in flight at the same time, never by waiting, and each route's batches stay below this
    /// as long as the receptor is slow (see [the module](self#batches)).
    pub fn com_lote_maximo(mut self, eventos: usize) -> Self {
        self.lote_maximo = eventos;
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

    /// POSTs `evento` as JSON to `{base}{caminho}` (the base URL's own path is kept), alone or,
    /// when other deliveries of that route are in flight, with them to `{base}{caminho}/lote`.
    pub async fn postar_em<T: Serialize + ?Sized>(
        &self,
        caminho: &str,
        evento: &T,
        ctx: &ContextoEnvio,
    ) -> Result<(), FalhaEnvio> {
        let corpo = serde_json::value::to_raw_value(evento).map_err(|erro| {
            FalhaEnvio::permanente(format!("payload does not serialize: {erro}"))
        })?;
        self.postar_agrupado(caminho, corpo, ctx).await
    }

    /// One request on the single route: `corpo` to `{base}{caminho}`.
    async fn enviar_um(
        &self,
        caminho: &str,
        corpo: &[u8],
        ctx: &ContextoEnvio,
    ) -> Result<(), FalhaEnvio> {
        let url = self.url_de(caminho);
        let exibida = sem_credenciais(&url);
        let corpo = corpo.to_vec();
        let mut pedido = self
            .cliente
            .post(url.clone())
            .timeout(self.tempo_limite)
            .header(CONTENT_TYPE, "application/json")
            .header("x-request-id", ctx.id_mensagem().to_string())
            .header("x-mensageria-tipo", ctx.tipo())
            .header("x-mensageria-tentativa", ctx.tentativa().to_string())
            .header("x-correlation-id", ctx.correlacao());
        for (nome, valor) in crate::cloudevents::atributos(ctx) {
            pedido = pedido.header(nome, valor);
        }
        for (nome, valor) in ctx.rastreamento().into_iter().flat_map(|r| r.cabecalhos()) {
            pedido = pedido.header(nome, valor);
        }
        pedido = pedido.body(corpo);
        if let Some(token) = &self.token {
            pedido = pedido.header(AUTHORIZATION, token.clone());
        }
        let resposta = pedido.send().await.map_err(|erro| {
            FalhaEnvio::temporaria(format!("POST {exibida} failed: {}", causas(erro)))
        })?;
        self.avaliar(resposta, &url, &exibida, ctx.tipo()).await
    }

    /// What an answer means: a delivery only when it is the receptor's answer for `tipo` (any
    /// 2xx after [`aceitar_qualquer_2xx`](Self::aceitar_qualquer_2xx)), never a redirect.
    async fn avaliar(
        &self,
        mut resposta: reqwest::Response,
        url: &Url,
        exibida: &Url,
        tipo: &str,
    ) -> Result<(), FalhaEnvio> {
        let status = resposta.status();
        let tentar_apos = tentar_apos(&resposta);
        recusar_redirecionamento(&resposta, url, exibida, tentar_apos)?;
        if status.is_success() && self.confirmacao == Confirmacao::Qualquer2xx {
            return Ok(());
        }
        let tipo_conteudo = resposta
            .headers()
            .get(CONTENT_TYPE)
            .map(|v| citar(v.as_bytes(), 100))
            .unwrap_or_else(|| "none".to_owned());
        let corpo = match ler_limitado(&mut resposta, LIMITE_RESPOSTA).await {
            Ok(corpo) => corpo,
            Err(erro) => {
                return Err(FalhaEnvio::Temporaria {
                    motivo: format!(
                        "POST {exibida} answered {status}, then its body failed: {}",
                        causas(erro)
                    ),
                    tentar_apos,
                });
            }
        };
        if status.is_success() {
            if resposta_do_receptor(&corpo, tipo) {
                return Ok(());
            }
            let motivo = format!(
                "POST {exibida} answered {status} but not as a mensageria receptor of `{}` \
                 (content-type {tipo_conteudo}: {}); not a delivery, the row stays. A proxy, \
                 gateway or login page may be in the way; if this receiver is not a mensageria \
                 receptor, use Destino::aceitar_qualquer_2xx()",
                tipo,
                citar(&corpo, TRECHO_CITADO)
            );
            tracing::debug!(
                url = %exibida,
                %status,
                "mensageria: a 2xx that is not the receptor's answer; not a delivery"
            );
            return Err(FalhaEnvio::Temporaria {
                motivo,
                tentar_apos,
            });
        }
        let motivo = format!(
            "POST {exibida} answered {status} {}",
            descrever_corpo(&corpo, &tipo_conteudo)
        );
        Err(classificar(status, motivo, tentar_apos, &corpo))
    }

    /// `{base}{caminho}`, keeping the base's path prefix and query.
    fn url_de(&self, caminho: &str) -> Url {
        let mut url = self.base.clone();
        let prefixo = self.base.path().trim_end_matches('/');
        let caminho = caminho.trim_start_matches('/');
        url.set_path(&format!("{prefixo}/{caminho}"));
        url
    }
}

/// The wait the destination asked for (`Retry-After` in seconds), if any.
fn tentar_apos(resposta: &reqwest::Response) -> Option<Duration> {
    resposta
        .headers()
        .get(RETRY_AFTER)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok())
        .map(Duration::from_secs)
}

/// A redirect is never a delivery: neither an answer that came from another URL (a client that
/// follows redirects) nor a 3xx (named with its `Location`).
fn recusar_redirecionamento(
    resposta: &reqwest::Response,
    url: &Url,
    exibida: &Url,
    tentar_apos: Option<Duration>,
) -> Result<(), FalhaEnvio> {
    let status = resposta.status();
    // reqwest takes a URL's `user:password@` out (into `Authorization: Basic`) before sending:
    // only the rest tells a redirect.
    if sem_credenciais(resposta.url()) != sem_credenciais(url) {
        let final_ = sem_credenciais(resposta.url());
        tracing::debug!(
            url = %exibida,
            location = %final_,
            "mensageria: the destination's HTTP client followed a redirect; not a delivery"
        );
        return Err(FalhaEnvio::temporaria(format!(
            "POST {exibida} was redirected to {final_} by a client that follows redirects: \
             not a delivery; build the client with Destino::construtor_de_cliente()"
        )));
    }
    if status.is_redirection() {
        let para = resposta
            .headers()
            .get(LOCATION)
            .map(|v| citar(v.as_bytes(), TRECHO_CITADO))
            .unwrap_or_else(|| "(no Location)".to_owned());
        let motivo = format!(
            "POST {exibida} answered {status} redirecting to {para}: redirects are never \
             followed; point the destination at the receptor itself"
        );
        tracing::debug!(
            url = %exibida,
            %status,
            location = %para,
            "mensageria: the destination redirects; not a delivery"
        );
        return Err(FalhaEnvio::Temporaria {
            motivo,
            tentar_apos,
        });
    }
    Ok(())
}

/// Whether `corpo` is a receptor's answer of `tipo`: applied or duplicate.
fn resposta_do_receptor(corpo: &[u8], tipo: &str) -> bool {
    #[derive(serde::Deserialize)]
    struct Resposta<'a> {
        resultado: &'a str,
        tipo: &'a str,
    }
    serde_json::from_slice::<Resposta<'_>>(corpo)
        .is_ok_and(|r| matches!(r.resultado, "applied" | "duplicate") && r.tipo == tipo)
}

/// Reads at most `limite` bytes of the body, chunk by chunk; the rest is never read.
async fn ler_limitado(
    resposta: &mut reqwest::Response,
    limite: usize,
) -> Result<Vec<u8>, reqwest::Error> {
    let mut corpo = Vec::new();
    while let Some(pedaco) = resposta.chunk().await? {
        let resta = limite - corpo.len();
        if pedaco.len() >= resta {
            corpo.extend_from_slice(&pedaco[..resta]);
            break;
        }
        corpo.extend_from_slice(&pedaco);
    }
    Ok(corpo)
}

/// The error and every cause under it ("connection refused", a TLS failure, a timeout),
/// without the URL (which the caller prints without its credentials).
fn causas(erro: reqwest::Error) -> String {
    let tempo = erro.is_timeout();
    let erro = erro.without_url();
    let mut texto = erro.to_string();
    let mut fonte = erro.source();
    while let Some(causa) = fonte {
        let parte = causa.to_string();
        if !texto.contains(&parte) {
            texto.push_str(": ");
            texto.push_str(&parte);
        }
        fonte = causa.source();
    }
    if tempo && !texto.contains("timed out") {
        texto.push_str(" (timed out)");
    }
    texto
}

/// Up to `maximo` characters of remote text, control characters escaped (the text lands in
/// logs, `ultimo_erro` and terminals).
fn citar(bytes: &[u8], maximo: usize) -> String {
    let texto = String::from_utf8_lossy(bytes);
    let mut citado = String::new();
    for c in texto.chars().take(maximo) {
        if c.is_control() {
            citado.extend(c.escape_default());
        } else {
            citado.push(c);
        }
    }
    if texto.chars().nth(maximo).is_some() {
        citado.push('…');
    }
    citado
}

/// What came back in an answer's body, for a failure's reason: "with an empty body", or its
/// content type and an excerpt of at most [`TRECHO_CITADO`] characters, control characters
/// escaped.
fn descrever_corpo(corpo: &[u8], tipo_conteudo: &str) -> String {
    if corpo.iter().all(u8::is_ascii_whitespace) {
        return "with an empty body".to_owned();
    }
    format!(
        "(content-type {tipo_conteudo}): {}",
        citar(corpo, TRECHO_CITADO)
    )
}

/// The URL without `user:password@`, for messages and logs.
pub(crate) fn sem_credenciais(url: &Url) -> Url {
    let mut limpa = url.clone();
    let _ = limpa.set_username("");
    let _ = limpa.set_password(None);
    limpa
}

/// A URL that did not parse, with anything between `://` and `@` masked.
fn texto_sem_credenciais(texto: &str) -> String {
    match texto.split_once("://") {
        Some((esquema, resto)) => match resto.rsplit_once('@') {
            Some((_, hospedeiro)) => format!("{esquema}://***@{hospedeiro}"),
            None => texto.to_owned(),
        },
        None => texto.to_owned(),
    }
}

/// What a non-2xx status means for the relay.
fn classificar(
    status: StatusCode,
    motivo: String,
    tentar_apos: Option<Duration>,
    corpo: &[u8],
) -> FalhaEnvio {
    match status.as_u16() {
        429 => FalhaEnvio::Sobrecarga {
            motivo,
            tentar_apos,
        },
        503 if ocupado(corpo) => FalhaEnvio::Sobrecarga {
            motivo,
            tentar_apos,
        },
        400 | 405 | 410 | 413 | 414 | 415 | 422 => FalhaEnvio::Permanente { motivo },
        401 | 403 => FalhaEnvio::Temporaria {
            motivo: format!(
                "{motivo}; the destination refuses our credentials: check the token \
                 (Destino::com_token) against the receptor's tokens"
            ),
            tentar_apos,
        },
        404 => FalhaEnvio::Temporaria {
            motivo: format!(
                "{motivo}; no receptor answers at this URL: check the URL (the base path, e.g. a \
                 gateway's prefix) and that the receptor of this tipo is mounted"
            ),
            tentar_apos,
        },
        _ => FalhaEnvio::Temporaria {
            motivo,
            tentar_apos,
        },
    }
}

/// A receptor's `503` whose body says `busy`: it had no database connection in time.
fn ocupado(corpo: &[u8]) -> bool {
    #[derive(Deserialize)]
    struct Erro<'a> {
        erro: &'a str,
    }
    serde_json::from_slice::<Erro<'_>>(corpo).is_ok_and(|e| e.erro == "busy")
}

#[cfg(test)]
mod testes {
    use super::*;

    #[test]
    fn status_viram_a_acao_certa() {
        let permanente = |s: u16| {
            matches!(
                classificar(StatusCode::from_u16(s).unwrap(), String::new(), None, b""),
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

    #[test]
    fn o_prefixo_da_base_fica() {
        let destino = Destino::new("http://gw/fiscal").unwrap();
        assert_eq!(
            destino.url_de("/m2m/a.b").as_str(),
            "http://gw/fiscal/m2m/a.b"
        );
        let destino = Destino::new("http://gw/fiscal/").unwrap();
        assert_eq!(
            destino.url_de("/m2m/a.b").as_str(),
            "http://gw/fiscal/m2m/a.b"
        );
        let destino = Destino::new("http://gw").unwrap();
        assert_eq!(destino.url_de("/m2m/a.b").as_str(), "http://gw/m2m/a.b");
    }

    #[test]
    fn debug_nao_mostra_segredos() {
        let destino = Destino::new("http://usuario:senha-secreta@gw/x")
            .unwrap()
            .com_token("token-secreto");
        let texto = format!("{destino:?}");
        assert!(!texto.contains("senha-secreta"), "{texto}");
        assert!(!texto.contains("token-secreto"), "{texto}");
        assert!(!texto.contains("usuario"), "{texto}");
        let erro = Destino::new("http://u:senha-secreta@[::1")
            .unwrap_err()
            .to_string();
        assert!(!erro.contains("senha-secreta"), "{erro}");
    }

    #[test]
    fn so_a_resposta_do_receptor_confirma() {
        let tipo = "a.b";
        assert!(resposta_do_receptor(
            br#"{"resultado":"applied","tipo":"a.b","request_id":"x"}"#,
            tipo
        ));
        assert!(resposta_do_receptor(
            br#"{"resultado":"duplicate","tipo":"a.b"}"#,
            tipo
        ));
        for outro in [
            &b"<html>login</html>"[..],
            b"",
            b"{}",
            br#"{"resultado":"applied","tipo":"c.d"}"#,
            br#"{"resultado":"ok","tipo":"a.b"}"#,
        ] {
            assert!(!resposta_do_receptor(outro, tipo), "{outro:?}");
        }
    }

    #[test]
    fn corpo_vazio_e_dito_e_o_resto_citado() {
        assert_eq!(descrever_corpo(b"", "none"), "with an empty body");
        assert_eq!(descrever_corpo(b" \r\n", "none"), "with an empty body");
        assert_eq!(
            descrever_corpo(b"no route\x1b", "text/plain"),
            "(content-type text/plain): no route\\u{1b}"
        );
    }

    #[test]
    fn texto_remoto_citado_sem_controles() {
        assert_eq!(citar(b"a\x1b[2Jb\x07", 100), "a\\u{1b}[2Jb\\u{7}");
        assert_eq!(citar(b"abcdef", 3), "abc…");
    }
}
