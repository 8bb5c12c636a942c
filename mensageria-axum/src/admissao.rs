//! Admission to the pool: a receptor whose pool is exhausted says so (`503` `busy`) instead of
//! queueing requests until they outlive the sender's timeout.
//!
//! When every connection of the pool is open and in use, a request that gets no connection
//! within `Config::com_espera_por_conexao` (1 s by default) is refused then, long before the
//! sender's timeout (10 s by default); while the pool can still open a connection, or has one
//! idle, it waits as long as that takes (opening one is slow over a slow link, not a sign of
//! overload).

use std::time::Duration;

use mensageria_core::Banco;
use mensageria_core::sqlx::{Pool, Transaction};

use crate::desfecho::Desfecho;

/// The admission of one router's requests to its pool.
#[derive(Debug)]
pub(crate) struct Admissao {
    espera: Duration,
}

impl Admissao {
    pub(crate) fn new(espera: Duration) -> Self {
        Self { espera }
    }

    /// A transaction of `pool`, or `Desfecho::Ocupado` when the pool is exhausted (see the
    /// module), or `Desfecho::BancoIndisponivel` on a database error (logged).
    pub(crate) async fn abrir<DB: Banco>(
        &self,
        pool: &Pool<DB>,
    ) -> Result<Transaction<'static, DB>, Desfecho> {
        let maximo = pool.options().get_max_connections();
        if pool.num_idle() > 0 || pool.size() < maximo {
            return pool.begin().await.map_err(crate::receber::indisponivel);
        }
        match tokio::time::timeout(self.espera, pool.begin()).await {
            Ok(aberta) => aberta.map_err(crate::receber::indisponivel),
            Err(_) => Err(ocupado(pool, self.espera)),
        }
    }
}

/// Logs and counts a `busy` answer.
fn ocupado<DB: Banco>(pool: &Pool<DB>, espera: Duration) -> Desfecho {
    tracing::warn!(
        pool_size = pool.size(),
        waited_ms = espera.as_millis() as u64,
        "mensageria receptor: every database connection in use; answered busy (503), nothing \
         applied"
    );
    metrics::counter!("mensageria_receptor_busy_total").increment(1);
    Desfecho::Ocupado
}
