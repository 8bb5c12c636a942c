//! The ordered tipo of the ordering suite (`tests/ordem.rs`) and of its child app `app-ordem`:
//! one step of an entity's life, ordered by the entity (`ordem = evento.chave`).

use mensageria_core::{ContextoEnvio, Destino, FalhaEnvio, enviador};
use serde::{Deserialize, Serialize};

/// Step `passo` of entity `chave`; `n` is its ledger number (`chave * 1000 + passo`).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Passo {
    pub(crate) chave: i64,
    pub(crate) passo: i64,
    pub(crate) n: i64,
}

impl Passo {
    #[allow(dead_code)]
    pub(crate) fn new(chave: i64, passo: i64) -> Self {
        Self {
            chave,
            passo,
            n: chave * 1000 + passo,
        }
    }
}

#[enviador(tipo = "ordem.passo", ordem = evento.chave)]
async fn enviar_passo(evento: Passo, ctx: &ContextoEnvio) -> Result<(), FalhaEnvio> {
    ctx.exigir::<Destino>()?.postar(&evento, ctx).await
}
