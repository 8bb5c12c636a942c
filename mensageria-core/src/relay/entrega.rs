//! One delivery (send a claimed row, then settle it, fenced by its lease token) and the set of
//! deliveries in flight with their leases.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use sqlx::Pool;
use tokio::task::{AbortHandle, JoinSet};
use tokio::time::{Instant, sleep, timeout};
use tracing::Instrument;

use super::backoff::atraso;
use super::circuito::Circuitos;
use super::confirmacoes::Confirmacoes;
use super::instancia::Leases;
use super::vazao::Vaga;
use super::{Config, Rodada};
use crate::banco::Banco;
use crate::banco::Reivindicada;
use crate::enviador::Recursos;
use crate::enviador::{ContextoEnvio, FalhaEnvio};
use crate::rastreamento::ContextoRastreamento;
use crate::registro::Registro;

/// How one delivery ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Desfecho {
    Entregue,
    Reagendada,
    Morta,
    /// The lease had moved on: another relay owns the row now; we changed nothing.
    Cercada,
    /// The settlement could not reach the database: the lease will expire and the row come back.
    SemLiquidacao,
}

impl Desfecho {
    /// Adds this outcome to a round's counts.
    pub(crate) fn contar(self, rodada: &mut Rodada) {
        match self {
            Desfecho::Entregue => rodada.entregues += 1,
            Desfecho::Reagendada => rodada.reagendadas += 1,
            Desfecho::Morta => rodada.mortas += 1,
            Desfecho::Cercada => rodada.cercadas += 1,
            Desfecho::SemLiquidacao => {}
        }
    }
}

/// The deliveries in flight and their leases: each delivery's `(row id, fencing token)` is in
/// the [`Leases`] the vigia renews from the moment it is spawned here until it ends. A delivery
/// that ended (settled, fenced or gave up settling) leaves the map; one that was cancelled or
/// panicked keeps its lease there, so the shutdown gives its row back.
pub(crate) struct EmVoo {
    tarefas: JoinSet<Desfecho>,
    leases: Leases,
}

