//! Group commit of acks: deliveries that finish while an ack `DELETE` is running wait for it and
//! go together in the next one, so a busy relay pays one commit per batch of acks instead of one
//! per message. An idle relay acks at once (a lone delivery is its own batch).
//!
//! Fencing is unchanged: the batch deletes each `(id, lease_token)` pair, and a delivery whose
//! pair was not deleted (its lease moved on) learns so.
//!
//! An ack batch and the lease renewal ([`renovar`](Confirmacoes::renovar), every lease/4 for
//! every delivery in flight) never run at the same time. Both lock many rows of the saída, each
//! in its plan's order (the array's for a nested loop over the primary key, the table's for a
//! hash join, and the planner picks by the array's size), and rows being acked are still in
//! flight, so the two statements could each hold a row the other waits for: PostgreSQL breaks
//! such a deadlock only after `deadlock_timeout` (1 s by default) by failing one of them, and a
//! failed ack batch is retried, so nothing was lost, but every delivery of the relay waited that
//! second (three times in one run of the bench's end-to-end section). Taking turns costs
//! the acks at most one renewal statement (a few milliseconds every lease/4).

use std::collections::HashSet;
use std::sync::{Arc, Mutex};

use sqlx::Pool;
use tokio::sync::oneshot;

use crate::banco::Banco;

type Resposta = Result<bool, String>;

#[derive(Default)]
struct Estado {
    pendentes: Vec<(i64, i64, oneshot::Sender<Resposta>)>,
    /// A task is running batches (`esvaziar`): new acks only queue and wait.
    esvaziando: bool,
}

/// The acks waiting for the next batch, shared by one relay's deliveries.
#[derive(Default)]
pub(crate) struct Confirmacoes {
    estado: Mutex<Estado>,
    /// Held while an ack batch or the lease renewal runs: they take turns.
    vez_no_banco: tokio::sync::Mutex<()>,
}

/// Hands the turn back and fails the queued acks (their waiters retry, and one of them starts
/// the next run) if the task running the batches ends without emptying the queue: it panicked,
/// or the runtime is shutting down.
struct Vez<'a>(&'a Confirmacoes);

impl Drop for Vez<'_> {
    fn drop(&mut self) {
        let mut estado = self.0.estado.lock().expect("acks lock");
        if estado.esvaziando {
            estado.esvaziando = false;
            estado.pendentes.clear();
        }
    }
}

impl Confirmacoes {
    /// Deletes the delivered row `id` if its lease `token` is still ours; `Ok(false)` when it
    /// was not (fenced). Batched with the acks of concurrent deliveries.
    ///
    /// The batches run in a task of their own, started by the ack that found no run going, so a
    /// delivery that is cancelled while it waits (an aborted delivery, a lease lost) takes only
    /// its own answer with it: the batch it was in, and the acks queued behind it, still run.
    pub(crate) async fn confirmar<DB: Banco>(
        self: &Arc<Self>,
        pool: &Pool<DB>,
        id: i64,
        token: i64,
    ) -> Result<bool, sqlx::Error> {
        let (enviar, receber) = oneshot::channel();
        let comecar = {
            let mut estado = self.estado.lock().expect("acks lock");
            estado.pendentes.push((id, token, enviar));
            !std::mem::replace(&mut estado.esvaziando, true)
        };
        if comecar {
            tokio::spawn(Arc::clone(self).esvaziar(pool.clone()));
        }
        match receber.await {
            Ok(Ok(apagada)) => Ok(apagada),
            Ok(Err(erro)) => Err(sqlx::Error::Protocol(format!("batched ack failed: {erro}"))),
            Err(_) => Err(sqlx::Error::Protocol(
                "the task running the ack batches ended before this ack's batch ran (it \
                 panicked, or the runtime is shutting down)"
                    .into(),
            )),
        }
    }

