//! The user's function, as `#[enviador]` needs it: `async fn f(evento: T, ctx: &ContextoEnvio)`.

use syn::spanned::Spanned;
use syn::{FnArg, ItemFn, ReturnType, Type};

const FORMA: &str = "an enviador is `async fn name(evento: Payload, ctx: &ContextoEnvio) -> Result<(), FalhaEnvio>`";

/// The checked shape of an enviador function.
pub(crate) struct Modelo<'a> {
    pub(crate) payload: &'a Type,
}

impl<'a> Modelo<'a> {
    /// Checks the signature; every problem found is reported, each at its own token.
    pub(crate) fn novo(funcao: &'a ItemFn) -> syn::Result<Self> {
        let sig = &funcao.sig;
        let mut erros = Vec::new();
        if sig.asyncness.is_none() {
            erros.push(syn::Error::new_spanned(
                sig.fn_token,
                format!("#[enviador] needs an `async fn`; add `async` ({FORMA})"),
            ));
        }
        if let Some(constness) = &sig.constness {
            erros.push(syn::Error::new_spanned(
                constness,
                "an enviador cannot be `const`; remove it",
            ));
        }
        if let Some(unsafety) = &sig.unsafety {
            erros.push(syn::Error::new_spanned(
                unsafety,
                "an enviador cannot be `unsafe`; remove it",
            ));
        }
        if let Some(abi) = &sig.abi {
            erros.push(syn::Error::new_spanned(
                abi,
                "an enviador cannot have an `extern` ABI; remove it",
            ));
        }
        if !sig.generics.params.is_empty() || sig.generics.where_clause.is_some() {
            erros.push(syn::Error::new_spanned(
                &sig.generics,
                "an enviador cannot be generic: one function sends one concrete payload type; \
                 write one #[enviador] per payload type",
            ));
        }
        if let Some(variadic) = &sig.variadic {
            erros.push(syn::Error::new_spanned(variadic, FORMA));
        }
        if matches!(sig.output, ReturnType::Default) {
            erros.push(syn::Error::new(
                sig.paren_token.span.close(),
                "an enviador returns `Result<(), FalhaEnvio>` so the relay knows whether to retry; \
                 add `-> Result<(), FalhaEnvio>`",
            ));
        }

        let mut parametros = sig.inputs.iter();
        let payload = match parametros.next() {
            Some(FnArg::Receiver(receptor)) => {
                erros.push(syn::Error::new_spanned(
                    receptor,
                    "#[enviador] goes on a free function, not a method; move it out of the `impl` block",
                ));
                None
            }
            Some(FnArg::Typed(parametro)) => match &*parametro.ty {
                Type::Reference(referencia) => {
                    erros.push(syn::Error::new_spanned(
                        referencia,
                        "the first parameter is the payload, taken by value (it is decoded from the \
                         saída for each delivery); remove the `&`",
                    ));
                    None
                }
                Type::ImplTrait(_) | Type::Infer(_) => {
                    erros.push(syn::Error::new_spanned(
                        &parametro.ty,
                        "the payload must be a concrete type that implements Serialize and Deserialize",
                    ));
                    None
                }
                ty => Some(ty),
            },
            None => {
                erros.push(syn::Error::new(
                    sig.paren_token.span.join(),
                    format!("missing parameters; {FORMA}"),
                ));
                None
            }
        };
        match parametros.next() {
            Some(FnArg::Typed(parametro)) if matches!(&*parametro.ty, Type::Reference(_)) => {}
            Some(outro) => erros.push(syn::Error::new_spanned(
                outro,
                "the second parameter is the delivery context, `ctx: &ContextoEnvio`",
            )),
            None if sig.inputs.len() == 1 => erros.push(syn::Error::new(
                sig.inputs.span(),
                "missing the second parameter, `ctx: &ContextoEnvio` (name it `_ctx` if unused)",
            )),
            None => {}
        }
        for excedente in parametros {
            erros.push(syn::Error::new_spanned(
                excedente,
                format!("too many parameters; {FORMA}; reach other resources through `ctx.recurso::<T>()`"),
            ));
        }

        match crate::erros::combinar(erros) {
            Some(erro) => Err(erro),
            None => Ok(Self {
                payload: payload.expect("a payload type when no error was found"),
            }),
        }
    }
}

#[cfg(test)]
mod testes {
    use super::Modelo;
    use syn::parse_quote;

    fn erro(funcao: syn::ItemFn) -> String {
        Modelo::novo(&funcao)
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default()
    }

    #[test]
    fn aceita_a_forma_canonica() {
        let funcao: syn::ItemFn = parse_quote! {
            async fn enviar(evento: Encerramento, ctx: &ContextoEnvio) -> Result<(), FalhaEnvio> { Ok(()) }
        };
        assert!(Modelo::novo(&funcao).is_ok());
    }

    #[test]
    fn cada_desvio_tem_sua_mensagem() {
        assert!(
            erro(parse_quote!(
                fn f(e: E, c: &C) -> R {}
            ))
            .contains("async")
        );
        assert!(
            erro(parse_quote!(
                async fn f<T>(e: T, c: &C) -> R {}
            ))
            .contains("generic")
        );
        assert!(
            erro(parse_quote!(
                async fn f(e: &E, c: &C) -> R {}
            ))
            .contains("by value")
        );
        assert!(
            erro(parse_quote!(
                async fn f(e: E) -> R {}
            ))
            .contains("second parameter")
        );
        assert!(
            erro(parse_quote!(
                async fn f(e: E, c: C) -> R {}
            ))
            .contains("&ContextoEnvio")
        );
        assert!(
            erro(parse_quote!(
                async fn f(e: E, c: &C, x: X) -> R {}
            ))
            .contains("too many")
        );
        assert!(
            erro(parse_quote!(
                async fn f(e: E, c: &C) {}
            ))
            .contains("Result")
        );
        assert!(
            erro(parse_quote!(
                async fn f() -> R {}
            ))
            .contains("missing parameters")
        );
    }
}
