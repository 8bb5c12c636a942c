//! The receiving side of mensageria, on Axum.
//!
//! A receptor is an async function that applies one tipo's effect in a transaction;
//! `#[receptor]` makes it idempotent by the event's natural key: the dedup record is written in
//! the **same transaction** as the effect, so the same event delivered 1, 2 or 50 times, one
//! after the other or all at once, is applied exactly once.
//!
//! ```
//! use mensageria_axum::{Rejeicao, receptor};
//! use mensageria_core::sqlx::{Sqlite, Transaction};
//! use serde::Deserialize;
//!
//! #[derive(Deserialize)]
//! struct EncerramentoMdfe { cnpj: String, chave_mdfe: String }
//!
//! #[receptor(tipo = "mdfe.encerramento", chave_natural = (evento.cnpj, evento.chave_mdfe))]
//! async fn encerrar(tx: &mut Transaction<'_, Sqlite>, evento: EncerramentoMdfe) -> Result<(), Rejeicao> {
//!     mensageria_core::sqlx::query("UPDATE mdfe SET situacao = 'encerrado' WHERE chave = $1")
//!         .bind(&evento.chave_mdfe)
//!         .execute(&mut **tx)
//!         .await?; // a database error is a temporary failure: the sender retries
//!     Ok(())
//! }
//!
//! # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let pool = mensageria_core::sqlx::SqlitePool::connect("sqlite::memory:").await?;
//! mensageria_core::migrar(&pool).await?;
//! let app: axum::Router = mensageria_axum::router(pool, mensageria_axum::Config::new("receptor", ["segredo-0123456789"]))?;
//! let ouvinte = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
//! // `servir`, not bare `axum::serve`: header-read and idle timeouts, a connection limit, and a
//! // graceful shutdown (your signal, e.g. `tokio::signal::ctrl_c()`; here at once).
//! mensageria_axum::servir(ouvinte, app).com_desligamento(async {}).await?;
//! # Ok(()) }
//! ```
//!
//! # What one request goes through
//!
//! 1. `Authorization: Bearer` against the configured tokens (constant time; several accepted so
//!    they can be rotated): **401** before any database access or body read. Then the
//!    CloudEvents attributes, if any: a `ce-type` other than the route's tipo or a
//!    `ce-specversion` other than `1.0` is **400** `invalid_cloudevent`.
//! 2. The body, bounded (1 MiB by default): **413**.
//! 3. JSON decoding into the payload type (serde_json refuses nesting over 128 levels in the fields it reads; unknown fields are skipped without recursion, bounded by the body limit): **400**.
//! 4. The natural key, canonical and injective (a JSON array of the parts, at most 1 KiB):
//!    **422** if it cannot be built.
//! 5. A transaction; the dedup record `(tipo, key)` inserted with conflict-do-nothing. Already
//!    there: commit and **200** `{"resultado":"duplicate"}`. A concurrent duplicate waits for
//!    the first transaction, then sees its outcome.
//! 6. The user's function with that transaction, in a `mensageria.receptor` span (tipo, request
//!    id, message id, key) and with the sender's correlation id in force for anything it
//!    enqueues. `Ok` → commit, **200** `{"resultado":"applied"}`; `Rejeicao::Permanente` →
//!    rollback, **422**; `Rejeicao::Temporaria` → rollback, **503** (+ `Retry-After`); a panic →
//!    rollback, **500**, the server keeps serving. Effect and dedup record commit or roll back
//!    together.
//!
//! With `versao = <expr>` the receptor is **convergent**: a key is applied when its version is
//! newer than the stored one, and an equal or older version is a duplicate — what "something
//! changed, go pull" pokes need.
//!
//! The `x-request-id` header is kept when printable ASCII of at most 128 bytes, replaced
//! otherwise, and echoed in the answer.
//!
//! A receptor takes a [CloudEvents 1.0](https://github.com/cloudevents/spec) request in the
//! HTTP binding's binary mode from any producer (a mensageria relay sends one): the body is the
//! event's data, `ce-id` is the message and request id when there is no `x-request-id`, and
//! `ce-type` and `ce-specversion`, when present, are checked as above. Structured mode
//! (`Content-Type: application/cloudevents+json`) is not supported: **415**.
//!
//! Every receptor also has a batch route, `POST {base}/{tipo}/lote` (see [`rota_lote`]): up to
//! [`Config::com_limite_lote`] events of its tipo in one transaction, with one dedup statement for
//! all of them and an outcome per event; an event that fails is taken out and the rest applied
//! again without it.
//!
//! The OpenAPI document of every receptor is served at
//! `GET /m2m/openapi.json`: a payload that derives `utoipa::ToSchema` gets its full schema
//! (derive it through the re-export, `use mensageria_axum::utoipa;`, or with `utoipa = "5"` of
//! your own); any other payload is documented "schema not published", with no schema.
#![cfg_attr(docsrs, feature(doc_cfg))]

