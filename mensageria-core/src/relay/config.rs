//! How a relay behaves: batch, concurrency, lease, retries, dead-letter limits, mode.

use std::time::Duration;

use crate::configuracao::{ErroConfiguracao, exigir_nome, exigir_nome_de_app};

/// How replicas of one app share the saída.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum Modo {
    /// Every replica claims with `FOR UPDATE SKIP LOCKED`; claims are disjoint.
    #[default]
    Todos,
    /// One replica per app ticks at a time (ADR 0035), elected each tick with a
    /// transaction-scoped PostgreSQL advisory lock keyed by the app name (works behind
    /// PgBouncer's transaction pooling). On SQLite every replica may lead. Correctness never
    /// depends on it: leases and fencing still apply.
    Lider,
}

/// The relay's settings. [`Config::new`] gives the defaults below; [`Config::do_ambiente`]
/// reads the environment on top of them.
///
/// ```
/// use std::time::Duration;
/// use mensageria_core::relay::Config;
///
/// let config = Config::new("emissor").com_lote(100).com_concorrencia(32).com_max_tentativas(10);
/// assert_eq!(config.app(), "emissor");
/// assert!(config.validar().is_ok());
/// assert!(Config::new("x").com_lease(Duration::from_millis(100)).validar().is_err());
/// ```
#[derive(Debug, Clone)]
pub struct Config {
    pub(crate) app: String,
    pub(crate) habilitado: bool,
    pub(crate) lote: usize,
    pub(crate) concorrencia: usize,
    pub(crate) lease: Duration,
    pub(crate) tempo_limite_envio: Duration,
    pub(crate) intervalo: Duration,
    pub(crate) backoff_base: Duration,
    pub(crate) backoff_max: Duration,
    pub(crate) max_tentativas: u32,
    pub(crate) idade_maxima: Duration,
    pub(crate) modo: Modo,
    pub(crate) intervalo_registro: Duration,
    pub(crate) circuito: super::circuito::Regras,
    pub(crate) instancia: Option<String>,
    pub(crate) margem_piso: Duration,
    pub(crate) varredura_completa: Duration,
    pub(crate) notificacoes: bool,
    pub(crate) acordar_no_processo: bool,
    pub(crate) espera_pelo_schema: Option<Duration>,
    pub(crate) ensaio: super::Ensaio,
    pub(crate) ordem_apos_morta: crate::ordem::OrdemAposMorta,
}

impl Config {
    /// The defaults, for the app named `app` (the name in the registration table and in the
    /// leader lock): batch 128, concurrency 128, lease 6 s (renewed every 1.5 s while a delivery
    /// runs), send timeout 20 s, polling every 1 s, backoff 1 s doubling to 5 min with jitter,
    /// dead letter after 25 attempts or 7 days, every replica claims, registration heartbeat
    /// every 15 s, circuit opening at 5 failures and half the outcomes of the last 10 s with a
    /// cool-down capped at 2 s, a random instance id.
    pub fn new(app: impl Into<String>) -> Self {
        Self {
            app: app.into(),
            habilitado: true,
            lote: 128,
            concorrencia: 128,
            lease: Duration::from_secs(6),
            tempo_limite_envio: Duration::from_secs(20),
            intervalo: Duration::from_secs(1),
            backoff_base: Duration::from_secs(1),
            backoff_max: Duration::from_secs(300),
            max_tentativas: 25,
            idade_maxima: Duration::from_secs(7 * 24 * 3600),
            modo: Modo::Todos,
            intervalo_registro: Duration::from_secs(15),
            circuito: super::circuito::Regras::default(),
            instancia: None,
            margem_piso: Duration::from_secs(10),
            varredura_completa: Duration::from_secs(30),
            notificacoes: false,
            acordar_no_processo: true,
            espera_pelo_schema: None,
            ensaio: super::Ensaio::new(),
            ordem_apos_morta: crate::ordem::OrdemAposMorta::Bloquear,
        }
    }

    /// [`Config::new`] with `MENSAGERIA_APP` (else `app`), `MENSAGERIA_INSTANCE` (a stable
    /// instance name, see [`com_instancia`](Self::com_instancia)) and
    /// `MENSAGERIA_RELAY_ENABLED` (`false`/`0`/`no`/`off` keeps the relay from starting at all:
    /// only an idle-loop saving for pure receivers, whose relay is a no-op anyway).
    pub fn do_ambiente(app: impl Into<String>) -> Self {
        let mut config = Self::new(std::env::var("MENSAGERIA_APP").unwrap_or_else(|_| app.into()));
        if let Ok(instancia) = std::env::var("MENSAGERIA_INSTANCE")
            && !instancia.trim().is_empty()
        {
            config.instancia = Some(instancia.trim().to_owned());
        }
        if let Ok(valor) = std::env::var("MENSAGERIA_RELAY_ENABLED") {
            config.habilitado = !matches!(
                valor.trim().to_ascii_lowercase().as_str(),
                "false" | "0" | "no" | "off"
            );
        }
        config
    }

