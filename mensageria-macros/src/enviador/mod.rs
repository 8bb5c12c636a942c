//! `#[enviador(tipo = "...")]`: parse the arguments, model the function, emit the glue.

mod args;
mod expand;
mod model;

use proc_macro2::TokenStream;

/// Expands one `#[enviador]`. On error the user's function is still emitted, so one mistake
/// does not cascade into "cannot find function" errors elsewhere.
pub(crate) fn expand(args: TokenStream, item: TokenStream) -> TokenStream {
    let funcao = match syn::parse2::<syn::ItemFn>(item.clone()) {
        Ok(funcao) => funcao,
        Err(erro) => {
            let mut saida = erro.into_compile_error();
            saida.extend(item);
            return saida;
        }
    };
    let args = args::Args::parse(args);
    let modelo = model::Modelo::novo(&funcao);
    match (args, modelo) {
        (Ok(args), Ok(modelo)) => expand::gerar(&args, &modelo, &funcao),
        (args, modelo) => {
            let mut erros: Option<syn::Error> = None;
            for erro in [args.err(), modelo.err()].into_iter().flatten() {
                match &mut erros {
                    Some(todos) => todos.combine(erro),
                    None => erros = Some(erro),
                }
            }
            let mut saida = erros
                .map(syn::Error::into_compile_error)
                .unwrap_or_default();
            saida.extend(quote::quote!(#funcao));
            saida
        }
    }
}
