//! A short linger, only while the receptor is busy: a batch that opens while a batch request of
//! its route is already out ([`PEDIDOS_EM_VOO`]) stays open until that request is answered (or
//! the batch is full, or [`ESPERA_MAXIMA`] has passed), and then leaves with every delivery that
//! joined it meanwhile.
//!
//! Without it, each claim's rows left at once in a batch of their own: under a steady stream of
//! enqueues the relay claims every few milliseconds, so a receptor got a request, and paid a
//! transaction, for every 15 to 20 events while earlier requests were still being applied. The
//! receptor cannot start those sooner than it finishes the ones it has, so the events wait for
//! it either way: waiting on this side, together, costs the receptor one transaction instead of
//! several. An idle route (no batch request out) never waits: a lone event, or the first batch
//! after a pause, leaves as before.
//!
//! Measured (bench section 2, `--rapido`, two interleaved pairs of runs): with producers, 17.7
//! and 17.6 events per receiving transaction before, 30.4 and 30.5 with it; CPU per event over
//! the baseline's CPU per transaction 3.49 and 4.01 before, 3.20 and 3.41 with it; commit →
//! effect p50 at half of the peak 4.51 and 4.50 ms before, 5.29 and 3.60 with it (the
//! machine's noise). With two requests out before lingering, batches did not grow (16.9): one
//! request is what the receptor has out at a time under this load. A 3 ms cap gave 20.9.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::Notify;
use tokio::time::Instant;

/// How many batch requests of one route may be out before a new batch lingers.
pub(super) const PEDIDOS_EM_VOO: usize = 1;

/// The longest a batch lingers for a busy route (then it leaves with what it has).
pub(super) const ESPERA_MAXIMA: Duration = Duration::from_millis(10);

/// The batch requests out on each route of a destination, shared by its clones.
#[derive(Default)]
pub(super) struct Ocupacoes(Mutex<HashMap<String, Arc<Ocupacao>>>);

impl Ocupacoes {
    /// The state of `rota` (created on first use).
    pub(super) fn de(&self, rota: &str) -> Arc<Ocupacao> {
        let mut rotas = self.0.lock().expect("busy routes");
        if let Some(ocupacao) = rotas.get(rota) {
            return Arc::clone(ocupacao);
        }
        let ocupacao = Arc::new(Ocupacao::default());
        rotas.insert(rota.to_owned(), Arc::clone(&ocupacao));
        ocupacao
    }
}

/// The batch requests out on one route, and the signal that one came back (or that a lingering
/// batch filled up).
#[derive(Default)]
pub(super) struct Ocupacao {
    pedidos: AtomicUsize,
    mudou: Notify,
}

impl Ocupacao {
    /// Counts a batch request as out until the returned guard is dropped.
    pub(super) fn pedido(self: &Arc<Self>) -> Pedido {
        self.pedidos.fetch_add(1, Ordering::AcqRel);
        Pedido(Arc::clone(self))
    }

    /// Wakes the batches lingering on this route to look again (one of them filled up).
    pub(super) fn avisar(&self) {
        self.mudou.notify_waiters();
    }

    /// Lingers while the route is busy and `aberto()` (the batch still takes deliveries): until
    /// fewer than [`PEDIDOS_EM_VOO`] batch requests are out, or `ate`.
    pub(super) async fn esperar_vez(&self, ate: Instant, aberto: impl Fn() -> bool) {
        loop {
            let mudou = self.mudou.notified();
            tokio::pin!(mudou);
            mudou.as_mut().enable();
            if self.pedidos.load(Ordering::Acquire) < PEDIDOS_EM_VOO || !aberto() {
                return;
            }
            tokio::select! {
                _ = mudou => {}
                _ = tokio::time::sleep_until(ate) => return,
            }
        }
    }
}

/// A batch request out on a route; dropped when it is answered (or abandoned).
pub(super) struct Pedido(Arc<Ocupacao>);

impl Drop for Pedido {
    fn drop(&mut self) {
        self.0.pedidos.fetch_sub(1, Ordering::AcqRel);
        self.0.mudou.notify_waiters();
    }
}

#[cfg(test)]
mod testes {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn uma_rota_ociosa_nao_espera() {
        let ocupacao = Arc::new(Ocupacao::default());
        drop(ocupacao.pedido());
        let inicio = Instant::now();
        ocupacao
            .esperar_vez(inicio + Duration::from_secs(1), || true)
            .await;
        assert_eq!(inicio.elapsed(), Duration::ZERO, "no request out: idle");
    }

    #[tokio::test(start_paused = true)]
    async fn ocupada_espera_uma_resposta_e_no_maximo_o_prazo() {
        let ocupacao = Arc::new(Ocupacao::default());
        let pedidos: Vec<_> = (0..PEDIDOS_EM_VOO).map(|_| ocupacao.pedido()).collect();
        let inicio = Instant::now();
        ocupacao.esperar_vez(inicio + ESPERA_MAXIMA, || true).await;
        assert_eq!(
            inicio.elapsed(),
            ESPERA_MAXIMA,
            "busy: lingers until the deadline"
        );

        let inicio = Instant::now();
        let respondido = {
            let ocupacao = Arc::clone(&ocupacao);
            tokio::spawn(async move {
                tokio::time::sleep(Duration::from_millis(3)).await;
                drop(pedidos);
                drop(ocupacao);
            })
        };
        ocupacao.esperar_vez(inicio + ESPERA_MAXIMA, || true).await;
        assert_eq!(
            inicio.elapsed(),
            Duration::from_millis(3),
            "an answer ends the linger"
        );
        respondido.await.unwrap();
    }

    #[tokio::test(start_paused = true)]
    async fn um_lote_cheio_nao_espera() {
        let ocupacao = Arc::new(Ocupacao::default());
        let _pedidos: Vec<_> = (0..PEDIDOS_EM_VOO).map(|_| ocupacao.pedido()).collect();
        let inicio = Instant::now();
        ocupacao.esperar_vez(inicio + ESPERA_MAXIMA, || false).await;
        assert_eq!(inicio.elapsed(), Duration::ZERO);
    }
}
