//! The attributes of mensageria. Use them through `mensageria_core::{enviador, evento}` and
//! `mensageria_axum::receptor`; their documentation lives there.
//!
//! Entry points only: each attribute parses its arguments (`args`), builds and checks a typed
//! model of the user's function (`model`) and emits glue that calls hand-written functions of
//! the runtime crates (`expand`), reached only through their `__private` modules. The signature
//! checks both attributes share live in `assinatura`. Everything works on `proc_macro2` so it
//! is unit-testable.

use proc_macro::TokenStream;

mod assinatura;
mod enviador;
mod erros;
mod evento;
mod receptor;
mod tipo;

/// Declares an event type's tipo next to it, for contracts crates: `#[evento(tipo = "...")]`.
#[proc_macro_attribute]
pub fn evento(args: TokenStream, item: TokenStream) -> TokenStream {
    evento::expand(args.into(), item.into()).into()
}

/// Registers an async function as the sender of one tipo: `#[enviador(tipo = "...")]`, or
/// `#[enviador]` on an `#[evento]` payload.
#[proc_macro_attribute]
#[doc(alias("sender", "producer", "publisher", "outbox"))]
pub fn enviador(args: TokenStream, item: TokenStream) -> TokenStream {
    enviador::expand(args.into(), item.into()).into()
}

/// Makes an async function the idempotent receptor of one tipo:
/// `#[receptor(tipo = "...", chave_natural = <expr>)]` (`tipo` optional on an `#[evento]`).
#[proc_macro_attribute]
#[doc(alias(
    "receiver",
    "consumer",
    "handler",
    "idempotent",
    "inbox",
    "idempotency key",
    "natural key"
))]
pub fn receptor(args: TokenStream, item: TokenStream) -> TokenStream {
    receptor::expand(args.into(), item.into()).into()
}
