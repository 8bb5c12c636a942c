//! The relay's engine: the claim loop, the delivery of one row, and its settlement.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use sqlx::Pool;
use tokio::task::{AbortHandle, JoinSet};
use tokio::time::{Instant, sleep, sleep_until, timeout};
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use super::backoff::atraso;
use super::circuito::{Circuitos, Permissao};
use super::confirmacoes::Confirmacoes;
use super::instancia::{Leases, vigiar};
use super::{ACORDAR, Config, Modo, Rodada};
use crate::banco::{Pedido, Reivindicada};
use crate::enviador::Recursos;
use crate::{Banco, ContextoEnvio, Erro, FalhaEnvio, Registro};

/// How one delivery ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Desfecho {
    Entregue,
    Reagendada,
    Morta,
    /// The lease had moved on: another relay owns the row now; we changed nothing.
    Cercada,
    /// The settlement could not reach the database: the lease will expire and the row come back.
    SemLiquidacao,
}

pub(crate) struct Motor<DB: Banco> {
    pub(crate) pool: Pool<DB>,
    pub(crate) config: Config,
    pub(crate) recursos: Recursos,
    pub(crate) prazo_ms: Arc<AtomicU64>,
    /// The id this relay's leases are held under (`app@name`).
    instancia: String,
    circuitos: Arc<Mutex<Circuitos>>,
    confirmacoes: Arc<Confirmacoes>,
    /// A backlog measurement for the gauges is running.
    medindo: Arc<AtomicBool>,
    giro: AtomicUsize,
    pisos: Mutex<Pisos>,
}

/// The keyset floor of each tipo, and when the last full scan ran.
#[derive(Default)]
struct Pisos {
    por_tipo: HashMap<&'static str, i64>,
    ultima_varredura: Option<Instant>,
}

/// Aborts a spawned send when the delivery that awaits it is dropped (timeout, shutdown).
struct AbortarAoSoltar(AbortHandle);

impl Drop for AbortarAoSoltar {
    fn drop(&mut self) {
        self.0.abort();
    }
}

impl<DB: Banco> Motor<DB> {
    pub(crate) fn new(pool: Pool<DB>, config: Config, recursos: Recursos) -> Self {
        let circuitos = Arc::new(Mutex::new(Circuitos::new(config.circuito)));
        Self {
            pool,
            instancia: config.id_da_instancia(),
            config,
            recursos,
            prazo_ms: Arc::new(AtomicU64::new(10_000)),
            circuitos,
            confirmacoes: Arc::default(),
            medindo: Arc::default(),
            giro: AtomicUsize::new(0),
            pisos: Mutex::new(Pisos::default()),
        }
    }

