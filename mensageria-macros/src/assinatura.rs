//! The signature checks both attributes make: an `async fn`, free, not generic, returning a
//! `Result`, with exactly two typed parameters, one of them the payload taken by value. Each
//! attribute describes its own shape ([`Forma`]) and checks what only it needs (the
//! transaction, the context) on the parameters this module hands back.

use syn::{FnArg, PatType, ReturnType, Signature, Type};

/// How one attribute names things in its messages.
pub(crate) struct Forma {
    /// The attribute, as written: `#[enviador]`.
    pub(crate) atributo: &'static str,
    /// The function with its article: "an enviador".
    pub(crate) funcao: &'static str,
    /// The whole expected signature: "an enviador is `async fn ...`".
    pub(crate) assinatura: &'static str,
    /// Why it cannot be generic, after "cannot be generic: ".
    pub(crate) por_que_nao_generico: &'static str,
    /// The return type and why: "`Result<(), FalhaEnvio>` so the relay knows whether to retry".
    pub(crate) retorno: &'static str,
    /// What the return type is, to add: "`-> Result<(), FalhaEnvio>`".
    pub(crate) adicionar_retorno: &'static str,
    /// What the second parameter is: "the delivery context, `ctx: &ContextoEnvio`".
    pub(crate) segundo: &'static str,
    /// How to write the second parameter when it is missing.
    pub(crate) segundo_faltando: &'static str,
    /// What to do instead of a third parameter, appended to "too many parameters" (may be "").
    pub(crate) em_vez_de_mais: &'static str,
    /// Why the payload is taken by value, appended to "taken by value" (may be "").
    pub(crate) payload_por_valor: &'static str,
    /// The traits the payload implements: "Serialize and Deserialize".
    pub(crate) payload_implementa: &'static str,
}

/// The two parameters, when they are typed ones; `None` where something was reported.
pub(crate) struct Parametros<'a> {
    /// The first parameter.
    pub(crate) primeiro: Option<&'a PatType>,
    /// The second parameter.
    pub(crate) segundo: Option<&'a PatType>,
}

/// Checks what both attributes require of `sig`, pushing one error per problem (each at its own
/// token) onto `erros`, and hands back the two parameters for the attribute's own checks.
pub(crate) fn conferir<'a>(
    sig: &'a Signature,
    forma: &Forma,
    erros: &mut Vec<syn::Error>,
) -> Parametros<'a> {
    modificadores(sig, forma, erros);
    if !sig.generics.params.is_empty() || sig.generics.where_clause.is_some() {
        erros.push(syn::Error::new_spanned(
            &sig.generics,
            format!(
                "{} cannot be generic: {}",
                forma.funcao, forma.por_que_nao_generico
            ),
        ));
    }
    if matches!(sig.output, ReturnType::Default) {
        erros.push(syn::Error::new(
            sig.paren_token.span.close(),
            format!(
                "{} returns {}; add {}",
                forma.funcao, forma.retorno, forma.adicionar_retorno
            ),
        ));
    }
    parametros(sig, forma, erros)
}

/// `async` and none of `const`, `unsafe`, `extern` or `...`.
fn modificadores(sig: &Signature, forma: &Forma, erros: &mut Vec<syn::Error>) {
    if sig.asyncness.is_none() {
        erros.push(syn::Error::new_spanned(
            sig.fn_token,
            format!(
                "{} needs an `async fn`; add `async` ({})",
                forma.atributo, forma.assinatura
            ),
        ));
    }
    let proibido = |modificador: &dyn quote::ToTokens, o_que: &str| {
        syn::Error::new_spanned(
            modificador,
            format!("{} cannot {o_que}; remove it", forma.funcao),
        )
    };
    if let Some(constness) = &sig.constness {
        erros.push(proibido(constness, "be `const`"));
    }
    if let Some(unsafety) = &sig.unsafety {
        erros.push(proibido(unsafety, "be `unsafe`"));
    }
    if let Some(abi) = &sig.abi {
        erros.push(proibido(abi, "have an `extern` ABI"));
    }
    if let Some(variadic) = &sig.variadic {
        erros.push(syn::Error::new_spanned(variadic, forma.assinatura));
    }
}

/// Exactly two typed parameters: not a method, none missing, none more.
fn parametros<'a>(
    sig: &'a Signature,
    forma: &Forma,
    erros: &mut Vec<syn::Error>,
) -> Parametros<'a> {
    let mut entradas = sig.inputs.iter();
    let primeiro = match entradas.next() {
        Some(FnArg::Receiver(receptor)) => {
            erros.push(syn::Error::new_spanned(
                receptor,
                format!(
                    "{} goes on a free function, not a method; move it out of the `impl` block",
                    forma.atributo
                ),
            ));
            None
        }
        Some(FnArg::Typed(parametro)) => Some(parametro),
        None => {
            erros.push(syn::Error::new(
                sig.paren_token.span.join(),
                format!("missing parameters; {}", forma.assinatura),
            ));
            None
        }
    };
    let segundo = match entradas.next() {
        Some(FnArg::Typed(parametro)) => Some(parametro),
        Some(receptor @ FnArg::Receiver(_)) => {
            erros.push(syn::Error::new_spanned(
                receptor,
                format!("the second parameter is {}", forma.segundo),
            ));
            None
        }
        None if !sig.inputs.is_empty() => {
            erros.push(syn::Error::new_spanned(
                &sig.inputs,
                format!("missing the second parameter, {}", forma.segundo_faltando),
            ));
            None
        }
        None => None,
    };
    for excedente in entradas {
        erros.push(syn::Error::new_spanned(
            excedente,
            format!(
                "too many parameters; {}{}",
                forma.assinatura, forma.em_vez_de_mais
            ),
        ));
    }
    Parametros { primeiro, segundo }
}

