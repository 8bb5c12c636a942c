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
