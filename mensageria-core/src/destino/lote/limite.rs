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
//!   [`Destino::com_lote_maximo`](crate::destino::Destino::com_lote_maximo): a fast receptor is back to
//!   full batches after a few answers (2, 4, 8, …, 64), within milliseconds under load.
//!
//! A receptor at 250 ms per event thus gets one or two events per request, as many requests
//! at once as the relay has deliveries in flight, and drains as fast as with one request per
//! event; a receptor at 30 µs per event gets full batches, as before.
//!
//! **The probe.** A route's first batch request tells whether the batch route exists (a 404
//! there switches the destination to one request per event) and how long its events take.
//! While it is out, the route's other deliveries that would open a batch wait for its answer,
//! but never longer than the budget since it left: past that they go alone on the single
//! route, so a delivery never spends more than the budget waiting for another request before
//! its own, which still has the whole timeout (waiting for the whole probe could take two
//! timeouts, past the relay's send timeout). Only a batch request settles the probe: a probe
//! whose opener went alone (nobody joined it) gives it back, and the next batch is the probe.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::Notify;

/// The limit of a route no answer has measured yet.
pub(super) const INICIAL: usize = 2;

/// The budget of one batch is the destination's timeout divided by this.
const FRACAO_DO_TEMPO_LIMITE: u32 = 20;

/// What a destination knows of one route.
struct Rota {
    /// The most events a request on it may carry now.
    limite: usize,
    sonda: Sonda,
}

impl Rota {
    fn nova() -> Self {
        Self {
            limite: INICIAL,
            sonda: Sonda::Nenhuma,
        }
    }
}

/// Where the route's probe stands: its first batch request, which tells whether the batch route
/// exists and how long its events take. Only an answer of the batch route settles it: a single
/// request says nothing of the batch route.
enum Sonda {
    /// No batch request of the route was answered yet: the next batch to open is the probe.
    Nenhuma,
    /// The probe is out since `desde`; `avisar` wakes the deliveries that wait for its answer.
    Fora { desde: Instant, avisar: Arc<Notify> },
    /// The batch route answered: batches open freely.
    Respondida,
}

/// Whether a delivery may open a batch on a route.
pub(super) enum Abrir {
    /// Yes, of at most this many events; with the probe's token when this batch is the route's
    /// probe.
    Sim(usize, Option<Sondagem>),
    /// Not yet: the route's probe is out; wait for its answer, at most this long (what is left
    /// of the budget since the probe left).
    Esperar(tokio::sync::futures::OwnedNotified, Duration),
    /// The route's probe is out and slower than the budget: go alone, on the single route.
    Sozinho,
}

/// The routes of a destination, shared by its clones.
type Rotas = Arc<Mutex<HashMap<String, Rota>>>;

/// What each route of a destination may carry, shared by its clones.
#[derive(Default)]
pub(super) struct Limites(Rotas);

/// The token of a route's probe, carried by its batch. Dropped before the batch route answered
/// (the opener's batch went alone because nobody joined it, or was dropped), it gives the probe
/// back: the route's next batch is its probe, and the deliveries that waited are woken to open
/// it or go.
pub(super) struct Sondagem {
    rotas: Rotas,
    rota: String,
    avisar: Arc<Notify>,
}

impl Drop for Sondagem {
    fn drop(&mut self) {
        let Ok(mut rotas) = self.rotas.lock() else {
            return;
        };
        let minha = rotas.get_mut(&self.rota).filter(|rota| {
            matches!(&rota.sonda, Sonda::Fora { avisar, .. } if Arc::ptr_eq(avisar, &self.avisar))
        });
        if let Some(rota) = minha {
            rota.sonda = Sonda::Nenhuma;
            drop(rotas);
            self.avisar.notify_waiters();
        }
    }
}

impl Limites {
    /// The most events a request on `rota` may carry now (at least 1, at most `maximo`).
    pub(super) fn atual(&self, rota: &str, maximo: usize) -> usize {
        let limite = match self.0.lock().expect("batch limits").get(rota) {
            Some(rota) => rota.limite,
            None => INICIAL,
        };
        limite.clamp(1, maximo.max(1))
    }

    /// Whether a new batch may open on `rota`. Until the batch route has answered, the first
    /// batch to open is the route's probe; while it is out, the deliveries that would open
    /// another wait for its answer, but only for what is left of the budget (a twentieth of
    /// `tempo_limite`) since it left: past that the route is slow anyway, and they go alone.
    /// A waiting delivery thus never spends more than the budget before its own request, which
    /// still has the whole timeout. A probe unanswered after `tempo_limite` is replaced by the
    /// next batch.
    pub(super) fn abrir(&self, rota: &str, maximo: usize, tempo_limite: Duration) -> Abrir {
        let orcamento = tempo_limite / FRACAO_DO_TEMPO_LIMITE;
        let mut rotas = self.0.lock().expect("batch limits");
        let agora = Instant::now();
        if !rotas.contains_key(rota) {
            rotas.insert(rota.to_owned(), Rota::nova());
        }
        let estado = rotas.get_mut(rota).expect("inserted above");
        let limite = estado.limite.clamp(1, maximo.max(1));
        match &estado.sonda {
            Sonda::Respondida => return Abrir::Sim(limite, None),
            Sonda::Fora { desde, avisar } if agora < *desde + orcamento => {
                return Abrir::Esperar(
                    Arc::clone(avisar).notified_owned(),
                    *desde + orcamento - agora,
                );
            }
            Sonda::Fora { desde, .. } if agora < *desde + tempo_limite => return Abrir::Sozinho,
            Sonda::Fora { .. } | Sonda::Nenhuma => {}
        }
        let avisar = Arc::new(Notify::new());
        estado.sonda = Sonda::Fora {
            desde: agora,
            avisar: Arc::clone(&avisar),
        };
        let sondagem = Sondagem {
            rotas: Arc::clone(&self.0),
            rota: rota.to_owned(),
            avisar,
        };
        Abrir::Sim(limite, Some(sondagem))
    }