/// The payload parameter: a concrete type taken by value. `qual` says which parameter it is:
/// "the first parameter".
pub(crate) fn payload<'a>(
    parametro: &'a PatType,
    qual: &str,
    forma: &Forma,
    erros: &mut Vec<syn::Error>,
) -> Option<&'a Type> {
    match &*parametro.ty {
        Type::Reference(referencia) => {
            erros.push(syn::Error::new_spanned(
                referencia,
                format!(
                    "{qual} is the payload, taken by value{}; remove the `&`",
                    forma.payload_por_valor
                ),
            ));
            None
        }
        Type::ImplTrait(_) | Type::Infer(_) => {
            erros.push(syn::Error::new_spanned(
                &parametro.ty,
                format!(
                    "the payload must be a concrete type that implements {}",
                    forma.payload_implementa
                ),
            ));
            None
        }
        ty => Some(ty),
    }
}

#[cfg(test)]
mod testes {
    use super::*;
    use syn::parse_quote;

    const FORMA_DE_TESTE: Forma = Forma {
        atributo: "#[teste]",
        funcao: "a teste",
        assinatura: "a teste is `async fn f(a: A, b: &B) -> R`",
        por_que_nao_generico: "one function, one type",
        retorno: "`R` so we know",
        adicionar_retorno: "`-> R`",
        segundo: "`b: &B`",
        segundo_faltando: "`b: &B`",
        em_vez_de_mais: "; use `b`",
        payload_por_valor: " (because)",
        payload_implementa: "Deserialize",
    };

    fn erros(sig: Signature) -> Vec<String> {
        let mut erros = Vec::new();
        conferir(&sig, &FORMA_DE_TESTE, &mut erros);
        erros.into_iter().map(|e| e.to_string()).collect()
    }

    #[test]
    fn a_forma_certa_passa_e_devolve_os_dois_parametros() {
        let sig: Signature = parse_quote!(async fn f(a: A, b: &B) -> R);
        let mut erros = Vec::new();
        let parametros = conferir(&sig, &FORMA_DE_TESTE, &mut erros);
        assert!(erros.is_empty(), "{:?}", erros);
        assert!(parametros.primeiro.is_some() && parametros.segundo.is_some());
    }

    #[test]
    fn cada_desvio_e_dito_e_todos_de_uma_vez() {
        for (sig, trecho) in [
            (parse_quote!(fn f(a: A, b: &B) -> R), "needs an `async fn`"),
            (
                parse_quote!(async unsafe fn f(a: A, b: &B) -> R),
                "`unsafe`",
            ),
            (
                parse_quote!(async extern "C" fn f(a: A, b: &B) -> R),
                "`extern`",
            ),
            (
                parse_quote!(async fn f<T>(a: T, b: &B) -> R),
                "cannot be generic",
            ),
            (
                parse_quote!(async fn f(a: A, b: &B) -> R where A: Copy),
                "generic",
            ),
            (parse_quote!(async fn f(a: A, b: &B)), "add `-> R`"),
            (parse_quote!(async fn f(&self, b: &B) -> R), "not a method"),
            (parse_quote!(async fn f() -> R), "missing parameters"),
            (
                parse_quote!(async fn f(a: A) -> R),
                "missing the second parameter",
            ),
            (
                parse_quote!(async fn f(a: A, b: &B, c: C) -> R),
                "too many parameters",
            ),
        ] {
            let erros = erros(sig);
            assert_eq!(erros.len(), 1, "{erros:?}");
            assert!(erros[0].contains(trecho), "{erros:?} lacks {trecho:?}");
        }
        let todos = erros(parse_quote!(fn f<T>(&self) -> R));
        assert_eq!(todos.len(), 4, "{todos:?}");
    }

    #[test]
    fn payload_e_por_valor_e_concreto() {
        let mut erros = Vec::new();
        let por_valor: PatType = parse_quote!(e: Evento);
        let primeiro = "the first parameter";
        assert!(payload(&por_valor, primeiro, &FORMA_DE_TESTE, &mut erros).is_some());
        let por_referencia: PatType = parse_quote!(e: &Evento);
        assert!(payload(&por_referencia, primeiro, &FORMA_DE_TESTE, &mut erros).is_none());
        let abstrato: PatType = parse_quote!(e: impl Serialize);
        assert!(payload(&abstrato, primeiro, &FORMA_DE_TESTE, &mut erros).is_none());
        let textos: Vec<String> = erros.iter().map(ToString::to_string).collect();
        assert!(
            textos[0].contains(
                "the first parameter is the payload, taken by value (because); remove the `&`"
            ),
            "{textos:?}"
        );
        assert!(textos[1].contains("concrete type"), "{textos:?}");
    }
}
