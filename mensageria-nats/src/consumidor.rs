//! Consuming: a durable pull consumer per receiving app and tipo feeds the app's registered
//! receptores through the one receiving path ([`mensageria_axum::recepcao`]).
//!
//! Every receiving app has its own durable consumers (`{app}__{tipo}`, encoded), so each app
//! gets every event (fan-out), and the replicas of one app share the work (they pull from the
//! same durables). Messages with an ordering key travel in their key's ordered lane
//! (`{prefixo}.{tipo}.o{n}`), whose durable (`{app}__{tipo}__o{n}`) lets one message at a time
//! out, in stream order: the next step of a key is delivered only once the previous one is
//! settled, whichever replica holds it, and a redelivery keeps its place. A fetched batch is applied like the HTTP batch route — rounds of distinct
//! keys, one transaction each, an outcome per event — and each message is then settled by its
//! outcome, after the commit:
//!
//! | outcome | JetStream |
//! |---|---|
//! | applied, duplicate | ack |
//! | temporary failure, panic, database | nak with a delay (the receptor's `tentar_apos`, else a backoff by delivery count) |
//! | invalid payload or key, permanent rejection | kept in `mensageria_mortas_recebidas`, then term |
//!
//! While a batch is applied, every message of it gets an in-progress signal every third of the
//! ack wait, so a slow effect is not redelivered to a sibling meanwhile. JetStream redelivers
//! what a killed consumer had fetched once the ack wait passes; the receptor's dedup makes that
//! a no-op for what had committed.

use std::any::Any;
use std::future::Future;
use std::time::Duration;

use async_nats::jetstream::consumer::{AckPolicy, Consumer, pull};
use async_nats::jetstream::{self, AckKind, Message};
use futures_util::StreamExt;
use mensageria_axum::ReceptorRegistrado;
use mensageria_axum::recepcao::{Entrada, Veredito};
use mensageria_core::Banco;
use mensageria_core::operacoes::{self, MortaRecebida};
use mensageria_core::sqlx::Pool;
use serde_json::value::RawValue;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

use crate::{ErroNats, Fluxo, nome};

/// How a receiving app consumes: its name (its durable consumers' name), the batch it fetches
/// and how long it waits for one, the ack wait, and the retry delays.
#[derive(Debug, Clone)]
pub struct Config {
    app: String,
    lote: usize,
    espera: Duration,
    ack_wait: Duration,
    backoff_base: Duration,
    backoff_max: Duration,
    tipos: Option<Vec<String>>,
}

impl Config {
    /// For the receiving app `app` (every replica of it gives the same name): batches of up to
    /// 128 messages, a fetch waits up to 1 s, ack wait 30 s, retries after 1 s doubling up to
    /// 5 min, every receptor of the binary for the pool's backend.
    pub fn new(app: impl Into<String>) -> Self {
        Self {
            app: app.into(),
            lote: 128,
            espera: Duration::from_secs(1),
            ack_wait: Duration::from_secs(30),
            backoff_base: Duration::from_secs(1),
            backoff_max: Duration::from_secs(300),
            tipos: None,
        }
    }

    /// The most messages fetched and applied at once (at least 1).
    pub fn com_lote(mut self, lote: usize) -> Self {
        self.lote = lote.max(1);
        self
    }

    /// How long a fetch waits for a first message.
    pub fn com_espera(mut self, espera: Duration) -> Self {
        self.espera = espera.max(Duration::from_millis(10));
        self
    }

    /// How long JetStream waits for a message's ack before redelivering it (a consumer killed
    /// mid-batch: its messages come back after this).
    pub fn com_ack_wait(mut self, ack_wait: Duration) -> Self {
        self.ack_wait = ack_wait.max(Duration::from_millis(100));
        self
    }

    /// The delay before a message that failed temporarily is redelivered: `base` doubling with
    /// each delivery, at most `maximo`, unless the receptor said how long.
    pub fn com_backoff(mut self, base: Duration, maximo: Duration) -> Self {
        self.backoff_base = base;
        self.backoff_max = maximo.max(base);
        self
    }

    /// Consumes only these tipos (the app receives the others over HTTP, say).
    pub fn com_tipos<T: Into<String>>(mut self, tipos: impl IntoIterator<Item = T>) -> Self {
        self.tipos = Some(tipos.into_iter().map(Into::into).collect());
        self
    }

