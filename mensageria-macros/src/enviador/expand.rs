//! The code `#[enviador]` emits: glue between the user's function and `mensageria_core`.

use proc_macro2::TokenStream;
use quote::{format_ident, quote, quote_spanned};
use syn::ItemFn;
use syn::spanned::Spanned;

use super::args::Args;

/// The user's function, unchanged, then:
/// - a hidden, `pub` marker type named after the payload, in the function's module: a second enviador
///   for the same payload in one module is a "defined multiple times" error at its payload type;
/// - `impl Enviador<Marker> for Payload` (so `enfileirar` accepts it, inferring the marker). The
///   marker is this crate's own type, which lets the payload be another crate's (a contracts
///   crate's `Evento`) under the orphan rule;
/// - the tipo: the one written, checked by a constant against the payload's `Evento::TIPO` when
///   it has one; or, when none is written, `Evento::TIPO` (a payload that is no `Evento` is then
///   an E0277 at the payload type saying to write the tipo);
/// - the `inventory` registration the relay routes by;
/// - for a written tipo, a crate-wide marker named after it, so the same tipo twice in one crate
///   is a "defined multiple times" error at the second tipo string.
pub(crate) fn gerar(args: &Args, payload: &syn::Type, funcao: &ItemFn) -> TokenStream {
    let nome = &funcao.sig.ident;
    let nome_str = nome.to_string();
    let payload_str = quote!(#payload).to_string().replace(' ', "");

    // The call spanned on the user's signature: a non-Send future or a wrong context type is
    // reported at the function, not inside generated code.
    let chamada = quote_spanned! {funcao.sig.span()=>
        #nome(self, ctx)
    };
    let impl_token = quote_spanned!(payload.span()=> impl);
    let ordem = chave_ordem(args, funcao);
    let ordem_texto = match &args.ordem {
        Some(expr) => {
            let texto = quote!(#expr).to_string();
            quote!(::core::option::Option::Some(#texto))
        }
        None => quote!(::core::option::Option::None),
    };
    let por = format_ident!(
        "__mensageria_payload_{}_ja_tem_enviador_neste_modulo",
        crate::tipo::identificador(&payload_str),
        span = payload.span()
    );
    let enviador = quote!(::mensageria_core::__private::Enviador<#por>);

    let (tipo, marcador, concordancia) = tipo(args, payload, &payload_str);

    quote! {
        #funcao

        // `pub`: an app that enqueues from another crate than its enviadores' infers this type,
        // and an inferred type must be nameable there.
        #[doc(hidden)]
        #[allow(non_camel_case_types, dead_code, unreachable_pub)]
        pub struct #por;

        #marcador

        #[doc(hidden)]
        const _: () = {
            #impl_token #enviador for #payload {
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

            #concordancia

            ::mensageria_core::__private::inventory::submit! {
                ::mensageria_core::__private::registrar_enviador::<#payload, #por>(
                    #payload_str,
                    ::core::module_path!(),
                    #nome_str,
                    #ordem_texto,
                    {
                        fn esquema() -> ::core::option::Option<
                            ::mensageria_core::__private::serde_json::Value,
                        > {
                            #[allow(unused_imports)]
                            use ::mensageria_core::__private::SemEsquema as _;
                            (&::mensageria_core::__private::Sonda::<#payload>::nova()).esquema()
                        }
                        esquema
                    },
                )
            }
        };
    }
}

/// The tipo's expression, and for a written tipo its crate-wide marker and the constant that
/// checks it against the payload's `Evento::TIPO`, when the payload has one.
fn tipo(
    args: &Args,
    payload: &syn::Type,
    payload_str: &str,
) -> (TokenStream, Option<TokenStream>, Option<TokenStream>) {
    match &args.tipo {
        Some(escrito) => {
            let valor = &escrito.valor;
            let marcador = format_ident!(
                "__mensageria_tipo_{}_ja_tem_enviador_neste_crate",
                crate::tipo::identificador(valor),
                span = escrito.lit.span()
            );
            let mensagem = format!(
                "#[enviador(tipo = \"{valor}\")] disagrees with the tipo `{payload_str}` declares \
                 with #[evento]: remove `tipo = \"{valor}\"` so this enviador sends the tipo the \
                 event type declares (the one its receptores listen to)"
            );
            let panico = quote_spanned!(escrito.lit.span()=> ::core::panic!(#mensagem));
            (
                quote!(#valor),
                Some(quote! {
                    #[doc(hidden)]
                    #[macro_export]
                    macro_rules! #marcador { () => {}; }
                }),
                Some(quote! {
                    const _: () = {
                        #[allow(unused_imports)]
                        use ::mensageria_core::__private::SemEvento as _;
                        if let ::core::option::Option::Some(declarado) =
                            ::mensageria_core::__private::Sonda::<#payload>::TIPO_EVENTO
                        {
                            if !::mensageria_core::__private::mesmo_tipo(declarado, #valor) {
                                #panico
                            }
                        }
                    };
                }),
            )
        }
        None => (
            quote_spanned!(payload.span()=> <#payload as ::mensageria_core::__private::Evento>::TIPO),
            None,
            None,
        ),
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

#[cfg(test)]
mod testes {
    use super::*;

    #[test]
    fn sem_tipo_usa_o_do_evento_e_com_tipo_confere() {
        let funcao: ItemFn = syn::parse_quote! {
            async fn enviar(e: contratos::Pedido, ctx: &ContextoEnvio) -> Result<(), FalhaEnvio> { Ok(()) }
        };
        let payload: syn::Type = syn::parse_quote!(contratos::Pedido);
        let sem = gerar(&Args::parse(quote!()).unwrap(), &payload, &funcao).to_string();
        assert!(sem.contains("Evento > :: TIPO"), "{sem}");
        assert!(!sem.contains("macro_rules"), "{sem}");
        let com = gerar(
            &Args::parse(quote!(tipo = "pedido.criado")).unwrap(),
            &payload,
            &funcao,
        )
        .to_string();
        assert!(com.contains("TIPO_EVENTO"), "{com}");
        assert!(com.contains("disagrees"), "{com}");
    }
}
