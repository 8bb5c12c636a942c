//! A circuit per tipo: a destination that is failing gets one probe per cool-down, not a retry
//! storm, while the other tipos keep flowing.
//!
//! The circuit opens on a **failure rate over a window** (by default at least 5 temporary
//! failures and at least half of the outcomes in the last 10 s), not on a run of failures: a
//! share of lost acks or a single stubborn message does not open it, a destination that is down
//! does within a second. Open, the tipo gets one probe after a cool-down that starts at 250 ms
//! and doubles up to a cap (2 s by default, `Config::com_circuito`): a destination that comes
//! back is found within the cap, and while it is down it sees one request per cool-down.

use std::collections::HashMap;
use std::time::Duration;

use tokio::time::Instant;

/// How the circuits of one relay decide (from `Config`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Regras {
    /// Failures within the window below which the circuit never opens.
    pub(crate) minimo_de_falhas: u32,
    /// The share of failures among the window's outcomes at which it opens.
    pub(crate) taxa: f64,
    /// How far back outcomes count.
    pub(crate) janela: Duration,
    /// The first cool-down.
    pub(crate) espera_inicial: Duration,
    /// The longest cool-down.
    pub(crate) espera_maxima: Duration,
}

impl Default for Regras {
    fn default() -> Self {
        Self {
            minimo_de_falhas: 5,
            taxa: 0.5,
            janela: Duration::from_secs(10),
            espera_inicial: Duration::from_millis(250),
            espera_maxima: Duration::from_secs(2),
        }
    }
}

/// Outcomes counted in `BALDES` slices of the window: memory per tipo is fixed whatever the rate.
const BALDES: usize = 10;

#[derive(Debug, Default, Clone, Copy)]
struct Balde {
    /// Which slice of time (window / BALDES since the circuit's epoch) this bucket counts.
    fatia: u64,
    falhas: u32,
    sucessos: u32,
}

#[derive(Debug)]
struct Estado {
    baldes: [Balde; BALDES],
    aberto_ate: Option<Instant>,
    espera: Duration,
    sondando: bool,
}

impl Estado {
    fn new() -> Self {
        Self {
            baldes: [Balde::default(); BALDES],
            aberto_ate: None,
            espera: Duration::ZERO,
            sondando: false,
        }
    }

    fn registrar(&mut self, fatia: u64, falhou: bool) {
        let balde = &mut self.baldes[(fatia % BALDES as u64) as usize];
        if balde.fatia != fatia {
            *balde = Balde {
                fatia,
                ..Balde::default()
            };
        }
        if falhou {
            balde.falhas += 1;
        } else {
            balde.sucessos += 1;
        }
    }

    /// (failures, outcomes) within the window ending at `fatia`.
    fn na_janela(&self, fatia: u64) -> (u32, u32) {
        self.baldes
            .iter()
            .filter(|b| b.fatia + (BALDES as u64) > fatia && b.fatia <= fatia)
            .fold((0, 0), |(f, t), b| {
                (f + b.falhas, t + b.falhas + b.sucessos)
            })
    }
}

/// What the relay may claim of a tipo now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Permissao {
    /// Claim normally.
    Livre,
    /// Claim one row only: a probe of a destination that was failing.
    Sonda,
    /// Claim nothing until the cool-down ends.
    Bloqueado,
}

/// The circuits of every tipo of one relay.
#[derive(Debug)]
pub(crate) struct Circuitos {
    regras: Regras,
    epoca: Instant,
    estados: HashMap<String, Estado>,
}

impl Circuitos {
    pub(crate) fn new(regras: Regras) -> Self {
        Self {
            regras,
            epoca: Instant::now(),
            estados: HashMap::new(),
        }
    }

    fn fatia(&self, agora: Instant) -> u64 {
        let passo = (self.regras.janela / BALDES as u32).max(Duration::from_millis(1));
        (agora.saturating_duration_since(self.epoca).as_millis() / passo.as_millis()) as u64
    }

    pub(crate) fn permissao(&mut self, tipo: &str, agora: Instant) -> Permissao {
        let Some(estado) = self.estados.get_mut(tipo) else {
            return Permissao::Livre;
        };
        match estado.aberto_ate {
            None => Permissao::Livre,
            Some(_) if estado.sondando => Permissao::Bloqueado,
            Some(ate) if agora < ate => Permissao::Bloqueado,
            Some(_) => {
                estado.sondando = true;
                Permissao::Sonda
            }
        }
    }

    /// Whether the tipo's circuit is open (probing or cooling down).
    pub(crate) fn aberto(&self, tipo: &str) -> bool {
        self.estados
            .get(tipo)
            .is_some_and(|e| e.aberto_ate.is_some())
    }

    /// The tipo's current cool-down, when its circuit is open.
    pub(crate) fn espera(&self, tipo: &str) -> Option<Duration> {
        self.estados
            .get(tipo)
            .filter(|e| e.aberto_ate.is_some())
            .map(|e| e.espera)
    }