impl EmVoo {
    pub(crate) fn new(leases: Leases) -> Self {
        Self {
            tarefas: JoinSet::new(),
            leases,
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.tarefas.len()
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.tarefas.is_empty()
    }

    /// Spawns the delivery of one claimed row, its lease recorded while it runs.
    pub(crate) fn lancar<DB: Banco>(&mut self, entrega: Entrega<DB>) {
        let (id, token) = (entrega.linha.id, entrega.token);
        let tarefa = self.tarefas.spawn(entrega.entregar());
        self.leases.inserir(tarefa.id(), id, token);
    }

    /// Forgets the deliveries that already ended, without waiting.
    pub(crate) fn colher(&mut self) {
        while let Some(resultado) = self.tarefas.try_join_next_with_id() {
            self.terminou(resultado);
        }
    }

    /// Waits for the next delivery to end; `None` when none is in flight.
    pub(crate) async fn proxima(&mut self) -> Option<Desfecho> {
        let resultado = self.tarefas.join_next_with_id().await?;
        Some(self.terminou(resultado))
    }

    /// Waits for every delivery in flight, counting their outcomes.
    pub(crate) async fn drenar(&mut self, rodada: &mut Rodada) {
        while let Some(desfecho) = self.proxima().await {
            desfecho.contar(rodada);
        }
    }

    /// Shutdown: lets the deliveries in flight end for up to `prazo`, aborts the rest and
    /// returns the `(id, token)` of every row claimed but not settled.
    pub(crate) async fn encerrar(mut self, prazo: Duration) -> Vec<(i64, i64)> {
        let _ = timeout(prazo, self.drenar(&mut Rodada::default())).await;
        self.tarefas.abort_all();
        self.drenar(&mut Rodada::default()).await;
        self.leases.esvaziar()
    }

    fn terminou(
        &mut self,
        resultado: Result<(tokio::task::Id, Desfecho), tokio::task::JoinError>,
    ) -> Desfecho {
        match resultado {
            Ok((tarefa, desfecho)) => {
                self.leases.remover(tarefa);
                desfecho
            }
            // Cancelled (shutdown) or panicked: nothing was settled, the lease stays to be given
            // back.
            Err(_) => Desfecho::SemLiquidacao,
        }
    }
}

/// Everything one delivery needs: the claimed row, its fencing token, and the relay's pool,
/// configuration, resources, circuits and ack batcher.
pub(crate) struct Entrega<DB: Banco> {
    pub(crate) pool: Pool<DB>,
    pub(crate) config: Config,
    pub(crate) recursos: Recursos,
    pub(crate) circuitos: Arc<Mutex<Circuitos>>,
    /// This delivery's place among its tipo's deliveries in flight, held until it is dropped.
    pub(crate) vaga: Vaga,
    pub(crate) confirmacoes: Arc<Confirmacoes>,
    pub(crate) linha: Reivindicada,
    pub(crate) token: i64,
}

/// Aborts a spawned send when the delivery that awaits it is dropped (timeout, shutdown).
struct AbortarAoSoltar(AbortHandle);

impl Drop for AbortarAoSoltar {
    fn drop(&mut self) {
        self.0.abort();
    }
}

impl<DB: Banco> Entrega<DB> {
    /// Delivers the row and settles it, in a `mensageria.entrega` span.
    pub(crate) async fn entregar(self) -> Desfecho {
        let span = tracing::info_span!(
            "mensageria.entrega",
            id_mensagem = %self.linha.id_mensagem,
            tipo = %self.linha.tipo,
            tentativa = self.linha.tentativas,
            app = %self.config.app,
        );
        // A child of the span that enqueued the message: one business event is one trace, and
        // each redelivery is one more delivery span in it.
        if let Some(rastreamento) = self.linha.rastreamento() {
            rastreamento.continuar(&span);
        }
        async move {
            let resultado = enviar(&self.config, self.recursos.clone(), &self.linha).await;
            // Whether the tipo's circuit was open when this delivery ended: then this was a probe
            // (or a delivery that started before the circuit opened), and a temporary failure is
            // the destination's, not the message's.
            let aberto = self
                .circuitos
                .lock()
                .expect("circuit lock")
                .aberto(&self.linha.tipo);
            if !matches!(resultado, Err(FalhaEnvio::Sobrecarga { .. })) {
                self.vaga.aceita();
            }
            let desfecho = match resultado {
                Ok(()) => self.entregue().await,
                Err(FalhaEnvio::Sobrecarga {
                    motivo,
                    tentar_apos,
                }) => self.sobrecarregado(&motivo, tentar_apos).await,
                Err(FalhaEnvio::Permanente { motivo }) => {
                    self.circuito(false);
                    tracing::error!(
                        error = %motivo,
                        "mensageria relay: permanent failure; message moved to dead letters"
                    );
                    self.matar(&motivo).await
                }
                Err(FalhaEnvio::Temporaria {
                    motivo,
                    tentar_apos,
                }) if aberto => self.sonda_falhou(&motivo, tentar_apos).await,
                Err(FalhaEnvio::Temporaria {
                    motivo,
                    tentar_apos,
                }) => self.falhou(&motivo, tentar_apos).await,
            };
            if desfecho == Desfecho::Cercada {
                tracing::info!(
                    "mensageria relay: lease lost before settling (another relay reclaimed the \
                     row); left as it is"
                );
            }
            desfecho
        }
        .instrument(span)
        .await
    }

    /// Records the outcome in the tipo's circuit; after a failure, the circuit's cool-down when
    /// it is open.
    fn circuito(&self, falhou: bool) -> Option<Duration> {
        let tipo = &self.linha.tipo;
        let mut circuitos = self.circuitos.lock().expect("circuit lock");
        if !falhou {
            circuitos.sucesso(tipo, Instant::now());
            return None;
        }
        if circuitos.falha(tipo, Instant::now()) {
            let espera = circuitos.espera(tipo).unwrap_or_default();
            tracing::warn!(
                retry_in_ms = espera.as_millis() as u64,
                "mensageria relay: the destination of this tipo is failing; circuit open, probing \
                 with one message per cool-down"
            );
        }
        circuitos.espera(tipo)
    }

