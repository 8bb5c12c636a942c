//! `#[receptor(tipo = "...", chave_natural = ..., versao = ...)]`.

mod args;
mod expand;
mod model;

use proc_macro2::TokenStream;

/// Expands one `#[receptor]`.
pub(crate) fn expand(args: TokenStream, item: TokenStream) -> TokenStream {
    crate::erros::expandir(
        item,
        || args::Args::parse(args),
        model::Modelo::novo,
        expand::gerar,
    )
}
