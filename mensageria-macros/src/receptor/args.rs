//! The arguments of `#[receptor(...)]`.

use proc_macro2::{Span, TokenStream};
use syn::parse::Parser;
use syn::{Expr, LitStr};

use crate::tipo::TipoEscrito;

const EXEMPLO: &str = "e.g. `#[receptor(tipo = \"mdfe.encerramento\", chave_natural = (evento.cnpj, evento.chave_mdfe))]`";

/// `tipo = "..."` (optional when the payload is an `Evento`: the tipo it declares),
/// `chave_natural = <expr>`, optional `versao = <expr>`.
pub(crate) struct Args {
    pub(crate) tipo: Option<TipoEscrito>,
    /// The key's parts: the elements of a tuple expression, or the one expression.
    pub(crate) partes: Vec<Expr>,
    pub(crate) versao: Option<Expr>,
}

impl Args {
    pub(crate) fn parse(tokens: TokenStream) -> syn::Result<Self> {
        let mut tipo_lit: Option<LitStr> = None;
        let mut chave: Option<Expr> = None;
        let mut versao: Option<Expr> = None;
        let parser = syn::meta::parser(|meta| {
            let repetido = |nome: &str| meta.error(format!("`{nome}` is given twice"));
            if meta.path.is_ident("tipo") {
                crate::tipo::ler_literal(
                    &meta,
                    &mut tipo_lit,
                    repetido("tipo"),
                    crate::tipo::EXEMPLO_TIPO,
                )?;
            } else if meta.path.is_ident("chave_natural") {
                if chave.is_some() {
                    return Err(repetido("chave_natural"));
                }
                chave = Some(meta.value()?.parse()?);
            } else if meta.path.is_ident("versao") {
                if versao.is_some() {
                    return Err(repetido("versao"));
                }
                versao = Some(meta.value()?.parse()?);
            } else {
                return Err(meta.error(format!(
                    "unknown argument; #[receptor] takes `tipo` (optional when the payload is an #[evento]), `chave_natural` and optionally `versao`, {EXEMPLO}"
                )));
            }
            Ok(())
        });
        parser.parse2(tokens)?;
        let tipo = TipoEscrito::de(tipo_lit)?;
        let chave = chave.ok_or_else(|| {
            syn::Error::new(
                Span::call_site(),
                format!(
                    "missing `chave_natural`: every receptor is idempotent by the event's domain \
                     identity (the same event delivered twice must be recognised as the same), \
                     never by a third party's id; {EXEMPLO}"
                ),
            )
        })?;
        let partes = match chave {
            Expr::Tuple(tupla) if tupla.elems.is_empty() => {
                return Err(syn::Error::new_spanned(
                    tupla,
                    "`chave_natural` needs at least one part",
                ));
            }
            Expr::Tuple(tupla) => tupla.elems.into_iter().collect(),
            Expr::Paren(p) => vec![*p.expr],
            outra => vec![outra],
        };
        Ok(Self {
            tipo,
            partes,
            versao,
        })
    }
}

#[cfg(test)]
mod testes {
    use super::Args;
    use quote::quote;

    #[test]
    fn le_tupla_campo_e_versao() {
        let a = Args::parse(quote!(
            tipo = "a.b",
            chave_natural = (e.x, e.y()),
            versao = e.v
        ))
        .unwrap();
        assert_eq!(
            (
                a.tipo.unwrap().valor.as_str(),
                a.partes.len(),
                a.versao.is_some()
            ),
            ("a.b", 2, true)
        );
        let b = Args::parse(quote!(tipo = "a", chave_natural = e.id)).unwrap();
        assert_eq!(b.partes.len(), 1);
        // On an #[evento] payload the tipo comes from the type.
        let c = Args::parse(quote!(chave_natural = e.id)).unwrap();
        assert!(c.tipo.is_none());
    }

    #[test]
    fn erros_dizem_o_que_escrever() {
        for (tokens, trecho) in [
            (quote!(tipo = "a"), "missing `chave_natural`"),
            (quote!(tipo = "a", chave_natural = ()), "at least one part"),
            (
                quote!(tipo = "a", chave_natural = e.id, chave = 1),
                "unknown argument",
            ),
            (
                quote!(tipo = "a", tipo = "b", chave_natural = e.id),
                "given twice",
            ),
        ] {
            let erro = Args::parse(tokens).err().unwrap().to_string();
            assert!(erro.contains(trecho), "{erro}");
        }
    }
}
