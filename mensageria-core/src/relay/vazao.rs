//! Backpressure: how many deliveries of each tipo the relay keeps in flight, adapted to what the
//! destination answers (additive increase, multiplicative decrease, as TCP does).
//!
//! A tipo starts at the relay's `concorrencia`. A delivery that the destination refused for
//! overload ([`FalhaEnvio::Sobrecarga`](crate::FalhaEnvio::Sobrecarga): a receptor that had no
//! database connection in time, a `429`) cuts the tipo's limit to [`CORTE`] of itself, once per
//! round: only a
//! delivery that started after the last cut can cut it again (the refusals of deliveries sent
//! before the cut are the same signal, as TCP counts one loss per window); every other answer
//! raises it by `1 / limit`, so by about one per round of deliveries, back up to `concorrencia`.
//! Without overload nothing changes: the limit stays at its top.
//!
//! Before, a receptor whose pool was exhausted queued every request until it outlived the
//! relay's timeout: the relay counted a failure, sent it again, and the receptor applied the
//! first copy anyway (121–126 duplicate deliveries for 300 events on a slow database link).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use tokio::time::Instant;

/// What a cut keeps of the limit: 0.7, as TCP CUBIC does, rather than Reno's half, which left
/// a receptor of 8 connections with 4 requests at a time after a cut from 8.
pub(crate) const CORTE: f64 = 0.7;

#[derive(Debug)]
struct Vazao {
    /// Deliveries of the tipo allowed in flight (fractional: it grows by `1 / limite`).
    limite: f64,
    em_voo: usize,
    ultimo_corte: Option<Instant>,
}

/// The in-flight limits of every tipo of one relay.
#[derive(Debug)]
pub(crate) struct Vazoes {
    maximo: usize,
    tipos: HashMap<String, Vazao>,
}

impl Vazoes {
    /// Limits that start (and top out) at `maximo` deliveries per tipo.
    pub(crate) fn new(maximo: usize) -> Self {
        Self {
            maximo: maximo.max(1),
            tipos: HashMap::new(),
        }
    }

    fn vazao(&mut self, tipo: &str) -> &mut Vazao {
        let maximo = self.maximo as f64;
        self.tipos.entry(tipo.to_owned()).or_insert(Vazao {
            limite: maximo,
            em_voo: 0,
            ultimo_corte: None,
        })
    }

    /// How many more deliveries of `tipo` may start now: unbounded while its limit is at the
    /// top (the relay's own `concorrencia` bounds it then, and a one-shot round may claim its
    /// whole `lote`), its room under the limit once a destination's overload has cut it.
    pub(crate) fn folga(&self, tipo: &str) -> usize {
        match self.tipos.get(tipo) {
            Some(vazao) if (vazao.limite as usize) < self.maximo => {
                (vazao.limite as usize).saturating_sub(vazao.em_voo)
            }
            _ => usize::MAX,
        }
    }

    /// The tipo's current limit.
    #[cfg(test)]
    pub(crate) fn limite(&self, tipo: &str) -> usize {
        self.tipos
            .get(tipo)
            .map_or(self.maximo, |vazao| vazao.limite as usize)
    }

    /// Whether some tipo has deliveries in flight and no room for more: one of them ending
    /// lets the relay claim again.
    pub(crate) fn algum_no_limite(&self) -> bool {
        self.tipos.values().any(|vazao| {
            let limite = vazao.limite as usize;
            limite < self.maximo && vazao.em_voo > 0 && vazao.em_voo >= limite
        })
    }

    /// A delivery of `tipo` got an answer that was not an overload.
    pub(crate) fn aceita(&mut self, tipo: &str) {
        let maximo = self.maximo as f64;
        let vazao = self.vazao(tipo);
        vazao.limite = (vazao.limite + 1.0 / vazao.limite).min(maximo);
    }

    /// A delivery of `tipo` that started at `iniciada` was refused for overload at `agora`:
    /// the new limit, when this answer cut it.
    pub(crate) fn sobrecarga(
        &mut self,
        tipo: &str,
        iniciada: Instant,
        agora: Instant,
    ) -> Option<usize> {
        let vazao = self.vazao(tipo);
        if vazao.ultimo_corte.is_some_and(|corte| iniciada <= corte) {
            return None;
        }
        vazao.ultimo_corte = Some(agora);
        vazao.limite = (vazao.limite * CORTE).max(1.0);
        Some(vazao.limite as usize)
    }
}