    /// Runs ack batches until the queue is empty, each with every ack queued when it starts.
    async fn esvaziar<DB: Banco>(self: Arc<Self>, pool: Pool<DB>) {
        let _vez = Vez(&self);
        loop {
            let lote = {
                let mut estado = self.estado.lock().expect("acks lock");
                if estado.pendentes.is_empty() {
                    // Hand the turn back under the same lock that saw the queue empty, so an
                    // ack queued after this point starts a run of its own.
                    estado.esvaziando = false;
                    break;
                }
                std::mem::take(&mut estado.pendentes)
            };
            let pares: Vec<(i64, i64)> = lote.iter().map(|(id, token, _)| (*id, *token)).collect();
            let resultado = {
                let _vez = self.vez_no_banco.lock().await;
                DB::confirmar_lote(&pool, &pares).await
            };
            match resultado {
                Ok(apagados) => {
                    let apagados: HashSet<i64> = apagados.into_iter().collect();
                    for (id, _, enviar) in lote {
                        let _ = enviar.send(Ok(apagados.contains(&id)));
                    }
                }
                Err(erro) => {
                    let erro = erro.to_string();
                    for (_, _, enviar) in lote {
                        let _ = enviar.send(Err(erro.clone()));
                    }
                }
            }
        }
    }

    /// Renews the leases of `pares` for `lease_ms` (fenced by token; how many were renewed), in
    /// turn with the ack batches.
    pub(crate) async fn renovar<DB: Banco>(
        &self,
        pool: &Pool<DB>,
        pares: &[(i64, i64)],
        lease_ms: i64,
    ) -> Result<u64, sqlx::Error> {
        let _vez = self.vez_no_banco.lock().await;
        DB::renovar_leases(pool, pares, lease_ms).await
    }
}

#[cfg(all(test, feature = "sqlite"))]
mod testes {
    use std::time::Duration;

    use super::*;

    /// An empty saída on a SQLite file of the test's own.
    async fn saida() -> (tempfile::TempDir, sqlx::SqlitePool) {
        let dir = tempfile::tempdir().expect("temp dir");
        let pool = crate::banco::sqlite::abrir(dir.path().join("saida.db"))
            .await
            .expect("open SQLite");
        crate::migrar(&pool).await.expect("migrate");
        (dir, pool)
    }

    /// The delivery whose ack started the run of batches is cancelled while its batch waits
    /// for the database: the acks queued behind it still run and get their answer (before,
    /// they failed with "cancelled before it ran" and their messages were delivered again).
    #[tokio::test]
    async fn uma_entrega_cancelada_nao_leva_as_confirmacoes_do_lote() {
        let (_dir, pool) = saida().await;
        let confirmacoes = Arc::new(Confirmacoes::default());
        let vez = confirmacoes.vez_no_banco.lock().await;
        let confirmar = |id: i64| {
            let (confirmacoes, pool) = (Arc::clone(&confirmacoes), pool.clone());
            tokio::spawn(async move { confirmacoes.confirmar(&pool, id, 7).await })
        };
        let primeira = confirmar(1);
        tokio::time::sleep(Duration::from_millis(50)).await;
        let seguintes = [confirmar(2), confirmar(3)];
        tokio::time::sleep(Duration::from_millis(50)).await;
        primeira.abort();
        assert!(primeira.await.expect_err("aborted").is_cancelled());
        drop(vez);
        for seguinte in seguintes {
            let resposta = seguinte.await.expect("ack task");
            assert!(
                matches!(resposta, Ok(false)),
                "an ack queued behind a cancelled one: {resposta:?}"
            );
        }
    }

    #[tokio::test]
    async fn renovacao_e_confirmacoes_se_revezam() {
        let (_dir, pool) = saida().await;
        let confirmacoes = Arc::new(Confirmacoes::default());
        // An ack batch (or a renewal) holds the turn: the other waits for it.
        let vez = confirmacoes.vez_no_banco.lock().await;
        let renovacao = tokio::spawn({
            let (confirmacoes, pool) = (Arc::clone(&confirmacoes), pool.clone());
            async move { confirmacoes.renovar(&pool, &[(1, 7)], 6_000).await }
        });
        let confirmacao = tokio::spawn({
            let (confirmacoes, pool) = (Arc::clone(&confirmacoes), pool.clone());
            async move { confirmacoes.confirmar(&pool, 1, 7).await }
        });
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert!(
            !renovacao.is_finished(),
            "the renewal ran during another's turn"
        );
        assert!(
            !confirmacao.is_finished(),
            "the ack ran during another's turn"
        );
        drop(vez);
        let renovadas = renovacao.await.expect("renewal task").expect("renewal");
        assert_eq!(renovadas, 0, "no such row to renew");
        let apagada = confirmacao.await.expect("ack task").expect("ack");
        assert!(!apagada, "no such row to delete");
    }
}
