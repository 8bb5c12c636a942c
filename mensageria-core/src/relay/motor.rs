//! The relay's engine: the claim loop in phases (start, registration, election, claim, wait,
//! shutdown) around the deliveries in flight ([`EmVoo`]), and the claim itself.

use std::collections::HashMap;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use sqlx::Pool;
use tokio::sync::futures::Notified;
use tokio::task::JoinSet;
use tokio::time::{Instant, sleep, sleep_until, timeout};
use tokio_util::sync::CancellationToken;

use super::circuito::{Circuitos, Permissao};
use super::confirmacoes::Confirmacoes;
use super::entrega::{EmVoo, Entrega};
use super::instancia::{Leases, Nome, Tomada, Vigia};
use super::vazao::{Vaga, Vazoes};
use super::{ACORDAR, Config, Modo, Rodada};
use crate::banco::Banco;
use crate::banco::{Pedido, Reivindicada};
use crate::enviador::Recursos;
use crate::erro::Erro;
use crate::registro::Registro;

pub(crate) struct Motor<DB: Banco> {
    pub(crate) pool: Pool<DB>,
    pub(crate) config: Config,
    pub(crate) recursos: Recursos,
    pub(crate) prazo_ms: Arc<AtomicU64>,
    /// The id this relay's leases are held under (`app@name`).
    instancia: String,
    /// Whether this process holds that name (a live process under the same name keeps it).
    nome: Nome,
    circuitos: Arc<Mutex<Circuitos>>,
    /// Each tipo's deliveries in flight and how many it may have (backpressure).
    vazoes: Arc<Mutex<Vazoes>>,
    confirmacoes: Arc<Confirmacoes>,
    /// A backlog measurement for the gauges is running.
    medindo: Arc<AtomicBool>,
    giro: AtomicUsize,
    pisos: Mutex<Pisos>,
}

/// How far below the head of a tipo's queue most claims start (or `margem_piso`, when it is
/// shorter). These claims walk the index entries of the rows delivered in the last half second,
/// not in the last `margem_piso`: while a long transaction elsewhere on the database holds the
/// xmin horizon, none of those entries can be marked dead, and each costs the claim a heap visit
/// (BENCHMARKS.md, pinned xmin horizon: with every claim 10 s below the head, the relay's claim
/// took 2–5× as long after 4–30 s of a pinned horizon; 1 s below it, 1.3–1.7×; half a second,
/// 1.2–1.4×, at 3,000–5,000 messages a second).
const MARGEM_CURTA: Duration = Duration::from_millis(500);

/// How often a claim starts `margem_piso` below the heads: a row that became visible further
/// behind a head than [`MARGEM_CURTA`] (its enqueuing transaction ran longer than that) is
/// claimed by the first claim this long after the last one from the full margin.
const PASSO_DA_MARGEM: Duration = Duration::from_secs(1);

/// The head of each tipo's queue as last seen (the earliest due time a claim returned, in ms),
/// and when the last claims from the full margin and from nothing (the full scan) ran.
#[derive(Default)]
struct Pisos {
    cabecas: HashMap<&'static str, i64>,
    ultima_margem: Option<Instant>,
    ultima_varredura: Option<Instant>,
}