    fn tipos() -> &'static [&'static str] {
        Registro::global().tipos()
    }

    /// A fresh fencing token for one claim: 63 random bits.
    fn token() -> i64 {
        (fastrand::u64(..) >> 1) as i64
    }

    /// The leader lock's key: a stable, namespaced FNV-1a hash of the app name (the same on every
    /// build and toolchain, unlike `DefaultHasher`).
    pub(crate) fn chave_lider(app: &str) -> i64 {
        let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
        for byte in b"mensageria.relay:".iter().chain(app.as_bytes()) {
            hash ^= u64::from(*byte);
            hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
        }
        hash as i64
    }

    fn pedido<'a>(
        &'a self,
        tipos: &'a [&'a str],
        pisos_ms: &'a [i64],
        lote: usize,
        token: i64,
    ) -> Pedido<'a> {
        Pedido {
            tipos,
            pisos_ms,
            lote: lote as i64,
            lease_ms: self.config.lease.as_millis() as i64,
            dono: &self.instancia,
            token,
        }
    }

    /// Claims up to `limite` rows, honouring each tipo's circuit.
    async fn reivindicar(
        &self,
        limite: usize,
        token: i64,
    ) -> Result<Vec<Reivindicada>, sqlx::Error> {
        let agora = Instant::now();
        let mut livres = Vec::new();
        let mut sondas = Vec::new();
        {
            let mut circuitos = self.circuitos.lock().expect("circuit lock");
            for tipo in Self::tipos() {
                match circuitos.permissao(tipo, agora) {
                    Permissao::Livre => livres.push(*tipo),
                    Permissao::Sonda => sondas.push(*tipo),
                    Permissao::Bloqueado => {}
                }
            }
        }
        // Rotate so that one tipo's backlog does not always come first.
        if !livres.is_empty() {
            let giro = self.giro.fetch_add(1, Ordering::Relaxed) % livres.len();
            livres.rotate_left(giro);
        }
        // The keyset floors, or none at all when a full scan is due.
        let pisos_de = |tipos: &[&'static str]| -> Vec<i64> {
            let mut pisos = self.pisos.lock().expect("floor lock");
            let varrer = pisos
                .ultima_varredura
                .is_none_or(|t| agora.duration_since(t) >= self.config.varredura_completa);
            if varrer {
                pisos.ultima_varredura = Some(agora);
                pisos.por_tipo.clear();
            }
            tipos
                .iter()
                .map(|t| pisos.por_tipo.get(t).copied().unwrap_or(0))
                .collect()
        };
        let mut linhas = Vec::new();
        for sonda in sondas {
            let so_ela = [sonda];
            let piso = [0];
            let achadas =
                DB::reivindicar(&self.pool, self.pedido(&so_ela, &piso, 1, token)).await?;
            if achadas.is_empty() {
                // Nothing due to probe with: the circuit has nothing to protect.
                self.circuitos
                    .lock()
                    .expect("circuit lock")
                    .sucesso(sonda, agora);
            }
            linhas.extend(achadas);
        }
        if !livres.is_empty() && linhas.len() < limite {
            let inicio = Instant::now();
            let pisos = pisos_de(&livres);
            let pedido = self.pedido(&livres, &pisos, limite - linhas.len(), token);
            linhas.extend(DB::reivindicar(&self.pool, pedido).await?);
            metrics::histogram!("mensageria_claim_seconds").record(inicio.elapsed().as_secs_f64());
        }
        self.avancar_pisos(&linhas);
        Ok(linhas)
    }

    /// Moves each tipo's floor to `margem` before the head of its queue just claimed.
    fn avancar_pisos(&self, linhas: &[Reivindicada]) {
        let margem = self.config.margem_piso.as_millis() as i64;
        let mut pisos = self.pisos.lock().expect("floor lock");
        for tipo in Self::tipos() {
            let cabeca = linhas
                .iter()
                .filter(|l| l.tipo == *tipo && l.devida_em_ms > 0)
                .map(|l| l.devida_em_ms)
                .min();
            if let Some(cabeca) = cabeca {
                pisos.por_tipo.insert(tipo, (cabeca - margem).max(0));
            }
        }
    }

    fn iniciar_entrega(
        &self,
        linha: Reivindicada,
        token: i64,
    ) -> impl Future<Output = Desfecho> + Send + 'static {
        entregar(
            self.pool.clone(),
            self.config.clone(),
            self.recursos.clone(),
            Arc::clone(&self.circuitos),
            Arc::clone(&self.confirmacoes),
            linha,
            token,
        )
    }

    /// One round, waiting for all of its deliveries.
    pub(crate) async fn rodada_completa(&self) -> Result<Rodada, Erro> {
        let mut rodada = Rodada::default();
        if Self::tipos().is_empty() {
            return Ok(rodada);
        }
        let token = Self::token();
        let linhas = self.reivindicar(self.config.lote, token).await?;
        rodada.reivindicadas = linhas.len();
        let mut em_voo = JoinSet::new();
        for linha in linhas {
            em_voo.spawn(self.iniciar_entrega(linha, token));
        }
        while let Some(desfecho) = em_voo.join_next().await {
            contar(&mut rodada, desfecho.unwrap_or(Desfecho::SemLiquidacao));
        }
        Ok(rodada)
    }

    /// The background loop, until `cancelar` fires; returns how long the shutdown took.
    pub(crate) async fn rodar(self, cancelar: CancellationToken) -> Duration {
        let tipos = Self::tipos();
        let app = self.config.app.clone();
        if tipos.is_empty() {
            tracing::info!(%app, "mensageria relay: no enviador registered in this binary (a pure receiver); the relay has nothing to claim and stays idle");
            cancelar.cancelled().await;
            return Duration::ZERO;
        }
        tracing::info!(%app, ?tipos, modo = ?self.config.modo, "mensageria relay started; claiming only these tipos");

        let mut banco = SaudeBanco::default();
        let mut proximo_heartbeat = Instant::now();
        let mut registrado = false;
        let mut em_voo: JoinSet<Desfecho> = JoinSet::new();
        let leases = Leases::default();
        let morta_apos_ms = i64::try_from(self.config.morta_apos().as_millis()).unwrap_or(i64::MAX);
        match DB::iniciar_instancia(&self.pool, &self.instancia, &app, morta_apos_ms).await {
            Ok(0) => {}
            Ok(recuperadas) => {
                tracing::info!(%app, instancia = %self.instancia, recuperadas, "mensageria relay: took back the rows this instance held before it restarted")
            }
            Err(erro) => banco.falhou(&erro),
        }
        // Lease renewal and the instance's heartbeat, for as long as this loop lives (a JoinSet
        // aborts its task when dropped: an aborted relay stops renewing at once).
        let mut vigia = JoinSet::new();
        vigia.spawn(vigiar::<DB>(
            self.pool.clone(),
            self.config.clone(),
            self.instancia.clone(),
            leases.clone(),
            cancelar.clone(),
        ));
        let mut acordado_em: Option<Instant> = None;
        let mut espera_rapida = PRIMEIRA_OLHADA;
        // The listener lives as long as this loop (a JoinSet aborts its tasks when dropped, so
        // an aborted relay takes its listener with it).
        let mut escuta = JoinSet::new();
        if self.config.notificacoes {
            escuta.spawn(DB::escutar(self.pool.clone(), cancelar.clone()));
        }

        while !cancelar.is_cancelled() {
            // Listen for wake-ups from here on, not only while idle: an enqueue that commits
            // while this iteration claims or delivers must not wait for the next poll.
            let acordar = ACORDAR.notified();
            tokio::pin!(acordar);
            acordar.as_mut().enable();
            while let Some(Ok((id, _))) = em_voo.try_join_next_with_id() {
                leases.remover(id);
            }
            if Instant::now() >= proximo_heartbeat {
                match DB::registrar_app(&self.pool, &app, tipos).await {
                    Ok(outros) => {
                        // Reported once, at start; the heartbeat only refreshes `visto_em`.
                        if !registrado && !outros.is_empty() {
                            tracing::warn!(%app, concorrentes = ?outros, "mensageria relay: other apps claim some of this app's tipos on this schema (competing consumers); each tipo should have one owner");
                        }
                        registrado = true;
                        proximo_heartbeat = Instant::now() + self.config.heartbeat;
                        // Backlog gauges, at the heartbeat's pace (one query over our tipos), off
                        // the claim loop: on a large backlog the count must not delay claims.
                        if !self.medindo.swap(true, Ordering::AcqRel) {
                            let (pool, medindo) = (self.pool.clone(), Arc::clone(&self.medindo));
                            tokio::spawn(async move {
                                let limite = Duration::from_secs(10);
                                if timeout(limite, crate::fila::publicar(&pool, tipos))
                                    .await
                                    .is_err()
                                {
                                    tracing::warn!(
                                        ?limite,
                                        "mensageria relay: measuring the backlog for the gauges took too long; the gauges keep their last values"
                                    );
                                }
                                medindo.store(false, Ordering::Release);
                            });
                        }
                    }
                    Err(erro) => banco.falhou(&erro),
                }
            }

            let livres = self.config.concorrencia.saturating_sub(em_voo.len());
            let mut cheia = false;
            let mut reivindicadas = 0;
            if livres > 0 {
                let lider = match self.config.modo {
                    Modo::Todos => None,
                    Modo::Lider => match DB::liderar(&self.pool, Self::chave_lider(&app)).await {
                        Ok(Some(tx)) => Some(tx),
                        Ok(None) => {
                            tokio::select! {
                                _ = cancelar.cancelled() => {}
                                _ = sleep(self.config.intervalo) => {}
                            }
                            continue;
                        }
                        Err(erro) => {
                            banco.falhou(&erro);
                            espera_ou_cancela(&cancelar, banco.atraso()).await;
                            continue;
                        }
                    },
                };
                let lote = livres.min(self.config.lote);
                let token = Self::token();
                match self.reivindicar(lote, token).await {
                    Ok(linhas) => {
                        banco.voltou(&app);
                        reivindicadas = linhas.len();
                        cheia = reivindicadas == lote;
                        for linha in linhas {
                            let id = linha.id;
                            let tarefa = em_voo.spawn(self.iniciar_entrega(linha, token));
                            leases.inserir(tarefa.id(), id, token);
                        }
                    }
                    Err(erro) => {
                        banco.falhou(&erro);
                        drop(lider);
                        espera_ou_cancela(&cancelar, banco.atraso()).await;
                        continue;
                    }
                }
                if let Some(tx) = lider {
                    // Lead until this round is delivered, then step down for the next election.
                    while let Some(Ok((id, _))) = em_voo.join_next_with_id().await {
                        leases.remover(id);
                    }
                    let _ = tx.commit().await;
                }
            }
            if cheia {
                continue; // more may be waiting: claim again at once
            }

            // Nothing (more) to claim now: wait for a wake-up, a free slot, a probe or the poll.
            let agora = Instant::now();
            let mut espera = self.config.intervalo;
            if let Some(quando) = acordado_em {
                if reivindicadas == 0 && agora.duration_since(quando) < Duration::from_millis(250) {
                    // The enqueuing transaction may not have committed yet: look again shortly.
                    espera = espera_rapida;
                    espera_rapida = proxima_olhada(espera_rapida);
                } else {
                    acordado_em = None;
                }
            }
            if let Some(sonda) = self.circuitos.lock().expect("circuit lock").proxima_sonda() {
                espera = espera.min(sonda.saturating_duration_since(agora));
            }
            let ate = agora + espera;
            tokio::select! {
                _ = cancelar.cancelled() => {}
                _ = &mut acordar, if self.config.acordar_no_processo => {
                    acordado_em = Some(Instant::now());
                    espera_rapida = PRIMEIRA_OLHADA;
                }
                Some(Ok((id, _))) = em_voo.join_next_with_id(), if !em_voo.is_empty() && livres == 0 => {
                    leases.remover(id);
                }
                _ = sleep_until(ate) => {}
            }
        }

        // Graceful shutdown: no more claims; let in-flight sends finish up to the deadline.
        let inicio = Instant::now();
        let prazo = Duration::from_millis(self.prazo_ms.load(Ordering::Relaxed));
        let _ = timeout(prazo, async {
            while let Some(resultado) = em_voo.join_next_with_id().await {
                if let Ok((id, _)) = resultado {
                    leases.remover(id);
                }
            }
        })
        .await;
        em_voo.abort_all();
        while let Some(resultado) = em_voo.join_next_with_id().await {
            if let Ok((id, _)) = resultado {
                leases.remover(id);
            }
        }
        // What was claimed but not settled goes back, due now, its attempt not counted.
        let mut devolvidas = 0;
        for (id, token) in leases.esvaziar() {
            if matches!(DB::liberar(&self.pool, id, token).await, Ok(true)) {
                devolvidas += 1;
            }
        }
        vigia.abort_all();
        if let Err(erro) = DB::parar_instancia(&self.pool, &self.instancia).await {
            tracing::warn!(error = %erro, "mensageria relay: could not record this instance as stopped; operators will see it as dead until it is removed");
        }
        tracing::info!(%app, instancia = %self.instancia, devolvidas, "mensageria relay stopped");
        inicio.elapsed()
    }
}

