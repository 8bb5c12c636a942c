//! The relay instance's life in the database: the leases of its deliveries in flight, renewed
//! while they run, and its heartbeat, through which it takes back the rows of dead siblings.
//!
//! Every `lease / 4` one task ([`vigiar`]) renews the leases of every delivery still running in
//! one statement (fenced by each row's token, so a row settled or reclaimed meanwhile is not
//! touched), writes the instance's heartbeat, and gives back at once the rows held by instances
//! of the same app whose heartbeat is older than `lease / 2` and that did not stop gracefully.
//! A live relay's slow delivery is never taken away; a dead relay's rows come back in seconds.
//! The task lives inside the relay's loop, so a relay that is aborted (or whose process is
//! killed) stops renewing at once.
//!
//! An instance name is held by one process at a time ([`Nome`]). A process takes it only when
//! it is new, or its holder stopped gracefully, or its holder's heartbeat is older than `lease / 2`
//! (dead); taking it gives back the rows the dead holder still held. A second process started
//! under a live name (two replicas given one `MENSAGERIA_INSTANCE`) is refused: it claims nothing,
//! logs an ERROR naming the fix, and takes the name only when the holder stops or dies. Every
//! heartbeat is fenced by the incarnation's mark, so a holder that was taken for dead (paused
//! for longer than `lease / 2`) learns it has lost the name, stops claiming and says so.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use sqlx::Pool;
use tokio::task::{Id, JoinSet};
use tokio_util::sync::CancellationToken;

use super::Config;
use crate::banco::Banco;
use crate::banco::{Batimento, Posse};

/// Whether this process holds its instance name, and under which incarnation mark.
#[derive(Clone, Default)]
pub(crate) struct Nome(Arc<Mutex<Option<i64>>>);

impl Nome {
    /// The mark of the incarnation holding the name, while this process holds it.
    pub(crate) fn marca(&self) -> Option<i64> {
        *self.0.lock().expect("name lock")
    }

    pub(crate) fn tomado(&self) -> bool {
        self.marca().is_some()
    }

    fn definir(&self, marca: Option<i64>) {
        *self.0.lock().expect("name lock") = marca;
    }
}

/// How often a relay refused its name repeats its ERROR.
const REPETIR_RECUSA: Duration = Duration::from_secs(30);

/// Taking the instance name, and saying why not when a live process holds it.
pub(crate) struct Tomada {
    pub(crate) nome: Nome,
    ultima_recusa: Option<Instant>,
}

impl Tomada {
    pub(crate) fn new(nome: Nome) -> Self {
        Self {
            nome,
            ultima_recusa: None,
        }
    }

    /// The name was taken by another process: this one holds it no more (and has said so).
    fn perdeu(&mut self) {
        self.nome.definir(None);
        self.ultima_recusa = Some(Instant::now());
    }

    /// Tries to take the name `instancia` of `config.app`; true when this process holds it now.
    pub(crate) async fn tentar<DB: Banco>(
        &mut self,
        pool: &Pool<DB>,
        config: &Config,
        instancia: &str,
    ) -> Result<bool, sqlx::Error> {
        let app = &config.app;
        let morta_apos_ms = i64::try_from(config.morta_apos().as_millis()).unwrap_or(i64::MAX);
        match DB::iniciar_instancia(pool, instancia, app, morta_apos_ms).await? {
            Posse::Tomada { marca, recuperadas } => {
                self.nome.definir(Some(marca));
                if self.ultima_recusa.take().is_some() {
                    tracing::warn!(
                        %app,
                        %instancia,
                        recuperadas,
                        "mensageria relay: the instance name is free again (its other holder \
                         stopped or died); this relay holds it now and starts claiming"
                    );
                } else if recuperadas > 0 {
                    tracing::info!(
                        %app,
                        %instancia,
                        recuperadas,
                        "mensageria relay: took back the rows this instance held before it \
                         restarted"
                    );
                }
                if recuperadas > 0 {
                    super::acordar();
                }
                Ok(true)
            }
            Posse::Ocupada { visto_ha_ms } => {
                let agora = Instant::now();
                if self
                    .ultima_recusa
                    .is_none_or(|antes| agora.duration_since(antes) >= REPETIR_RECUSA)
                {
                    tracing::error!(
                        %app,
                        %instancia,
                        heartbeat_ms_ago = visto_ha_ms,
                        "mensageria relay: another live process holds this instance name, so \
                         this relay claims nothing until it stops or dies; give every process \
                         its own name (MENSAGERIA_INSTANCE / Config::com_instancia: e.g. the pod \
                         name, never a shared or unresolved value), or leave it unset for a \
                         random one"
                    );
                    self.ultima_recusa = Some(agora);
                }
                Ok(false)
            }
        }
    }
}

/// The leases of the deliveries in flight: per delivery task, `(row id, fencing token)`.
#[derive(Clone, Default)]
pub(crate) struct Leases(Arc<Mutex<HashMap<Id, (i64, i64)>>>);

impl Leases {
    pub(crate) fn inserir(&self, tarefa: Id, id: i64, token: i64) {
        self.0
            .lock()
            .expect("lease lock")
            .insert(tarefa, (id, token));
    }