    /// The app's name.
    pub fn app(&self) -> &str {
        &self.app
    }

    /// Starts the relay or not (see [`Config::do_ambiente`]).
    pub fn com_habilitado(mut self, habilitado: bool) -> Self {
        self.habilitado = habilitado;
        self
    }

    /// Rows claimed per round trip (default 128). A claim that comes back full is followed by
    /// another at once; one that comes back short is followed by a short pause (half as long as
    /// it took, at most 3 ms) so that, under a steady stream of enqueues, the rows that commit
    /// meanwhile go together in the next claim instead of one claim per row. Draining a backlog
    /// (claims that come back full), the next claim waits until half the deliveries in flight
    /// are free (up to 20 ms), so that the rows of one claim leave in few full batch requests.
    pub fn com_lote(mut self, lote: usize) -> Self {
        self.lote = lote;
        self
    }

    /// Deliveries in flight at once (default 128): one per claimed row. To a mensageria receptor
    /// the deliveries of one claim travel together in a few batch requests
    /// ([`Destino::com_lote_maximo`](crate::destino::Destino::com_lote_maximo)), so this bounds events,
    /// not requests; to a receiver that takes one event per request it is also the number of
    /// requests at once: lower it for a receiver that cannot take that many. With 16 the
    /// relay fell behind eight producers on two cores (BENCHMARKS.md).
    pub fn com_concorrencia(mut self, concorrencia: usize) -> Self {
        self.concorrencia = concorrencia;
        self
    }

    /// How long a claimed row stays ours (database clock) without news from us. While a
    /// delivery runs the relay renews its lease every quarter of this (one statement for all
    /// its deliveries), so a slow delivery is never taken from a live relay; a relay that dies
    /// leaves its rows for at most this long, and its siblings take them back after half of it
    /// without a heartbeat. At least 400 ms.
    pub fn com_lease(mut self, lease: Duration) -> Self {
        self.lease = lease;
        self
    }

    /// The longest one send may take before it counts as a temporary failure.
    pub fn com_tempo_limite_envio(mut self, tempo: Duration) -> Self {
        self.tempo_limite_envio = tempo;
        self
    }

    /// How often an idle relay looks at the saída (wake-ups from enqueues in this process come
    /// sooner).
    pub fn com_intervalo(mut self, intervalo: Duration) -> Self {
        self.intervalo = intervalo;
        self
    }

    /// The first retry delay and the cap of the exponential backoff.
    pub fn com_backoff(mut self, base: Duration, max: Duration) -> Self {
        self.backoff_base = base;
        self.backoff_max = max;
        self
    }

    /// Attempts before a message that keeps failing temporarily goes to dead letters.
    pub fn com_max_tentativas(mut self, max: u32) -> Self {
        self.max_tentativas = max;
        self
    }

    /// Age after which a message that keeps failing temporarily goes to dead letters.
    pub fn com_idade_maxima(mut self, idade: Duration) -> Self {
        self.idade_maxima = idade;
        self
    }

    /// How replicas share the saída.
    pub fn com_modo(mut self, modo: Modo) -> Self {
        self.modo = modo;
        self
    }

    /// How often the relay renews the app's registration (its tipos' rows in `mensageria_apps`,
    /// which `status`, `doctor` and `apps` read) and measures the backlog gauges (default 15 s).
    /// Not the instance heartbeat, which is written with every lease renewal (lease/4, see
    /// [`com_lease`](Self::com_lease)) and is what siblings judge a dead replica by.
    pub fn com_intervalo_registro(mut self, intervalo: Duration) -> Self {
        self.intervalo_registro = intervalo;
        self
    }

