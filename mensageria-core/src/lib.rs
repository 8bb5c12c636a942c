#![doc = include_str!("../README.md")]
//!
//! # Crate map
//!
//! - [`saida`]: the saída (transactional outbox) and [`enfileirar`].
//! - [`enviador`](mod@enviador): the [`Enviador`] contract, [`ContextoEnvio`] and [`FalhaEnvio`].
//! - [`registro`]: the link-time [`Registro`] of enviadores.
//! - [`schema`]: [`migrar`] for the schema's owner, [`verificar_schema`] and [`esperar_schema`]
//!   for the others.
//! - [`banco`]: the stores ([`Banco`] for PostgreSQL and SQLite).
//! - [`relay`]: the [`Relay`](relay::Relay) that delivers the saída, at least once.
//! - [`destino`]: the HTTP [`Destino`] enviadores post to (feature `http`).
//! - [`correlacao`]: the correlation id carried from an enqueue to its deliveries.
//! - [`rastreamento`]: the W3C trace context carried from an enqueue to the receptor's effect.
//! - [`operacoes`]: what operators do (replay and discard dead letters, purge dedup records, the
//!   read models behind `mensageria status`, `doctor` and `apps`, the backlog).
//! - [`tipo`]: what a valid `tipo` looks like.
//! - [`configuracao`]: what makes a setting invalid ([`ErroConfiguracao`]).
#![cfg_attr(docsrs, feature(doc_cfg))]

pub mod banco;
pub mod cloudevents;
pub mod configuracao;
pub mod contratos;
pub mod correlacao;
pub mod desligamento;
mod despacho;
#[cfg(feature = "http")]
pub mod destino;
pub mod enviador;
mod erro;
mod fila;
pub mod operacoes;
pub mod ordem;
pub mod rastreamento;
pub mod registro;
pub mod relay;
pub mod saida;
pub mod schema;
#[cfg(feature = "teste")]
pub mod teste;
pub mod tipo;

pub use banco::Banco;
pub use configuracao::ErroConfiguracao;
#[cfg(feature = "http")]
pub use destino::Destino;
pub use enviador::{ContextoEnvio, Enviador, Evento, FalhaEnvio};
pub use erro::Erro;
/// Registers an async function as the sender (enviador) of one tipo.
///
/// ```
/// use mensageria_core::{ContextoEnvio, FalhaEnvio, enviador};
/// # #[derive(serde::Serialize, serde::Deserialize)] struct EncerramentoMdfe { chave_mdfe: String }
///
/// #[enviador(tipo = "mdfe.encerramento")]
/// async fn enviar_encerramento(
///     evento: EncerramentoMdfe,
///     ctx: &ContextoEnvio,
/// ) -> Result<(), FalhaEnvio> {
///     // deliver `evento`; Err(FalhaEnvio::Temporaria) to retry,
///     // Err(FalhaEnvio::Permanente) to dead-letter
///     Ok(())
/// }
///
/// assert!(mensageria_core::Registro::global().tipos().contains(&"mdfe.encerramento"));
/// ```
///
/// On a contracts crate's [`Evento`] (see [`evento`]) the tipo comes from the type, so the
/// attribute needs none; a `tipo = "..."` that disagrees with the type's is a compile error:
///
/// ```
/// use mensageria_core::{ContextoEnvio, FalhaEnvio, enviador, evento};
/// # mod contratos {
/// #     use mensageria_core::evento;
/// #     #[evento(tipo = "pedido.criado")]
/// #     #[derive(serde::Serialize, serde::Deserialize)]
/// #     pub struct PedidoCriado { pub pedido: i64 }
/// # }
///
/// #[enviador]
/// async fn enviar_pedido(
///     evento: contratos::PedidoCriado,
///     ctx: &ContextoEnvio,
/// ) -> Result<(), FalhaEnvio> {
///     Ok(())
/// }
///
/// assert!(mensageria_core::Registro::global().tipos().contains(&"pedido.criado"));
/// ```
///
/// The function keeps its name and stays callable. The attribute adds:
///
/// - a hidden marker type `M` next to the function and `impl Enviador<M> for Payload`, so
///   [`enfileirar`] accepts the payload (and nothing without an enviador compiles); the marker,
///   a type of this crate, is what allows the impl for a payload type of another crate (see
///   [`Enviador`]);
/// - a link-time registration in the [`Registro`]: the relay claims this tipo and calls this
///   function for each delivery;
/// - a crate-wide marker, so the same explicit tipo twice in one crate does not compile (across
///   crates, or with tipos taken from an [`Evento`], [`Registro::validar`] reports it).
///
/// Rules, each checked with an error at the offending token: `tipo = "..."` (optional when the
/// payload is an [`Evento`]) follows [`tipo`](mod@tipo)'s alphabet, `ordem = <key>` is optional;
/// the function is a free `async fn` without generics, taking the payload by value (implementing
/// `Serialize` and `Deserialize`) and `&ContextoEnvio`, returning `Result<(), FalhaEnvio>`, and
/// its future is `Send`.
pub use mensageria_macros::enviador;
/// Declares an event type's tipo next to it: implements [`Evento`] for a struct or an enum.
///
/// For the types of a **contracts crate**, shared by the app that sends them and the apps that
/// receive them. It registers nothing: only `#[enviador]` does, in the sending app, so a receiving
/// app that links the contracts crate claims no tipo with its relay (no competing consumers).
///
/// ```
/// use mensageria_core::{Evento, evento};
/// use serde::{Deserialize, Serialize};
///
/// #[evento(tipo = "estoque.reservado")]
/// #[derive(Debug, Serialize, Deserialize)]
/// pub enum Reserva {
///     Feita { pedido: i64 },
///     Recusada { pedido: i64, motivo: String },
/// }
///
/// assert_eq!(<Reserva as Evento>::TIPO, "estoque.reservado");
/// ```
///
/// Rules, each checked at compile time: `tipo = "..."` is the only argument and follows
/// [`tipo`](mod@tipo)'s alphabet (the error points at the literal); the item is a struct or an
/// enum without generic parameters, implementing `Serialize`, `Deserialize`, `Send` and `Sync`.
pub use mensageria_macros::evento;
pub use registro::{EnviadorRegistrado, Registro};
pub use saida::{
    Conexao, LIMITE_PAYLOAD_PADRAO, Saida, enfileirar, enfileirar_json, enfileirar_ordenado,
};
pub use schema::{VersaoSchema, esperar_schema, migrar, verificar_schema};

/// Re-exported so applications use the same `serde_json` as mensageria (`enfileirar_json`'s
/// values, raw JSON natural keys).
pub use serde_json;
/// Re-exported so applications use the same sqlx as mensageria.
pub use sqlx;
/// Re-exported so applications use the same `uuid` as mensageria (message ids are UUIDv7).
pub use uuid;

/// Support for generated code. Not public API: it changes without notice.
#[doc(hidden)]
pub mod __private {
    pub use crate::despacho::registrar as registrar_enviador;
    pub use crate::despacho::{SemEsquema, SemEvento, Sonda, mesmo_tipo};
    pub use crate::enviador::{ContextoEnvio, Enviador, Evento, FalhaEnvio};
    pub use crate::ordem::chave_ordem;
    pub use inventory;
    pub use serde_json;
}
