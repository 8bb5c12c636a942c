//! Consuming: a durable pull consumer per receiving app and tipo feeds the app's registered
//! receptores through the one receiving path ([`mensageria_axum::recepcao`]).
//!
//! Every receiving app has its own durable consumers (`{app}__{tipo}`, encoded), so each app
//! gets every event (fan-out), and the replicas of one app share the work (they pull from the
//! same durables); its dedup records are keyed by its app name. Messages with an ordering key
//! travel in their key's ordered lane (`{prefixo}._ordem.{n}.{tipo}`: one set of lanes per
//! stream, shared by every tipo, so one key's steps of several tipos share a lane), whose durable
//! (`{app}___ordem{n}_{tipos}`, `{tipos}` a hash of the tipos this binary receives) lets one
//! message at a time out, in stream order: the next step of a key is delivered only once the
//! previous one is settled, whichever replica holds it, and a redelivery keeps its place. A lane
//! message of a tipo the binary does not receive is acknowledged and skipped: binaries of one app
//! that receive different tipos have lane durables of their own, so each still gets its tipos. A
//! fetched batch is applied like the HTTP batch route — rounds of distinct keys, one transaction
//! each, an outcome per event — and each message is then settled by its outcome, after the
//! commit:
//!
//! | outcome | JetStream |
//! |---|---|
//! | applied, duplicate | ack |
//! | temporary failure, panic | nak with a delay (the receptor's `tentar_apos` as a floor, else a jittered backoff by delivery count) |
//! | database down (every event of the batch) | nak with a growing delay, and the lane pauses fetching as long (a circuit, not a nak storm) |
//! | effects past `tempo_limite` | rolled back, nak with a backoff |
//! | invalid payload or key, permanent rejection | kept in `mensageria_mortas_recebidas`, then term |
//! | failing at its `max_entregas`-th delivery, or older than `idade_maxima` | kept in `mensageria_mortas_recebidas` (`gave_up`, with the last error), then term |
//!
//! The server's `max_deliver` stays unlimited: it would drop a message silently; this consumer
//! gives up instead, into the dead letters. While a batch is applied, every message of it gets
//! an in-progress signal every third of the durable's ack wait (as the server holds it), until
//! `tempo_limite`. JetStream redelivers what a killed consumer had fetched once the ack wait
//! passes; the receptor's dedup makes that a no-op for what had committed. A watcher
//! (`acompanhamento.rs`) recreates a durable deleted under the running consumer and records the
//! lag.

use std::any::Any;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use async_nats::jetstream::consumer::{AckPolicy, Consumer, pull};
use async_nats::jetstream::{self, AckKind, Message};
use futures_util::StreamExt;
use mensageria_axum::ReceptorRegistrado;
use mensageria_axum::recepcao::{Entrada, Veredito};
use mensageria_core::Banco;
use mensageria_core::operacoes::{self, MortaRecebida};
use mensageria_core::ordem::OrdemAposMorta;
use mensageria_core::sqlx::Pool;
use serde_json::value::RawValue;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

use crate::cabecalhos::{CHAVE_DE_ORDEM, REENVIO_DE, SEQUENCIA_ORIGINAL};
use crate::expiracao::Adiadas;
use crate::troca::Troca;
use crate::{ErroNats, Fluxo, nome};

/// How a receiving app consumes: its name (its durable consumers' name, and its dedup records'
/// owner), the batch it fetches and how long it waits for one, the ack wait, the retry delays,
/// and when it gives up on a message (the relay's discipline: bounded by deliveries and age).
#[derive(Debug, Clone)]
pub struct Config {
    pub(crate) app: String,
    lote: usize,
    espera: Duration,
    ack_wait: Duration,
    backoff_base: Duration,
    backoff_max: Duration,
    pub(crate) tipos: Option<Vec<String>>,
    max_entregas: i64,
    idade_maxima: Duration,
    tempo_limite: Duration,
    pub(crate) intervalo_de_verificacao: Duration,
    perder_primeiro_ack: bool,
    inicio: Inicio,
    ordem_apos_morta: OrdemAposMorta,
    entregas_na_faixa: i64,
}

/// Where a durable the consumer creates starts in the stream (an existing durable keeps its
/// place: this matters at an app's first start, and when a durable is recreated after it was
/// deleted or the app renamed).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum Inicio {
    /// From the oldest message the stream holds (the default): nothing published before the
    /// durable existed is missed. A replay of what was applied is absorbed by the dedup records,
    /// as long as they outlive the stream's `max_age` (`mensageria doctor --retencao` and
    /// `mensageria purgar` check it against what the consumers record).
    #[default]
    Tudo,
    /// Only messages published after the durable is created: what the stream held before is
    /// skipped, for good (for an app that must not replay history it never received).
    Novas,
    /// From the first message published at or after this instant.
    Desde(std::time::SystemTime),
}

impl Config {
    /// For the receiving app `app` (every replica of it gives the same name): batches of up to
    /// 128 messages, a fetch waits up to 1 s, ack wait 30 s, retries after 1 s doubling up to
    /// 5 min (with jitter), a message given up after 25 deliveries or 7 days since it was
    /// published (the relay's `max_tentativas` and `idade_maxima`), a batch's effects bounded to
    /// 2 min, its durables checked every 5 s, every receptor of the binary for the pool's
    /// backend.
    pub fn new(app: impl Into<String>) -> Self {
        Self {
            app: app.into(),
            lote: 128,
            espera: Duration::from_secs(1),
            ack_wait: Duration::from_secs(30),
            backoff_base: Duration::from_secs(1),
            backoff_max: Duration::from_secs(300),
            tipos: None,
            max_entregas: 25,
            idade_maxima: Duration::from_secs(7 * 24 * 3600),
            tempo_limite: Duration::from_secs(120),
            intervalo_de_verificacao: Duration::from_secs(5),
            perder_primeiro_ack: false,
            inicio: Inicio::Tudo,
            ordem_apos_morta: OrdemAposMorta::Bloquear,
            entregas_na_faixa: 3,
        }
    }