    /// Records that a request of `eventos` events on `rota` took `levou` to answer (or fail),
    /// with a destination whose timeout is `tempo_limite` and whose batches carry at most
    /// `maximo` events. An answer of the batch route (`do_lote`) settles the route's probe and
    /// wakes the deliveries that waited for it.
    pub(super) fn observar(
        &self,
        rota: &str,
        eventos: usize,
        levou: Duration,
        tempo_limite: Duration,
        maximo: usize,
        do_lote: bool,
    ) {
        let orcamento = tempo_limite / FRACAO_DO_TEMPO_LIMITE;
        let mut rotas = self.0.lock().expect("batch limits");
        if !rotas.contains_key(rota) {
            rotas.insert(rota.to_owned(), Rota::nova());
        }
        let estado = rotas.get_mut(rota).expect("inserted above");
        let novo = proximo(estado.limite, eventos, levou, orcamento, maximo);
        if novo != estado.limite {
            tracing::debug!(
                rota,
                eventos,
                levou_ms = levou.as_millis() as u64,
                limite = novo,
                "mensageria: batch limit of this route changed"
            );
        }
        estado.limite = novo;
        let avisar = match do_lote {
            true => match std::mem::replace(&mut estado.sonda, Sonda::Respondida) {
                Sonda::Fora { avisar, .. } => Some(avisar),
                Sonda::Nenhuma | Sonda::Respondida => None,
            },
            false => None,
        };
        drop(rotas);
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
        limites.observar("/m2m/a", 2, MS(4_000), Duration::from_secs(10), 64, true);
        assert_eq!(limites.atual("/m2m/a", 64), 1);
        assert_eq!(limites.atual("/m2m/b", 64), INICIAL);
    }

    #[tokio::test]
    async fn o_primeiro_lote_de_uma_rota_abre_sozinho_e_os_outros_esperam_a_resposta() {
        let limites = Limites::default();
        let dez = Duration::from_secs(10);
        let Abrir::Sim(INICIAL, Some(_sonda)) = limites.abrir("/r", 64, dez) else {
            panic!("the route's first batch is not its probe");
        };
        let Abrir::Esperar(avisado, prazo) = limites.abrir("/r", 64, dez) else {
            panic!("a second batch opened while the probe is out");
        };
        // At most the budget, never the whole timeout.
        assert!(prazo <= dez / FRACAO_DO_TEMPO_LIMITE, "{prazo:?}");
        // Another route is not held by this one's probe.
        assert!(matches!(
            limites.abrir("/s", 64, dez),
            Abrir::Sim(INICIAL, Some(_))
        ));
        limites.observar("/r", 2, MS(2), dez, 64, true);
        tokio::time::timeout(Duration::from_secs(1), avisado)
            .await
            .expect("the answer wakes who waited");
        assert!(matches!(limites.abrir("/r", 64, dez), Abrir::Sim(4, None)));
    }

    #[test]
    fn uma_sonda_mais_lenta_que_o_orcamento_manda_os_outros_sozinhos() {
        let limites = Limites::default();
        // A 100 ms timeout: a 5 ms budget.
        let tempo_limite = Duration::from_millis(100);
        let Abrir::Sim(_, Some(_sonda)) = limites.abrir("/r", 64, tempo_limite) else {
            panic!("the route's first batch is not its probe");
        };
        std::thread::sleep(Duration::from_millis(10));
        assert!(matches!(
            limites.abrir("/r", 64, tempo_limite),
            Abrir::Sozinho
        ));
    }

    #[tokio::test]
    async fn um_pedido_sozinho_nao_responde_pela_sonda() {
        let limites = Limites::default();
        let dez = Duration::from_secs(10);
        let Abrir::Sim(_, Some(sonda)) = limites.abrir("/r", 64, dez) else {
            panic!("the route's first batch is not its probe");
        };
        let Abrir::Esperar(avisado, _) = limites.abrir("/r", 64, dez) else {
            panic!("a second batch opened while the probe is out");
        };
        // A single request's answer says nothing of the batch route: the probe is still out.
        limites.observar("/r", 1, MS(1), dez, 64, false);
        assert!(matches!(limites.abrir("/r", 64, dez), Abrir::Esperar(..)));
        // The probe's opener went alone: the probe is given back, who waited is woken, and the
        // next batch is the probe.
        drop(sonda);
        tokio::time::timeout(Duration::from_secs(1), avisado)
            .await
            .expect("giving the probe back wakes who waited");
        assert!(matches!(
            limites.abrir("/r", 64, dez),
            Abrir::Sim(INICIAL, Some(_))
        ));
    }

    #[test]
    fn uma_sonda_sem_resposta_e_substituida_apos_o_tempo_limite() {
        let limites = Limites::default();
        let curto = Duration::from_millis(1);
        let Abrir::Sim(_, Some(_primeira)) = limites.abrir("/r", 64, curto) else {
            panic!("the route's first batch is not its probe");
        };
        std::thread::sleep(Duration::from_millis(5));
        assert!(matches!(
            limites.abrir("/r", 64, curto),
            Abrir::Sim(_, Some(_))
        ));
    }
}
