//! The relay: claims the rows of the tipos this binary registered and delivers them, at least
//! once, whatever fails in between.
//!
//! ```no_run
//! # async fn exemplo(pool: sqlx::SqlitePool) -> Result<(), mensageria_core::Erro> {
//! use std::time::Duration;
//! use mensageria_core::relay::{Config, Relay};
//!
//! let relay = Relay::new(pool, Config::do_ambiente("emissor")).spawn()?;
//! // ... serve ...
//! relay.shutdown(Duration::from_secs(10)).await; // finish in-flight sends, release the rest
//! # Ok(()) }
//! ```
//!
//! # What one round does
//!
//! 1. Claim: a short transaction leases up to `lote` due rows **of this binary's tipos only**
//!    (`Registro::global().tipos()`; on a shared schema other apps' rows are never read, leased,
//!    counted or dead-lettered), bumping their attempts, pushing their next attempt to the lease's
//!    end and stamping a fencing token. PostgreSQL: `FOR UPDATE SKIP LOCKED`, one index-ordered
//!    probe per tipo, planned per call. SQLite: one `UPDATE … RETURNING` (single writer).
//! 2. Deliver, outside any transaction, up to `concorrencia` at once, each bounded by the send
//!    timeout, each in a `mensageria.entrega` span.
//! 3. Settle, each `WHERE lease_token = ours` (a late answer after the lease expired and another
//!    relay reclaimed the row changes nothing): delivered → delete; `FalhaEnvio::Permanente` →
//!    dead letter; `FalhaEnvio::Temporaria`, timeout or panic → retry after backoff, or dead
//!    letter past `max_tentativas`/`idade_maxima`; `FalhaEnvio::Sobrecarga` → retry after the
//!    destination's `Retry-After`, the attempt not counted (see below).
//!
//! # Backpressure
//!
//! Each tipo may have up to `concorrencia` deliveries in flight while its destination keeps up.
//! A destination that refuses for overload before doing anything (a mensageria receptor with no
//! database connection free within its wait answers `503` `busy`; any `429`) makes the relay
//! cut the tipo's limit to 0.7 of itself, once per round (a refusal of a delivery sent before
//! the last cut is the same signal), and every other answer raise it by about one per round of
//! deliveries, back up to `concorrencia`: additive increase, multiplicative decrease. Claims take no more rows
//! of a tipo than its room. Metric: `mensageria_overloaded_total{tipo}`.
//!
//! A relay killed at any point loses nothing: a leased row becomes due again when its lease
//! ends (6 s by default; the lease of a delivery still running is renewed every quarter of it),
//! or sooner: a sibling instance of the same app takes a dead instance's rows back once its
//! heartbeat is half a lease old, and an instance restarted under the same stable name
//! ([`Config::com_instancia`]) takes its own back once the earlier incarnation's heartbeat is
//! that old. A name is held by one live process at a time: a second process started under a
//! live name claims nothing and logs an ERROR until the holder stops or dies. A graceful
//! shutdown records the
//! instance as stopped, so operators can tell it from a dead one. Database errors are retried
//! with backoff and logged once per period.

mod backoff;
mod circuito;
mod config;
mod confirmacoes;
mod ensaio;
mod entrega;
mod instancia;
mod motor;
#[cfg(feature = "postgres")]
pub mod notificacoes;
mod vazao;

use std::sync::LazyLock;
use std::time::Duration;

use sqlx::Pool;
use tokio::sync::Notify;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

pub use config::{Config, Modo};
pub use ensaio::Ensaio;

use crate::banco::Banco;
use crate::configuracao::ErroConfiguracao;
use crate::enviador::Recursos;
use crate::erro::Erro;
use crate::registro::Registro;

static ACORDAR: LazyLock<Notify> = LazyLock::new(Notify::new);

/// Wakes the relays of this process: something was enqueued. [`enfileirar`](crate::enfileirar)
/// calls it for you; the relay then looks at the saída at once (and again shortly after, since
/// the enqueuing transaction may not have committed yet) instead of at its next poll. Under a
/// steady stream of enqueues the wake-ups are coalesced: after a claim that found rows but not
/// a full batch, the next waits half as long as that claim took (at most 3 ms).
pub fn acordar() {
    ACORDAR.notify_waiters();
}

/// What one [`Relay::rodada`] did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct Rodada {
    /// Rows claimed.
    pub reivindicadas: usize,
    /// Delivered and deleted.
    pub entregues: usize,
    /// Scheduled for another attempt.
    pub reagendadas: usize,
    /// Moved to dead letters.
    pub mortas: usize,
    /// Settlements refused because the lease had moved on (fenced).
    pub cercadas: usize,
}

impl Rodada {
    fn somar(&mut self, outra: &Rodada) {
        self.reivindicadas += outra.reivindicadas;
        self.entregues += outra.entregues;
        self.reagendadas += outra.reagendadas;
        self.mortas += outra.mortas;
        self.cercadas += outra.cercadas;
    }
}

