//! The user's function, as `#[receptor]` needs it:
//! `async fn f(tx: &mut Transaction<'_, DB>, evento: T) -> Result<(), Rejeicao>`.

use syn::{GenericArgument, ItemFn, Pat, PathArguments, Type};

use crate::assinatura::{self, Forma};

const FORMA: Forma = Forma {
    atributo: "#[receptor]",
    funcao: "a receptor",
    assinatura: "a receptor is `async fn name(tx: &mut Transaction<'_, Postgres>, evento: Payload) -> Result<(), Rejeicao>` (or `Sqlite`)",
    por_que_nao_generico: "one function receives one concrete payload type",
    retorno: "`Result<(), Rejeicao>` so the handler knows whether to commit",
    adicionar_retorno: "`-> Result<(), Rejeicao>`",
    segundo: "the payload, `evento: Payload`",
    segundo_faltando: "the payload: `evento: Payload`",
    em_vez_de_mais: "",
    payload_por_valor: "",
    payload_implementa: "Deserialize",
};

/// The checked shape of a receptor function.
pub(crate) struct Modelo {
    pub(crate) banco: Type,
    pub(crate) payload: Type,
    pub(crate) evento: syn::Ident,
}

impl Modelo {
    pub(crate) fn novo(funcao: &ItemFn) -> syn::Result<Self> {
        let mut erros = Vec::new();
        let parametros = assinatura::conferir(&funcao.sig, &FORMA, &mut erros);
        let banco = parametros.primeiro.and_then(|tx| {
            let banco = banco_da_transacao(&tx.ty);
            if banco.is_none() {
                erros.push(syn::Error::new_spanned(
                    &tx.ty,
                    format!(
                        "the first parameter is the effect's transaction, \
                         `tx: &mut Transaction<'_, Postgres>` (or `Sqlite`); {}",
                        FORMA.assinatura
                    ),
                ));
            }
            banco
        });
        let evento = parametros.segundo.and_then(|evento| {
            let payload = assinatura::payload(evento, "the second parameter", &FORMA, &mut erros)?;
            match &*evento.pat {
                Pat::Ident(nome) if nome.by_ref.is_none() && nome.subpat.is_none() => {
                    Some((nome.ident.clone(), payload.clone()))
                }
                pat => {
                    erros.push(syn::Error::new_spanned(
                        pat,
                        "name the payload parameter with a plain identifier (e.g. `evento`): \
                         `chave_natural` and `versao` refer to it by name",
                    ));
                    None
                }
            }
        });
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

    /// The checks shared with `#[enviador]` are tested in `assinatura`; these are the
    /// receptor's own, and the shared ones worded for it.
    #[test]
    fn cada_desvio_tem_sua_mensagem() {
        let casos: [(syn::ItemFn, &str); 6] = [
            (
                parse_quote!(
                    fn f(tx: &mut Transaction<'_, P>, e: E) -> R {}
                ),
                "#[receptor] needs",
            ),
            (
                parse_quote!(
                    async fn f(tx: &Transaction<'_, P>, e: E) -> R {}
                ),
                "transaction",
            ),
            (
                parse_quote!(
                    async fn f(tx: &mut Conn, e: E) -> R {}
                ),
                "transaction",
            ),
            (
                parse_quote!(
                    async fn f(tx: &mut Transaction<'_, P>, e: &E) -> R {}
                ),
                "by value",
            ),
            (
                parse_quote!(
                    async fn f(tx: &mut Transaction<'_, P>, E(x): E) -> R {}
                ),
                "plain identifier",
            ),
            (
                parse_quote!(
                    async fn f(tx: &mut Transaction<'_, P>, e: E) {}
                ),
                "Rejeicao",
            ),
        ];
        for (funcao, trecho) in casos {
            let erro = erro(funcao);
            assert!(erro.contains(trecho), "{erro:?} lacks {trecho:?}");
        }
    }
}
