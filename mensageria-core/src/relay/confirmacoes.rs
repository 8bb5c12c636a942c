//! Group commit of acks: deliveries that finish while an ack `DELETE` is running wait for it and
//! go together in the next one, so a busy relay pays one commit per batch of acks instead of one
//! per message. An idle relay acks at once (a lone delivery is its own batch).
//!
//! Fencing is unchanged: the batch deletes each `(id, lease_token)` pair, and a delivery whose
//! pair was not deleted (its lease moved on) learns so.

use std::collections::HashSet;
use std::sync::Mutex;

use sqlx::Pool;
use tokio::sync::oneshot;

use crate::banco::Banco;

type Resposta = Result<bool, String>;

#[derive(Default)]
struct Estado {
    pendentes: Vec<(i64, i64, oneshot::Sender<Resposta>)>,
    /// Some delivery is running batches: the others only queue and wait.
    esvaziando: bool,
}

/// The acks waiting for the next batch, shared by one relay's deliveries.
#[derive(Default)]
pub(crate) struct Confirmacoes {
    estado: Mutex<Estado>,
}

/// If the delivery running the batches is cancelled mid-way (a timeout, an aborted relay), hands
/// the turn back and fails the queued acks (their waiters retry, and one of them runs the next
/// batch) instead of leaving them waiting for nobody.
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
    pub(crate) async fn confirmar<DB: Banco>(
        &self,
        pool: &Pool<DB>,
        id: i64,
        token: i64,
    ) -> Result<bool, sqlx::Error> {
        let (enviar, receber) = oneshot::channel();
        let minha_vez = {
            let mut estado = self.estado.lock().expect("acks lock");
            estado.pendentes.push((id, token, enviar));
            !std::mem::replace(&mut estado.esvaziando, true)
        };
        if minha_vez {
            let _vez = Vez(self);
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
                let pares: Vec<(i64, i64)> =
                    lote.iter().map(|(id, token, _)| (*id, *token)).collect();
                match DB::confirmar_lote(pool, &pares).await {
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
        match receber.await {
            Ok(Ok(apagada)) => Ok(apagada),
            Ok(Err(erro)) => Err(sqlx::Error::Protocol(format!("batched ack failed: {erro}"))),
            Err(_) => Err(sqlx::Error::Protocol(
                "batched ack cancelled before it ran".into(),
            )),
        }
    }
}
