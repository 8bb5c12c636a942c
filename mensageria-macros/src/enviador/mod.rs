//! `#[enviador(tipo = "...")]`: parse the arguments, model the function, emit the glue.

mod args;
mod expand;
mod model;

use proc_macro2::TokenStream;

/// Expands one `#[enviador]`.
pub(crate) fn expand(args: TokenStream, item: TokenStream) -> TokenStream {
    crate::erros::expandir(
        item,
        || args::Args::parse(args),
        |funcao| model::Modelo::novo(funcao).map(|m| m.payload.clone()),
        expand::gerar,
    )
}
