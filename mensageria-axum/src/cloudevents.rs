//! CloudEvents 1.0 over HTTP as a receptor reads it: binary mode, where the body is the event's
//! data and the attributes are `ce-*` headers (what a mensageria relay sends, and what any
//! CloudEvents producer can send).
//!
//! - `ce-id`, when there is no `x-request-id`, is the message and request id;
//! - `ce-type`, when present, must be the route's tipo (400 `invalid_cloudevent` otherwise);
//! - `ce-specversion`, when present, must be `1.0` (400 `invalid_cloudevent` otherwise);
//! - a `ce-*` attribute sent twice is refused (400 `invalid_cloudevent`): which of the two counts
//!   would be up to each reader (a proxy, a log, this route), so neither is taken.
//!
//! The single route and the batch route (`{base}/{tipo}/lote`) check the same.
//!
//! Structured mode (`Content-Type: application/cloudevents+json`, the whole event as a JSON
//! envelope) and batched mode are not supported: 415, so an envelope is never read as the data.

use axum::http::{HeaderMap, HeaderValue, header};

/// What the name of every CloudEvents attribute header starts with (header names are lowercase).
const PREFIXO: &str = "ce-";
/// The event's id.
pub(crate) const ID: &str = "ce-id";
/// The event's type: for a receptor, its tipo.
const TIPO: &str = "ce-type";
/// The CloudEvents version.
const VERSAO: &str = "ce-specversion";
/// The only CloudEvents version read.
const VERSAO_ACEITA: &str = "1.0";

/// Whether the CloudEvents attributes present fit the route of `tipo`; the reason otherwise.
/// A request without them (a plain JSON POST) fits.
pub(crate) fn conferir(cabecalhos: &HeaderMap, tipo: &str) -> Result<(), String> {
    for nome in cabecalhos.keys() {
        let vezes = cabecalhos.get_all(nome).iter().count();
        if nome.as_str().starts_with(PREFIXO) && vezes > 1 {
            return Err(format!(
                "`{nome}` is sent {vezes} times: send each CloudEvents attribute once"
            ));
        }
    }
    if let Some(versao) = cabecalhos.get(VERSAO)
        && versao.as_bytes() != VERSAO_ACEITA.as_bytes()
    {
        return Err(format!(
            "ce-specversion `{}` is not supported: send CloudEvents {VERSAO_ACEITA} \
             (`ce-specversion: {VERSAO_ACEITA}`)",
            citar(versao)
        ));
    }
    if let Some(tipo_do_evento) = cabecalhos.get(TIPO)
        && tipo_do_evento.as_bytes() != tipo.as_bytes()
    {
        return Err(format!(
            "ce-type `{}` is not this route's tipo `{tipo}`: post each event to the receptor of \
             its type",
            citar(tipo_do_evento)
        ));
    }
    Ok(())
}

/// Whether the body is a CloudEvents structured or batched envelope
/// (`application/cloudevents+json`, `application/cloudevents-batch+json`, …), which a receptor
/// does not read.
pub(crate) fn estruturado(cabecalhos: &HeaderMap) -> bool {
    cabecalhos
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .and_then(|tipo| tipo.trim().split_once('/'))
        .is_some_and(|(principal, sub)| {
            principal.eq_ignore_ascii_case("application")
                && sub.len() >= 11
                && sub.is_char_boundary(11)
                && sub[..11].eq_ignore_ascii_case("cloudevents")
        })
}

/// A header value for an error message: printable ASCII, at most 64 characters.
fn citar(valor: &HeaderValue) -> String {
    let texto = String::from_utf8_lossy(valor.as_bytes());
    let mut citado: String = texto
        .chars()
        .take(64)
        .map(|c| {
            if c.is_ascii_graphic() || c == ' ' {
                c
            } else {
                '?'
            }
        })
        .collect();
    if texto.chars().nth(64).is_some() {
        citado.push('…');
    }
    citado
}

#[cfg(test)]
mod testes {
    use super::*;

    fn com(pares: &[(&'static str, &str)]) -> HeaderMap {
        let mut cabecalhos = HeaderMap::new();
        for (nome, valor) in pares {
            cabecalhos.insert(*nome, HeaderValue::from_str(valor).unwrap());
        }
        cabecalhos
    }

    #[test]
    fn o_exemplo_do_modo_binario_confere_com_a_rota_do_seu_tipo() {
        // HTTP protocol binding 1.0, section 3.1.3.1.
        let exemplo = com(&[
            ("ce-specversion", "1.0"),
            ("ce-type", "com.example.someevent"),
            ("ce-time", "2018-04-05T03:56:24Z"),
            ("ce-id", "1234-1234-1234"),
            ("ce-source", "/mycontext/subcontext"),
            ("content-type", "application/json; charset=utf-8"),
        ]);
        assert_eq!(conferir(&exemplo, "com.example.someevent"), Ok(()));
        assert!(!estruturado(&exemplo));
        let erro = conferir(&exemplo, "outro.tipo").unwrap_err();
        assert!(
            erro.contains("com.example.someevent") && erro.contains("outro.tipo"),
            "{erro}"
        );
        // Without CloudEvents attributes, nothing to check.
        assert_eq!(conferir(&HeaderMap::new(), "a.b"), Ok(()));
    }

    #[test]
    fn um_atributo_repetido_e_recusado_mesmo_que_o_primeiro_caiba() {
        for (nome, valores) in [
            ("ce-type", ["a.b", "outro.tipo"]),
            ("ce-type", ["a.b", "a.b"]),
            ("ce-specversion", ["1.0", "1.0"]),
            ("ce-id", ["1", "2"]),
            ("ce-source", ["/a", "/b"]),
        ] {
            let mut cabecalhos = HeaderMap::new();
            for valor in valores {
                cabecalhos.append(nome, HeaderValue::from_static(valor));
            }
            let erro = conferir(&cabecalhos, "a.b").unwrap_err();
            assert!(erro.contains(nome) && erro.contains("2 times"), "{erro}");
        }
        // Other headers may repeat.
        let mut cabecalhos = com(&[("ce-type", "a.b")]);
        cabecalhos.append("accept", HeaderValue::from_static("a/b"));
        cabecalhos.append("accept", HeaderValue::from_static("c/d"));
        assert_eq!(conferir(&cabecalhos, "a.b"), Ok(()));
    }

    #[test]
    fn so_a_versao_1_0_e_lida() {
        for ruim in ["0.3", "1.0.1", "1", " 1.0", ""] {
            let erro = conferir(&com(&[("ce-specversion", ruim)]), "a.b").unwrap_err();
            assert!(erro.contains("ce-specversion"), "{ruim}: {erro}");
        }
        let longo = "x".repeat(500);
        let erro = conferir(&com(&[("ce-specversion", &longo)]), "a.b").unwrap_err();
        assert!(erro.len() < 200, "{erro}");
    }

    #[test]
    fn o_modo_estruturado_e_reconhecido() {
        for estrut in [
            "application/cloudevents+json",
            "Application/CloudEvents+JSON; charset=utf-8",
            "application/cloudevents-batch+json",
        ] {
            assert!(estruturado(&com(&[("content-type", estrut)])), "{estrut}");
        }
        for outro in [
            "application/json",
            "application/problem+json",
            "text/plain",
            "",
        ] {
            assert!(!estruturado(&com(&[("content-type", outro)])), "{outro}");
        }
        assert!(!estruturado(&HeaderMap::new()));
    }
}