/// A relay over one pool. Build it, add the resources your enviadores use, then
/// [`spawn`](Relay::spawn) it, or drive it yourself with [`rodada`](Relay::rodada) in tests.
#[doc(alias("outbox relay", "dispatcher", "publisher"))]
pub struct Relay<DB: Banco> {
    motor: motor::Motor<DB>,
    /// Resources handed twice: an error at `spawn`/`rodada`, never a silent replacement.
    repetidos: Vec<ErroConfiguracao>,
}

impl<DB: Banco> Relay<DB> {
    /// A relay for the tipos registered in this binary.
    pub fn new(pool: Pool<DB>, config: Config) -> Self {
        Self {
            motor: motor::Motor::new(pool, config, Recursos::default()),
            repetidos: Vec::new(),
        }
    }

    /// Hands a resource to every delivery (reach it with
    /// [`ContextoEnvio::recurso`](crate::enviador::ContextoEnvio::recurso)), e.g. a
    /// [`Destino`](crate::destino::Destino).
    ///
    /// Resources are found by type: two of one type (two `Destino`s) make
    /// [`spawn`](Self::spawn) and [`rodada`](Self::rodada) fail with a configuration error,
    /// never a silent replacement. For several destinations, hand each tipo its own with
    /// [`recurso_para`](Self::recurso_para), or wrap each in a newtype of yours
    /// (`struct Fiscal(Destino);`) and ask for that type in the enviador.
    #[doc(alias = "destination")]
    pub fn recurso<R: Send + Sync + 'static>(mut self, recurso: R) -> Self {
        if !self.motor.recursos.inserir(recurso) {
            let tipo = std::any::type_name::<R>();
            self.repetidos
                .push(ErroConfiguracao::RecursoRepetido { tipo });
        }
        self
    }

    /// Hands a resource to the deliveries of one tipo only: there it wins over a resource of
    /// the same type handed with [`recurso`](Self::recurso), so one relay sends each tipo to
    /// its own destination with the enviador unchanged (`ctx.exigir::<Destino>()`).
    ///
    /// A tipo that no enviador of this binary sends (a typo), or two resources of one type for
    /// one tipo, make [`spawn`](Self::spawn) and [`rodada`](Self::rodada) fail with a
    /// configuration error.
    ///
    /// ```no_run
    /// # async fn exemplo(pool: sqlx::SqlitePool) -> Result<(), mensageria_core::Erro> {
    /// use mensageria_core::Destino;
    /// use mensageria_core::relay::{Config, Relay};
    ///
    /// let relay = Relay::new(pool, Config::new("emissor"))
    ///     // every tipo goes to the fiscal service...
    ///     .recurso(Destino::new("http://fiscal:8080")?.com_token("segredo"))
    ///     // ...but the closings go to the archive.
    ///     .recurso_para("mdfe.encerramento", Destino::new("http://arquivo:8080")?.com_token("outro"))
    ///     .spawn()?;
    /// # relay.shutdown(std::time::Duration::from_secs(5)).await; Ok(()) }
    /// ```
    #[doc(alias = "destination")]
    pub fn recurso_para<R: Send + Sync + 'static>(mut self, tipo: &str, recurso: R) -> Self {
        if !self.motor.recursos.inserir_para(tipo, recurso) {
            self.repetidos
                .push(ErroConfiguracao::RecursoRepetidoParaTipo {
                    tipo: tipo.to_owned(),
                    recurso: std::any::type_name::<R>(),
                });
        }
        self
    }

    fn conferir_recursos(&self) -> Result<(), Erro> {
        if let Some(erro) = self.repetidos.first() {
            return Err(erro.clone().into());
        }
        let registro = Registro::global();
        let sem_enviador = self
            .motor
            .recursos
            .tipos_com_recurso()
            .find(|tipo| registro.enviador(tipo).is_none());
        match sem_enviador {
            None => Ok(()),
            Some(tipo) => {
                let conhecidos = match registro.tipos() {
                    [] => "none".to_owned(),
                    tipos => tipos.join(", "),
                };
                Err(ErroConfiguracao::RecursoSemEnviador {
                    tipo: tipo.to_owned(),
                    conhecidos,
                }
                .into())
            }
        }
    }

    /// One claim-deliver-settle round, waiting for every delivery it started: the building
    /// block of tests that must not sleep.
    pub async fn rodada(&self) -> Result<Rodada, Erro> {
        self.conferir_recursos()?;
        self.motor.rodada_completa().await
    }

    /// Rounds until one claims nothing: everything **due** is delivered, rescheduled or dead.
    /// It returns while a retry is not yet due (a message that failed and waits for its backoff
    /// stays in the saída); to wait for those too, use [`drenar_ate_vazia`](Self::drenar_ate_vazia).
    pub async fn drenar(&self) -> Result<Rodada, Erro> {
        let mut total = Rodada::default();
        loop {
            let rodada = self.rodada().await?;
            if rodada.reivindicadas == 0 {
                return Ok(total);
            }
            total.somar(&rodada);
        }
    }

    /// Drains until the saída holds no message of this relay's tipos — retries waiting for
    /// their backoff included (a message that goes to the dead letters leaves the saída too) —
    /// or fails with [`Erro::DrenagemIncompleta`] after `prazo`. For tests of ordered or failing
    /// deliveries, instead of drain, sleep, drain again.
    ///
    /// ```no_run
    /// # async fn f(relay: mensageria_core::relay::Relay<sqlx::Sqlite>) -> Result<(), mensageria_core::Erro> {
    /// let rodada = relay.drenar_ate_vazia(std::time::Duration::from_secs(10)).await?;
    /// assert_eq!(rodada.mortas, 0);
    /// # Ok(()) }
    /// ```
    pub async fn drenar_ate_vazia(&self, prazo: Duration) -> Result<Rodada, Erro> {
        let fim = tokio::time::Instant::now() + prazo;
        let tipos = Registro::global().tipos();
        let mut total = Rodada::default();
        loop {
            total.somar(&self.drenar().await?);
            let restantes: i64 = DB::medir_backlog(&self.motor.pool, tipos)
                .await?
                .iter()
                .map(|backlog| backlog.linhas)
                .sum();
            if restantes == 0 {
                return Ok(total);
            }
            if tokio::time::Instant::now() >= fim {
                return Err(Erro::DrenagemIncompleta { restantes, prazo });
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Starts the relay in the background.
    ///
    /// Fails when the registry is inconsistent (a tipo registered by two crates) or the
    /// configuration does not hang together. With no enviador registered (a pure receiver) the
    /// relay says so once and idles harmlessly; with `MENSAGERIA_RELAY_ENABLED=false` it does not
    /// start at all. With [`Config::com_espera_pelo_schema`] it first waits (in its task) for
    /// the schema's owner to migrate.
    pub fn spawn(self) -> Result<RelayHandle, Erro> {
        Registro::global().validar()?;
        self.motor.config.validar()?;
        self.conferir_recursos()?;
        let cancelar = CancellationToken::new();
        let prazo_ms = std::sync::Arc::clone(&self.motor.prazo_ms);
        let tarefa = if self.motor.config.habilitado {
            let motor = self.motor;
            let token = cancelar.clone();
            Some(tokio::spawn(async move {
                if let Some(prazo) = motor.config.espera_pelo_schema {
                    tokio::select! {
                        _ = token.cancelled() => return Duration::ZERO,
                        pronto = crate::esperar_schema(&motor.pool, prazo) => {
                            if let Err(erro) = pronto {
                                tracing::error!(
                                    app = %motor.config.app,
                                    error = %erro,
                                    limite_ms = prazo.as_millis() as u64,
                                    "mensageria relay: the schema is still not ready; starting \
                                     anyway and retrying with backoff until it is"
                                );
                            }
                        }
                    }
                }
                motor.rodar(token).await
            }))
        } else {
            tracing::info!(
                app = %self.motor.config.app,
                "mensageria relay disabled (MENSAGERIA_RELAY_ENABLED=false)"
            );
            None
        };
        Ok(RelayHandle {
            cancelar,
            tarefa,
            prazo_ms,
        })
    }
}

/// A running relay.
pub struct RelayHandle {
    cancelar: CancellationToken,
    tarefa: Option<JoinHandle<Duration>>,
    prazo_ms: std::sync::Arc<std::sync::atomic::AtomicU64>,
}

impl RelayHandle {
    /// Stops claiming, lets in-flight deliveries finish for up to `prazo`, then gives the leases
    /// of whatever was claimed but not delivered back to the saída (due at once).
    pub async fn shutdown(mut self, prazo: Duration) {
        self.prazo_ms.store(
            prazo.as_millis() as u64,
            std::sync::atomic::Ordering::Relaxed,
        );
        self.cancelar.cancel();
        if let Some(tarefa) = self.tarefa.take() {
            let _ = tarefa.await;
        }
    }

    /// Kills the relay on the spot, as a crash would (tokio's `abort`): nothing is settled or
    /// released; leased rows come back when their leases end. For fault-injection tests.
    pub fn abort(mut self) {
        if let Some(tarefa) = self.tarefa.take() {
            tarefa.abort();
        }
    }

    /// Whether the relay's task has ended (as tokio's `JoinHandle::is_finished`); `true` for a
    /// relay that never started (`MENSAGERIA_RELAY_ENABLED=false`).
    pub fn is_finished(&self) -> bool {
        self.tarefa.as_ref().is_none_or(|t| t.is_finished())
    }
}

impl Drop for RelayHandle {
    fn drop(&mut self) {
        // Dropping the handle stops the relay (gracefully, without waiting).
        self.cancelar.cancel();
    }
}
