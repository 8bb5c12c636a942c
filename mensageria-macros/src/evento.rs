//! `#[evento(tipo = "...")]`: declares an event type's tipo next to it (for contracts crates).
//! It implements `Evento` and registers nothing.

use proc_macro2::{Span, TokenStream};
use quote::{ToTokens, quote};
use syn::parse::Parser;
use syn::{Item, LitStr};

const EXEMPLO: &str = "e.g. `#[evento(tipo = \"pedido.criado\")]`";

/// Expands one `#[evento]`; on error, the errors and the item unchanged.
pub(crate) fn expand(args: TokenStream, item: TokenStream) -> TokenStream {
    let item = match syn::parse2::<Item>(item.clone()) {
        Ok(item) => item,
        Err(erro) => {
            let mut saida = erro.into_compile_error();
            saida.extend(item);
            return saida;
        }
    };
    match (tipo(args), modelo(&item)) {
        (Ok(tipo), Ok((nome, _))) => quote! {
            #item

            #[doc(hidden)]
            const _: () = {
                impl ::mensageria_core::__private::Evento for #nome {
                    const TIPO: &'static str = #tipo;
                }
            };
        },
        (tipo, modelo) => {
            let mut saida =
                crate::erros::combinar([tipo.err(), modelo.err()].into_iter().flatten())
                    .map(syn::Error::into_compile_error)
                    .unwrap_or_default();
            item.to_tokens(&mut saida);
            saida
        }
    }
}

/// `tipo = "..."`, the only argument, checked.
fn tipo(tokens: TokenStream) -> syn::Result<String> {
    let mut tipo_lit: Option<LitStr> = None;
    let parser = syn::meta::parser(|meta| {
        if meta.path.is_ident("tipo") {
            let repetido = meta.error("`tipo` is given twice; an event type has exactly one tipo");
            crate::tipo::ler_literal(&meta, &mut tipo_lit, repetido, EXEMPLO)
        } else {
            Err(meta.error(format!(
                "unknown argument; #[evento] takes only `tipo = \"...\"`, {EXEMPLO}"
            )))
        }
    });
    parser.parse2(tokens)?;
    let tipo_lit = tipo_lit.ok_or_else(|| {
        syn::Error::new(
            Span::call_site(),
            format!("missing `tipo`, the tipo this event type travels as; {EXEMPLO}"),
        )
    })?;
    crate::tipo::validar(&tipo_lit)
}

/// The type's name: a struct or an enum without generic parameters.
fn modelo(item: &Item) -> syn::Result<(&syn::Ident, &syn::Generics)> {
    let (nome, genericos) = match item {
        Item::Struct(s) => (&s.ident, &s.generics),
        Item::Enum(e) => (&e.ident, &e.generics),
        outro => {
            return Err(syn::Error::new_spanned(
                outro,
                "#[evento] goes on a struct or an enum: the event type that travels as this tipo",
            ));
        }
    };
    if !genericos.params.is_empty() {
        return Err(syn::Error::new_spanned(
            genericos,
            "an event type has one tipo, so it cannot be generic; declare one concrete type per \
             tipo",
        ));
    }
    Ok((nome, genericos))
}

#[cfg(test)]
mod testes {
    use super::*;

    #[test]
    fn implementa_evento_para_struct_e_enum() {
        for item in [
            quote!(
                struct A {
                    x: i64,
                }
            ),
            quote!(
                enum B {
                    X,
                    Y,
                }
            ),
        ] {
            let saida = expand(quote!(tipo = "pedido.criado"), item).to_string();
            assert!(saida.contains("Evento for"), "{saida}");
            assert!(saida.contains("\"pedido.criado\""), "{saida}");
            assert!(
                !saida.contains("inventory"),
                "an evento registers nothing: {saida}"
            );
        }
    }

    #[test]
    fn erros_dizem_o_que_escrever() {
        for (args, item, trecho) in [
            (
                quote!(),
                quote!(
                    struct A;
                ),
                "missing `tipo`",
            ),
            (
                quote!(tipo = "A"),
                quote!(
                    struct A;
                ),
                "lowercase",
            ),
            (
                quote!(tipo = 3),
                quote!(
                    struct A;
                ),
                "string literal",
            ),
            (
                quote!(tipo = "a", tipo = "b"),
                quote!(
                    struct A;
                ),
                "given twice",
            ),
            (
                quote!(tipo = "a", ordem = x),
                quote!(
                    struct A;
                ),
                "unknown argument",
            ),
            (
                quote!(tipo = "a"),
                quote!(
                    fn f() {}
                ),
                "struct or an enum",
            ),
            (
                quote!(tipo = "a"),
                quote!(
                    struct A<T>(T);
                ),
                "cannot be generic",
            ),
        ] {
            let saida = expand(args, item).to_string();
            assert!(saida.contains("compile_error"), "{saida}");
            assert!(saida.contains(trecho), "{saida} lacks {trecho}");
        }
    }
}