    fn atraso(&self, entregas: i64) -> Duration {
        let expoente = u32::try_from(entregas.saturating_sub(1).clamp(0, 20)).unwrap_or(20);
        self.backoff_base
            .saturating_mul(2_u32.saturating_pow(expoente))
            .min(self.backoff_max)
    }
}

/// The consumer of one receiving app: build it, then [`spawn`](Self::spawn) it.
///
/// ```no_run
/// # async fn f(pool: mensageria_core::sqlx::SqlitePool) -> Result<(), Box<dyn std::error::Error>> {
/// use mensageria_nats::{Consumidor, ConfigConsumidor, Fluxo};
///
/// let js = async_nats::jetstream::new(async_nats::connect("nats://127.0.0.1:4222").await?);
/// let fluxo = Fluxo::new("MENSAGERIA", "mensageria")?.garantir(&js).await?;
/// let consumidor = Consumidor::new(pool, js, fluxo, ConfigConsumidor::new("estoque")).spawn().await?;
/// // ... at shutdown:
/// consumidor.shutdown(std::time::Duration::from_secs(10)).await;
/// # Ok(()) }
/// ```
#[doc(alias("consumer", "subscriber"))]
pub struct Consumidor<DB: Banco> {
    pool: Pool<DB>,
    js: jetstream::Context,
    fluxo: Fluxo,
    config: Config,
}

impl<DB: Banco> Consumidor<DB> {
    /// The consumer of `config`'s app on `fluxo`, applying effects in `pool`.
    pub fn new(pool: Pool<DB>, js: jetstream::Context, fluxo: Fluxo, config: Config) -> Self {
        Self {
            pool,
            js,
            fluxo,
            config,
        }
    }

    /// Creates (or finds) the app's durable consumer of each tipo it receives, and starts one
    /// task per tipo. Fails when a durable cannot be created (stream missing, server down).
    pub async fn spawn(self) -> Result<ConsumidorHandle, ErroNats> {
        mensageria_core::configuracao::exigir_nome_de_app(&self.config.app)?;
        let fluxo = self
            .js
            .get_stream(self.fluxo.nome())
            .await
            .map_err(|e| ErroNats::jetstream("reading the stream")(Box::new(e)))?;
        let cancelar = CancellationToken::new();
        let mut tarefas = JoinSet::new();
        let mut tipos = Vec::new();
        for registrado in self.receptores() {
            for faixa in self.faixas(registrado.tipo) {
                let config = pull::Config {
                    durable_name: Some(faixa.duravel.clone()),
                    filter_subject: faixa.assunto.clone(),
                    ack_policy: AckPolicy::Explicit,
                    ack_wait: self.config.ack_wait,
                    // Never give up on a message: a temporary failure is retried until it
                    // applies or is refused for good (max_deliver would drop it silently).
                    max_deliver: -1,
                    max_ack_pending: i64::try_from(faixa.em_voo).unwrap_or(i64::MAX),
                    ..Default::default()
                };
                let consumidor: Consumer<pull::Config> = fluxo
                    .get_or_create_consumer(&faixa.duravel, config)
                    .await
                    .map_err(|e| ErroNats::jetstream("creating a durable consumer")(Box::new(e)))?;
                let laco = Laco {
                    pool: self.pool.clone(),
                    consumidor,
                    registrado,
                    origem: format!("nats:{}:{}", self.fluxo.nome(), faixa.assunto),
                    lote: faixa.lote,
                    espera: faixa.espera,
                    config: self.config.clone(),
                };
                tarefas.spawn(laco.rodar(cancelar.clone()));
            }
            tipos.push(registrado.tipo);
        }
        tarefas.spawn(mensageria_axum::presenca::manter(
            self.pool.clone(),
            self.config.app.clone(),
            tipos.clone(),
            "nats",
            || true,
            cancelar.clone().cancelled_owned(),
        ));
        tracing::info!(
            app = %self.config.app,
            stream = %self.fluxo.nome(),
            ?tipos,
            "mensageria nats: consuming"
        );
        Ok(ConsumidorHandle {
            cancelar,
            tarefas,
            tipos,
        })
    }

