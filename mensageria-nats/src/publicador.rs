//! Publishing: the relay resource an `#[enviador]` hands its message to.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use async_nats::HeaderMap;
use async_nats::jetstream::{self, context::PublishErrorKind};
use mensageria_core::{ContextoEnvio, FalhaEnvio, cloudevents};
use serde::Serialize;

use crate::Fluxo;
use crate::troca::Troca;

/// The JetStream destination of a relay: publishes each message to `{prefixo}.{tipo}` (a message
/// with an ordering key to its key's ordered lane, `{prefixo}._ordem.{n}.{tipo}`) with its
/// message id as `Nats-Msg-Id` and the same CloudEvents attributes a `Destino` sends as headers.
/// The lanes are the stream's topology record's: a [`Fluxo`] that did not come from
/// [`Fluxo::garantir`] or [`Fluxo::ler`] is checked against the broker at the first publish.
/// The saída row is acknowledged only on the stream's PubAck (a PubAck that says `duplicate` is
/// one: the stream had it already). The relay runs its deliveries concurrently, so a claim's
/// messages are published together and their PubAcks awaited together over one connection.
///
/// ```no_run
/// use mensageria_core::{ContextoEnvio, FalhaEnvio, enviador};
/// use mensageria_nats::Publicador;
/// # #[derive(serde::Serialize, serde::Deserialize)] struct PedidoCriado { id: i64 }
///
/// #[enviador(tipo = "pedido.criado")]
/// async fn publicar_pedido(evento: PedidoCriado, ctx: &ContextoEnvio) -> Result<(), FalhaEnvio> {
///     ctx.exigir::<Publicador>()?.publicar(&evento, ctx).await
/// }
///
/// # async fn iniciar(pool: mensageria_core::sqlx::SqlitePool) -> Result<(), Box<dyn std::error::Error>> {
/// let cliente = async_nats::connect("nats://127.0.0.1:4222").await?;
/// let fluxo = mensageria_nats::Fluxo::new("MENSAGERIA", "mensageria")?;
/// let js = async_nats::jetstream::new(cliente);
/// let fluxo = fluxo.garantir(&js).await?;
/// let relay = mensageria_core::relay::Relay::new(pool, mensageria_core::relay::Config::new("pedidos"))
///     .recurso(Publicador::new(js, &fluxo))
///     .spawn()?;
/// # Ok(()) }
/// ```
#[derive(Clone, Debug)]
#[doc(alias("publisher", "destination"))]
pub struct Publicador {
    js: jetstream::Context,
    fluxo: Fluxo,
    /// How long one delivery keeps publishing again after a failure that passes by itself.
    persistencia: Duration,
    /// The PubAck wait (the context's timeout).
    tempo_limite: Duration,
    /// PubAcks that said `duplicate`, shared by the clones.
    duplicados: Arc<AtomicU64>,
    /// The stream as the broker has it, read once (shared by the clones).
    verificado: Arc<tokio::sync::OnceCell<Fluxo>>,
    /// When this publisher last moved its client off a silent server (shared by the clones).
    troca: Troca,
}

impl Publicador {
    /// Publishes to `fluxo` through `js` (whose timeout bounds the wait for each PubAck; 5 s by
    /// default, see [`com_tempo_limite`](Self::com_tempo_limite)).
    pub fn new(js: jetstream::Context, fluxo: &Fluxo) -> Self {
        Self {
            js,
            fluxo: fluxo.clone(),
            persistencia: Duration::from_secs(10),
            tempo_limite: Duration::from_secs(5),
            duplicados: Arc::default(),
            verificado: Arc::new(tokio::sync::OnceCell::new_with(
                fluxo.verificado().then(|| fluxo.clone()),
            )),
            troca: Troca::default(),
        }
    }

    /// The stream as every app agrees on it: read from the broker the first time.
    async fn fluxo(&self) -> Result<&Fluxo, FalhaEnvio> {
        self.verificado
            .get_or_try_init(|| self.fluxo.ler(&self.js))
            .await
            .map_err(|erro| {
                tracing::error!(stream = %self.fluxo.nome(), error = %erro, "mensageria nats: cannot publish");
                FalhaEnvio::temporaria(format!("the stream cannot be used: {erro}"))
            })
    }

    /// How long one delivery keeps publishing again, every 250 ms with a 1 s PubAck wait, after
    /// a failure that passes by itself: no stream answered (a cluster electing the stream's
    /// leader), no PubAck in time, a connection that broke. 10 s by default, under the relay's
    /// 20 s send timeout: a leader election (a few seconds) costs no backoff, and delivery resumes
    /// within about 250 ms of the new leader. Past it the delivery fails temporarily and the relay
    /// retries with its backoff; `Duration::ZERO` leaves every retry to the relay. Each publish
    /// carries the same `Nats-Msg-Id`: the stream stores the message once.
    ///
    /// When no PubAck (or no stream) answers for 3 s, the server may be cut from its cluster's majority (its
    /// connection stays up while nothing of JetStream answers through it): the client is asked to
    /// reconnect to another server of its pool, at most once every 5 s, and the publishes go on
    /// there.
    pub fn com_persistencia(mut self, persistencia: Duration) -> Self {
        self.persistencia = persistencia;
        self
    }

    /// How many PubAcks said `duplicate` so far (this publisher and its clones): a message the
    /// stream already had within its duplicate window, published again after a lost PubAck or a
    /// relay crash, and dropped by the stream. Also counted by the metric
    /// `mensageria_published_duplicate_total{tipo}`.
    pub fn duplicados(&self) -> u64 {
        self.duplicados.load(Ordering::Relaxed)
    }