/// One delivery of a tipo in flight, counted from its claim until it is dropped (ended,
/// cancelled or panicked alike).
pub(crate) struct Vaga {
    vazoes: Arc<Mutex<Vazoes>>,
    tipo: String,
    /// When it was claimed.
    iniciada: Instant,
}

impl Vaga {
    pub(crate) fn ocupar(vazoes: &Arc<Mutex<Vazoes>>, tipo: &str) -> Self {
        vazoes.lock().expect("in-flight limits").vazao(tipo).em_voo += 1;
        Self {
            vazoes: Arc::clone(vazoes),
            tipo: tipo.to_owned(),
            iniciada: Instant::now(),
        }
    }

    /// The destination answered this delivery, and not with an overload: the tipo's limit
    /// rises.
    pub(crate) fn aceita(&self) {
        self.vazoes
            .lock()
            .expect("in-flight limits")
            .aceita(&self.tipo);
    }

    /// The destination refused this delivery for overload, now: the tipo's new limit, when
    /// this answer cut it.
    pub(crate) fn sobrecarga(&self) -> Option<usize> {
        self.vazoes.lock().expect("in-flight limits").sobrecarga(
            &self.tipo,
            self.iniciada,
            Instant::now(),
        )
    }
}

impl Drop for Vaga {
    fn drop(&mut self) {
        if let Ok(mut vazoes) = self.vazoes.lock() {
            let vazao = vazoes.vazao(&self.tipo);
            vazao.em_voo = vazao.em_voo.saturating_sub(1);
        }
    }
}

#[cfg(test)]
mod testes {
    use std::time::Duration;

    use super::*;

    #[test]
    fn sem_sobrecarga_o_limite_fica_no_topo() {
        let mut vazoes = Vazoes::new(128);
        for _ in 0..1000 {
            vazoes.aceita("t");
        }
        assert_eq!(vazoes.limite("t"), 128);
        assert_eq!(
            vazoes.folga("t"),
            usize::MAX,
            "at the top, concorrencia bounds it"
        );
    }

    #[test]
    fn uma_sobrecarga_corta_pela_metade_uma_vez_por_rodada() {
        let mut vazoes = Vazoes::new(128);
        let inicio = Instant::now();
        let ms = |n| inicio + Duration::from_millis(n);
        assert_eq!(vazoes.sobrecarga("t", inicio, ms(100)), Some(89));
        // Refusals of deliveries sent before that cut are the same signal.
        assert_eq!(vazoes.sobrecarga("t", ms(50), ms(150)), None);
        assert_eq!(vazoes.sobrecarga("t", ms(100), ms(300)), None);
        // One sent after it cuts again.
        assert_eq!(vazoes.sobrecarga("t", ms(101), ms(400)), Some(62));
        assert_eq!(vazoes.limite("outro"), 128, "other tipos keep theirs");
        for n in 0..20 {
            vazoes.sobrecarga("t", ms(1000 + 2 * n), ms(1001 + 2 * n));
        }
        assert_eq!(vazoes.limite("t"), 1, "never below one");
    }

    #[test]
    fn sobe_de_um_por_rodada_ate_o_topo() {
        let mut vazoes = Vazoes::new(20);
        vazoes.sobrecarga("t", Instant::now(), Instant::now());
        assert_eq!(vazoes.limite("t"), 14);
        // About one per round of `limit` answers.
        for _ in 0..14 {
            vazoes.aceita("t");
        }
        assert_eq!(vazoes.limite("t"), 14, "14.97 after one round of 14");
        for _ in 0..2 {
            vazoes.aceita("t");
        }
        assert_eq!(vazoes.limite("t"), 15);
        for _ in 0..200 {
            vazoes.aceita("t");
        }
        assert_eq!(vazoes.limite("t"), 20, "never above concorrencia");
    }

    #[test]
    fn as_vagas_contam_ate_serem_soltas() {
        let vazoes = Arc::new(Mutex::new(Vazoes::new(4)));
        vazoes
            .lock()
            .unwrap()
            .sobrecarga("t", Instant::now(), Instant::now());
        let a = Vaga::ocupar(&vazoes, "t");
        assert_eq!(vazoes.lock().unwrap().folga("t"), 1);
        let b = Vaga::ocupar(&vazoes, "t");
        assert_eq!(vazoes.lock().unwrap().folga("t"), 0);
        drop((a, b));
        assert_eq!(vazoes.lock().unwrap().folga("t"), 2);
    }
}