    /// The durable consumers of `tipo` for this app: the unordered lane, batches of up to the
    /// configured size, and each ordered lane, one message at a time in stream order (the next
    /// one of a lane is delivered only once the previous one is settled, so a key's steps apply
    /// in order across replicas and redeliveries).
    fn faixas(&self, tipo: &str) -> Vec<Faixa> {
        let lote = self.config.lote;
        let mut faixas = vec![Faixa {
            duravel: nome::duravel(&self.config.app, tipo),
            assunto: self.fluxo.assunto(tipo),
            lote,
            em_voo: lote.saturating_mul(8),
            espera: self.config.espera,
        }];
        for n in 0..self.fluxo.faixas_ordenadas() {
            faixas.push(Faixa {
                duravel: format!("{}__o{n}", nome::duravel(&self.config.app, tipo)),
                assunto: self.fluxo.assunto_da_faixa(tipo, n),
                lote: 1,
                em_voo: 1,
                // A fetch returns as soon as a message arrives; the wait bounds a shutdown.
                espera: self.config.espera,
            });
        }
        faixas
    }

    /// The receptores of this binary for the pool's backend (and the configured tipos).
    fn receptores(&self) -> Vec<&'static ReceptorRegistrado> {
        mensageria_axum::registrados()
            .filter(|registrado| {
                (registrado.aplicar)(&self.pool as &dyn Any, &self.config.app, &[]).is_some()
            })
            .filter(|registrado| {
                self.config
                    .tipos
                    .as_ref()
                    .is_none_or(|tipos| tipos.iter().any(|tipo| tipo == registrado.tipo))
            })
            .collect()
    }
}

/// A running [`Consumidor`].
#[derive(Debug)]
pub struct ConsumidorHandle {
    cancelar: CancellationToken,
    tarefas: JoinSet<()>,
    tipos: Vec<&'static str>,
}

impl ConsumidorHandle {
    /// The tipos it consumes.
    pub fn tipos(&self) -> &[&'static str] {
        &self.tipos
    }

    /// Stops fetching, lets the batches being applied finish and be settled (up to `prazo`),
    /// then returns; `false` if it had to abort some after `prazo` (their messages come back
    /// after the ack wait, and the receptor's dedup absorbs what had committed).
    pub async fn shutdown(mut self, prazo: Duration) -> bool {
        self.cancelar.cancel();
        let fim = async { while self.tarefas.join_next().await.is_some() {} };
        if tokio::time::timeout(prazo, fim).await.is_err() {
            self.tarefas.abort_all();
            return false;
        }
        true
    }

    /// Stops at once, as a killed process would.
    pub fn abort(mut self) {
        self.tarefas.abort_all();
    }
}

/// What a fetch gives: the messages, or why there are none.
type BuscaResultado = Result<Vec<Message>, async_nats::Error>;

/// One durable consumer of a tipo: its name, subject, batch, messages in flight, fetch wait.
struct Faixa {
    duravel: String,
    assunto: String,
    lote: usize,
    em_voo: usize,
    espera: Duration,
}

/// One lane's loop: fetch, apply, settle.
struct Laco<DB: Banco> {
    pool: Pool<DB>,
    consumidor: Consumer<pull::Config>,
    registrado: &'static ReceptorRegistrado,
    origem: String,
    lote: usize,
    espera: Duration,
    config: Config,
}

impl<DB: Banco> Laco<DB> {
    async fn rodar(self, cancelar: CancellationToken) {
        let mut falhas_seguidas = 0_u32;
        while !cancelar.is_cancelled() {
            let busca = self.buscar();
            tokio::pin!(busca);
            let mensagens = tokio::select! {
                mensagens = &mut busca => mensagens,
                _ = cancelar.cancelled() => {
                    self.terminar(busca).await;
                    return;
                }
            };
            match mensagens {
                Ok(mensagens) => {
                    if falhas_seguidas > 0 {
                        tracing::info!(
                            tipo = self.registrado.tipo,
                            "mensageria nats: fetching again"
                        );
                    }
                    falhas_seguidas = 0;
                    if !mensagens.is_empty() {
                        self.aplicar(&mensagens).await;
                    }
                }
                Err(erro) => {
                    falhas_seguidas += 1;
                    if falhas_seguidas == 1 {
                        tracing::warn!(
                            tipo = self.registrado.tipo,
                            error = %erro,
                            "mensageria nats: fetching failed; retrying every second"
                        );
                    }
                    tokio::select! {
                        _ = cancelar.cancelled() => return,
                        _ = tokio::time::sleep(Duration::from_secs(1)) => {}
                    }
                }
            }
        }
    }

