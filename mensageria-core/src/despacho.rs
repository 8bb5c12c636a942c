//! How the relay calls an enviador knowing only its tipo: the type-erased [`despachar`] each
//! `#[enviador]` registers. Reached only by generated code, through `__private`.

use std::future::Future;
use std::pin::Pin;

use crate::enviador::{ContextoEnvio, Enviador, FalhaEnvio};
use crate::registro::EnviadorRegistrado;

/// The boxed future of a type-erased send.
pub(crate) type EnvioEmCurso<'a> =
    Pin<Box<dyn Future<Output = Result<(), FalhaEnvio>> + Send + 'a>>;

/// Decodes a stored payload as `T` and sends it. The registry keeps one instance per enviador so
/// the relay can deliver a row knowing only its tipo.
///
/// A payload that no longer decodes (the type changed incompatibly since it was enqueued) is a
/// permanent failure: retrying cannot fix it, the dead letter keeps it for a human.
pub(crate) fn despachar<'a, T: Enviador>(
    payload: &'a str,
    ctx: &'a ContextoEnvio,
) -> EnvioEmCurso<'a> {
    match serde_json::from_str::<T>(payload) {
        Ok(evento) => Box::pin(evento.enviar(ctx)),
        Err(erro) => Box::pin(std::future::ready(Err(FalhaEnvio::permanente(format!(
            "stored payload of tipo `{}` does not decode as `{}`: {erro}",
            T::TIPO,
            std::any::type_name::<T>()
        ))))),
    }
}

/// The registration `#[enviador]` submits to `inventory` (a `const fn`: `inventory::submit!`
/// needs a constant).
pub const fn registrar<T: Enviador>(
    tipo: &'static str,
    tipo_rust: &'static str,
    modulo: &'static str,
    funcao: &'static str,
) -> EnviadorRegistrado {
    EnviadorRegistrado {
        tipo,
        tipo_rust,
        modulo,
        funcao,
        despachar: despachar::<T>,
    }
}