    async fn entregue(&self) -> Desfecho {
        let (linha, tipo) = (&self.linha, self.linha.tipo.clone());
        self.circuito(false);
        metrics::counter!("mensageria_delivered_total", "tipo" => tipo.clone()).increment(1);
        if linha.tentativas > 1 {
            metrics::counter!("mensageria_redelivered_total", "tipo" => tipo.clone()).increment(1);
        }
        metrics::histogram!("mensageria_delivery_age_seconds", "tipo" => tipo)
            .record(linha.idade_ms as f64 / 1000.0);
        if self.config.ensaio.perder_primeiro_ack && linha.tentativas <= 1 {
            // Test switch: the ack "got lost"; the row is due again at once.
            return self
                .reagendar(Duration::ZERO, "ensaio: ack lost on purpose", true)
                .await;
        }
        let confirmar = || {
            self.confirmacoes
                .confirmar(&self.pool, linha.id, self.token)
        };
        let desfecho = liquidar(confirmar, Desfecho::Entregue).await;
        if linha.chave_ordem.is_some() && matches!(desfecho, Desfecho::Entregue) {
            // The key's next step became the head of its key: claim it now, not at the next
            // poll (a key advances as fast as its steps are settled).
            super::acordar();
        }
        desfecho
    }

    /// A probe of a destination that is down: try again at the circuit's pace, and give the
    /// attempt back (an outage must not walk messages to the dead letters).
    async fn sonda_falhou(&self, motivo: &str, tentar_apos: Option<Duration>) -> Desfecho {
        let espera = self.circuito(true).unwrap_or(self.config.backoff_base);
        let espera = tentar_apos.map_or(espera, |pedida| pedida.max(espera));
        tracing::warn!(
            error = %motivo,
            retry_in_ms = espera.as_millis() as u64,
            "mensageria relay: probe failed; the destination is still down"
        );
        self.reagendar(espera, motivo, false).await
    }

    /// The destination refused for overload before doing anything: fewer of the tipo's
    /// deliveries in flight from now on, and a retry after its `Retry-After` (or the backoff
    /// base) that gives the attempt back; a message past `idade_maxima` is dead-lettered.
    /// Neither the circuit (the destination answers: a success there) nor the message (nothing
    /// is wrong with it) is blamed.
    async fn sobrecarregado(&self, motivo: &str, tentar_apos: Option<Duration>) -> Desfecho {
        let tipo = &self.linha.tipo;
        // For the circuit, an answer: the destination is up (a probe that got it closes the
        // circuit; left unsettled, it blocked the tipo for good). Overload is the in-flight
        // limit's business.
        self.circuito(false);
        let idade = Duration::from_millis(u64::try_from(self.linha.idade_ms).unwrap_or(0));
        if idade >= self.config.idade_maxima {
            let motivo = format!("gave up at {idade:?} old, the destination overloaded: {motivo}");
            tracing::error!(error = %motivo, "mensageria relay: message moved to dead letters");
            return self.matar(&motivo).await;
        }
        if let Some(limite) = self.vaga.sobrecarga() {
            tracing::warn!(
                error = %motivo,
                in_flight_limit = limite,
                "mensageria relay: the destination is overloaded; fewer deliveries of this tipo \
                 in flight"
            );
        }
        metrics::counter!("mensageria_overloaded_total", "tipo" => tipo.clone()).increment(1);
        let espera = tentar_apos.unwrap_or(self.config.backoff_base);
        self.reagendar(espera, motivo, false).await
    }