    /// At shutdown, the fetch in flight: what the server already sent to it would otherwise
    /// stay unsettled until the ack wait. It is let finish (it ends within its wait) and its
    /// messages applied and settled like any batch, then the lane stops.
    async fn terminar(&self, busca: std::pin::Pin<&mut impl Future<Output = BuscaResultado>>) {
        if let Ok(mensagens) = busca.await
            && !mensagens.is_empty()
        {
            self.aplicar(&mensagens).await;
        }
    }

    /// Up to a batch of messages, waiting up to the fetch wait for the first. A pull whose
    /// connection dropped ends only after its wait plus the client's own margin: it is given up
    /// a second after its wait, so a reconnected client fetches again at once.
    async fn buscar(&self) -> BuscaResultado {
        let prazo = self.espera + Duration::from_secs(1);
        match tokio::time::timeout(prazo, self.buscar_sem_prazo()).await {
            Ok(resultado) => resultado,
            Err(_) => Ok(Vec::new()),
        }
    }

    async fn buscar_sem_prazo(&self) -> BuscaResultado {
        let mut lote = self
            .consumidor
            .fetch()
            .max_messages(self.lote)
            .expires(self.espera)
            .messages()
            .await?;
        let mut mensagens = Vec::new();
        while let Some(mensagem) = lote.next().await {
            match mensagem {
                Ok(mensagem) => mensagens.push(mensagem),
                // What came before the error is kept; the rest comes back after the ack wait.
                Err(erro) if mensagens.is_empty() => return Err(erro),
                Err(_) => break,
            }
        }
        Ok(mensagens)
    }

    /// Applies a fetched batch through the one receiving path, then settles every message.
    async fn aplicar(&self, mensagens: &[Message]) {
        let tipo = self.registrado.tipo;
        let mut vereditos: Vec<Option<Veredito>> = vec![None; mensagens.len()];
        let mut entradas = Vec::with_capacity(mensagens.len());
        let mut posicoes = Vec::with_capacity(mensagens.len());
        for (posicao, mensagem) in mensagens.iter().enumerate() {
            match ler(mensagem, tipo) {
                Ok(entrada) => {
                    entradas.push(entrada);
                    posicoes.push(posicao);
                }
                Err(veredito) => vereditos[posicao] = Some(veredito),
            }
        }
        if !entradas.is_empty() {
            let aplicar = self.registrado.aplicar;
            let Some(aplicacao) = aplicar(&self.pool as &dyn Any, &self.config.app, &entradas)
            else {
                unreachable!("the receptor's backend was checked at spawn")
            };
            let resultado = com_progresso(aplicacao, mensagens, self.config.ack_wait / 3).await;
            for (posicao, veredito) in posicoes.into_iter().zip(resultado) {
                vereditos[posicao] = Some(veredito);
            }
        }
        for (mensagem, veredito) in mensagens.iter().zip(vereditos) {
            let veredito = veredito.unwrap_or(Veredito::Adiar {
                codigo: "database",
                motivo: String::new(),
                tentar_apos: None,
            });
            self.liquidar(mensagem, veredito).await;
        }
    }

    /// Tells JetStream what became of one message.
    async fn liquidar(&self, mensagem: &Message, veredito: Veredito) {
        let tipo = self.registrado.tipo;
        let resposta = match veredito {
            Veredito::Confirmar { .. } => mensagem.ack().await,
            Veredito::Rejeitar { codigo, motivo } => {
                match self.guardar(mensagem, codigo, &motivo).await {
                    Ok(()) => mensagem.ack_with(AckKind::Term).await,
                    Err(erro) => {
                        tracing::warn!(tipo, error = %erro, "mensageria nats: could not keep a refused message as a dead letter; it comes back later");
                        mensagem
                            .ack_with(AckKind::Nak(Some(self.config.backoff_base)))
                            .await
                    }
                }
            }
            Veredito::Adiar {
                codigo,
                motivo,
                tentar_apos,
            } => {
                let entregas = mensagem.info().map(|info| info.delivered).unwrap_or(1);
                let atraso = tentar_apos.unwrap_or_else(|| self.config.atraso(entregas));
                tracing::warn!(
                    tipo,
                    resultado = codigo,
                    error = %motivo,
                    entregas,
                    retry_in_ms = u64::try_from(atraso.as_millis()).unwrap_or(u64::MAX),
                    "mensageria nats: event not applied; redelivered later"
                );
                mensagem.ack_with(AckKind::Nak(Some(atraso))).await
            }
            _ => mensagem.ack_with(AckKind::Nak(None)).await,
        };
        if let Err(erro) = resposta {
            // Unsettled, it comes back after the ack wait, and its outcome is found again.
            tracing::debug!(tipo, error = %erro, "mensageria nats: could not settle a message");
        }
    }

