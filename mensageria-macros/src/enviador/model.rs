//! The user's function, as `#[enviador]` needs it: `async fn f(evento: T, ctx: &ContextoEnvio)`.

use syn::{ItemFn, Type};

use crate::assinatura::{self, Forma};

const FORMA: Forma = Forma {
    atributo: "#[enviador]",
    funcao: "an enviador",
    assinatura: "an enviador is `async fn name(evento: Payload, ctx: &ContextoEnvio) -> Result<(), FalhaEnvio>`",
    por_que_nao_generico: "one function sends one concrete payload type; write one #[enviador] \
                           per payload type",
    retorno: "`Result<(), FalhaEnvio>` so the relay knows whether to retry",
    adicionar_retorno: "`-> Result<(), FalhaEnvio>`",
    segundo: "the delivery context, `ctx: &ContextoEnvio`",
    segundo_faltando: "`ctx: &ContextoEnvio` (name it `_ctx` if unused)",
    em_vez_de_mais: "; reach other resources through `ctx.recurso::<T>()`",
    payload_por_valor: " (it is decoded from the saída for each delivery)",
    payload_implementa: "Serialize and Deserialize",
};

/// The checked shape of an enviador function.
pub(crate) struct Modelo<'a> {
    pub(crate) payload: &'a Type,
}

impl<'a> Modelo<'a> {
    /// Checks the signature; every problem found is reported, each at its own token.
    pub(crate) fn novo(funcao: &'a ItemFn) -> syn::Result<Self> {
        let mut erros = Vec::new();
        let parametros = assinatura::conferir(&funcao.sig, &FORMA, &mut erros);
        let payload = parametros
            .primeiro
            .and_then(|p| assinatura::payload(p, "the first parameter", &FORMA, &mut erros));
        if let Some(ctx) = parametros.segundo
            && !matches!(&*ctx.ty, Type::Reference(_))
        {
            erros.push(syn::Error::new_spanned(
                ctx,
                format!("the second parameter is {}", FORMA.segundo),
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

    /// The checks shared with `#[receptor]` are tested in `assinatura`; these are the
    /// enviador's own, and the shared ones worded for it.
    #[test]
    fn cada_desvio_tem_sua_mensagem() {
        let casos: [(syn::ItemFn, &str); 5] = [
            (
                parse_quote!(
                    fn f(e: E, c: &C) -> R {}
                ),
                "#[enviador] needs an `async fn`",
            ),
            (
                parse_quote!(
                    async fn f(e: &E, c: &C) -> R {}
                ),
                "saída for each delivery",
            ),
            (
                parse_quote!(
                    async fn f(e: E) -> R {}
                ),
                "`ctx: &ContextoEnvio`",
            ),
            (
                parse_quote!(
                    async fn f(e: E, c: C) -> R {}
                ),
                "the delivery context",
            ),
            (
                parse_quote!(
                    async fn f(e: E, c: &C, x: X) -> R {}
                ),
                "ctx.recurso",
            ),
        ];
        for (funcao, trecho) in casos {
            let erro = erro(funcao);
            assert!(erro.contains(trecho), "{erro:?} lacks {trecho:?}");
        }
    }
}
