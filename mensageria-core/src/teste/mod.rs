//! Test support (feature `teste`): prove that nothing is lost and nothing applied twice, in a
//! test that never sleeps.
//!
//! - [`Ensaio`]: switches that make the relay duplicate every delivery or lose the first ack
//!   of every message. Drive the relay with [`Relay::rodada`](crate::relay::Relay::rodada) /
//!   [`Relay::drenar`](crate::relay::Relay::drenar) instead of spawning it.
//! - [`ProxyDeFalhas`]: a TCP proxy on 127.0.0.1 that delays, blackholes, resets, or loses a
//!   seeded share of responses after the upstream answered, between a relay and a receptor or
//!   an app and its database.
//! - [`reivindicacao`]: the relay's claim and settlement statements one at a time (fencing and
//!   plan tests, the claim bench).
//! - [`PgIsolado`] (with feature `postgres`) and [`SqliteIsolado`] (with `sqlite`): a migrated
//!   database of one test's own — a fresh PostgreSQL schema or a temporary SQLite file — so
//!   tests run in parallel against a real server. `mensageria-axum`'s `teste::ServidorDeTeste`
//!   serves a router on 127.0.0.1:0 and counts its requests.
//!
//! An adopter's idempotency test (`mensageria-axum` gives the receptor side):
//!
//! ```ignore
//! let relay = Relay::new(pool.clone(), Config::new("emissor").com_ensaio(
//!     Ensaio::new().duplicar_entregas().perder_primeiro_ack(),
//! ))
//! .recurso(Destino::new(&url_do_receptor)?);
//! let mut tx = pool.begin().await?;
//! enfileirar(&mut *tx, &Encerramento { chave: "4321".into() }).await?;
//! tx.commit().await?;
//! relay.drenar().await?;            // 4 deliveries of the same message, no sleep
//! assert_eq!(efeitos(&pool).await, 1); // applied once
//! ```

mod isolado;
mod proxy;
pub mod reivindicacao;

#[cfg(feature = "sqlite")]
pub use isolado::SqliteIsolado;
#[cfg(feature = "postgres")]
pub use isolado::{PgIsolado, database_url};

pub use crate::relay::Ensaio;
pub use proxy::{Contagem, ModoProxy, ProxyDeFalhas};