/// After a wake-up that found nothing (the enqueuing transaction had not committed yet), the
/// relay looks again after 1, 2, 3, 4, 5 ms (most commits land within a few milliseconds of
/// their enqueue), then doubling to 64 ms, for 250 ms in all.
const PRIMEIRA_OLHADA: Duration = Duration::from_millis(1);

fn proxima_olhada(espera: Duration) -> Duration {
    if espera < Duration::from_millis(5) {
        espera + Duration::from_millis(1)
    } else {
        (espera * 2).min(Duration::from_millis(64))
    }
}

fn contar(rodada: &mut Rodada, desfecho: Desfecho) {
    match desfecho {
        Desfecho::Entregue => rodada.entregues += 1,
        Desfecho::Reagendada => rodada.reagendadas += 1,
        Desfecho::Morta => rodada.mortas += 1,
        Desfecho::Cercada => rodada.cercadas += 1,
        Desfecho::SemLiquidacao => {}
    }
}

async fn espera_ou_cancela(cancelar: &CancellationToken, espera: Duration) {
    tokio::select! {
        _ = cancelar.cancelled() => {}
        _ = sleep(espera) => {}
    }
}

/// The database's health as the loop sees it: backoff and one log line per period.
#[derive(Default)]
struct SaudeBanco {
    falhas: u32,
    desde: Option<Instant>,
    ultimo_log: Option<Instant>,
}

