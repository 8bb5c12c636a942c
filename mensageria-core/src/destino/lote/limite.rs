//! How many events a batch of one route may carry now: sized to what the receptor takes.
//!
//! A receptor applies a batch's events one after the other in one transaction, so a batch takes
//! about as long as its events' effects together. Each answer of a route (a batch or a single
//! request, delivered or not, a timeout included) tells how long its events took; the route's
//! limit becomes the number of events that fit the **budget**, a twentieth of the destination's
//! timeout (500 ms of the default 10 s), at that pace:
//!
//! - a route starts at [`INICIAL`] events (a batch of the default 64 against a receptor that
//!   takes 250 ms per event would run for 16 s, past the timeout);
//! - an answer that shows fewer events fit lowers the limit at once, down to one event per
//!   request (a timed-out batch of `n` events lowers it to `n` / 20 at most);
//! - an answer that shows more fit raises it to at most twice the events of that answer, up to
//!   [`Destino::com_lote_maximo`](crate::Destino::com_lote_maximo): a fast receptor is back to
//!   full batches after a few answers (2, 4, 8, …, 64), within milliseconds under load.
//!
//! A receptor at 250 ms per event thus gets one or two events per request, as many requests
//! at once as the relay has deliveries in flight, and drains as fast as with one request per
//! event; a receptor at 30 µs per event gets full batches, as before.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::Notify;

/// The limit of a route no answer has measured yet.
pub(super) const INICIAL: usize = 2;

/// The budget of one batch is the destination's timeout divided by this.
const FRACAO_DO_TEMPO_LIMITE: u32 = 20;

/// What a destination knows of one route.
enum Rota {
    /// Its first batch is out: until it is answered (or its timeout has passed), the route's
    /// other deliveries wait for it instead of opening batches of their own.
    Sondando { ate: Instant, avisar: Arc<Notify> },
    /// The most events a request on it may carry now.
    Medida(usize),
}

/// Whether a delivery may open a batch on a route.
pub(super) enum Abrir {
    /// Yes, of at most this many events.
    Sim(usize),
    /// Not before the route's first batch is answered: wait for this, at most this long.
    Esperar(tokio::sync::futures::OwnedNotified, Duration),
}

/// What each route of a destination may carry, shared by its clones.
#[derive(Default)]
pub(super) struct Limites(Mutex<HashMap<String, Rota>>);

impl Limites {
    /// The most events a request on `rota` may carry now (at least 1, at most `maximo`).
    pub(super) fn atual(&self, rota: &str, maximo: usize) -> usize {
        let limite = match self.0.lock().expect("batch limits").get(rota) {
            Some(Rota::Medida(limite)) => *limite,
            Some(Rota::Sondando { .. }) | None => INICIAL,
        };
        limite.clamp(1, maximo.max(1))
    }

    /// Whether a new batch may open on `rota`: on a route no answer has measured, the first
    /// batch (its probe: does the batch route exist, how long do its events take) opens alone;
    /// the deliveries that would open another wait until it is answered, for at most
    /// `tempo_limite` (a probe whose answer never comes is replaced by the next).
    pub(super) fn abrir(&self, rota: &str, maximo: usize, tempo_limite: Duration) -> Abrir {
        let mut limites = self.0.lock().expect("batch limits");
        let agora = Instant::now();
        match limites.get(rota) {
            Some(Rota::Medida(limite)) => Abrir::Sim((*limite).clamp(1, maximo.max(1))),
            Some(Rota::Sondando { ate, avisar }) if *ate > agora => {
                Abrir::Esperar(Arc::clone(avisar).notified_owned(), *ate - agora)
            }
            _ => {
                let sonda = Rota::Sondando {
                    ate: agora + tempo_limite,
                    avisar: Arc::new(Notify::new()),
                };
                limites.insert(rota.to_owned(), sonda);
                Abrir::Sim(INICIAL.clamp(1, maximo.max(1)))
            }
        }
    }

    /// Records that a request of `eventos` events on `rota` took `levou` to answer (or fail),
    /// with a destination whose timeout is `tempo_limite` and whose batches carry at most
    /// `maximo` events; wakes the deliveries that waited for the route's first answer.
    pub(super) fn observar(
        &self,
        rota: &str,
        eventos: usize,
        levou: Duration,
        tempo_limite: Duration,
        maximo: usize,
    ) {
        let orcamento = tempo_limite / FRACAO_DO_TEMPO_LIMITE;
        let mut limites = self.0.lock().expect("batch limits");
        let (atual, avisar) = match limites.get(rota) {
            Some(Rota::Medida(limite)) => (*limite, None),
            Some(Rota::Sondando { avisar, .. }) => (INICIAL, Some(Arc::clone(avisar))),
            None => (INICIAL, None),
        };
        let novo = proximo(atual, eventos, levou, orcamento, maximo);
        if novo != atual {
            tracing::debug!(
                rota,
                eventos,
                levou_ms = levou.as_millis() as u64,
                limite = novo,
                "mensageria: batch limit of this route changed"
            );
        }
        match limites.get_mut(rota) {
            Some(limite) => *limite = Rota::Medida(novo),
            None => {
                limites.insert(rota.to_owned(), Rota::Medida(novo));
            }
        }
        drop(limites);
        if let Some(avisar) = avisar {
            avisar.notify_waiters();
        }
    }
}

