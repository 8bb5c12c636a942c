//! Group commit of acks: deliveries that finish while an ack `DELETE` is running wait for it and
//! go together in the next one, so a busy relay pays one commit per batch of acks instead of one
//! per message. An idle relay acks at once (a lone delivery is its own batch).
//!
//! Fencing is unchanged: the batch deletes each `(id, lease_token)` pair, and a delivery whose
//! pair was not deleted (its lease moved on) learns so.
//!
//! An ack batch and the lease renewal (`instancia::vigiar`, every lease/4 for every delivery
//! in flight) run side by side. Both lock many rows of the saída, and rows being
//! acked are still in flight, so both statements lock their rows in one order, the primary
//! key's (`SQL_CONFIRMAR`, `SQL_RENOVAR` in `banco/postgres.rs`): two statements that share rows
//! wait for each other at the first shared row and never each hold a row the other waits for.
//! Left to their plans they locked in the order of their join, and PostgreSQL broke the
//! deadlock after `deadlock_timeout` (1 s) by failing one; they took turns on one lock instead,
//! so a renewal stuck on a dead connection held back every ack of the relay.

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
            match DB::confirmar_lote(&pool, &pares).await {
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
}

#[cfg(all(test, feature = "postgres", feature = "teste"))]
mod testes {
    use std::time::Duration;

    use super::*;
    use crate::banco::interno::BancoInterno;
    use crate::banco::postgres::para_testes::{so_arrendadas, travar};
    use crate::teste::PgIsolado;

    /// The delivery whose ack started the run of batches is cancelled while its batch waits
    /// for the database: the acks queued behind it still run and get their answer (before,
    /// they failed with "cancelled before it ran" and their messages were delivered again).
    #[tokio::test]
    async fn uma_entrega_cancelada_nao_leva_as_confirmacoes_do_lote() {
        let isolado = PgIsolado::novo().await.expect("schema");
        let pool = isolado.pool().clone();
        so_arrendadas(&pool, 3).await;
        let trava = travar(&pool, 1).await;
        let confirmacoes = Arc::new(Confirmacoes::default());
        let confirmar = |id: i64| {
            let (confirmacoes, pool) = (Arc::clone(&confirmacoes), pool.clone());
            tokio::spawn(async move { confirmacoes.confirmar(&pool, id, 7).await })
        };
        let primeira = confirmar(1);
        tokio::time::sleep(Duration::from_millis(100)).await;
        let seguintes = [confirmar(2), confirmar(3)];
        tokio::time::sleep(Duration::from_millis(50)).await;
        primeira.abort();
        assert!(primeira.await.expect_err("aborted").is_cancelled());
        trava.rollback().await.expect("release the row");
        for seguinte in seguintes {
            let resposta = seguinte.await.expect("ack task");
            assert!(
                matches!(resposta, Ok(true)),
                "an ack queued behind a cancelled one: {resposta:?}"
            );
        }
        isolado.fechar().await.expect("drop the schema");
    }

    /// A lease renewal stuck on a row (here another transaction's lock; in the field a dead
    /// connection) does not hold back the acks of other rows: they used to take turns on one
    /// lock, so every delivery of the relay waited for the renewal.
    #[tokio::test]
    async fn uma_renovacao_presa_nao_segura_as_confirmacoes() {
        let isolado = PgIsolado::novo().await.expect("schema");
        let pool = isolado.pool().clone();
        so_arrendadas(&pool, 3).await;
        let trava = travar(&pool, 1).await;
        let confirmacoes = Arc::new(Confirmacoes::default());
        let renovacao = tokio::spawn({
            let pool = pool.clone();
            async move {
                <sqlx::Postgres as BancoInterno>::renovar_leases(&pool, &[(1, 7), (2, 7)], 60_000)
                    .await
            }
        });
        tokio::time::sleep(Duration::from_millis(100)).await;
        let confirmacao =
            tokio::time::timeout(Duration::from_secs(3), confirmacoes.confirmar(&pool, 3, 7)).await;
        assert!(
            matches!(confirmacao, Ok(Ok(true))),
            "the ack of another row waited for the stuck renewal: {confirmacao:?}"
        );
        // Row 2 too, though the renewal names it: the renewal locks in id order and waits at 1.
        let confirmacao =
            tokio::time::timeout(Duration::from_secs(3), confirmacoes.confirmar(&pool, 2, 7)).await;
        assert!(
            matches!(confirmacao, Ok(Ok(true))),
            "the ack of a row the renewal had not reached: {confirmacao:?}"
        );
        assert!(!renovacao.is_finished(), "the renewal was not held");
        trava.rollback().await.expect("release the row");
        let renovadas = renovacao.await.expect("renewal task").expect("renewal");
        assert_eq!(renovadas, 1, "row 1 renewed; row 2 was acked meanwhile");
        isolado.fechar().await.expect("drop the schema");
    }

    /// Ack batches and renewals over the same rows, each listing them in its own order (the
    /// array order a nested loop follows): both lock in id order, so neither waits for
    /// PostgreSQL's deadlock detector (a failed statement, after `deadlock_timeout`).
    #[tokio::test]
    async fn confirmacoes_e_renovacoes_nos_mesmos_registros_sem_impasse() {
        let isolado = PgIsolado::novo().await.expect("schema");
        let pool = isolado.pool().clone();
        for rodada in 0..20 {
            so_arrendadas(&pool, 200).await;
            let crescente: Vec<(i64, i64)> = (1..=200).map(|id| (id, 7)).collect();
            let mut decrescente = crescente.clone();
            decrescente.reverse();
            let (apagados, renovadas) = tokio::join!(
                <sqlx::Postgres as BancoInterno>::confirmar_lote(&pool, &decrescente),
                <sqlx::Postgres as BancoInterno>::renovar_leases(&pool, &crescente, 60_000),
            );
            let apagados = apagados.unwrap_or_else(|erro| panic!("round {rodada}: ack: {erro}"));
            let renovadas =
                renovadas.unwrap_or_else(|erro| panic!("round {rodada}: renewal: {erro}"));
            assert_eq!(apagados.len(), 200, "round {rodada}: every row acked");
            assert!(renovadas <= 200);
        }
        isolado.fechar().await.expect("drop the schema");
    }
}