    /// When the next blocked circuit reopens for a probe, if any is blocked.
    pub(crate) fn proxima_sonda(&self) -> Option<Instant> {
        self.estados
            .values()
            .filter(|e| !e.sondando)
            .filter_map(|e| e.aberto_ate)
            .min()
    }

    /// A delivery of `tipo` worked (or its destination answered, even with a refusal): an open
    /// circuit closes.
    pub(crate) fn sucesso(&mut self, tipo: &str, agora: Instant) {
        let fatia = self.fatia(agora);
        if let Some(estado) = self.estados.get_mut(tipo) {
            if estado.aberto_ate.is_some() {
                self.estados.remove(tipo);
            } else {
                estado.registrar(fatia, false);
            }
        }
    }

    /// Records a temporary failure; returns true when this one opened (or reopened) the circuit.
    pub(crate) fn falha(&mut self, tipo: &str, agora: Instant) -> bool {
        let fatia = self.fatia(agora);
        let regras = self.regras;
        let estado = self
            .estados
            .entry(tipo.to_owned())
            .or_insert_with(Estado::new);
        if estado.sondando {
            // The probe failed: cool down longer, up to the cap.
            estado.espera = (estado.espera * 2).clamp(regras.espera_inicial, regras.espera_maxima);
            estado.aberto_ate = Some(agora + estado.espera);
            estado.sondando = false;
            return true;
        }
        if estado.aberto_ate.is_some() {
            // A delivery that started before the circuit opened: already counted as open.
            return false;
        }
        estado.registrar(fatia, true);
        let (falhas, total) = estado.na_janela(fatia);
        if falhas >= regras.minimo_de_falhas && f64::from(falhas) >= regras.taxa * f64::from(total)
        {
            estado.espera = regras.espera_inicial.min(regras.espera_maxima);
            estado.aberto_ate = Some(agora + estado.espera);
            return true;
        }
        false
    }
}

#[cfg(test)]
mod testes {
    use super::*;

    fn regras() -> Regras {
        Regras {
            minimo_de_falhas: 3,
            ..Regras::default()
        }
    }

    #[test]
    fn abre_pela_taxa_sonda_e_fecha_no_sucesso() {
        let t0 = Instant::now();
        let mut c = Circuitos::new(regras());
        assert!(!c.falha("a", t0));
        assert!(!c.falha("a", t0));
        assert_eq!(c.permissao("a", t0), Permissao::Livre);
        assert!(c.falha("a", t0));
        assert_eq!(c.permissao("a", t0), Permissao::Bloqueado);
        assert_eq!(
            c.permissao("b", t0),
            Permissao::Livre,
            "other tipos keep flowing"
        );
        let depois = t0 + Duration::from_millis(250);
        assert_eq!(c.permissao("a", depois), Permissao::Sonda);
        assert_eq!(
            c.permissao("a", depois),
            Permissao::Bloqueado,
            "one probe at a time"
        );
        // The probe fails: the cool-down doubles.
        assert!(c.falha("a", depois));
        assert_eq!(
            c.permissao("a", depois + Duration::from_millis(400)),
            Permissao::Bloqueado
        );
        assert_eq!(
            c.permissao("a", depois + Duration::from_millis(500)),
            Permissao::Sonda
        );
        c.sucesso("a", depois);
        assert_eq!(c.permissao("a", depois), Permissao::Livre);
    }

    #[test]
    fn perdas_esparsas_nao_abrem() {
        // One failure in four (lost acks): 25% of the window, never 50%.
        let t0 = Instant::now();
        let mut c = Circuitos::new(regras());
        for i in 0..400_u64 {
            let agora = t0 + Duration::from_millis(i * 10);
            if i % 4 == 0 {
                assert!(!c.falha("a", agora), "opened at {i}");
            } else {
                c.sucesso("a", agora);
            }
        }
        assert_eq!(
            c.permissao("a", t0 + Duration::from_secs(4)),
            Permissao::Livre
        );
    }

    #[test]
    fn falhas_antigas_saem_da_janela() {
        let t0 = Instant::now();
        let mut c = Circuitos::new(regras());
        assert!(!c.falha("a", t0));
        assert!(!c.falha("a", t0));
        // Eleven seconds later the two old failures no longer count.
        let depois = t0 + Duration::from_secs(11);
        assert!(!c.falha("a", depois));
        assert!(!c.falha("a", depois));
        assert!(c.falha("a", depois));
    }

    #[test]
    fn a_espera_tem_teto() {
        let t0 = Instant::now();
        let mut c = Circuitos::new(regras());
        for _ in 0..3 {
            c.falha("a", t0);
        }
        let mut agora = t0;
        for _ in 0..20 {
            agora += Duration::from_secs(5);
            assert_eq!(c.permissao("a", agora), Permissao::Sonda);
            assert!(c.falha("a", agora));
        }
        assert_eq!(c.espera("a"), Some(Duration::from_secs(2)));
    }
}