    pub(crate) fn remover(&self, tarefa: Id) {
        self.0.lock().expect("lease lock").remove(&tarefa);
    }

    /// Every `(id, token)` in flight.
    pub(crate) fn pares(&self) -> Vec<(i64, i64)> {
        self.0
            .lock()
            .expect("lease lock")
            .values()
            .copied()
            .collect()
    }

    /// Takes every `(id, token)` left (at shutdown, to give them back).
    pub(crate) fn esvaziar(&self) -> Vec<(i64, i64)> {
        self.0
            .lock()
            .expect("lease lock")
            .drain()
            .map(|(_, par)| par)
            .collect()
    }
}

/// How long stopping the [`Vigia`] waits for a heartbeat already under way.
const PRAZO_DA_VIGIA: std::time::Duration = std::time::Duration::from_secs(5);

/// The task running [`vigiar`], with the switch that stops it. It outlives the claim loop: a
/// shutdown's drain keeps renewing the leases of the deliveries it waits for, so no sibling
/// sends them again meanwhile. Dropped (an aborted relay), it stops at once.
pub(crate) struct Vigia {
    tarefa: JoinSet<()>,
    parar: CancellationToken,
}

impl Vigia {
    /// Starts renewing `leases` (beside the ack batches: both lock rows in id order) and
    /// beating the heart of `instancia`.
    pub(crate) fn iniciar<DB: Banco>(
        pool: Pool<DB>,
        config: Config,
        instancia: String,
        leases: Leases,
        tomada: Tomada,
    ) -> Self {
        let parar = CancellationToken::new();
        let mut tarefa = JoinSet::new();
        tarefa.spawn(vigiar::<DB>(
            pool,
            config,
            instancia,
            leases,
            tomada,
            parar.clone(),
        ));
        Self { tarefa, parar }
    }

    /// Stops it, letting a heartbeat already sent finish first (up to a bound): one landing
    /// after the instance is recorded as stopped would erase that record.
    pub(crate) async fn parar(mut self) {
        self.parar.cancel();
        let fim = async { while self.tarefa.join_next().await.is_some() {} };
        if tokio::time::timeout(PRAZO_DA_VIGIA, fim).await.is_err() {
            self.tarefa.abort_all();
        }
    }
}

/// Renews the leases in flight and beats the instance's heart until `cancelar`; while the name
/// is not this process's, tries to take it instead.
pub(crate) async fn vigiar<DB: Banco>(
    pool: Pool<DB>,
    config: Config,
    instancia: String,
    leases: Leases,
    mut tomada: Tomada,
    cancelar: CancellationToken,
) {
    let passo = config.passo_de_renovacao();
    let lease_ms = i64::try_from(config.lease.as_millis()).unwrap_or(i64::MAX);
    let mut falhas_seguidas = 0_u32;
    loop {
        tokio::select! {
            _ = cancelar.cancelled() => return,
            _ = tokio::time::sleep(passo) => {}
        }
        let pares = leases.pares();
        let renovacao = if pares.is_empty() {
            Ok(0)
        } else {
            DB::renovar_leases(&pool, &pares, lease_ms).await
        };
        let batimento = match tomada.nome.marca() {
            Some(marca) => DB::bater_instancia(&pool, &instancia, &config.app, marca).await,
            None => tomada
                .tentar(&pool, &config, &instancia)
                .await
                .map(|_| Batimento::Batido { recuperadas: 0 }),
        };
        match (renovacao, batimento) {
            (Ok(_), Ok(Batimento::Perdida)) => {
                falhas_seguidas = 0;
                tomada.perdeu();
                tracing::error!(
                    app = %config.app,
                    %instancia,
                    "mensageria relay: another process took this instance name (this one was \
                     taken for dead: no heartbeat for half a lease); this relay stops claiming \
                     until the name is free again. Give every process its own name"
                );
            }
            (Ok(renovadas), Ok(Batimento::Batido { recuperadas })) => {
                falhas_seguidas = 0;
                relatar_volta(&config.app, renovadas, pares.len(), recuperadas);
            }
            (renovacao, batimento) => {
                falhas_seguidas += 1;
                // Once per outage, and again if it lasts long enough to cost the leases.
                if falhas_seguidas == 1 || falhas_seguidas == 4 {
                    let erro = renovacao.err().or(batimento.err());
                    let erro = erro.map(|e| e.to_string()).unwrap_or_default();
                    tracing::warn!(
                        error = %erro,
                        falhas_seguidas,
                        "mensageria relay: could not renew leases or write the heartbeat; \
                         deliveries in flight may be redelivered by another relay if this lasts a \
                         lease"
                    );
                }
            }
        }
    }
}

/// What one successful turn of the vigia has to say: leases it could not renew (settled or
/// fenced meanwhile), and rows it took back from dead siblings (the loop is woken to claim them).
fn relatar_volta(app: &str, renovadas: u64, em_voo: usize, recuperadas: u64) {
    if (renovadas as usize) < em_voo {
        tracing::debug!(
            renovadas,
            em_voo,
            "mensageria relay: some leases were not renewed (settled or fenced meanwhile)"
        );
    }
    if recuperadas > 0 {
        tracing::info!(
            %app,
            recuperadas,
            "mensageria relay: took back the rows of a dead instance of this app"
        );
        super::acordar();
    }
}
