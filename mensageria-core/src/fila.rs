//! The saída's backlog as gauges: how many rows of each of this app's tipos wait (pending or in
//! flight) and how old the oldest one is. The relay measures it ([`operacoes::medir_backlog`])
//! with its heartbeat (every 15 s by default): one grouped query over its own tipos, never over
//! other apps' rows.
//!
//! Gauges (label `tipo`): `mensageria_backlog` and `mensageria_backlog_oldest_age_seconds`.

use sqlx::Pool;

use crate::banco::Banco;
use crate::operacoes;

/// Measures and sets the gauges; a database error only skips this reading.
pub(crate) async fn publicar<DB: Banco>(pool: &Pool<DB>, tipos: &[&str]) {
    match operacoes::medir_backlog(pool, tipos).await {
        Ok(medidas) => {
            for m in medidas {
                metrics::gauge!("mensageria_backlog", "tipo" => m.tipo.clone())
                    .set(m.linhas as f64);
                metrics::gauge!("mensageria_backlog_oldest_age_seconds", "tipo" => m.tipo)
                    .set(m.idade_segundos.max(0.0));
            }
        }
        Err(erro) => {
            tracing::warn!(
                error = %erro,
                "mensageria relay: could not measure the backlog for the gauges (they keep their \
                 last values); the next heartbeat tries again"
            );
        }
    }
}
