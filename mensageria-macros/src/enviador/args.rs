//! The arguments of `#[enviador(...)]`.

use proc_macro2::{Span, TokenStream};
use syn::LitStr;
use syn::parse::Parser;

/// `tipo = "..."`, checked.
pub(crate) struct Args {
    pub(crate) tipo: String,
    pub(crate) tipo_lit: LitStr,
}

impl Args {
    pub(crate) fn parse(tokens: TokenStream) -> syn::Result<Self> {
        let mut tipo_lit: Option<LitStr> = None;
        let parser = syn::meta::parser(|meta| {
            if meta.path.is_ident("tipo") {
                if tipo_lit.is_some() {
                    return Err(
                        meta.error("`tipo` is given twice; an enviador sends exactly one tipo")
                    );
                }
                tipo_lit = Some(meta.value()?.parse().map_err(|erro| {
                    syn::Error::new(
                        erro.span(),
                        "`tipo` takes a string literal, e.g. `tipo = \"mdfe.encerramento\"`",
                    )
                })?);
                Ok(())
            } else {
                Err(meta.error(
                    "unknown argument; #[enviador] takes only `tipo = \"...\"`, e.g. \
                     `#[enviador(tipo = \"mdfe.encerramento\")]`",
                ))
            }
        });
        parser.parse2(tokens)?;
        let tipo_lit = tipo_lit.ok_or_else(|| {
            syn::Error::new(
                Span::call_site(),
                "missing `tipo`; write `#[enviador(tipo = \"mdfe.encerramento\")]` with the tipo this function sends",
            )
        })?;
        let tipo = crate::tipo::validar(&tipo_lit)?;
        Ok(Self { tipo, tipo_lit })
    }
}

#[cfg(test)]
mod testes {
    use super::Args;
    use quote::quote;

    #[test]
    fn le_o_tipo() {
        let args = Args::parse(quote!(tipo = "mdfe.encerramento")).unwrap();
        assert_eq!(args.tipo, "mdfe.encerramento");
    }

    #[test]
    fn erros_dizem_o_que_escrever() {
        for (tokens, trecho) in [
            (quote!(), "missing `tipo`"),
            (quote!(tipo = 3), "string literal"),
            (quote!(tipo = "a", tipo = "b"), "given twice"),
            (quote!(tipo = "a", destino = "b"), "unknown argument"),
            (quote!(tipo = "A"), "lowercase"),
        ] {
            let erro = Args::parse(tokens).err().unwrap().to_string();
            assert!(erro.contains(trecho), "{erro}");
        }
    }
}