    /// How many deliveries a message of an ordered lane gets (3 by default, 100 ms and then
    /// 200 ms apart: the lane's other keys wait meanwhile) before a temporary
    /// failure **parks** it, under [`OrdemAposMorta::Bloquear`]: it is kept as a `parked` dead
    /// letter, its key's later messages are held behind it, and the lane goes on with the other
    /// keys instead of waiting for each redelivery. The consumer retries a parked key by itself,
    /// in process, in the key's order, with its backoff (every `intervalo_de_verificacao` at the
    /// soonest), until it applies.
    pub fn com_entregas_na_faixa(mut self, entregas: u32) -> Self {
        self.entregas_na_faixa = i64::from(entregas.max(1));
        self
    }

    /// What a dead letter of an ordered message does to the later messages of its key in this
    /// app, as on the HTTP path: [`OrdemAposMorta::Bloquear`] (the default) keeps them as
    /// `held` dead letters behind it, other keys going on, until an operator replays the key
    /// (`mensageria mortas-recebidas reenviar`, or `reaplicar_mortas_recebidas` in process: the
    /// key's dead letters in their order) or discards them; [`OrdemAposMorta::Seguir`] applies
    /// them as if the dead one had been.
    pub fn com_ordem_apos_morta(mut self, politica: OrdemAposMorta) -> Self {
        self.ordem_apos_morta = politica;
        self
    }

    /// Where a durable this consumer creates starts (see [`Inicio`]; [`Inicio::Tudo`] by
    /// default).
    pub fn com_inicio(mut self, inicio: Inicio) -> Self {
        self.inicio = inicio;
        self
    }

    /// This configuration with `idade_maxima` held under the stream's `max_age`: given up at its
    /// idade_maxima, a failing message would race the stream's own deletion, so it is kept in
    /// the dead letters at three quarters of max_age instead (said at start).
    fn sob_max_age(&self, max_age: Duration) -> Self {
        let mut config = self.clone();
        if !max_age.is_zero() && config.idade_maxima >= max_age {
            config.idade_maxima = max_age.mul_f64(0.75);
            tracing::warn!(
                app = %self.app,
                idade_maxima_s = self.idade_maxima.as_secs(),
                max_age_s = max_age.as_secs(),
                "mensageria nats: the consumer's idade_maxima is not shorter than the stream's \
                 max_age; a failing message is given up at three quarters of max_age instead"
            );
        }
        config
    }

    /// The durable of one lane, as this consumer creates it.
    fn do_duravel(&self, faixa: &Faixa) -> pull::Config {
        pull::Config {
            durable_name: Some(faixa.duravel.clone()),
            filter_subject: faixa.assunto.clone(),
            ack_policy: AckPolicy::Explicit,
            ack_wait: self.ack_wait,
            // The server never gives up on a message (its max_deliver would drop it silently):
            // this consumer does, after `max_entregas`, into the dead letters.
            max_deliver: -1,
            max_ack_pending: i64::try_from(faixa.em_voo).unwrap_or(i64::MAX),
            deliver_policy: self.politica_de_entrega(),
            ..Default::default()
        }
    }

    fn politica_de_entrega(&self) -> async_nats::jetstream::consumer::DeliverPolicy {
        use async_nats::jetstream::consumer::DeliverPolicy;
        match self.inicio {
            Inicio::Tudo => DeliverPolicy::All,
            Inicio::Novas => DeliverPolicy::New,
            Inicio::Desde(instante) => {
                let nanos = instante
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_or(0, |d| d.as_nanos() as i128);
                match async_nats::datetime::from_nanos(nanos) {
                    Ok(start_time) => DeliverPolicy::ByStartTime { start_time },
                    Err(_) => DeliverPolicy::All,
                }
            }
        }
    }

    /// **For fault tests only**: the first ack of every message is not sent, as if it were lost
    /// after the receptor committed. JetStream redelivers the message after the ack wait and the
    /// receptor answers `duplicate` (its dedup record committed with the effect): what a lost
    /// ack costs, exercised. Never in production.
    pub fn com_ensaio_perder_primeiro_ack(mut self) -> Self {
        self.perder_primeiro_ack = true;
        self
    }

    /// Gives a message up after this many deliveries that failed temporarily (at least 1): it
    /// is kept in the receiving side's dead letters with its last error, and terminated.
    pub fn com_max_entregas(mut self, entregas: u32) -> Self {
        self.max_entregas = i64::from(entregas.max(1));
        self
    }

    /// Gives a message up once this long has passed since it was published (the same, when it
    /// fails again): kept in the receiving side's dead letters, and terminated. Keep it shorter
    /// than the stream's `max_age`, or the stream may delete the message first.
    pub fn com_idade_maxima(mut self, idade: Duration) -> Self {
        self.idade_maxima = idade;
        self
    }

    /// The longest a fetched batch's effects may run: past it, the batch's transaction is
    /// rolled back (its effects dropped), its messages stop getting in-progress signals and are
    /// redelivered after a backoff (a hung effect never holds its messages forever).
    pub fn com_tempo_limite(mut self, tempo: Duration) -> Self {
        self.tempo_limite = tempo.max(Duration::from_millis(10));
        self
    }

