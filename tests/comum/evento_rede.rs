//! The tipo of the network lab (`tests/rede.rs`): enqueued by the test, delivered by the lab's
//! app (`tests/bin/app_rede.rs`), which also receives it. Each side adds its own enviador.

use serde::{Deserialize, Serialize};

/// The payload of `rede.evento`: its number is its natural key and the ledger's `n`.
#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct EventoRede {
    pub(crate) n: i64,
}