impl SaudeBanco {
    const PERIODO_DE_LOG: Duration = Duration::from_secs(30);

    fn falhou(&mut self, erro: &sqlx::Error) {
        self.falhas += 1;
        let agora = Instant::now();
        self.desde.get_or_insert(agora);
        if self
            .ultimo_log
            .is_none_or(|t| agora.duration_since(t) >= Self::PERIODO_DE_LOG)
        {
            self.ultimo_log = Some(agora);
            tracing::warn!(error = %erro, falhas = self.falhas, "mensageria relay: the database is failing; backing off and retrying (nothing is lost: leased rows come back when their leases end)");
        }
    }

    fn atraso(&self) -> Duration {
        Duration::from_millis(100u64.saturating_mul(1 << self.falhas.min(6)))
            .min(Duration::from_secs(5))
    }

    fn voltou(&mut self, app: &str) {
        if let Some(desde) = self.desde.take() {
            tracing::info!(%app, falhas = self.falhas, fora_por = ?desde.elapsed(), "mensageria relay: the database is back");
            self.falhas = 0;
            self.ultimo_log = None;
        }
    }
}

/// Delivers one claimed row and settles it.
async fn entregar<DB: Banco>(
    pool: Pool<DB>,
    config: Config,
    recursos: Recursos,
    circuitos: Arc<Mutex<Circuitos>>,
    confirmacoes: Arc<Confirmacoes>,
    linha: Reivindicada,
    token: i64,
) -> Desfecho {
    let span = tracing::info_span!(
        "mensageria.entrega",
        id_mensagem = %linha.id_mensagem,
        tipo = %linha.tipo,
        tentativa = linha.tentativas,
        app = %config.app,
    );
    async move {
        let tipo = linha.tipo.clone();
        let resultado = enviar(&config, recursos, &linha).await;
        // Whether the tipo's circuit was open when this delivery ended: then this was a probe (or
        // a delivery that started before the circuit opened), and a temporary failure is the
        // destination's, not the message's.
        let aberto = circuitos.lock().expect("circuit lock").aberto(&tipo);
        let circuito = |falhou: bool| {
            let mut circuitos = circuitos.lock().expect("circuit lock");
            if !falhou {
                circuitos.sucesso(&tipo, Instant::now());
                None
            } else {
                if circuitos.falha(&tipo, Instant::now()) {
                    tracing::warn!(tipo = %tipo, espera = ?circuitos.espera(&tipo), "mensageria relay: the destination of this tipo is failing; circuit open, probing with one message per cool-down");
                }
                circuitos.espera(&tipo)
            }
        };
        let liquidacao = match resultado {
            Ok(()) => {
                circuito(false);
                metrics::counter!("mensageria_delivered_total", "tipo" => tipo.clone()).increment(1);
                if linha.tentativas > 1 {
                    metrics::counter!("mensageria_redelivered_total", "tipo" => tipo.clone()).increment(1);
                }
                metrics::histogram!("mensageria_delivery_age_seconds", "tipo" => tipo.clone())
                    .record(linha.idade_ms as f64 / 1000.0);
                if config.ensaio.perder_primeiro_ack && linha.tentativas <= 1 {
                    // Test switch: the ack "got lost"; the row is due again at once.
                    let perdido = "ensaio: ack lost on purpose";
                    liquidar(|| DB::reagendar(&pool, linha.id, token, 0, perdido, true), Desfecho::Reagendada).await
                } else {
                    liquidar(|| confirmacoes.confirmar(&pool, linha.id, token), Desfecho::Entregue).await
                }
            }
            Err(FalhaEnvio::Permanente { motivo }) => {
                circuito(false);
                tracing::error!(motivo = %motivo, "mensageria relay: permanent failure; message moved to dead letters");
                metrics::counter!("mensageria_dead_lettered_total", "tipo" => tipo.clone()).increment(1);
                liquidar(|| DB::matar(&pool, linha.id, token, &motivo, &config.app), Desfecho::Morta).await
            }
            Err(FalhaEnvio::Temporaria { motivo, tentar_apos }) if aberto => {
                // A probe of a destination that is down: try again at the circuit's pace, and
                // give the attempt back (an outage must not walk messages to the dead letters).
                let espera = circuito(true).unwrap_or(config.backoff_base);
                let espera = tentar_apos.map_or(espera, |pedida| pedida.max(espera));
                tracing::warn!(motivo = %motivo, nova_tentativa_em = ?espera, "mensageria relay: probe failed; the destination is still down");
                let atraso_ms = espera.as_millis() as i64;
                liquidar(|| DB::reagendar(&pool, linha.id, token, atraso_ms, &motivo, false), Desfecho::Reagendada).await
            }
            Err(FalhaEnvio::Temporaria { motivo, tentar_apos }) => {
                circuito(true);
                let tentativas = u32::try_from(linha.tentativas).unwrap_or(0);
                let velha = Duration::from_millis(u64::try_from(linha.idade_ms).unwrap_or(0)) >= config.idade_maxima;
                if tentativas >= config.max_tentativas || velha {
                    let motivo = format!("gave up after {tentativas} attempts: {motivo}");
                    tracing::error!(motivo = %motivo, "mensageria relay: message moved to dead letters");
                    metrics::counter!("mensageria_dead_lettered_total", "tipo" => tipo.clone()).increment(1);
                    liquidar(|| DB::matar(&pool, linha.id, token, &motivo, &config.app), Desfecho::Morta).await
                } else {
                    let espera = atraso(tentativas, config.backoff_base, config.backoff_max, tentar_apos, fastrand::f64());
                    tracing::warn!(motivo = %motivo, nova_tentativa_em = ?espera, "mensageria relay: temporary failure; will retry");
                    metrics::counter!("mensageria_retried_total", "tipo" => tipo.clone()).increment(1);
                    let atraso_ms = espera.as_millis() as i64;
                    liquidar(|| DB::reagendar(&pool, linha.id, token, atraso_ms, &motivo, true), Desfecho::Reagendada).await
                }
            }
        };
        if liquidacao == Desfecho::Cercada {
            tracing::info!("mensageria relay: lease lost before settling (another relay reclaimed the row); left as it is");
        }
        liquidacao
    }
    .instrument(span)
    .await
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
                tracing::warn!(error = %erro, "mensageria relay: could not settle a delivery; retrying");
                sleep(Duration::from_millis(100 << tentativa)).await;
            }
        }
    }
    Desfecho::SemLiquidacao
}