    /// How long to wait for a PubAck before the attempt counts as a temporary failure (the
    /// message may still be stored: the next attempt publishes it again with the same
    /// `Nats-Msg-Id`, which the stream drops within its duplicate window).
    pub fn com_tempo_limite(mut self, tempo: Duration) -> Self {
        self.js.set_timeout(tempo);
        self.tempo_limite = tempo;
        self
    }

    /// Publishes `evento` as the message `ctx` describes and waits for the stream's PubAck.
    pub async fn publicar<T: Serialize + ?Sized>(
        &self,
        evento: &T,
        ctx: &ContextoEnvio,
    ) -> Result<(), FalhaEnvio> {
        let corpo = serde_json::to_vec(evento).map_err(|erro| {
            FalhaEnvio::permanente(format!("the payload does not serialize to JSON: {erro}"))
        })?;
        let fluxo = self.fluxo().await?;
        let assunto = match ctx.chave_ordem() {
            Some(chave) => fluxo.assunto_ordenado(ctx.tipo(), chave),
            None => fluxo.assunto(ctx.tipo()),
        };
        let corpo = bytes::Bytes::from(corpo);
        let inicio = tokio::time::Instant::now();
        let mut js = self.js.clone();
        let ack = loop {
            let tentativa = async {
                js.publish_with_headers(assunto.clone(), cabecalhos(ctx), corpo.clone())
                    .await
                    .map_err(|erro| (erro.kind(), erro.to_string()))?
                    .await
                    .map_err(|erro| (erro.kind(), erro.to_string()))
            };
            match tentativa.await {
                Ok(ack) => break ack,
                Err((tipo, erro))
                    if passa_sozinha(&tipo)
                        && inicio.elapsed() + ESPERA_ENTRE_PUBLICACOES < self.persistencia =>
                {
                    tracing::debug!(subject = %assunto, error = %erro, "mensageria nats: publishing again shortly");
                    // No PubAck, or no stream: the server may be cut from the majority (a broken
                    // pipe is a reconnect already under way).
                    if tipo != PublishErrorKind::BrokenPipe {
                        self.troca.sem_resposta(&js.client(), inicio).await;
                    }
                    tokio::time::sleep(ESPERA_ENTRE_PUBLICACOES).await;
                    // From the second try on, a short PubAck wait: a leader that is back answers
                    // in milliseconds.
                    js.set_timeout(self.tempo_limite.min(Duration::from_secs(1)));
                }
                Err((tipo, erro)) => return Err(falha(&assunto, tipo, &erro)),
            }
        };
        tracing::debug!(
            subject = %assunto,
            stream = %ack.stream,
            sequence = ack.sequence,
            duplicate = ack.duplicate,
            "mensageria nats: published"
        );
        if ack.duplicate {
            self.duplicados.fetch_add(1, Ordering::Relaxed);
            metrics::counter!("mensageria_published_duplicate_total", "tipo" => ctx.tipo().to_owned())
                .increment(1);
        }
        Ok(())
    }
}

/// The pause between two publishes of one delivery after a failure that passes by itself.
const ESPERA_ENTRE_PUBLICACOES: Duration = Duration::from_millis(250);

/// Failures that pass by themselves: a stream electing its leader answers nothing for seconds,
/// a PubAck lost in a node's death, a connection that broke and reconnects.
fn passa_sozinha(tipo: &PublishErrorKind) -> bool {
    matches!(
        tipo,
        PublishErrorKind::StreamNotFound
            | PublishErrorKind::TimedOut
            | PublishErrorKind::BrokenPipe
    )
}

/// `Nats-Msg-Id` (the message id: the stream's dedup key), the CloudEvents attributes, the
/// correlation id, the content type, and the W3C trace context when the message was enqueued in
/// a trace.
fn cabecalhos(ctx: &ContextoEnvio) -> HeaderMap {
    let mut cabecalhos = HeaderMap::new();
    cabecalhos.insert("Nats-Msg-Id", ctx.id_mensagem().to_string());
    for (nome, valor) in cloudevents::atributos(ctx) {
        cabecalhos.insert(nome, valor);
    }
    cabecalhos.insert("x-correlation-id", ctx.correlacao());
    cabecalhos.insert("content-type", "application/json");
    for (nome, valor) in ctx.rastreamento().into_iter().flat_map(|r| r.cabecalhos()) {
        cabecalhos.insert(nome, valor);
    }
    cabecalhos
}

/// A failed publish, as the relay must treat it, with a reason an operator can act on.
fn falha(assunto: &str, tipo: PublishErrorKind, erro: &dyn std::fmt::Display) -> FalhaEnvio {
    match tipo {
        PublishErrorKind::StreamNotFound => FalhaEnvio::temporaria(format!(
            "no JetStream stream answered for subject `{assunto}` (no responders): on a cluster, \
             the stream may be electing a leader (seconds: wait); if it lasts, no stream captures \
             the subject: create it (mensageria_nats::Fluxo::garantir) or add the subject; the \
             message stays in the saída meanwhile"
        )),
        PublishErrorKind::TimedOut => FalhaEnvio::temporaria(format!(
            "no PubAck for `{assunto}` in time (server down, slow or unreachable); the message may \
             be stored already: it is published again with the same Nats-Msg-Id, which the stream \
             drops within its duplicate window"
        )),
        PublishErrorKind::MaxPayloadExceeded => FalhaEnvio::permanente(format!(
            "the message is larger than the NATS server's max_payload ({erro}); raise the \
             server's max_payload or send less"
        )),
        _ => FalhaEnvio::temporaria(format!("publishing to `{assunto}` failed: {erro}")),
    }
}
