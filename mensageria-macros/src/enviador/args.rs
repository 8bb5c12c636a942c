//! The arguments of `#[enviador(...)]`.

use proc_macro2::TokenStream;
use syn::LitStr;
use syn::parse::Parser;

use crate::tipo::TipoEscrito;

/// `tipo = "..."`, checked (absent when the payload is an `Evento`: its tipo is the one the type
/// declares); optionally `ordem = <expr>`, the ordering key of each payload.
pub(crate) struct Args {
    pub(crate) tipo: Option<TipoEscrito>,
    pub(crate) ordem: Option<syn::Expr>,
}

impl Args {
    pub(crate) fn parse(tokens: TokenStream) -> syn::Result<Self> {
        let mut tipo_lit: Option<LitStr> = None;
        let mut ordem: Option<syn::Expr> = None;
        let parser = syn::meta::parser(|meta| {
            if meta.path.is_ident("tipo") {
                let repetido =
                    meta.error("`tipo` is given twice; an enviador sends exactly one tipo");
                crate::tipo::ler_literal(&meta, &mut tipo_lit, repetido, crate::tipo::EXEMPLO_TIPO)
            } else if meta.path.is_ident("ordem") {
                if ordem.is_some() {
                    return Err(
                        meta.error("`ordem` is given twice; a message has one ordering key")
                    );
                }
                ordem = Some(meta.value()?.parse()?);
                Ok(())
            } else {
                Err(meta.error(
                    "unknown argument; #[enviador] takes `tipo = \"...\"` (optional when the \
                     payload is an #[evento]) and optionally `ordem = <key>`, e.g. \
                     `#[enviador(tipo = \"mdfe.encerramento\", ordem = evento.chave_mdfe)]`",
                ))
            }
        });
        parser.parse2(tokens)?;
        Ok(Self {
            tipo: TipoEscrito::de(tipo_lit)?,
            ordem,
        })
    }
}

#[cfg(test)]
mod testes {
    use super::Args;
    use quote::quote;

    #[test]
    fn le_o_tipo() {
        let args = Args::parse(quote!(tipo = "mdfe.encerramento")).unwrap();
        assert_eq!(args.tipo.unwrap().valor, "mdfe.encerramento");
        assert!(args.ordem.is_none());
        let args = Args::parse(quote!(tipo = "pedido.passo", ordem = evento.pedido)).unwrap();
        assert!(args.ordem.is_some());
        // The tipo of an #[evento] payload comes from the type.
        let args = Args::parse(quote!()).unwrap();
        assert!(args.tipo.is_none());
    }

    #[test]
    fn erros_dizem_o_que_escrever() {
        for (tokens, trecho) in [
            (quote!(tipo = 3), "string literal"),
            (quote!(tipo = "a", tipo = "b"), "given twice"),
            (quote!(tipo = "a", destino = "b"), "unknown argument"),
            (
                quote!(tipo = "a", ordem = x, ordem = y),
                "`ordem` is given twice",
            ),
            (quote!(tipo = "A"), "lowercase"),
        ] {
            let erro = Args::parse(tokens).err().unwrap().to_string();
            assert!(erro.contains(trecho), "{erro}");
        }
    }
}