impl Pisos {
    /// The keyset floors of `tipos` for a claim at `agora`: none at all (zeros) when a full scan
    /// is due (every `varredura`); `margem` below each head when a claim from the full margin is
    /// due (every [`PASSO_DA_MARGEM`]); else the shorter of `margem` and [`MARGEM_CURTA`] below
    /// it. A tipo whose head is not known yet starts from nothing.
    fn de(
        &mut self,
        tipos: &[&'static str],
        agora: Instant,
        margem: Duration,
        varredura: Duration,
    ) -> Vec<i64> {
        let devida = |ultima: Option<Instant>, passo: Duration| {
            ultima.is_none_or(|t| agora.duration_since(t) >= passo)
        };
        if devida(self.ultima_varredura, varredura) {
            self.ultima_varredura = Some(agora);
            self.ultima_margem = Some(agora);
            self.cabecas.clear();
            return vec![0; tipos.len()];
        }
        let recuo = if devida(self.ultima_margem, PASSO_DA_MARGEM) {
            self.ultima_margem = Some(agora);
            margem
        } else {
            margem.min(MARGEM_CURTA)
        };
        let recuo = recuo.as_millis() as i64;
        tipos
            .iter()
            .map(|t| {
                self.cabecas
                    .get(t)
                    .map_or(0, |cabeca| (cabeca - recuo).max(0))
            })
            .collect()
    }

    /// Records the head of each of `tipos` among `linhas` just claimed (ordered rows, whose due
    /// time is not returned, leave it where it was).
    fn avancar(&mut self, tipos: &[&'static str], linhas: &[Reivindicada]) {
        for tipo in tipos {
            let cabeca = linhas
                .iter()
                .filter(|l| l.tipo == *tipo && l.devida_em_ms > 0)
                .map(|l| l.devida_em_ms)
                .min();
            if let Some(cabeca) = cabeca {
                self.cabecas.insert(tipo, cabeca);
            }
        }
    }
}

impl<DB: Banco> Motor<DB> {
    pub(crate) fn new(pool: Pool<DB>, config: Config, recursos: Recursos) -> Self {
        let circuitos = Arc::new(Mutex::new(Circuitos::new(config.circuito)));
        let vazoes = Arc::new(Mutex::new(Vazoes::new(config.concorrencia)));
        Self {
            pool,
            instancia: config.id_da_instancia(),
            nome: Nome::default(),
            config,
            recursos,
            prazo_ms: Arc::new(AtomicU64::new(10_000)),
            circuitos,
            vazoes,
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
            bloquear_apos_morta: self.config.ordem_apos_morta
                == crate::ordem::OrdemAposMorta::Bloquear,
        }
    }

    /// Claims up to `limite` rows, honouring each tipo's circuit.
    async fn reivindicar(
        &self,
        limite: usize,
        token: i64,
    ) -> Result<Vec<Reivindicada>, sqlx::Error> {
        let agora = Instant::now();
        let (livres, sondas) = self.permissoes(agora);
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
        // Backpressure: a tipo with less room than the claim's size (its destination said it
        // is overloaded) is claimed alone, for its room; the others together.
        let (soltos, apertados) = {
            let vazoes = self.vazoes.lock().expect("in-flight limits");
            let mut soltos = Vec::new();
            let mut apertados = Vec::new();
            for tipo in livres {
                match vazoes.folga(tipo) {
                    0 => {}
                    folga if folga < limite => apertados.push((tipo, folga)),
                    _ => soltos.push(tipo),
                }
            }
            (soltos, apertados)
        };
        for (tipo, folga) in apertados {
            if linhas.len() >= limite {
                break;
            }
            let lote = folga.min(limite - linhas.len());
            linhas.extend(self.reivindicar_de(&[tipo], lote, token, agora).await?);
        }
        if !soltos.is_empty() && linhas.len() < limite {
            let lote = limite - linhas.len();
            linhas.extend(self.reivindicar_de(&soltos, lote, token, agora).await?);
        }
        self.avancar_pisos(&linhas);
        Ok(linhas)
    }

    /// Claims up to `lote` due rows of `tipos` from their keyset floors.
    async fn reivindicar_de(
        &self,
        tipos: &[&'static str],
        lote: usize,
        token: i64,
        agora: Instant,
    ) -> Result<Vec<Reivindicada>, sqlx::Error> {
        let inicio = Instant::now();
        let pisos = self.pisos_de(tipos, agora);
        let linhas = DB::reivindicar(&self.pool, self.pedido(tipos, &pisos, lote, token)).await?;
        metrics::histogram!("mensageria_claim_seconds").record(inicio.elapsed().as_secs_f64());
        Ok(linhas)
    }

    /// The tipos each circuit lets through now: `(free, probe only)`; the free ones rotated so
    /// that one tipo's backlog does not always come first.
    fn permissoes(&self, agora: Instant) -> (Vec<&'static str>, Vec<&'static str>) {
        let mut livres = Vec::new();
        let mut sondas = Vec::new();
        let mut circuitos = self.circuitos.lock().expect("circuit lock");
        for tipo in Self::tipos() {
            match circuitos.permissao(tipo, agora) {
                Permissao::Livre => livres.push(*tipo),
                Permissao::Sonda => sondas.push(*tipo),
                Permissao::Bloqueado => {}
            }
        }
        if !livres.is_empty() {
            let giro = self.giro.fetch_add(1, Ordering::Relaxed) % livres.len();
            livres.rotate_left(giro);
        }
        (livres, sondas)
    }

    /// The keyset floors of `tipos` for a claim at `agora` (see [`Pisos::de`]).
    fn pisos_de(&self, tipos: &[&'static str], agora: Instant) -> Vec<i64> {
        self.pisos.lock().expect("floor lock").de(
            tipos,
            agora,
            self.config.margem_piso,
            self.config.varredura_completa,
        )
    }

    /// Records the head of each tipo's queue among the rows just claimed.
    fn avancar_pisos(&self, linhas: &[Reivindicada]) {
        self.pisos
            .lock()
            .expect("floor lock")
            .avancar(Self::tipos(), linhas);
    }

    /// The context of one delivery of `linha`, claimed under `token`.
    fn entrega(&self, linha: Reivindicada, token: i64) -> Entrega<DB> {
        Entrega {
            pool: self.pool.clone(),
            config: self.config.clone(),
            recursos: self.recursos.clone(),
            circuitos: Arc::clone(&self.circuitos),
            vaga: Vaga::ocupar(&self.vazoes, &linha.tipo),
            confirmacoes: Arc::clone(&self.confirmacoes),
            linha,
            token,
        }
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
        let mut em_voo = EmVoo::new(Leases::default());
        for linha in linhas {
            em_voo.lancar(self.entrega(linha, token));
        }
        em_voo.drenar(&mut rodada).await;
        Ok(rodada)
    }

    /// The background loop, until `cancelar` fires; returns how long the shutdown took.
    ///
    /// Each turn runs the phases in order: [`renovar_registro`](Self::renovar_registro),
    /// [`reivindicar_vagas`](Self::reivindicar_vagas) (election in leader mode, then the claim)
    /// and [`esperar`](Self::esperar); deliveries settle on their own tasks inside [`EmVoo`];
    /// [`encerrar`](Self::encerrar) is the shutdown.
    pub(crate) async fn rodar(self, cancelar: CancellationToken) -> Duration {
        let tipos = Self::tipos();
        let app = &self.config.app;
        if tipos.is_empty() {
            tracing::info!(
                %app,
                "mensageria relay: no enviador registered in this binary (a pure receiver); the \
                 relay has nothing to claim and stays idle"
            );
            cancelar.cancelled().await;
            return Duration::ZERO;
        }
        tracing::info!(
            %app,
            ?tipos,
            modo = ?self.config.modo,
            "mensageria relay started; claiming only these tipos"
        );
        let leases = Leases::default();
        let mut laco = Laco::new(EmVoo::new(leases.clone()));
        let mut tomada = Tomada::new(self.nome.clone());
        self.iniciar(&mut tomada, &mut laco.banco).await;
        // Lease renewal with the instance's heartbeat, through the shutdown's drain (`Vigia`).
        let vigia = Vigia::iniciar::<DB>(
            self.pool.clone(),
            self.config.clone(),
            self.instancia.clone(),
            leases,
            tomada,
        );
        let mut escuta = JoinSet::new();
        if self.config.notificacoes {
            escuta.spawn(DB::escutar(self.pool.clone(), cancelar.clone()));
        }
        while !cancelar.is_cancelled() {
            self.volta(&mut laco, &cancelar).await;
        }
        self.encerrar(laco.em_voo, vigia).await
    }

    /// One turn of the loop: the registration, claim what fits, then wait unless the claim asks to
    /// claim again at once.
    async fn volta(&self, laco: &mut Laco, cancelar: &CancellationToken) {
        // Listen for wake-ups from here on, not only while idle: an enqueue that commits
        // while this turn claims or delivers must not wait for the next poll.
        let acordar = ACORDAR.notified();
        tokio::pin!(acordar);
        acordar.as_mut().enable();
        // Claim pacing (`Ritmo`): what commits during the pause goes in this turn's claim.
        if let Some(pronto) = laco.ritmo.pausa(Instant::now()) {
            espera_ou_cancela(cancelar, pronto.saturating_duration_since(Instant::now())).await;
            if cancelar.is_cancelled() {
                return;
            }
        }
        laco.em_voo.colher();
        if laco.ritmo.cheia() {
            self.juntar_vagas(&mut laco.em_voo, cancelar).await;
        }
        self.renovar_registro(laco).await;
        let livres = if self.nome.tomado() {
            self.config.concorrencia.saturating_sub(laco.em_voo.len())
        } else {
            0 // another live process holds this instance name: claim nothing
        };
        match self.reivindicar_vagas(laco, livres, cancelar).await {
            Depois::Recomecar => {}
            Depois::Esperar { reivindicadas } => {
                self.esperar(laco, reivindicadas, livres, acordar, cancelar)
                    .await;
            }
        }
    }

    /// Draining a backlog (the last claim came back full), waits until half the deliveries in
    /// flight are free (or the batch size, if smaller) before claiming again, at most
    /// [`ESPERA_POR_VAGAS`]. Claiming whatever slots one answer freed kept the 128 in flight
    /// split into batches of about 18 events, each a batch request and a receiving
    /// transaction of its own; claims of half the room make batches of up to 64.
    async fn juntar_vagas(&self, em_voo: &mut EmVoo, cancelar: &CancellationToken) {
        let concorrencia = self.config.concorrencia;
        let metade = (concorrencia / 2).min(self.config.lote).max(1);
        let ate = Instant::now() + ESPERA_POR_VAGAS;
        while !em_voo.is_empty() && concorrencia.saturating_sub(em_voo.len()) < metade {
            tokio::select! {
                _ = cancelar.cancelled() => return,
                _ = em_voo.proxima() => {}
                _ = sleep_until(ate) => return,
            }
        }
    }

    /// Start: takes the instance name (and the rows a dead earlier holder of it still held).
    /// Refused because a live process holds it, the relay runs but claims nothing; the vigia
    /// tries again at each instance heartbeat (every lease/4).
    async fn iniciar(&self, tomada: &mut Tomada, banco: &mut SaudeBanco) {
        if let Err(erro) = tomada
            .tentar(&self.pool, &self.config, &self.instancia)
            .await
        {
            banco.falhou(&erro);
        }
    }

    /// Registration phase, every [`Config::com_intervalo_registro`]: renews the app's
    /// registration (warning once about other apps that claim its tipos) and measures the
    /// backlog for the gauges. (The instance heartbeat is `instancia::vigiar`'s.)
    async fn renovar_registro(&self, laco: &mut Laco) {
        if Instant::now() < laco.proximo_registro {
            return;
        }
        let app = &self.config.app;
        match DB::registrar_app(&self.pool, app, Self::tipos()).await {
            Ok(outros) => {
                // Reported once, at start; each renewal only refreshes `visto_em`.
                if !laco.registrado && !outros.is_empty() {
                    tracing::warn!(
                        %app,
                        concorrentes = ?outros,
                        "mensageria relay: other apps claim some of this app's tipos on this \
                         schema (competing consumers); each tipo should have one owner"
                    );
                }
                laco.registrado = true;
                laco.proximo_registro = Instant::now() + self.config.intervalo_registro;
                self.medir_backlog();
            }
            Err(erro) => laco.banco.falhou(&erro),
        }
    }

    /// Backlog gauges (one query over our tipos), off the claim loop: on a large backlog the
    /// count must not delay claims. At most one measure runs at a time.
    fn medir_backlog(&self) {
        if self.medindo.swap(true, Ordering::AcqRel) {
            return;
        }
        let (pool, medindo) = (self.pool.clone(), Arc::clone(&self.medindo));
        tokio::spawn(async move {
            let limite = Duration::from_secs(10);
            if timeout(limite, crate::fila::publicar(&pool, Self::tipos()))
                .await
                .is_err()
            {
                tracing::warn!(
                    limite_ms = limite.as_millis() as u64,
                    "mensageria relay: measuring the backlog for the gauges took too long; the \
                     gauges keep their last values"
                );
            }
            medindo.store(false, Ordering::Release);
        });
    }

    /// Election phase: in leader mode, tries to lead this turn.
    async fn eleger(&self, banco: &mut SaudeBanco, cancelar: &CancellationToken) -> Eleicao<DB> {
        match self.config.modo {
            Modo::Todos => return Eleicao::Reivindicar(None),
            Modo::Lider => {}
        }
        match DB::liderar(&self.pool, Self::chave_lider(&self.config.app)).await {
            Ok(Some(tx)) => Eleicao::Reivindicar(Some(tx)),
            Ok(None) => {
                // Another replica leads: look again at the next poll.
                espera_ou_cancela(cancelar, self.config.intervalo).await;
                Eleicao::Passar
            }
            Err(erro) => {
                banco.falhou(&erro);
                espera_ou_cancela(cancelar, banco.atraso()).await;
                Eleicao::Passar
            }
        }
    }

    /// Claim phase: with `livres` free slots, elects (leader mode), claims up to that many rows
    /// and spawns their deliveries. A leader waits for its round to settle, then steps down.
    async fn reivindicar_vagas(
        &self,
        laco: &mut Laco,
        livres: usize,
        cancelar: &CancellationToken,
    ) -> Depois {
        if livres == 0 {
            return Depois::Esperar { reivindicadas: 0 };
        }
        let Eleicao::Reivindicar(lider) = self.eleger(&mut laco.banco, cancelar).await else {
            return Depois::Recomecar;
        };
        let lote = livres.min(self.config.lote);
        let token = Self::token();
        let inicio = Instant::now();
        let resultado = avisar_se_demorar(self.reivindicar(lote, token)).await;
        let achadas = resultado.as_ref().map_or(0, Vec::len);
        laco.ritmo
            .reivindicou(inicio, Instant::now(), achadas, lote);
        let linhas = match resultado {
            Ok(linhas) => linhas,
            Err(erro) => {
                laco.banco.falhou(&erro);
                drop(lider);
                espera_ou_cancela(cancelar, laco.banco.atraso()).await;
                return Depois::Recomecar;
            }
        };
        laco.banco.voltou(&self.config.app);
        let reivindicadas = linhas.len();
        for linha in linhas {
            laco.em_voo.lancar(self.entrega(linha, token));
        }
        if let Some(tx) = lider {
            // Lead until this round is delivered, then step down for the next election.
            laco.em_voo.drenar(&mut Rodada::default()).await;
            let _ = tx.commit().await;
        }
        if reivindicadas == lote {
            Depois::Recomecar // more may be waiting: claim again at once
        } else {
            Depois::Esperar { reivindicadas }
        }
    }

    /// Wait phase: nothing (more) to claim now; waits for a wake-up, a free slot (when none was
    /// free, or a tipo is at its in-flight limit), the next probe of an open circuit or the poll.
    async fn esperar(
        &self,
        laco: &mut Laco,
        reivindicadas: usize,
        livres: usize,
        acordar: Pin<&mut Notified<'_>>,
        cancelar: &CancellationToken,
    ) {
        let agora = Instant::now();
        let mut espera = laco
            .olhadas
            .espera(agora, reivindicadas, self.config.intervalo);
        if let Some(sonda) = self.circuitos.lock().expect("circuit lock").proxima_sonda() {
            espera = espera.min(sonda.saturating_duration_since(agora));
        }
        // A tipo held at its in-flight limit (backpressure) waits for a delivery to end, as a
        // relay with no free slot does.
        let contido = self
            .vazoes
            .lock()
            .expect("in-flight limits")
            .algum_no_limite();
        let em_voo = &mut laco.em_voo;
        tokio::select! {
            _ = cancelar.cancelled() => {}
            _ = acordar, if self.config.acordar_no_processo => laco.olhadas.acordou(),
            Some(_) = em_voo.proxima(), if !em_voo.is_empty() && (livres == 0 || contido) => {}
            _ = sleep_until(agora + espera) => {}
        }
    }

    /// Shutdown phase: no more claims; in-flight deliveries finish up to the deadline, what was
    /// claimed but not settled goes back (due now, its attempt not counted), and the instance is
    /// recorded as stopped. Returns how long it took.
    async fn encerrar(&self, em_voo: EmVoo, vigia: Vigia) -> Duration {
        let inicio = Instant::now();
        let prazo = Duration::from_millis(self.prazo_ms.load(Ordering::Relaxed));
        let mut devolvidas = 0;
        for (id, token) in em_voo.encerrar(prazo).await {
            if matches!(DB::liberar(&self.pool, id, token).await, Ok(true)) {
                devolvidas += 1;
            }
        }
        vigia.parar().await;
        let parada = match self.nome.marca() {
            Some(marca) => DB::parar_instancia(&self.pool, &self.instancia, marca).await,
            None => Ok(()), // the name is another process's: its record is not ours to close
        };
        if let Err(erro) = parada {
            tracing::warn!(
                error = %erro,
                "mensageria relay: could not record this instance as stopped; operators will see \
                 it as dead until it is removed"
            );
        }
        let app = &self.config.app;
        tracing::info!(%app, instancia = %self.instancia, devolvidas, "mensageria relay stopped");
        inicio.elapsed()
    }
}

/// What the loop carries from one turn to the next.
struct Laco {
    em_voo: EmVoo,
    banco: SaudeBanco,
    proximo_registro: Instant,
    /// The app's registration succeeded once (competing apps are reported only then).
    registrado: bool,
    olhadas: Olhadas,
    ritmo: Ritmo,
}

impl Laco {
    fn new(em_voo: EmVoo) -> Self {
        Self {
            em_voo,
            banco: SaudeBanco::default(),
            proximo_registro: Instant::now(),
            registrado: false,
            olhadas: Olhadas::default(),
            ritmo: Ritmo::default(),
        }
    }
}

/// The election's outcome for one turn.
enum Eleicao<DB: Banco> {
    /// Claim; in leader mode, holding the lead (commit the transaction to step down).
    Reivindicar(Option<sqlx::Transaction<'static, DB>>),
    /// Do not claim this turn (another replica leads, or the database failed); already waited.
    Passar,
}

/// What the loop does after the claim phase.
enum Depois {
    /// Start the next turn at once: the batch came back full, or a phase already waited.
    Recomecar,
    /// Wait before the next turn; `reivindicadas` rows were claimed in this one.
    Esperar { reivindicadas: usize },
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

/// The quick looks that follow a wake-up.
struct Olhadas {
    acordado_em: Option<Instant>,
    proxima: Duration,
}

impl Default for Olhadas {
    fn default() -> Self {
        Self {
            acordado_em: None,
            proxima: PRIMEIRA_OLHADA,
        }
    }
}

impl Olhadas {
    fn acordou(&mut self) {
        self.acordado_em = Some(Instant::now());
        self.proxima = PRIMEIRA_OLHADA;
    }

    /// How long to wait: the next quick look while a wake-up of less than 250 ms ago has
    /// claimed nothing yet, the poll `intervalo` otherwise.
    fn espera(&mut self, agora: Instant, reivindicadas: usize, intervalo: Duration) -> Duration {
        let Some(quando) = self.acordado_em else {
            return intervalo;
        };
        if reivindicadas == 0 && agora.duration_since(quando) < Duration::from_millis(250) {
            // The enqueuing transaction may not have committed yet: look again shortly.
            let espera = self.proxima;
            self.proxima = proxima_olhada(espera);
            espera
        } else {
            self.acordado_em = None;
            intervalo
        }
    }
}

/// The longest pause: a claim slowed by a busy machine does not hold the next one back for long.
const PAUSA_MAXIMA: Duration = Duration::from_millis(3);

/// Claim pacing: wake-ups are coalesced while rows keep arriving.
///
/// Every `enfileirar` wakes the relay, usually before its transaction commits; under a steady
/// stream of enqueues, claiming at each wake-up kept a claim running all the time (one round
/// trip and one index scan per row or two). So after a claim that found rows but not a full
/// batch, the next claim waits half as long as that one took (at most [`PAUSA_MAXIMA`]): the
/// claims take at most two thirds of the loop's time, and what commits meanwhile goes together
/// in the next one. A full batch claims again at once (a backlog is not paced), and an empty
/// claim is not paced (the quick looks after a wake-up, [`Olhadas`], find the row when it
/// commits), so a lone message pays nothing; under load a row waits at most one pause longer.
/// Half and not the whole duration: measured, the whole doubled the pause for the same
/// throughput and cost a millisecond of median latency at half of the peak (BENCHMARKS.md).
#[derive(Default)]
struct Ritmo {
    proxima: Option<Instant>,
    /// The last claim came back full (a backlog), not yet asked.
    cheia: bool,
}

impl Ritmo {
    /// Records a claim that started at `inicio` and ended at `fim` with `linhas` rows of at
    /// most `lote`.
    fn reivindicou(&mut self, inicio: Instant, fim: Instant, linhas: usize, lote: usize) {
        self.cheia = linhas > 0 && linhas == lote;
        self.proxima =
            (linhas > 0 && linhas < lote).then(|| fim + ((fim - inicio) / 2).min(PAUSA_MAXIMA));
    }

    /// Whether the last claim came back full (a backlog); asked once per claim.
    fn cheia(&mut self) -> bool {
        std::mem::take(&mut self.cheia)
    }

    /// When the next claim may run, if it has to wait.
    fn pausa(&mut self, agora: Instant) -> Option<Instant> {
        self.proxima.take().filter(|quando| *quando > agora)
    }
}

/// The longest [`Motor::juntar_vagas`] waits for room before claiming what there is.
const ESPERA_POR_VAGAS: Duration = Duration::from_millis(20);

/// How long a claim may go unanswered before the relay says so: a database that is gone without
/// a word (a silent partition, a host that froze) makes a statement hang until TCP gives up or
/// the pool's acquire times out, tens of seconds later, and an operator should see it in
/// seconds.
const CLAIM_SEM_RESPOSTA: Duration = Duration::from_secs(3);

/// Awaits `claim`; if it has not answered after [`CLAIM_SEM_RESPOSTA`], logs one WARN (and, when
/// it ends, one INFO saying how long it took), without cancelling it.
async fn avisar_se_demorar<T>(claim: impl std::future::Future<Output = T>) -> T {
    tokio::pin!(claim);
    let inicio = Instant::now();
    tokio::select! {
        resultado = &mut claim => return resultado,
        () = sleep(CLAIM_SEM_RESPOSTA) => {}
    }
    tracing::warn!(
        limite_ms = CLAIM_SEM_RESPOSTA.as_millis() as u64,
        "mensageria relay: a claim has had no answer from the database for 3 s: it is slow or \
         unreachable (a network partition, a frozen host); still waiting"
    );
    let resultado = claim.await;
    tracing::info!(
        fora_por_ms = inicio.elapsed().as_millis() as u64,
        "mensageria relay: the slow claim answered"
    );
    resultado
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
            tracing::warn!(
                error = %erro,
                falhas_seguidas = self.falhas,
                "mensageria relay: the database is failing; backing off and retrying (nothing is \
                 lost: leased rows come back when their leases end)"
            );
        }
    }

    fn atraso(&self) -> Duration {
        Duration::from_millis(100u64.saturating_mul(1 << self.falhas.min(6)))
            .min(Duration::from_secs(5))
    }

    fn voltou(&mut self, app: &str) {
        if let Some(desde) = self.desde.take() {
            tracing::info!(
                %app,
                falhas_seguidas = self.falhas,
                fora_por_ms = desde.elapsed().as_millis() as u64,
                "mensageria relay: the database is back"
            );
            self.falhas = 0;
            self.ultimo_log = None;
        }
    }
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

    #[test]
    fn ritmo_pausa_so_depois_de_um_lote_incompleto_e_pela_metade_da_reivindicacao() {
        let inicio = Instant::now();
        let mut ritmo = Ritmo::default();
        // Rows, not a full batch: the next claim waits half as long as this one took.
        ritmo.reivindicou(inicio, inicio + Duration::from_millis(2), 5, 128);
        assert_eq!(ritmo.pausa(inicio), Some(inicio + Duration::from_millis(3)));
        // Taken once: the claim after it is not held back by it again.
        assert_eq!(ritmo.pausa(inicio), None);
        // A slow claim: the pause is capped.
        ritmo.reivindicou(inicio, inicio + Duration::from_millis(40), 5, 128);
        assert_eq!(
            ritmo.pausa(inicio),
            Some(inicio + Duration::from_millis(43))
        );
        // A full batch (a backlog) and an empty claim are not paced.
        ritmo.reivindicou(inicio, inicio + Duration::from_millis(2), 128, 128);
        assert_eq!(ritmo.pausa(inicio), None);
        ritmo.reivindicou(inicio, inicio + Duration::from_millis(2), 0, 128);
        assert_eq!(ritmo.pausa(inicio), None);
        // A pause already over does not wait.
        ritmo.reivindicou(inicio, inicio + Duration::from_millis(2), 5, 128);
        assert_eq!(ritmo.pausa(inicio + Duration::from_millis(10)), None);
    }

    #[test]
    fn so_uma_reivindicacao_cheia_junta_vagas_e_uma_vez() {
        let inicio = Instant::now();
        let mut ritmo = Ritmo::default();
        assert!(!ritmo.cheia(), "no claim yet");
        // A claim as large as it could be (a backlog, even when few slots were free).
        ritmo.reivindicou(inicio, inicio + Duration::from_millis(2), 18, 18);
        assert!(ritmo.cheia());
        assert!(!ritmo.cheia(), "asked once per claim");
        // A short claim (a steady stream, or the tail of a backlog) and an empty one do not.
        ritmo.reivindicou(inicio, inicio + Duration::from_millis(2), 5, 128);
        assert!(!ritmo.cheia());
        ritmo.reivindicou(inicio, inicio + Duration::from_millis(2), 0, 128);
        assert!(!ritmo.cheia());
    }

    fn linha(tipo: &str, devida_em_ms: i64) -> Reivindicada {
        Reivindicada {
            id: 1,
            id_mensagem: uuid::Uuid::nil(),
            tipo: tipo.to_owned(),
            payload: "{}".to_owned(),
            correlacao: None,
            tentativas: 1,
            idade_ms: 0,
            devida_em_ms,
            chave_ordem: None,
            traceparent: None,
            tracestate: None,
        }
    }

    #[test]
    fn pisos_curtos_entre_reivindicacoes_da_margem_e_varreduras() {
        const MARGEM: Duration = Duration::from_secs(10);
        const VARREDURA: Duration = Duration::from_secs(30);
        let tipos = ["a", "b"];
        let inicio = Instant::now();
        let ms = |ms: u64| inicio + Duration::from_millis(ms);
        let mut pisos = Pisos::default();
        // The first claim is a full scan.
        assert_eq!(pisos.de(&tipos, ms(0), MARGEM, VARREDURA), [0, 0]);
        // Heads seen: a's at 100 s; b returned only an ordered row (due time 0), so it has none.
        pisos.avancar(
            &tipos,
            &[linha("a", 100_000), linha("a", 100_500), linha("b", 0)],
        );
        // Within a second of the last claim from the full margin: half a second below the head.
        assert_eq!(pisos.de(&tipos, ms(10), MARGEM, VARREDURA), [99_500, 0]);
        assert_eq!(pisos.de(&tipos, ms(999), MARGEM, VARREDURA), [99_500, 0]);
        // A second later: one claim from the full margin, then short ones again.
        assert_eq!(pisos.de(&tipos, ms(1_000), MARGEM, VARREDURA), [90_000, 0]);
        assert_eq!(pisos.de(&tipos, ms(1_001), MARGEM, VARREDURA), [99_500, 0]);
        // The head moves with the rows claimed, backwards too (a late commit found below it).
        pisos.avancar(&tipos, &[linha("a", 95_000)]);
        assert_eq!(pisos.de(&tipos, ms(1_002), MARGEM, VARREDURA), [94_500, 0]);
        // A claim that returned nothing of a tipo leaves its head where it was.
        pisos.avancar(&tipos, &[]);
        assert_eq!(pisos.de(&tipos, ms(1_003), MARGEM, VARREDURA), [94_500, 0]);
        // The full scan forgets the heads.
        assert_eq!(pisos.de(&tipos, ms(30_000), MARGEM, VARREDURA), [0, 0]);
        assert_eq!(pisos.de(&tipos, ms(30_001), MARGEM, VARREDURA), [0, 0]);
        // A margin shorter than half a second is used by every claim, as it was.
        pisos.avancar(&tipos, &[linha("a", 200_000)]);
        let curta = Duration::from_millis(50);
        assert_eq!(pisos.de(&tipos, ms(30_002), curta, VARREDURA), [199_950, 0]);
        assert_eq!(pisos.de(&tipos, ms(31_002), curta, VARREDURA), [199_950, 0]);
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
