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
pub(crate) fn despachar<'a, T: Enviador<Por>, Por>(
    payload: &'a str,
    ctx: &'a ContextoEnvio,
) -> EnvioEmCurso<'a> {
    match serde_json::from_str::<T>(payload) {
        Ok(evento) => Box::pin(<T as Enviador<Por>>::enviar(evento, ctx)),
        Err(erro) => Box::pin(std::future::ready(Err(FalhaEnvio::permanente(format!(
            "stored payload of tipo `{}` does not decode as `{}`: {erro}",
            <T as Enviador<Por>>::TIPO,
            std::any::type_name::<T>()
        ))))),
    }
}

/// The registration `#[enviador]` submits to `inventory` (a `const fn`: `inventory::submit!`
/// needs a constant). The tipo is the impl's, so the generated code names it once.
pub const fn registrar<T: Enviador<Por>, Por>(
    tipo_rust: &'static str,
    modulo: &'static str,
    funcao: &'static str,
    chave_de_ordem: Option<&'static str>,
    esquema: fn() -> Option<serde_json::Value>,
) -> EnviadorRegistrado {
    EnviadorRegistrado {
        tipo: <T as Enviador<Por>>::TIPO,
        tipo_rust,
        modulo,
        funcao,
        chave_de_ordem,
        esquema,
        despachar: despachar::<T, Por>,
    }
}

/// Whether the explicit tipo of an `#[enviador(tipo = "...")]` agrees with the one its payload
/// declares with `#[evento]`, at compile time: `Sonda::<T>::TIPO_EVENTO` is `Some` exactly when
/// `T: Evento` (the inherent constant wins over [`SemEvento`]'s when its bound holds).
pub struct Sonda<T>(std::marker::PhantomData<T>);

/// The fallback of [`Sonda`]: a payload that is not an `Evento` declares no tipo.
pub trait SemEvento {
    /// No tipo declared.
    const TIPO_EVENTO: Option<&'static str> = None;
}

impl<T> SemEvento for Sonda<T> {}

impl<T: crate::enviador::Evento> Sonda<T> {
    /// The tipo `T` declares.
    pub const TIPO_EVENTO: Option<&'static str> = Some(T::TIPO);
}

impl<T> Sonda<T> {
    /// The probe of `T`.
    pub const fn nova() -> Self {
        Self(std::marker::PhantomData)
    }
}

impl<T: utoipa::ToSchema> Sonda<T> {
    /// `T`'s JSON Schema, for its contract (the inherent method wins over [`SemEsquema`]'s
    /// when `T: utoipa::ToSchema`).
    pub fn esquema(&self) -> Option<serde_json::Value> {
        Some(crate::contratos::esquema_de::<T>())
    }
}

/// The fallback of [`Sonda::esquema`]: a payload without `utoipa::ToSchema` publishes no schema.
pub trait SemEsquema {
    /// No schema.
    fn esquema(&self) -> Option<serde_json::Value> {
        None
    }
}

impl<T> SemEsquema for Sonda<T> {}

/// `a == b`, in a constant.
pub const fn mesmo_tipo(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    if a.len() != b.len() {
        return false;
    }
    let mut i = 0;
    while i < a.len() {
        if a[i] != b[i] {
            return false;
        }
        i += 1;
    }
    true
}

#[cfg(test)]
mod testes {
    use super::{SemEvento, Sonda, mesmo_tipo};

    #[derive(serde::Serialize, serde::Deserialize)]
    struct ComTipo;

    impl crate::enviador::Evento for ComTipo {
        const TIPO: &'static str = "pedido.criado";
    }

    #[derive(serde::Serialize, serde::Deserialize)]
    struct SemTipo;

    #[test]
    fn a_sonda_ve_o_tipo_so_de_um_evento() {
        #[allow(unused_imports)]
        use SemEvento as _;
        assert_eq!(Sonda::<ComTipo>::TIPO_EVENTO, Some("pedido.criado"));
        assert_eq!(Sonda::<SemTipo>::TIPO_EVENTO, None);
    }

    #[test]
    fn mesmo_tipo_compara_byte_a_byte() {
        assert!(mesmo_tipo("pedido.criado", "pedido.criado"));
        assert!(!mesmo_tipo("pedido.criado", "pedido.criada"));
        assert!(!mesmo_tipo("pedido", "pedido.criado"));
        assert!(!mesmo_tipo("", "a"));
    }
}