    /// How often the consumer checks its durables (and recreates a deleted one), measures its
    /// lag and records it with its registration (`mensageria_receptores`; default 5 s).
    pub fn com_intervalo_de_verificacao(mut self, intervalo: Duration) -> Self {
        self.intervalo_de_verificacao = intervalo.max(Duration::from_millis(100));
        self
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

    /// The delay after the `falhas`-th failure: `base · 2^(falhas−1)`, capped, then scaled by
    /// a random factor in [0.5, 1.0] so the retries of many messages spread out.
    fn atraso(&self, falhas: i64) -> Duration {
        let expoente = u32::try_from(falhas.saturating_sub(1).clamp(0, 20)).unwrap_or(20);
        let bruto = self
            .backoff_base
            .saturating_mul(2_u32.saturating_pow(expoente))
            .min(self.backoff_max);
        bruto.mul_f64(0.5 + 0.5 * sorteio())
    }
}

/// A number in [0, 1) from a UUIDv7's random bits.
fn sorteio() -> f64 {
    let bits = (Uuid::now_v7().as_u128() as u64) & ((1 << 52) - 1);
    bits as f64 / (1_u64 << 52) as f64
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
    /// task per lane, plus one that checks the durables (recreating one deleted under it),
    /// measures the lag and keeps the app's registration. Creating a durable is retried for up
    /// to 10 s (a replicated durable takes a while on a busy cluster); fails when the stream is
    /// missing or the server stays unreachable.
    pub async fn spawn(self) -> Result<ConsumidorHandle, ErroNats> {
        mensageria_core::configuracao::exigir_nome_de_app(&self.config.app)?;
        let fluxo = self.fluxo.existente(&self.js).await?;
        let max_age = fluxo.cached_info().config.max_age;
        // The lanes and whatever else every app agrees on, from the broker: refused when the
        // stream contradicts this app's declaration.
        let topologia = self.fluxo.verificar(&self.js, fluxo.cached_info()).await?;
        let primeira = fluxo.cached_info().state.first_sequence;
        let mut largada = Largada {
            config: self.config.sob_max_age(max_age),
            adiadas: Arc::new(Adiadas::default()),
            troca: Troca::default(),
            cancelar: CancellationToken::new(),
            tarefas: JoinSet::new(),
            vigiadas: Vec::new(),
        };
        let mut tipos = Vec::new();
        let receptores = self.receptores();
        let faixas_ordenadas = self.faixas_ordenadas(&topologia, &receptores);
        let por_tipo: Arc<Vec<&'static ReceptorRegistrado>> = Arc::new(receptores.clone());
        for registrado in receptores {
            let faixa = self.faixa(registrado.tipo);
            let mut todas = vec![faixa.clone()];
            todas.extend(faixas_ordenadas.iter().cloned());
            crate::acompanhamento::conferir_ausencia(
                &self.pool,
                &fluxo,
                &self.config.app,
                registrado.tipo,
                &todas,
                primeira,
                max_age,
            )
            .await;
            // The unordered lane of the tipo; the ordered lanes are started once, below.
            let config = self.config.do_duravel(&faixa);
            largada
                .lancar(&self, &fluxo, faixa, config, Receptores::Um(registrado))
                .await?;
            tipos.push(registrado.tipo);
        }
        let duraveis = listar_duraveis(&fluxo).await.unwrap_or_default();
        for (n, faixa) in faixas_ordenadas.into_iter().enumerate() {
            let mut config = self.config.do_duravel(&faixa);
            let herdada =
                herdar_posicao(&fluxo, &duraveis, &self.config.app, n, &faixa.duravel).await;
            if let Some(inicio) = herdada {
                config.deliver_policy =
                    async_nats::jetstream::consumer::DeliverPolicy::ByStartSequence {
                        start_sequence: inicio,
                    };
            }
            let receptores = Receptores::DaFaixa {
                por_tipo: Arc::clone(&por_tipo),
                fluxo: topologia.clone(),
            };
            largada
                .lancar(&self, &fluxo, faixa, config, receptores)
                .await?;
        }
        Ok(largada.concluir(&self, fluxo, max_age, tipos))
    }

    /// The unordered durable of `tipo` for this app: batches of up to the configured size.
    fn faixa(&self, tipo: &str) -> Faixa {
        let lote = self.config.lote;
        Faixa {
            duravel: nome::duravel(&self.config.app, tipo),
            assunto: self.fluxo.assunto(tipo),
            lote,
            em_voo: lote.saturating_mul(8),
            espera: self.config.espera,
        }
    }

    /// The app's durables of the stream's ordered lanes (the record's count), one message at a
    /// time in stream order: the next one of a lane is delivered only once the previous one is
    /// settled, so a key's steps, of every tipo, apply in order across replicas and
    /// redeliveries. Named after the tipos this binary receives, so a binary of the app that
    /// receives others has lanes of its own and never loses a message this one skips.
    fn faixas_ordenadas(
        &self,
        topologia: &Fluxo,
        receptores: &[&'static ReceptorRegistrado],
    ) -> Vec<Faixa> {
        let mut tipos: Vec<&str> = receptores.iter().map(|r| r.tipo).collect();
        tipos.sort_unstable();
        (0..topologia.faixas_ordenadas())
            .map(|n| Faixa {
                duravel: nome::duravel_da_faixa(&self.config.app, n, &tipos),
                assunto: format!("{}.>", topologia.prefixo_da_faixa(n)),
                lote: 1,
                em_voo: 1,
                // A fetch returns as soon as a message arrives; the wait bounds a shutdown.
                espera: self.config.espera,
            })
            .collect()
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

/// The names of the stream's durables (one listing for every lane of the app), or `None` when
/// they cannot be listed: the client's listing asks again after an error, forever, so it stops
/// at the first (a user without `$JS.API.CONSUMER.NAMES.<stream>`, a server going away) and
/// gives up after 5 s.
async fn listar_duraveis(fluxo: &jetstream::stream::Stream) -> Option<Vec<String>> {
    let listar = async {
        let mut nomes = Vec::new();
        let mut lista = std::pin::pin!(fluxo.consumer_names());
        while let Some(nome) = lista.next().await {
            nomes.push(nome.ok()?);
        }
        Some(nomes)
    };
    let nomes = tokio::time::timeout(Duration::from_secs(5), listar)
        .await
        .ok()
        .flatten();
    if nomes.is_none() {
        tracing::warn!(
            stream = %fluxo.cached_info().config.name,
            "mensageria nats: could not list the stream's durables (permission \
             `$JS.API.CONSUMER.NAMES`?): a new ordered-lane durable starts where `Inicio` says, \
             not where the app's earlier ones had settled"
        );
    }
    nomes
}

/// Where a new durable of ordered lane `n` starts when the app already has lane durables of
/// another tipo set among `duraveis` (a binary that now receives other tipos, after a deploy):
/// right after the earliest of their ack floors, so nothing they had not settled is skipped
/// (whatever `Inicio` says) and the lane's history is not replayed. `None` when `duravel` exists
/// or is the app's first. The old durables are said at WARN: delete them once no binary of
/// their tipo set runs.
async fn herdar_posicao(
    fluxo: &jetstream::stream::Stream,
    duraveis: &[String],
    app: &str,
    n: usize,
    duravel: &str,
) -> Option<u64> {
    if duraveis.iter().any(|nome| nome == duravel) {
        return None;
    }
    let prefixo = nome::prefixo_da_faixa(app, n);
    let nomes: Vec<&String> = duraveis
        .iter()
        .filter(|nome| nome.starts_with(&prefixo))
        .collect();
    let mut piso: Option<u64> = None;
    for antigo in &nomes {
        if let Ok(info) = fluxo.consumer_info(antigo.as_str()).await {
            let seu = info.ack_floor.stream_sequence + 1;
            piso = Some(piso.map_or(seu, |p| p.min(seu)));
        }
    }
    if piso.is_some() {
        tracing::warn!(
            app,
            duravel,
            antigos = ?nomes,
            "mensageria nats: this binary receives another set of tipos than the app's earlier \
             ordered-lane durables: its new durable starts where they had settled; delete the \
             old ones once no binary of their tipo set runs"
        );
    }
    piso
}

/// Creates (or finds) a durable, retrying a timed-out request for up to 10 s: a replicated
/// durable takes a while on a busy cluster, and an app makes several.
async fn criar_duravel(
    fluxo: &jetstream::stream::Stream,
    duravel: &str,
    config: pull::Config,
) -> Result<Consumer<pull::Config>, ErroNats> {
    let prazo = tokio::time::Instant::now() + Duration::from_secs(10);
    let mut pausa = Duration::from_millis(100);
    loop {
        match fluxo.get_or_create_consumer(duravel, config.clone()).await {
            Ok(consumidor) => return Ok(consumidor),
            Err(erro)
                if erro.kind() == async_nats::jetstream::stream::ConsumerErrorKind::TimedOut
                    && tokio::time::Instant::now() < prazo =>
            {
                tracing::info!(duravel, error = %erro, "mensageria nats: creating a durable consumer timed out; retrying");
                tokio::time::sleep(pausa).await;
                pausa = (pausa * 2).min(Duration::from_secs(1));
            }
            Err(erro) => {
                return Err(ErroNats::jetstream("creating a durable consumer")(
                    Box::new(erro),
                ));
            }
        }
    }
}

/// A running [`Consumidor`]: keep it, and call [`shutdown`](Self::shutdown) when the app stops
/// (dropped, its tasks run on until the runtime ends, and its last acks may not reach the
/// server).
#[derive(Debug)]
#[must_use = "a consumer stops cleanly only through its handle's `shutdown`"]
pub struct ConsumidorHandle {
    cancelar: CancellationToken,
    tarefas: JoinSet<()>,
    tipos: Vec<&'static str>,
    cliente: async_nats::Client,
}

impl ConsumidorHandle {
    /// The tipos it consumes.
    pub fn tipos(&self) -> &[&'static str] {
        &self.tipos
    }

    /// Stops fetching, lets the batches being applied finish and be settled (up to `prazo`),
    /// flushes the acks to the server, then returns; `false` if it had to abort some after
    /// `prazo` or could not flush (their messages come back after the ack wait, and the
    /// receptor's dedup absorbs what had committed).
    pub async fn shutdown(mut self, prazo: Duration) -> bool {
        let inicio = tokio::time::Instant::now();
        self.cancelar.cancel();
        let fim = async { while self.tarefas.join_next().await.is_some() {} };
        if tokio::time::timeout(prazo, fim).await.is_err() {
            self.tarefas.abort_all();
            return false;
        }
        // An ack is a publish: sent from the client's buffer, not awaited. Flushed here so the
        // process may exit right after.
        let resto = prazo
            .saturating_sub(inicio.elapsed())
            .max(Duration::from_millis(100));
        matches!(
            tokio::time::timeout(resto, self.cliente.flush()).await,
            Ok(Ok(()))
        )
    }

    /// Stops at once, as a killed process would.
    pub fn abort(mut self) {
        self.tarefas.abort_all();
    }
}

/// What a fetch gives: the messages, or why there are none.
type BuscaResultado = Result<Vec<Message>, async_nats::Error>;

/// What [`Consumidor::spawn`] builds up: the app's configuration (under the stream's
/// `max_age`), what its lanes share, their tasks and the durables the watcher checks.
struct Largada {
    config: Config,
    adiadas: Arc<Adiadas>,
    /// When a lane last moved the client off a silent server (shared by the lanes).
    troca: Troca,
    cancelar: CancellationToken,
    tarefas: JoinSet<()>,
    vigiadas: Vec<crate::acompanhamento::Vigiada>,
}

impl Largada {
    /// Creates (or finds) `faixa`'s durable with `config` and starts its loop.
    async fn lancar<DB: Banco>(
        &mut self,
        consumidor: &Consumidor<DB>,
        fluxo: &jetstream::stream::Stream,
        faixa: Faixa,
        config: pull::Config,
        receptores: Receptores,
    ) -> Result<(), ErroNats> {
        let duravel = criar_duravel(fluxo, &faixa.duravel, config.clone()).await?;
        // The in-progress signals follow the durable's own ack wait, as the server has it (a
        // durable created by another replica or by hand may differ from ours).
        let ack_wait = duravel.cached_info().config.ack_wait;
        let tipo = receptores.tipo();
        let laco = Laco {
            pool: consumidor.pool.clone(),
            consumidor: duravel,
            receptores,
            origem: format!("nats:{}:", consumidor.fluxo.nome()),
            lote: faixa.lote,
            espera: faixa.espera,
            ack_wait,
            config: self.config.clone(),
            adiadas: Arc::clone(&self.adiadas),
            cliente: consumidor.js.client(),
            troca: self.troca.clone(),
        };
        self.tarefas.spawn(laco.rodar(self.cancelar.clone()));
        self.vigiadas.push(crate::acompanhamento::Vigiada {
            tipo,
            duravel: faixa.duravel,
            assunto: faixa.assunto,
            config,
        });
        Ok(())
    }

    /// Starts the tasks beside the lanes (the parked keys' retries under `Bloquear`, the
    /// durables' watcher) and hands the running consumer over.
    fn concluir<DB: Banco>(
        self,
        consumidor: &Consumidor<DB>,
        fluxo: jetstream::stream::Stream,
        max_age: Duration,
        tipos: Vec<&'static str>,
    ) -> ConsumidorHandle {
        let Largada {
            config,
            adiadas,
            troca: _,
            cancelar,
            mut tarefas,
            vigiadas,
        } = self;
        if config.ordem_apos_morta == OrdemAposMorta::Bloquear {
            tarefas.spawn(
                crate::retomada::Retomada {
                    pool: consumidor.pool.clone(),
                    app: config.app.clone(),
                    intervalo: config.intervalo_de_verificacao,
                    base: config.backoff_base,
                    maximo: config.backoff_max,
                }
                .rodar(cancelar.clone()),
            );
        }
        tarefas.spawn(
            crate::acompanhamento::Acompanhamento {
                pool: consumidor.pool.clone(),
                fluxo,
                app: config.app.clone(),
                vigiadas,
                max_age,
                intervalo: config.intervalo_de_verificacao,
                adiadas,
            }
            .rodar(cancelar.clone()),
        );
        tracing::info!(
            app = %config.app,
            stream = %consumidor.fluxo.nome(),
            ?tipos,
            "mensageria nats: consuming"
        );
        ConsumidorHandle {
            cancelar,
            tarefas,
            tipos,
            cliente: consumidor.js.client(),
        }
    }
}

/// One durable consumer: its name, subject, batch, messages in flight, fetch wait.
#[derive(Clone)]
pub(crate) struct Faixa {
    pub(crate) duravel: String,
    pub(crate) assunto: String,
    lote: usize,
    em_voo: usize,
    espera: Duration,
}

/// One lane's loop: fetch, apply, settle.
struct Laco<DB: Banco> {
    pool: Pool<DB>,
    consumidor: Consumer<pull::Config>,
    receptores: Receptores,
    /// `nats:{stream}:`, the start of a dead letter's origin (its subject follows).
    origem: String,
    lote: usize,
    espera: Duration,
    /// The durable's ack wait, as the server holds it.
    ack_wait: Duration,
    config: Config,
    /// The app's nak'd messages waiting for a redelivery (see `expiracao.rs`).
    adiadas: Arc<Adiadas>,
    /// The client, asked to change server when JetStream stays silent through its own.
    cliente: async_nats::Client,
    troca: Troca,
}

/// Which receptor a lane's messages go to.
enum Receptores {
    /// A tipo's unordered lane: its receptor.
    Um(&'static ReceptorRegistrado),
    /// An ordered lane: every tipo of the stream travels in it; the receptor of the message's
    /// tipo, by its subject.
    DaFaixa {
        por_tipo: Arc<Vec<&'static ReceptorRegistrado>>,
        fluxo: Fluxo,
    },
}

impl Receptores {
    /// The tipo of a tipo's unordered lane; `None` for an ordered lane (every tipo).
    fn tipo(&self) -> Option<&'static str> {
        match self {
            Self::Um(registrado) => Some(registrado.tipo),
            Self::DaFaixa { .. } => None,
        }
    }

    /// What the lane's logs and metrics name it by.
    fn rotulo(&self) -> &'static str {
        self.tipo().unwrap_or("_ordem")
    }

    /// The receptor of `mensagem`; `None` for a lane message of a tipo this binary does not
    /// receive.
    fn de(&self, mensagem: &Message) -> Option<&'static ReceptorRegistrado> {
        match self {
            Self::Um(registrado) => Some(registrado),
            Self::DaFaixa { por_tipo, fluxo } => {
                let tipo = fluxo.tipo_da_faixa(mensagem.subject.as_str())?;
                por_tipo.iter().copied().find(|r| r.tipo == tipo)
            }
        }
    }
}

/// The wait before the next delivery of a message of an ordered lane that fails temporarily
/// (times its deliveries so far) until it is parked: the lane's other keys wait with it.
const ESPERA_NA_FAIXA: Duration = Duration::from_millis(100);

/// How often a lane that keeps failing to fetch says so again.
const AVISO_DE_BUSCA: Duration = Duration::from_secs(30);

impl<DB: Banco> Laco<DB> {
    async fn rodar(self, cancelar: CancellationToken) {
        let mut falhas_seguidas = 0_u32;
        let mut ultimo_aviso: Option<tokio::time::Instant> = None;
        // Batches whose every event met a database failure, in a row: the lane's circuit.
        let mut banco_fora = 0_i64;
        // Since when no pull of this lane was answered (see `troca.rs`).
        let mut silencio: Option<tokio::time::Instant> = None;
        while !cancelar.is_cancelled() {
            let pedida = tokio::time::Instant::now();
            let busca = self.buscar();
            tokio::pin!(busca);
            let resposta = tokio::select! {
                resposta = &mut busca => resposta,
                _ = cancelar.cancelled() => {
                    self.terminar(busca).await;
                    return;
                }
            };
            let mensagens = match resposta {
                Some(Ok(mensagens)) => {
                    silencio = None;
                    Ok(mensagens)
                }
                // Unanswered, or failed: the server may be cut from the stream's majority.
                silente => {
                    let desde = *silencio.get_or_insert(pedida);
                    self.troca.sem_resposta(&self.cliente, desde).await;
                    silente.unwrap_or_else(|| Ok(Vec::new()))
                }
            };
            let pausa = match mensagens {
                Ok(mensagens) => {
                    if falhas_seguidas > 0 {
                        tracing::info!(
                            tipo = self.receptores.rotulo(),
                            falhas_seguidas,
                            "mensageria nats: fetching again"
                        );
                    }
                    (falhas_seguidas, ultimo_aviso) = (0, None);
                    if mensagens.is_empty() {
                        continue;
                    }
                    if self.aplicar(&mensagens, banco_fora).await {
                        banco_fora += 1;
                        // The database is down: the lane stops fetching for a growing while
                        // instead of a nak storm every second.
                        self.config.atraso(banco_fora)
                    } else {
                        banco_fora = 0;
                        continue;
                    }
                }
                Err(erro) => {
                    falhas_seguidas += 1;
                    let avisar =
                        ultimo_aviso.is_none_or(|quando| quando.elapsed() >= AVISO_DE_BUSCA);
                    if avisar {
                        ultimo_aviso = Some(tokio::time::Instant::now());
                        tracing::warn!(
                            tipo = self.receptores.rotulo(),
                            duravel = %self.consumidor.cached_info().name,
                            error = %erro,
                            falhas_seguidas,
                            "mensageria nats: fetching failed; retrying every second (said again \
                             every 30 s while it fails)"
                        );
                    }
                    Duration::from_secs(1)
                }
            };
            tokio::select! {
                _ = cancelar.cancelled() => return,
                _ = tokio::time::sleep(pausa) => {}
            }
        }
    }

    /// At shutdown, the fetch in flight: what the server already sent to it would otherwise
    /// stay unsettled until the ack wait. It is let finish (it ends within its wait) and its
    /// messages applied and settled like any batch, then the lane stops.
    async fn terminar(
        &self,
        busca: std::pin::Pin<&mut impl Future<Output = Option<BuscaResultado>>>,
    ) {
        if let Some(Ok(mensagens)) = busca.await
            && !mensagens.is_empty()
        {
            self.aplicar(&mensagens, 0).await;
        }
    }

    /// Up to a batch of messages, waiting up to the fetch wait for the first; `None` when the
    /// pull was not answered at all. A pull whose connection dropped, or whose server is cut
    /// from the consumer's leader, ends only after its wait plus the client's own margin: it is
    /// given up a second after its wait, so a reconnected client fetches again at once.
    async fn buscar(&self) -> Option<BuscaResultado> {
        let prazo = self.espera + Duration::from_secs(1);
        tokio::time::timeout(prazo, self.buscar_sem_prazo())
            .await
            .ok()
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

    /// Applies a fetched batch through the one receiving path, then settles every message;
    /// `true` when the database failed for every event of it (`banco_fora` such batches came
    /// right before: the redelivery waits longer each time).
    async fn aplicar(&self, mensagens: &[Message], banco_fora: i64) -> bool {
        let registrado = match self.receptores.de(&mensagens[0]) {
            Some(registrado) => registrado,
            None => {
                // An ordered lane (one message a batch) carries every tipo of the stream: one
                // this binary does not receive is not its to apply (a binary of the app that
                // receives it has lanes of its own).
                for mensagem in mensagens {
                    metrics::counter!("mensageria_consumer_skipped_total", "app" => self.config.app.clone())
                        .increment(1);
                    self.resolver(mensagem.ack().await);
                }
                return false;
            }
        };
        let tipo = registrado.tipo;
        if let Some(banco_caiu) = self.reter(mensagens, tipo, banco_fora).await {
            return banco_caiu;
        }
        let mut vereditos: Vec<Option<Veredito>> = vec![None; mensagens.len()];
        let mut entradas = Vec::with_capacity(mensagens.len());
        let mut posicoes = Vec::with_capacity(mensagens.len());
        for mensagem in mensagens {
            if let Ok(info) = mensagem.info() {
                self.adiadas.esquecer(info.stream_sequence); // back: no longer waiting
            }
        }
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
            let aplicar = registrado.aplicar;
            let Some(aplicacao) = aplicar(&self.pool as &dyn Any, &self.config.app, &entradas)
            else {
                unreachable!("the receptor's backend was checked at spawn")
            };
            let resultado = com_progresso(
                aplicacao,
                mensagens,
                self.ack_wait / 3,
                self.config.tempo_limite,
                entradas.len(),
            )
            .await;
            for (posicao, veredito) in posicoes.into_iter().zip(resultado) {
                vereditos[posicao] = Some(veredito);
            }
        }
        let banco = |v: &Option<Veredito>| {
            matches!(
                v,
                None | Some(Veredito::Adiar {
                    codigo: "database",
                    ..
                })
            )
        };
        let banco_caiu = vereditos.iter().all(banco);
        for (mensagem, veredito) in mensagens.iter().zip(vereditos) {
            let veredito = veredito.unwrap_or(Veredito::Adiar {
                codigo: "database",
                motivo: String::new(),
                tentar_apos: None,
            });
            self.liquidar(
                mensagem,
                tipo,
                veredito,
                banco_caiu.then_some(banco_fora + 1),
            )
            .await;
        }
        banco_caiu
    }

    /// Tells JetStream what became of one message. `banco_fora`: the batch met a database that
    /// is down, for this many batches in a row (its redelivery waits by that count).
    async fn liquidar(
        &self,
        mensagem: &Message,
        tipo: &'static str,
        veredito: Veredito,
        banco_fora: Option<i64>,
    ) {
        let resposta = match veredito {
            Veredito::Confirmar { .. }
                if self.config.perder_primeiro_ack
                    && mensagem.info().is_ok_and(|info| info.delivered == 1) =>
            {
                Ok(()) // the fault test's lost ack: never sent
            }
            Veredito::Confirmar { .. } => {
                self.esquecer_reenviada(mensagem).await;
                mensagem.ack().await
            }
            Veredito::Rejeitar { codigo, motivo } => {
                self.terminar_morta(mensagem, tipo, codigo, &motivo).await
            }
            Veredito::Adiar {
                codigo,
                motivo,
                tentar_apos,
            } => {
                let entregas = mensagem.info().map(|info| info.delivered).unwrap_or(1);
                if let Some(porque) = self.desistir(mensagem, entregas) {
                    let motivo = format!("{porque}; the last attempt: {codigo}: {motivo}");
                    return self.resolver(
                        self.terminar_morta(mensagem, tipo, "gave_up", &motivo)
                            .await,
                    );
                }
                if self.estacionar(mensagem, entregas) {
                    let motivo = format!(
                        "failed {entregas} times in an ordered lane: parked so the lane's other \
                         keys go on, its key held behind it, retried in process by the consumer \
                         until it applies; the last attempt: {codigo}: {motivo}"
                    );
                    return self
                        .resolver(self.terminar_morta(mensagem, tipo, "parked", &motivo).await);
                }
                let atraso = match (banco_fora, tentar_apos) {
                    (Some(vezes), _) => self.config.atraso(vezes),
                    // A message that will be parked holds its whole lane while it waits: a
                    // short wait, then parked, and the key's backoff is the retries' in process.
                    _ if self.estacionavel(mensagem) => ESPERA_NA_FAIXA.mul_f64(entregas as f64),
                    (None, Some(pedido)) => pedido.max(self.config.atraso(1) / 2),
                    (None, None) => self.config.atraso(entregas),
                };
                tracing::warn!(
                    tipo,
                    resultado = codigo,
                    error = %motivo,
                    entregas,
                    retry_in_ms = u64::try_from(atraso.as_millis()).unwrap_or(u64::MAX),
                    "mensageria nats: event not applied; redelivered later"
                );
                if let Ok(info) = mensagem.info() {
                    let porque = format!(
                        "the stream deleted it (its max_age or limits) while it waited for a \
                         redelivery; the last attempt: {codigo}: {motivo}"
                    );
                    let morta = self.morta(mensagem, tipo, "expired", &porque);
                    self.adiadas.adiar(info.stream_sequence, morta);
                }
                mensagem.ack_with(AckKind::Nak(Some(atraso))).await
            }
            _ => mensagem.ack_with(AckKind::Nak(None)).await,
        };
        self.resolver(resposta);
    }

    /// A settlement the server did not get: the message comes back after the ack wait, and its
    /// outcome is found again.
    fn resolver(&self, resposta: Result<(), async_nats::Error>) {
        if let Err(erro) = resposta {
            tracing::debug!(tipo = self.receptores.rotulo(), error = %erro, "mensageria nats: could not settle a message");
        }
    }

    /// Whether a temporary failure of this message parks it (see
    /// [`Config::com_entregas_na_faixa`]): a message of an ordered lane, with its key, under
    /// `Bloquear`, at its `entregas_na_faixa`-th delivery.
    fn estacionar(&self, mensagem: &Message, entregas: i64) -> bool {
        entregas >= self.config.entregas_na_faixa && self.estacionavel(mensagem)
    }

    /// Whether a temporary failure of this message parks it at its `entregas_na_faixa`-th
    /// delivery: a message of an ordered lane, with its key, under `Bloquear`.
    fn estacionavel(&self, mensagem: &Message) -> bool {
        self.receptores.tipo().is_none()
            && self.config.ordem_apos_morta == OrdemAposMorta::Bloquear
            && cabecalho(mensagem, CHAVE_DE_ORDEM).is_some()
    }

    /// Why this consumer gives a message up now, if it does: `max_entregas` deliveries, or
    /// older than `idade_maxima` since it was enqueued (its UUIDv7 id's instant; the relay's
    /// discipline, measured the same way).
    fn desistir(&self, mensagem: &Message, entregas: i64) -> Option<String> {
        if entregas >= self.config.max_entregas {
            return Some(format!(
                "gave up after {entregas} deliveries (max_entregas {})",
                self.config.max_entregas
            ));
        }
        let idade = id_da_mensagem(mensagem).and_then(idade_do_id)?;
        (idade > self.config.idade_maxima).then(|| {
            format!(
                "gave up {} s after it was enqueued (idade_maxima {} s)",
                idade.as_secs(),
                self.config.idade_maxima.as_secs()
            )
        })
    }

    /// An ordered lane's batch (its one message) held behind a dead letter of its key: kept as
    /// a `held` dead letter; `Some(true)` when the database could not say (redelivered later),
    /// `Some(false)` when held, `None` when it goes on.
    async fn reter(
        &self,
        mensagens: &[Message],
        tipo: &'static str,
        banco_fora: i64,
    ) -> Option<bool> {
        if self.receptores.tipo().is_some() {
            return None;
        }
        match self.retida(&mensagens[0]).await? {
            Ok(motivo) => {
                let resposta = self
                    .terminar_morta(&mensagens[0], tipo, "held", &motivo)
                    .await;
                self.resolver(resposta);
                Some(false)
            }
            Err(erro) => {
                let veredito = Veredito::Adiar {
                    codigo: "database",
                    motivo: erro,
                    tentar_apos: None,
                };
                self.liquidar(&mensagens[0], tipo, veredito, Some(banco_fora + 1))
                    .await;
                Some(true)
            }
        }
    }

    /// Under [`OrdemAposMorta::Bloquear`], whether an ordered message waits behind a dead letter
    /// of its key in this app: `Some(Ok(why))` when it does, `Some(Err(..))` when the database
    /// could not say, `None` when it goes on.
    async fn retida(&self, mensagem: &Message) -> Option<Result<String, String>> {
        if self.config.ordem_apos_morta != OrdemAposMorta::Bloquear {
            return None;
        }
        let chave = cabecalho(mensagem, CHAVE_DE_ORDEM)?;
        let posicao = posicao_na_chave(mensagem)?;
        match operacoes::morta_recebida_que_retem(&self.pool, &self.config.app, chave, posicao)
            .await
        {
            Ok(None) => None,
            Ok(Some(id)) => Some(Ok(format!(
                "an earlier message of its ordering key `{chave}` is a dead letter ({id}): it waits \
                 behind it (OrdemAposMorta::Bloquear); `mensageria mortas-recebidas reenviar {id}` \
                 replays the key's dead letters in order, `descartar` drops one"
            ))),
            Err(erro) => Some(Err(erro.to_string())),
        }
    }

    /// A replayed dead letter (`Mensageria-Reenvio-De`) was applied: its record goes, so the
    /// key's next one is no longer held behind it.
    async fn esquecer_reenviada(&self, mensagem: &Message) {
        let Some(id) = reenvio_de(mensagem) else {
            return;
        };
        // Another app of the subject (fan-out) gets the replay too, and has no such record.
        if let Err(erro) =
            operacoes::descartar_morta_recebida(&self.pool, &self.config.app, id).await
            && !matches!(
                erro,
                operacoes::ErroOperacao::MortaRecebidaNaoEncontrada { .. }
            )
        {
            tracing::warn!(app = %self.config.app, %id, error = %erro, "mensageria nats: a replayed dead letter was applied but its record stays; discard it");
        }
    }

    /// Keeps a message in the receiving side's dead letters, then terminates it; if it cannot be
    /// kept, it is redelivered later instead (never terminated unrecorded).
    async fn terminar_morta(
        &self,
        mensagem: &Message,
        tipo: &str,
        codigo: &str,
        motivo: &str,
    ) -> Result<(), async_nats::Error> {
        match self.guardar(mensagem, tipo, codigo, motivo).await {
            Ok(()) => mensagem.ack_with(AckKind::Term).await,
            Err(erro) => {
                tracing::warn!(tipo, error = %erro, "mensageria nats: could not keep a message as a dead letter; it comes back later");
                mensagem
                    .ack_with(AckKind::Nak(Some(self.config.atraso(1))))
                    .await
            }
        }
    }

    /// Keeps a message refused for good in the receiving app's dead letters.
    async fn guardar(
        &self,
        mensagem: &Message,
        tipo: &str,
        codigo: &str,
        motivo: &str,
    ) -> Result<(), operacoes::ErroOperacao> {
        let morta = self.morta(mensagem, tipo, codigo, motivo);
        tracing::warn!(
            tipo = %morta.tipo,
            id_mensagem = %morta.id_mensagem,
            error = %morta.motivo,
            "mensageria nats: event refused for good; kept in mensageria_mortas_recebidas"
        );
        operacoes::registrar_morta_recebida(&self.pool, &morta).await?;
        Ok(())
    }

    /// What the receiving side's dead letter of `mensagem` holds.
    fn morta(&self, mensagem: &Message, tipo: &str, codigo: &str, motivo: &str) -> MortaRecebida {
        MortaRecebida {
            app: self.config.app.clone(),
            // A replay is kept under the dead letter it replays (its place in its key included);
            // a message without a usable id gets one of its own, so it is kept like the others.
            id_mensagem: reenvio_de(mensagem)
                .or_else(|| id_da_mensagem(mensagem))
                .unwrap_or_else(Uuid::now_v7),
            tipo: tipo.to_owned(),
            // The message's own subject: an ordered lane's durable takes a wildcard.
            origem: format!("{}{}", self.origem, mensagem.subject),
            payload: String::from_utf8_lossy(&mensagem.payload).into_owned(),
            correlacao: cabecalho(mensagem, "x-correlation-id").map(str::to_owned),
            motivo: format!("{codigo}: {motivo}"),
            entregas: mensagem.info().map(|info| info.delivered).unwrap_or(1),
            morta_em_ms: 0,
            traceparent: cabecalho(mensagem, "traceparent").map(str::to_owned),
            tracestate: cabecalho(mensagem, "tracestate").map(str::to_owned),
            sequencia: posicao_na_chave(mensagem),
            chave_ordem: cabecalho(mensagem, CHAVE_DE_ORDEM).map(str::to_owned),
        }
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

/// The dead letter a replayed message replays (`Mensageria-Reenvio-De`), if it is one.
fn reenvio_de(mensagem: &Message) -> Option<Uuid> {
    cabecalho(mensagem, REENVIO_DE).and_then(|id| Uuid::parse_str(id).ok())
}

/// A message's place: its stream sequence, or, for a replayed dead letter, the sequence it had
/// (`Mensageria-Sequencia-Original`), so a replay keeps its place in its key.
fn posicao_na_chave(mensagem: &Message) -> Option<i64> {
    cabecalho(mensagem, SEQUENCIA_ORIGINAL)
        .and_then(|sequencia| sequencia.parse().ok())
        .or_else(|| {
            mensagem
                .info()
                .ok()
                .and_then(|info| i64::try_from(info.stream_sequence).ok())
        })
}

fn cabecalho<'m>(mensagem: &'m Message, nome: &str) -> Option<&'m str> {
    mensagem
        .headers
        .as_ref()
        .and_then(|cabecalhos| cabecalhos.get(nome))
        .map(|valor| valor.as_str())
}

/// How long ago a UUIDv7 message id was made (its enqueue instant); `None` for another kind.
pub(crate) fn idade_do_id(id: Uuid) -> Option<Duration> {
    let (segundos, nanos) = id.get_timestamp()?.to_unix();
    let feito = std::time::UNIX_EPOCH + Duration::new(segundos, nanos);
    Some(
        std::time::SystemTime::now()
            .duration_since(feito)
            .unwrap_or_default(),
    )
}

pub(crate) fn id_da_mensagem(mensagem: &Message) -> Option<Uuid> {
    mensagem.headers.as_ref().and_then(id_dos_cabecalhos)
}

/// A message's id from its headers: `Nats-Msg-Id`, else `ce-id`, holding a UUID.
pub(crate) fn id_dos_cabecalhos(cabecalhos: &async_nats::HeaderMap) -> Option<Uuid> {
    cabecalhos
        .get("Nats-Msg-Id")
        .or_else(|| cabecalhos.get("ce-id"))
        .and_then(|id| Uuid::parse_str(id.as_str()).ok())
}

/// Awaits `aplicacao`, telling JetStream every `passo` that the batch's messages are still being
/// worked on, for at most `limite`: past it the application is dropped (its transaction rolls
/// back) and each of its `eventos` is to be redelivered.
async fn com_progresso(
    aplicacao: mensageria_axum::recepcao::Aplicacao<'_>,
    mensagens: &[Message],
    passo: Duration,
    limite: Duration,
    eventos: usize,
) -> Vec<Veredito> {
    tokio::pin!(aplicacao);
    let passo = passo.max(Duration::from_millis(10));
    let mut relogio = tokio::time::interval_at(tokio::time::Instant::now() + passo, passo);
    let prazo = tokio::time::sleep(limite);
    tokio::pin!(prazo);
    loop {
        tokio::select! {
            vereditos = &mut aplicacao => return vereditos,
            () = &mut prazo => {
                tracing::error!(
                    eventos,
                    limite_ms = u64::try_from(limite.as_millis()).unwrap_or(u64::MAX),
                    "mensageria nats: a batch's effects outlived the consumer's tempo_limite; \
                     rolled back, its messages are redelivered later"
                );
                let motivo = format!(
                    "the batch's effects took longer than {} ms; rolled back",
                    limite.as_millis()
                );
                return (0..eventos)
                    .map(|_| Veredito::Adiar {
                        codigo: "timeout",
                        motivo: motivo.clone(),
                        tentar_apos: None,
                    })
                    .collect();
            }
            _ = relogio.tick() => {
                for mensagem in mensagens {
                    let _ = mensagem.ack_with(AckKind::Progress).await;
                }
            }
        }
    }
}