    /// The old name of [`com_intervalo_registro`](Self::com_intervalo_registro).
    #[deprecated(
        since = "0.1.0",
        note = "renamed `com_intervalo_registro`: this is the app's registration, not the instance heartbeat"
    )]
    pub fn com_heartbeat(self, intervalo: Duration) -> Self {
        self.com_intervalo_registro(intervalo)
    }

    /// Temporary failures of one tipo within the circuit's 10 s window below which its circuit
    /// never opens (it opens when, past this count, at least half of the window's outcomes
    /// failed; its destination then gets one probe per cool-down instead of a retry storm).
    pub fn com_circuito_limiar(mut self, falhas: u32) -> Self {
        self.circuito.minimo_de_falhas = falhas.max(1);
        self
    }

    /// The longest cool-down of an open circuit: after an outage the destination is probed at
    /// least this often, so it is back in use within this long of coming back (2 s by default;
    /// while it is down it gets one request per cool-down per tipo and relay).
    pub fn com_circuito_espera_maxima(mut self, espera: Duration) -> Self {
        self.circuito.espera_maxima = espera.max(Duration::from_millis(10));
        self
    }

    /// A stable name for this relay instance (e.g. the pod or host name), unique to one process
    /// of the app. Rows the instance held when it died are taken back when it starts again under
    /// the same name (once the dead incarnation's heartbeat is half a lease old), instead of
    /// when their leases end, even with no sibling running. Without one, each start is a new
    /// random instance and its siblings take a dead instance's rows back after half a lease.
    ///
    /// One live process holds a name at a time: a second process started under a name whose
    /// holder is alive claims nothing and logs an ERROR (again every 30 s) until the holder
    /// stops or dies, so a name shared by mistake never makes two processes deliver each
    /// other's messages.
    pub fn com_instancia(mut self, nome: impl Into<String>) -> Self {
        self.instancia = Some(nome.into());
        self
    }

    /// The instance id this relay holds leases under: `app@name`, or `app@<random uuid>`.
    pub(crate) fn id_da_instancia(&self) -> String {
        match &self.instancia {
            Some(nome) => format!("{}@{nome}", self.app),
            None => format!("{}@{}", self.app, uuid::Uuid::now_v7()),
        }
    }

    /// How often in-flight leases are renewed and the instance's heartbeat is written.
    pub(crate) fn passo_de_renovacao(&self) -> Duration {
        self.lease / 4
    }

    /// How long an instance may go without a heartbeat before its siblings take it for dead.
    pub(crate) fn morta_apos(&self) -> Duration {
        self.lease / 2
    }

    /// The keyset floor (PostgreSQL). A claim of a tipo starts below the head of its queue as
    /// last seen, instead of at the oldest index entry, so the index entries of delivered rows
    /// that vacuum has not removed yet are not walked over on every claim: one claim a second
    /// starts `margem` below the head, the others at most half a second below it (the entries of
    /// the last half second only, which matters while a long transaction elsewhere on the
    /// database holds the xmin horizon and no entry can be marked dead). A row that becomes
    /// visible below the floor is delayed, never skipped: up to about a second when its
    /// enqueuing transaction stayed open for between half a second and `margem`, until the full
    /// scan that runs every `varredura` when it stayed open for longer. A leased row keeps its
    /// place in the queue (its due time), so a lease that ended while its holder still ran
    /// (its renewals failed, its heartbeat did not) is also claimed by the full scan, or at once
    /// by a relay that starts (its first claim scans everything); a dead holder's rows are put
    /// back at the head by its siblings. Defaults: 10 s and 30 s.
    pub fn com_piso(mut self, margem: Duration, varredura: Duration) -> Self {
        self.margem_piso = margem;
        self.varredura_completa = varredura;
        self
    }

    /// Also wake on PostgreSQL notifications from other processes' enqueues (off by default:
    /// it needs the trigger of `relay::notificacoes::instalar`, and notifying costs every
    /// enqueue a serialized commit; see that module). SQLite ignores it.
    pub fn com_notificacoes(mut self, escutar: bool) -> Self {
        self.notificacoes = escutar;
        self
    }

    /// Whether wake-ups ([`acordar`](super::acordar): this process's enqueues, and
    /// notifications when listening) make the relay look at once (the default). Off, the relay
    /// only polls: for measuring polling latency, or to pace a relay by its poll alone.
    pub fn com_acordar_no_processo(mut self, acordar: bool) -> Self {
        self.acordar_no_processo = acordar;
        self
    }

    /// Before its first claim, waits up to `prazo` for the schema's owner to run
    /// [`migrar`](crate::migrar) (see [`esperar_schema`](crate::esperar_schema): one INFO line
    /// when it starts waiting, one when the schema is ready), so a non-owner app may start
    /// before the owner. Off by default: the relay then starts claiming at once (the owner's
    /// relay, which runs after `migrar`, needs no wait).
    ///
    /// The wait runs in the relay's task: [`Relay::spawn`](super::Relay::spawn) returns at once.
    /// If the schema is still not ready after `prazo`, the relay logs the reason at ERROR and
    /// starts anyway; its claims then fail and are retried with backoff (one WARN per 30 s)
    /// until the owner migrates, and nothing is lost meanwhile.
    pub fn com_espera_pelo_schema(mut self, prazo: Duration) -> Self {
        self.espera_pelo_schema = Some(prazo);
        self
    }

    /// What a dead letter of an ordered message does to the later messages of its key (see
    /// [`crate::ordem`]): [`OrdemAposMorta::Bloquear`](crate::ordem::OrdemAposMorta::Bloquear),
    /// the default, holds them until an operator replays or discards it;
    /// [`OrdemAposMorta::Seguir`](crate::ordem::OrdemAposMorta::Seguir) lets the next one go.
    /// Give every replica of the app the same policy: each claim applies its own relay's.
    ///
    /// ```
    /// use mensageria_core::ordem::OrdemAposMorta;
    /// use mensageria_core::relay::Config;
    ///
    /// let config = Config::new("emissor").com_ordem_apos_morta(OrdemAposMorta::Seguir);
    /// assert_eq!(config.ordem_apos_morta(), OrdemAposMorta::Seguir);
    /// assert_eq!(Config::new("x").ordem_apos_morta(), OrdemAposMorta::Bloquear);
    /// ```
    #[doc(alias = "dead letter policy")]
    pub fn com_ordem_apos_morta(mut self, politica: crate::ordem::OrdemAposMorta) -> Self {
        self.ordem_apos_morta = politica;
        self
    }

    /// The dead-letter policy of ordered messages; see [`Config::com_ordem_apos_morta`].
    pub fn ordem_apos_morta(&self) -> crate::ordem::OrdemAposMorta {
        self.ordem_apos_morta
    }

    /// Turns on the relay's own fault switches, for tests (see [`crate::teste`]).
    #[cfg(feature = "teste")]
    pub fn com_ensaio(mut self, ensaio: super::Ensaio) -> Self {
        self.ensaio = ensaio;
        self
    }

    /// How long one delivery may take before it counts as a temporary failure.
    pub fn tempo_limite_envio(&self) -> Duration {
        self.tempo_limite_envio
    }

    /// How long a claimed row stays leased to this relay (renewed while its delivery runs).
    pub fn lease(&self) -> Duration {
        self.lease
    }

    /// The redelivery horizon: after this long a message is either delivered or dead. A
    /// receptor's dedup retention must be longer (see the receptor's configuration).
    pub fn horizonte_de_reentrega(&self) -> Duration {
        self.idade_maxima + self.backoff_max + self.lease
    }

    /// Checks the settings hang together.
    pub fn validar(&self) -> Result<(), ErroConfiguracao> {
        exigir_nome_de_app(&self.app)?;
        if let Some(instancia) = &self.instancia {
            exigir_nome("instance", instancia)?;
        }
        let contagens = [
            ("lote", self.lote),
            ("concorrencia", self.concorrencia),
            ("max_tentativas", self.max_tentativas as usize),
        ];
        if let Some((campo, _)) = contagens.into_iter().find(|(_, valor)| *valor == 0) {
            return Err(ErroConfiguracao::Zero { campo });
        }
        if self.lease < Duration::from_millis(400) {
            return Err(ErroConfiguracao::LeaseCurto { lease: self.lease });
        }
        if self.backoff_base.is_zero() || self.backoff_max < self.backoff_base {
            return Err(ErroConfiguracao::Backoff {
                base: self.backoff_base,
                maximo: self.backoff_max,
            });
        }
        Ok(())
    }
}

#[cfg(test)]
mod testes {
    use super::Config;
    use crate::configuracao::ErroConfiguracao;

    #[test]
    fn nomes_de_app_e_instancia_sao_uma_palavra_imprimivel() {
        for nome in ["emissor", "billing-v2", "ns/app:prod@eu.1", "fatura_ção"] {
            assert!(
                Config::new(nome).com_instancia(nome).validar().is_ok(),
                "{nome}"
            );
        }
        let invalidos = [
            "app\r\nINFO mensageria relay: forged",
            "app\u{1b}[31m",
            "two words",
            "tab\tname",
            &"x".repeat(129),
        ];
        for nome in invalidos {
            let erro = Config::new(nome).validar().unwrap_err();
            assert!(
                matches!(erro, ErroConfiguracao::NomeInvalido { campo: "app", .. }),
                "{nome:?}"
            );
            assert!(
                !erro.to_string().contains('\n'),
                "the error is one line: {erro}"
            );
            let erro = Config::new("app")
                .com_instancia(nome)
                .validar()
                .unwrap_err();
            assert!(matches!(
                erro,
                ErroConfiguracao::NomeInvalido {
                    campo: "instance",
                    ..
                }
            ));
        }
    }
}
