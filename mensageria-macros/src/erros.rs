//! Reporting misuse: every error at its token, all of them at once, and the user's item kept.

use proc_macro2::TokenStream;
use quote::ToTokens;

/// Folds errors into one `syn::Error` that reports each of them.
pub(crate) fn combinar(erros: impl IntoIterator<Item = syn::Error>) -> Option<syn::Error> {
    erros.into_iter().reduce(|mut todos, erro| {
        todos.combine(erro);
        todos
    })
}

/// Runs the attribute: parse the item as a function, build `args` and the model, expand; on any
/// error, emit the errors followed by the user's function unchanged, so one mistake does not
/// cascade into "cannot find function" errors elsewhere.
pub(crate) fn expandir<A, M>(
    item: TokenStream,
    args: impl FnOnce() -> syn::Result<A>,
    modelo: impl for<'f> FnOnce(&'f syn::ItemFn) -> syn::Result<M>,
    gerar: impl FnOnce(&A, &M, &syn::ItemFn) -> TokenStream,
) -> TokenStream {
    let funcao = match syn::parse2::<syn::ItemFn>(item.clone()) {
        Ok(funcao) => funcao,
        Err(erro) => {
            let mut saida = erro.into_compile_error();
            saida.extend(item);
            return saida;
        }
    };
    match (args(), modelo(&funcao)) {
        (Ok(args), Ok(modelo)) => gerar(&args, &modelo, &funcao),
        (args, modelo) => {
            let mut saida = combinar([args.err(), modelo.err()].into_iter().flatten())
                .map(syn::Error::into_compile_error)
                .unwrap_or_default();
            funcao.to_tokens(&mut saida);
            saida
        }
    }
}