    /// A temporary failure: retry after backoff, or dead-letter past the attempt or age limit.
    async fn falhou(&self, motivo: &str, tentar_apos: Option<Duration>) -> Desfecho {
        let config = &self.config;
        self.circuito(true);
        let tentativas = u32::try_from(self.linha.tentativas).unwrap_or(0);
        let idade = Duration::from_millis(u64::try_from(self.linha.idade_ms).unwrap_or(0));
        if tentativas >= config.max_tentativas || idade >= config.idade_maxima {
            let motivo = format!("gave up after {tentativas} attempts: {motivo}");
            tracing::error!(error = %motivo, "mensageria relay: message moved to dead letters");
            return self.matar(&motivo).await;
        }
        let (base, max) = (config.backoff_base, config.backoff_max);
        let espera = atraso(tentativas, base, max, tentar_apos, fastrand::f64());
        tracing::warn!(
            error = %motivo,
            retry_in_ms = espera.as_millis() as u64,
            "mensageria relay: temporary failure; will retry"
        );
        metrics::counter!("mensageria_retried_total", "tipo" => self.linha.tipo.clone())
            .increment(1);
        self.reagendar(espera, motivo, true).await
    }

    async fn reagendar(&self, espera: Duration, motivo: &str, contar: bool) -> Desfecho {
        let (id, token, atraso_ms) = (self.linha.id, self.token, espera.as_millis() as i64);
        let reagendar = || DB::reagendar(&self.pool, id, token, atraso_ms, motivo, contar);
        liquidar(reagendar, Desfecho::Reagendada).await
    }

    async fn matar(&self, motivo: &str) -> Desfecho {
        metrics::counter!("mensageria_dead_lettered_total", "tipo" => self.linha.tipo.clone())
            .increment(1);
        let (id, token, app) = (self.linha.id, self.token, &self.config.app);
        liquidar(
            || DB::matar(&self.pool, id, token, motivo, app),
            Desfecho::Morta,
        )
        .await
    }
}

/// Runs the user's enviador for one row: bounded by the send timeout, a panic or a timeout is a
/// temporary failure.
async fn enviar(
    config: &Config,
    recursos: Recursos,
    linha: &Reivindicada,
) -> Result<(), FalhaEnvio> {
    let Some(enviador) = Registro::global().enviador(&linha.tipo) else {
        return Err(FalhaEnvio::temporaria(format!(
            "no enviador for tipo `{}` in this binary",
            linha.tipo
        )));
    };
    let despachar = enviador.despachar;
    let payload = linha.payload.clone();
    let ctx = ContextoEnvio::new(linha.id_mensagem, linha.tipo.clone())
        .com_tentativa(u32::try_from(linha.tentativas).unwrap_or(1))
        .com_correlacao(linha.correlacao.clone())
        .com_app(config.app.clone())
        .com_chave_ordem(linha.chave_ordem.clone())
        // What the destination continues: this delivery span's context (the receptor's span is
        // its child), else, without OpenTelemetry here, the one stored with the message, passed on.
        .com_rastreamento(ContextoRastreamento::do_span_atual().or_else(|| linha.rastreamento()))
        .com_recursos(recursos);
    let duplicar = config.ensaio.duplicar;
    let tarefa = tokio::spawn(
        async move {
            if duplicar {
                // Test switch: the first send's outcome is dropped, as a sender's timeout would.
                let _ = despachar(&payload, &ctx).await;
            }
            despachar(&payload, &ctx).await
        }
        .in_current_span(),
    );
    let _abortar = AbortarAoSoltar(tarefa.abort_handle());
    match timeout(config.tempo_limite_envio, tarefa).await {
        Ok(Ok(resultado)) => resultado,
        Ok(Err(erro)) => Err(FalhaEnvio::temporaria(format!(
            "the enviador panicked: {erro}"
        ))),
        Err(_) => Err(FalhaEnvio::temporaria(format!(
            "the send did not finish within {:?}",
            config.tempo_limite_envio
        ))),
    }
}

/// Applies a settlement, retrying briefly if the database hiccups; `Cercada` when the fencing
/// token no longer matches.
async fn liquidar<F, Fut>(mut operacao: F, sucesso: Desfecho) -> Desfecho
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<bool, sqlx::Error>>,
{
    for tentativa in 0..3u32 {
        match operacao().await {
            Ok(true) => return sucesso,
            Ok(false) => return Desfecho::Cercada,
            Err(erro) => {
                tracing::warn!(
                    error = %erro,
                    "mensageria relay: could not settle a delivery; retrying"
                );
                sleep(Duration::from_millis(100 << tentativa)).await;
            }
        }
    }
    Desfecho::SemLiquidacao
}