#[cfg(test)]
mod testes {
    use super::*;

    #[test]
    fn olhadas_depois_de_acordar_sao_finas_no_inicio_e_dobram_depois() {
        let mut espera = PRIMEIRA_OLHADA;
        let mut olhadas = vec![espera.as_millis()];
        while olhadas.iter().sum::<u128>() < 250 {
            espera = proxima_olhada(espera);
            olhadas.push(espera.as_millis());
        }
        assert_eq!(olhadas, [1, 2, 3, 4, 5, 10, 20, 40, 64, 64, 64]);
    }

    const CHAVE_DO_APP_VAZIO: i64 = 5_931_967_896_988_404_108;

    #[test]
    fn chave_do_lider_e_estavel_e_depende_do_app() {
        // Fixed values: changing the hash would split the election across versions.
        assert_eq!(
            Motor::<sqlx::Sqlite>::chave_lider("emissor"),
            Motor::<sqlx::Sqlite>::chave_lider("emissor")
        );
        assert_ne!(
            Motor::<sqlx::Sqlite>::chave_lider("emissor"),
            Motor::<sqlx::Sqlite>::chave_lider("fiscal")
        );
        // FNV-1a of "mensageria.relay:" alone, computed by hand once: must never change.
        assert_eq!(Motor::<sqlx::Sqlite>::chave_lider(""), CHAVE_DO_APP_VAZIO);
    }
}
