//! Opt-in LISTEN/NOTIFY wake-ups (PostgreSQL), for saídas written by **other** processes.
//!
//! A relay is woken at once by enqueues in its own process ([`acordar`](super::acordar), which
//! [`enfileirar`](crate::enfileirar) calls) and otherwise polls every
//! [`Config::com_intervalo`](super::Config::com_intervalo). When the senders are other
//! processes (a web tier enqueues, a worker tier relays) and the poll interval is too slow for
//! you, install a trigger that notifies on every insert and have the relay listen:
//!
//! ```no_run
//! # async fn exemplo(pool: sqlx::PgPool) -> Result<(), mensageria_core::Erro> {
//! use mensageria_core::relay::{Config, Relay, notificacoes};
//!
//! notificacoes::instalar(&pool).await?; // once, by the schema's owner (like `migrar`)
//! let relay = Relay::new(pool, Config::new("emissor").com_notificacoes(true)).spawn()?;
//! # Ok(()) }
//! ```
//!
//! # What it costs
//!
//! Not the default, because it taxes every enqueue. A transaction that has called
//! `pg_notify` takes a database-wide lock while it commits (PostgreSQL queues notifications
//! in commit order), so notifying enqueues commit one at a time. Measured on the reference
//! machine (2 cores, PostgreSQL 15, `pgbench -c16 -j2 -T8`, a one-row insert transaction with
//! and without `pg_notify`): 6.5–7.1k tx/s without, 2.7k tx/s with, **−60%** at 16 clients;
//! at one client the difference is small. The trigger is per statement, so a transaction that
//! enqueues many rows in one statement notifies once, and PostgreSQL folds identical
//! notifications of one transaction into one.
//!
//! Correctness never depends on it: a lost notification (the listening connection dropped,
//! the relay restarted) only means the row waits for the next poll.

use sqlx::PgPool;

use crate::banco::postgres;
use crate::erro::Erro;

/// Installs (or replaces) the `AFTER INSERT … FOR EACH STATEMENT` trigger on the saída of the
/// pool's schema that notifies the relays listening with
/// [`Config::com_notificacoes`](super::Config::com_notificacoes). Needs the right to create
/// triggers on the table (the owner's, like [`migrar`](crate::migrar)). Idempotent.
pub async fn instalar(pool: &PgPool) -> Result<(), Erro> {
    Ok(postgres::instalar_notificacoes(pool).await?)
}

/// Removes the trigger and its function: enqueues stop paying for notifications, listening
/// relays fall back to polling. Idempotent.
pub async fn remover(pool: &PgPool) -> Result<(), Erro> {
    Ok(postgres::remover_notificacoes(pool).await?)
}
