//! The user's function, as `#[receptor]` needs it:
//! `async fn f(tx: &mut Transaction<'_, DB>, evento: T) -> Result<(), Rejeicao>`.

use syn::{FnArg, GenericArgument, ItemFn, Pat, PathArguments, ReturnType, Type};

const FORMA: &str = "a receptor is `async fn name(tx: &mut Transaction<'_, Postgres>, evento: Payload) -> Result<(), Rejeicao>` (or `Sqlite`)";

/// The checked shape of a receptor function.
pub(crate) struct Modelo {
    pub(crate) banco: Type,
    pub(crate) payload: Type,
    pub(crate) evento: syn::Ident,
}

impl Modelo {
    pub(crate) fn novo(funcao: &ItemFn) -> syn::Result<Self> {
        let sig = &funcao.sig;
        let mut erros = Vec::new();
        if sig.asyncness.is_none() {
            erros.push(syn::Error::new_spanned(
                sig.fn_token,
                format!("#[receptor] needs an `async fn`; add `async` ({FORMA})"),
            ));
        }
        if !sig.generics.params.is_empty() || sig.generics.where_clause.is_some() {
            erros.push(syn::Error::new_spanned(
                &sig.generics,
                "a receptor cannot be generic: one function receives one concrete payload type",
            ));
        }
        if matches!(sig.output, ReturnType::Default) {
            erros.push(syn::Error::new(
                sig.paren_token.span.close(),
                "a receptor returns `Result<(), Rejeicao>` so the handler knows whether to commit; add `-> Result<(), Rejeicao>`",
            ));
        }
        let mut parametros = sig.inputs.iter();
        let banco = match parametros.next() {
            Some(FnArg::Receiver(r)) => {
                erros.push(syn::Error::new_spanned(
                    r,
                    "#[receptor] goes on a free function, not a method",
                ));
                None
            }
            Some(FnArg::Typed(p)) => match banco_da_transacao(&p.ty) {
                Some(banco) => Some(banco),
                None => {
                    erros.push(syn::Error::new_spanned(
                        &p.ty,
                        format!("the first parameter is the effect's transaction, `tx: &mut Transaction<'_, Postgres>` (or `Sqlite`); {FORMA}"),
                    ));
                    None
                }
            },
            None => {
                erros.push(syn::Error::new(
                    sig.paren_token.span.join(),
                    format!("missing parameters; {FORMA}"),
                ));
                None
            }
        };
        let evento = match parametros.next() {
            Some(FnArg::Typed(p)) => match (&*p.pat, &*p.ty) {
                (_, Type::Reference(r)) => {
                    erros.push(syn::Error::new_spanned(
                        r,
                        "the second parameter is the payload, taken by value; remove the `&`",
                    ));
                    None
                }
                (Pat::Ident(nome), ty) if nome.by_ref.is_none() && nome.subpat.is_none() => {
                    Some((nome.ident.clone(), ty.clone()))
                }
                (pat, _) => {
                    erros.push(syn::Error::new_spanned(
                        pat,
                        "name the payload parameter with a plain identifier (e.g. `evento`): `chave_natural` and `versao` refer to it by name",
                    ));
                    None
                }
            },
            Some(FnArg::Receiver(r)) => {
                erros.push(syn::Error::new_spanned(r, FORMA));
                None
            }
            None if !sig.inputs.is_empty() => {
                erros.push(syn::Error::new_spanned(
                    &sig.inputs,
                    "missing the second parameter, the payload: `evento: Payload`",
                ));
                None
            }
            None => None,
        };
        for excedente in parametros {
            erros.push(syn::Error::new_spanned(
                excedente,
                format!("too many parameters; {FORMA}"),
            ));
        }
        match crate::erros::combinar(erros) {
            Some(erro) => Err(erro),
            None => {
                let (evento, payload) = evento.expect("checked above");
                Ok(Self {
                    banco: banco.expect("checked above"),
                    payload,
                    evento,
                })
            }
        }
    }
}

/// `&mut Transaction<'_, DB>` (any path ending in `Transaction`) → `DB`.
fn banco_da_transacao(ty: &Type) -> Option<Type> {
    let Type::Reference(referencia) = ty else {
        return None;
    };
    referencia.mutability?;
    let Type::Path(caminho) = &*referencia.elem else {
        return None;
    };
    let ultimo = caminho.path.segments.last()?;
    if ultimo.ident != "Transaction" {
        return None;
    }
    let PathArguments::AngleBracketed(args) = &ultimo.arguments else {
        return None;
    };
    args.args.iter().rev().find_map(|arg| match arg {
        GenericArgument::Type(ty) => Some(ty.clone()),
        _ => None,
    })
}

#[cfg(test)]
mod testes {
    use super::Modelo;
    use syn::parse_quote;

    fn erro(f: syn::ItemFn) -> String {
        Modelo::novo(&f)
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default()
    }

    #[test]
    fn aceita_a_forma_canonica_e_acha_o_banco() {
        let f: syn::ItemFn = parse_quote! {
            async fn encerrar(tx: &mut sqlx::Transaction<'_, sqlx::Postgres>, evento: E) -> Result<(), Rejeicao> { Ok(()) }
        };
        let m = Modelo::novo(&f).unwrap();
        let banco = &m.banco;
        assert_eq!(quote::quote!(#banco).to_string(), "sqlx :: Postgres");
        assert_eq!(m.evento, "evento");
    }

    #[test]
    fn cada_desvio_tem_sua_mensagem() {
        assert!(
            erro(parse_quote!(
                fn f(tx: &mut Transaction<'_, P>, e: E) -> R {}
            ))
            .contains("async")
        );
        assert!(
            erro(parse_quote!(
                async fn f(tx: &Transaction<'_, P>, e: E) -> R {}
            ))
            .contains("transaction")
        );
        assert!(
            erro(parse_quote!(
                async fn f(tx: &mut Conn, e: E) -> R {}
            ))
            .contains("transaction")
        );
        assert!(
            erro(parse_quote!(
                async fn f(tx: &mut Transaction<'_, P>, e: &E) -> R {}
            ))
            .contains("by value")
        );
        assert!(
            erro(parse_quote!(
                async fn f(tx: &mut Transaction<'_, P>, E(x): E) -> R {}
            ))
            .contains("plain identifier")
        );
        assert!(
            erro(parse_quote!(
                async fn f(tx: &mut Transaction<'_, P>) -> R {}
            ))
            .contains("second parameter")
        );
        assert!(
            erro(parse_quote!(
                async fn f(tx: &mut Transaction<'_, P>, e: E) {}
            ))
            .contains("Rejeicao")
        );
        assert!(
            erro(parse_quote!(
                async fn f<T>(tx: &mut Transaction<'_, P>, e: T) -> R {}
            ))
            .contains("generic")
        );
    }
}