mod admissao;
mod chave;
mod cloudevents;
mod config;
pub mod contratos;
mod desfecho;
mod estado;
mod lote;
#[cfg(feature = "prometheus")]
pub mod metricas;
mod openapi;
pub mod presenca;
mod receber;
pub mod recepcao;
mod receptor;
mod rejeicao;
mod rotas;
mod servidor;
#[cfg(feature = "teste")]
pub mod teste;
mod versao;

pub use chave::{ChaveNatural, ErroChave, ParteChave, TAMANHO_MAXIMO_CHAVE};
pub use config::Config;
pub use estado::Estado;
/// Makes an async function the idempotent receptor of one tipo.
///
/// `#[receptor(tipo = "...", chave_natural = <expr>)]`, optionally `versao = <expr>`, on
/// `async fn name(tx: &mut Transaction<'_, DB>, evento: Payload) -> Result<(), Rejeicao>`, where
/// `DB` is `Postgres` or `Sqlite` and the expressions read the payload parameter by its name.
/// `chave_natural` is a field, a call, or a tuple of them; `versao` is a [`Versao`] (an integer that grows with each change). The
/// function stays callable; the attribute adds a unit struct `Receptor<Name>` implementing
/// [`Receptor`] (for [`rota`]) and registers it for [`router`].
///
/// When the payload is a contracts crate's `#[evento]` ([`mensageria_core::Evento`]), `tipo` may
/// be left out: the receptor takes the tipo the type declares. A written `tipo` wins, so a type
/// can also be received under a second tipo. A payload that is no `Evento` needs the `tipo`
/// (without it: "`Payload` is not an `#[evento]`, so it has no tipo of its own").
pub use mensageria_macros::receptor;
pub use openapi::EsquemaEvento;
pub use receptor::{Receptor, ReceptorRegistrado, registrados};
pub use rejeicao::Rejeicao;
pub use rotas::{purgar, rota, rota_lote, router};
pub use servidor::{Servir, servir};
pub use versao::Versao;

/// Re-exported so applications build their routers with the same axum as mensageria (no
/// version to match by hand): `mensageria_axum::axum::Router`.
pub use axum;
/// Re-exported so an application that depends on `mensageria-axum` alone reaches the sending
/// side, and its `sqlx`, `uuid` and `serde_json`, at the versions mensageria uses.
pub use mensageria_core;
/// Re-exported so a payload can derive `utoipa::ToSchema` (and publish its schema in the OpenAPI
/// document) without a `utoipa` dependency of the application's own: `use
/// mensageria_axum::utoipa;` in the module that derives it (the derive names `utoipa::…`).
///
/// ```
/// use mensageria_axum::utoipa;
///
/// /// A stock change (its doc comment is the schema's description).
/// #[derive(serde::Deserialize, utoipa::ToSchema)]
/// struct Ajuste {
///     sku: String,
///     delta: i32,
/// }
///
/// use utoipa::PartialSchema as _;
/// assert!(serde_json::to_string(&Ajuste::schema()).unwrap().contains("sku"));
/// ```
pub use utoipa;

/// What the code `#[receptor]` generates names, and only that: generated code reaches this
/// crate through here alone. Not public API: it changes with the macro.
#[doc(hidden)]
pub mod __private {
    pub use crate::chave::{ChaveNatural, ErroChave, chave, parte};
    pub use crate::openapi::{EsquemaEvento, EsquemaGenerico, Sonda};
    pub use crate::recepcao::aplicar_dinamico;
    pub use crate::receptor::{Receptor, ReceptorRegistrado};
    pub use crate::rejeicao::Rejeicao;
    pub use crate::rotas::{RotasDoReceptor, montar};
    pub use crate::versao::versao;
    pub use inventory;
    pub use mensageria_core::Evento;
    pub use mensageria_core::sqlx;
}
