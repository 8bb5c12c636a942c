//! The code `#[enviador]` emits: glue between the user's function and `mensageria_core`.

use proc_macro2::TokenStream;
use quote::{format_ident, quote, quote_spanned};
use syn::ItemFn;
use syn::spanned::Spanned;

use super::args::Args;

/// The user's function, unchanged, then:
/// - `impl Enviador for Payload` (so `enfileirar` accepts it; a second enviador for the same
///   payload is a conflicting impl, reported at its payload type);
/// - the `inventory` registration the relay routes by;
/// - a crate-wide marker named after the tipo, so the same tipo twice in one crate is a
///   "defined multiple times" error at the second tipo string.
pub(crate) fn gerar(args: &Args, payload: &syn::Type, funcao: &ItemFn) -> TokenStream {
    let nome = &funcao.sig.ident;
    let nome_str = nome.to_string();
    let payload_str = quote!(#payload).to_string().replace(' ', "");
    let tipo = &args.tipo;

    // The call spanned on the user's signature: a non-Send future or a wrong context type is
    // reported at the function, not inside generated code.
    let chamada = quote_spanned! {funcao.sig.span()=>
        #nome(self, ctx)
    };
    let impl_token = quote_spanned!(payload.span()=> impl);
    let ordem = chave_ordem(args, funcao);

    let marcador = format_ident!(
        "__mensageria_tipo_{}_ja_tem_enviador_neste_crate",
        crate::tipo::identificador(tipo),
        span = args.tipo_lit.span()
    );

    quote! {
        #funcao

        #[doc(hidden)]
        #[macro_export]
        macro_rules! #marcador { () => {}; }

        #[doc(hidden)]
        const _: () = {
            #impl_token ::mensageria_core::__private::Enviador for #payload {
                const TIPO: &'static str = #tipo;

                fn enviar<'__a>(
                    self,
                    ctx: &'__a ::mensageria_core::__private::ContextoEnvio,
                ) -> impl ::core::future::Future<
                    Output = ::core::result::Result<(), ::mensageria_core::__private::FalhaEnvio>,
                > + ::core::marker::Send + '__a {
                    #chamada
                }

                #ordem
            }

            ::mensageria_core::__private::inventory::submit! {
                ::mensageria_core::__private::registrar_enviador::<#payload>(
                    #tipo,
                    #payload_str,
                    ::core::module_path!(),
                    #nome_str,
                )
            }
        };
    }
}

/// `ordem = <expr>`: the impl's `chave_ordem`, with the payload bound to the name (pattern) the
/// user's function gives it, so `ordem = evento.pedido_id` reads as in the function's body. The
/// key goes through `__private::chave_ordem`, whose bound reports a float or any inexact type at
/// the expression.
fn chave_ordem(args: &Args, funcao: &ItemFn) -> Option<TokenStream> {
    let expr = args.ordem.as_ref()?;
    let padrao = match funcao.sig.inputs.first() {
        Some(syn::FnArg::Typed(p)) => &p.pat,
        _ => return None, // the signature check reported it
    };
    let chave = quote_spanned! {expr.span()=>
        ::mensageria_core::__private::chave_ordem(&(#expr))
    };
    Some(quote! {
        #[allow(unused_variables, unused_mut, clippy::needless_borrow)]
        fn chave_ordem(&self) -> ::core::option::Option<::std::string::String> {
            let #padrao = self;
            ::core::option::Option::Some(#chave)
        }
    })
}
