//! A circuit per tipo: a destination that keeps failing gets one probe per cool-down, not a
//! retry storm, while the other tipos keep flowing.

use std::collections::HashMap;
use std::time::Duration;

use tokio::time::Instant;

const ESPERA_INICIAL: Duration = Duration::from_secs(1);
const ESPERA_MAXIMA: Duration = Duration::from_secs(60);

#[derive(Debug, Default)]
struct Estado {
    falhas_seguidas: u32,
    aberto_ate: Option<Instant>,
    espera: Duration,
    sondando: bool,
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
#[derive(Debug, Default)]
pub(crate) struct Circuitos {
    limiar: u32,
    estados: HashMap<String, Estado>,
}

impl Circuitos {
    pub(crate) fn new(limiar: u32) -> Self {
        Self {
            limiar: limiar.max(1),
            estados: HashMap::new(),
        }
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

    /// When the next blocked circuit reopens for a probe, if any is blocked.
    pub(crate) fn proxima_sonda(&self) -> Option<Instant> {
        self.estados
            .values()
            .filter(|e| !e.sondando)
            .filter_map(|e| e.aberto_ate)
            .min()
    }

    pub(crate) fn sucesso(&mut self, tipo: &str) {
        self.estados.remove(tipo);
    }

    /// Records a temporary failure; returns true when this one opened (or reopened) the circuit.
    pub(crate) fn falha(&mut self, tipo: &str, agora: Instant) -> bool {
        let estado = self.estados.entry(tipo.to_owned()).or_default();
        estado.falhas_seguidas += 1;
        let sonda_falhou = estado.sondando;
        if sonda_falhou || (estado.aberto_ate.is_none() && estado.falhas_seguidas >= self.limiar) {
            estado.espera = if sonda_falhou {
                (estado.espera * 2).min(ESPERA_MAXIMA)
            } else {
                ESPERA_INICIAL
            };
            estado.aberto_ate = Some(agora + estado.espera);
            estado.sondando = false;
            return true;
        }
        false
    }
}

#[cfg(test)]
mod testes {
    use super::*;

    #[test]
    fn abre_no_limiar_sonda_e_fecha_no_sucesso() {
        let t0 = Instant::now();
        let mut c = Circuitos::new(3);
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
        let depois = t0 + Duration::from_secs(1);
        assert_eq!(c.permissao("a", depois), Permissao::Sonda);
        assert_eq!(
            c.permissao("a", depois),
            Permissao::Bloqueado,
            "one probe at a time"
        );
        // The probe fails: the cool-down doubles.
        assert!(c.falha("a", depois));
        assert_eq!(
            c.permissao("a", depois + Duration::from_millis(1500)),
            Permissao::Bloqueado
        );
        assert_eq!(
            c.permissao("a", depois + Duration::from_secs(2)),
            Permissao::Sonda
        );
        c.sucesso("a");
        assert_eq!(c.permissao("a", depois), Permissao::Livre);
    }
}