/// The limit after an answer of `eventos` events that took `levou`: the events that fit
/// `orcamento` at that answer's pace; lower at once, higher by at most twice `eventos`.
fn proximo(
    atual: usize,
    eventos: usize,
    levou: Duration,
    orcamento: Duration,
    maximo: usize,
) -> usize {
    let maximo = maximo.max(1);
    let eventos = eventos.max(1);
    let segundos = levou.as_secs_f64().max(1e-6);
    let cabem = orcamento.as_secs_f64() * eventos as f64 / segundos;
    // `as` saturates: a huge quotient is `usize::MAX`, clamped below.
    let cabem = (cabem.floor() as usize).clamp(1, maximo);
    if cabem < atual {
        cabem
    } else {
        atual.max(cabem.min(2 * eventos)).min(maximo)
    }
}

#[cfg(test)]
mod testes {
    use super::*;

    const ORCAMENTO: Duration = Duration::from_millis(500);
    const MS: fn(u64) -> Duration = Duration::from_millis;

    #[test]
    fn um_receptor_lento_recebe_um_evento_por_pedido() {
        // Two events at 250 ms each: 500 ms, exactly the budget.
        assert_eq!(proximo(2, 2, MS(500), ORCAMENTO, 64), 2);
        // The same while the receptor's connections are all busy: one per request.
        assert_eq!(proximo(2, 2, MS(4_000), ORCAMENTO, 64), 1);
        // A timed-out batch of 64 (10 s): one per request.
        assert_eq!(proximo(64, 64, MS(10_000), ORCAMENTO, 64), 3);
        assert_eq!(proximo(64, 8, MS(10_000), ORCAMENTO, 64), 1);
    }

    #[test]
    fn um_receptor_rapido_volta_aos_lotes_cheios_dobrando() {
        let mut limite = INICIAL;
        let mut passos = vec![limite];
        while limite < 64 {
            limite = proximo(limite, limite, MS(3), ORCAMENTO, 64);
            passos.push(limite);
        }
        assert_eq!(passos, [2, 4, 8, 16, 32, 64]);
        // A short batch at low load changes nothing; a lone delivery neither.
        assert_eq!(proximo(64, 3, MS(2), ORCAMENTO, 64), 64);
        assert_eq!(proximo(64, 1, MS(1), ORCAMENTO, 64), 64);
        // Never above the destination's maximum, never below 1.
        assert_eq!(proximo(64, 64, Duration::ZERO, ORCAMENTO, 64), 64);
        assert_eq!(proximo(1, 1, MS(60_000), ORCAMENTO, 64), 1);
    }

    #[test]
    fn cada_rota_tem_o_seu_limite() {
        let limites = Limites::default();
        assert_eq!(limites.atual("/m2m/a", 64), INICIAL);
        assert_eq!(limites.atual("/m2m/a", 1), 1);
        limites.observar("/m2m/a", 2, MS(4_000), Duration::from_secs(10), 64);
        assert_eq!(limites.atual("/m2m/a", 64), 1);
        assert_eq!(limites.atual("/m2m/b", 64), INICIAL);
    }

    #[tokio::test]
    async fn o_primeiro_lote_de_uma_rota_abre_sozinho_e_os_outros_esperam_a_resposta() {
        let limites = Limites::default();
        let dez = Duration::from_secs(10);
        assert!(matches!(limites.abrir("/r", 64, dez), Abrir::Sim(INICIAL)));
        let Abrir::Esperar(avisado, prazo) = limites.abrir("/r", 64, dez) else {
            panic!("a second batch opened while the probe is out");
        };
        assert!(prazo <= dez);
        // Another route is not held by this one's probe.
        assert!(matches!(limites.abrir("/s", 64, dez), Abrir::Sim(INICIAL)));
        limites.observar("/r", 2, MS(2), dez, 64);
        tokio::time::timeout(Duration::from_secs(1), avisado)
            .await
            .expect("the answer wakes who waited");
        assert!(matches!(limites.abrir("/r", 64, dez), Abrir::Sim(4)));
    }

    #[test]
    fn uma_sonda_sem_resposta_e_substituida_apos_o_tempo_limite() {
        let limites = Limites::default();
        let curto = Duration::from_millis(1);
        assert!(matches!(limites.abrir("/r", 64, curto), Abrir::Sim(_)));
        std::thread::sleep(Duration::from_millis(5));
        assert!(matches!(limites.abrir("/r", 64, curto), Abrir::Sim(_)));
    }
}
