//! The [`Receptor`] contract and its link-time registration.

use std::any::Any;
use std::future::Future;

use mensageria_core::Banco;
use mensageria_core::sqlx::Transaction;
use serde::de::DeserializeOwned;

use crate::{ChaveNatural, ErroChave, Rejeicao};

/// One receptor: the tipo it receives, its payload, its natural key and its effect.
///
/// Implemented by `#[receptor(...)]`, which also registers it; implementing it by hand works
/// with [`rota`](crate::rota) but is not seen by [`router`](crate::router).
#[doc(alias("Receiver", "consumer"))]
pub trait Receptor: Send + Sync + 'static {
    /// The database of the effect's transaction.
    type Banco: Banco;
    /// The payload.
    type Evento: DeserializeOwned + Send + 'static;
    /// The tipo received.
    const TIPO: &'static str;

    /// The event's domain identity.
    fn chave_natural(evento: &Self::Evento) -> Result<ChaveNatural, ErroChave>;

    /// Convergent mode: the event's version (a newer version of a key is applied, an equal or
    /// older one is a no-op). `None`: plain dedup.
    fn versao(_evento: &Self::Evento) -> Option<i64> {
        None
    }

    /// The effect, in the transaction that also holds the dedup record.
    fn aplicar<'a, 'c>(
        tx: &'a mut Transaction<'c, Self::Banco>,
        evento: Self::Evento,
    ) -> impl Future<Output = Result<(), Rejeicao>> + Send + 'a
    where
        'c: 'a;

    /// The payload's schema for the OpenAPI document.
    fn esquema() -> crate::openapi::EsquemaEvento;
}

/// One `#[receptor]`, as registered at link time (built by generated code, read by
/// [`router`](crate::router)).
#[derive(Debug)]
pub struct ReceptorRegistrado {
    /// The tipo it receives.
    pub tipo: &'static str,
    /// The payload type, as written in the source.
    pub tipo_rust: &'static str,
    /// The module of the function.
    pub modulo: &'static str,
    /// The function's name.
    pub funcao: &'static str,
    /// Builds its routes if `estado` is the state of its backend.
    pub montar: fn(&dyn Any) -> Option<crate::rotas::RotasDoReceptor>,
    /// Its payload's schema.
    pub esquema: fn() -> crate::openapi::EsquemaEvento,
    /// Whether it is convergent (`versao = ...`): newer versions of a key are applied.
    pub convergente: bool,
    /// The natural key's expression, as written (`chave_natural = ...`).
    pub chave_natural: &'static str,
    /// The version's expression of a convergent receptor, as written.
    pub versao: Option<&'static str>,
    /// Applies a batch of its events, received by the named app, through the
    /// transport-neutral path, if the `&dyn Any` is a `Pool` of its backend
    /// ([`recepcao::aplicar`](crate::recepcao::aplicar)).
    pub aplicar: for<'a> fn(
        &'a dyn Any,
        &'a str,
        &'a [crate::recepcao::Entrada<'a>],
    ) -> Option<crate::recepcao::Aplicacao<'a>>,
}

inventory::collect!(ReceptorRegistrado);

impl ReceptorRegistrado {
    /// `module::function(Type)`.
    pub(crate) fn descricao(&self) -> String {
        format!("{}::{}({})", self.modulo, self.funcao, self.tipo_rust)
    }
}

/// Every receptor linked into this binary, whatever its backend: what a transport other than
/// HTTP (a broker consumer) mounts, by tipo.
pub fn registrados() -> impl Iterator<Item = &'static ReceptorRegistrado> {
    inventory::iter::<ReceptorRegistrado>.into_iter()
}