    /// Keeps a message refused for good in the receiving app's dead letters.
    async fn guardar(
        &self,
        mensagem: &Message,
        codigo: &str,
        motivo: &str,
    ) -> Result<(), operacoes::ErroOperacao> {
        let morta = MortaRecebida {
            app: self.config.app.clone(),
            // A message without a usable id gets one of its own, so it is kept like the others.
            id_mensagem: id_da_mensagem(mensagem).unwrap_or_else(Uuid::now_v7),
            tipo: self.registrado.tipo.to_owned(),
            origem: self.origem.clone(),
            payload: String::from_utf8_lossy(&mensagem.payload).into_owned(),
            correlacao: cabecalho(mensagem, "x-correlation-id").map(str::to_owned),
            motivo: format!("{codigo}: {motivo}"),
            entregas: mensagem.info().map(|info| info.delivered).unwrap_or(1),
            morta_em_ms: 0,
            traceparent: cabecalho(mensagem, "traceparent").map(str::to_owned),
            tracestate: cabecalho(mensagem, "tracestate").map(str::to_owned),
        };
        tracing::warn!(
            tipo = %morta.tipo,
            id_mensagem = %morta.id_mensagem,
            error = %morta.motivo,
            "mensageria nats: event refused for good; kept in mensageria_mortas_recebidas"
        );
        operacoes::registrar_morta_recebida(&self.pool, &morta).await?;
        Ok(())
    }
}

/// A message as the receiving path takes it, or the verdict that it cannot be one.
fn ler<'m>(mensagem: &'m Message, tipo: &str) -> Result<Entrada<'m>, Veredito> {
    let rejeitar = |codigo, motivo: String| Veredito::Rejeitar { codigo, motivo };
    let Some(id) = id_da_mensagem(mensagem) else {
        return Err(rejeitar(
            "invalid_message",
            "no Nats-Msg-Id (or ce-id) holding a UUID: not a message a mensageria relay published"
                .to_owned(),
        ));
    };
    if let Some(outro) = cabecalho(mensagem, "ce-type").filter(|outro| *outro != tipo) {
        return Err(rejeitar(
            "invalid_cloudevent",
            format!("ce-type `{outro}` on the subject of tipo `{tipo}`"),
        ));
    }
    let payload: &RawValue = serde_json::from_slice(&mensagem.payload).map_err(|erro| {
        rejeitar(
            "invalid_payload",
            format!("the payload is not JSON: {erro}"),
        )
    })?;
    Ok(Entrada {
        id,
        correlacao: cabecalho(mensagem, "x-correlation-id").map(str::to_owned),
        traceparent: cabecalho(mensagem, "traceparent").map(str::to_owned),
        tracestate: cabecalho(mensagem, "tracestate").map(str::to_owned),
        payload,
    })
}

fn cabecalho<'m>(mensagem: &'m Message, nome: &str) -> Option<&'m str> {
    mensagem
        .headers
        .as_ref()
        .and_then(|cabecalhos| cabecalhos.get(nome))
        .map(|valor| valor.as_str())
}

fn id_da_mensagem(mensagem: &Message) -> Option<Uuid> {
    cabecalho(mensagem, "Nats-Msg-Id")
        .or_else(|| cabecalho(mensagem, "ce-id"))
        .and_then(|id| Uuid::parse_str(id).ok())
}

/// Awaits `aplicacao`, telling JetStream every `passo` that the batch's messages are still being
/// worked on.
async fn com_progresso(
    aplicacao: mensageria_axum::recepcao::Aplicacao<'_>,
    mensagens: &[Message],
    passo: Duration,
) -> Vec<Veredito> {
    tokio::pin!(aplicacao);
    let mut relogio = tokio::time::interval_at(tokio::time::Instant::now() + passo, passo);
    loop {
        tokio::select! {
            vereditos = &mut aplicacao => return vereditos,
            _ = relogio.tick() => {
                for mensagem in mensagens {
                    let _ = mensagem.ack_with(AckKind::Progress).await;
                }
            }
        }
    }
}
