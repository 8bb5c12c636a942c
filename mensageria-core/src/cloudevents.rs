//! The CloudEvents 1.0 attributes of one delivery (binary mode: one header per attribute),
//! written once for every transport.

use crate::enviador::ContextoEnvio;

/// The CloudEvents 1.0 attributes of a delivery, as the HTTP binding's binary mode writes them
/// (header name, value), `ce-time` only when the message id carries a timestamp,
/// `ce-partitionkey` (the partitioning extension) only for a message with an ordering key, and
/// `ce-traceparent`/`ce-tracestate` (the distributed-tracing extension) only when the message
/// was enqueued in a trace ([`crate::rastreamento`]). Every
/// transport sends these: `Destino` as HTTP headers, a broker publisher as message headers.
///
/// ```
/// use mensageria_core::ContextoEnvio;
///
/// let ctx = ContextoEnvio::new(mensageria_core::uuid::Uuid::now_v7(), "mdfe.encerramento");
/// let atributos = mensageria_core::cloudevents::atributos(&ctx);
/// assert!(atributos.contains(&("ce-type", "mdfe.encerramento".to_owned())));
/// ```
pub fn atributos(ctx: &ContextoEnvio) -> Vec<(&'static str, String)> {
    let mut atributos = vec![
        ("ce-specversion", "1.0".to_owned()),
        ("ce-id", ctx.id_mensagem().to_string()),
        ("ce-type", codificar_atributo(ctx.tipo())),
        (
            "ce-source",
            codificar_atributo(ctx.app().unwrap_or("mensageria")),
        ),
    ];
    if let Some(instante) = enfileirada_em(ctx.id_mensagem()) {
        atributos.push(("ce-time", instante));
    }
    // The partitioning extension: an ordered message's ordering key, so a consumer that takes
    // several keys in one lane (mensageria-nats) knows which key a message holds back.
    if let Some(chave) = ctx.chave_ordem() {
        atributos.push(("ce-partitionkey", codificar_atributo(chave)));
    }
    // The distributed-tracing extension: the same context the W3C headers carry, as event
    // attributes, for a consumer that reads only the event.
    if let Some(rastreamento) = ctx.rastreamento() {
        atributos.push(("ce-traceparent", rastreamento.traceparent().to_owned()));
        if let Some(estado) = rastreamento.tracestate() {
            atributos.push(("ce-tracestate", estado.to_owned()));
        }
    }
    atributos
}

/// When message `id` was enqueued: the timestamp of its UUIDv7 (the saída makes one per
/// message at enqueue), in RFC 3339, UTC, milliseconds. `None` for an id without a timestamp.
fn enfileirada_em(id: uuid::Uuid) -> Option<String> {
    let (segundos, nanos) = id.get_timestamp()?.to_unix();
    let instante = chrono::DateTime::from_timestamp(i64::try_from(segundos).ok()?, nanos)?;
    Some(instante.to_rfc3339_opts(chrono::SecondsFormat::Millis, true))
}

/// A CloudEvents attribute as a header value: UTF-8 bytes outside printable ASCII, the space,
/// `"` and `%` percent-encoded (HTTP binding 1.0, section 3.1.3.2).
fn codificar_atributo(valor: &str) -> String {
    let mut codificado = String::with_capacity(valor.len());
    for byte in valor.bytes() {
        if (0x21..=0x7e).contains(&byte) && byte != b'"' && byte != b'%' {
            codificado.push(char::from(byte));
        } else {
            codificado.push_str(&format!("%{byte:02X}"));
        }
    }
    codificado
}

#[cfg(test)]
mod testes {
    use super::*;

    #[test]
    fn atributos_cloudevents_do_modo_binario() {
        // The id of the binding's example is not a UUID; ours is the message id, a UUIDv7
        // whose timestamp is 2018-04-05T03:56:24Z (the example's `ce-time`).
        let id = uuid::Uuid::new_v7(uuid::Timestamp::from_unix(
            uuid::NoContext,
            1_522_900_584,
            0,
        ));
        let ctx = ContextoEnvio::new(id, "com.example.someevent").com_app("/mycontext/subcontext");
        let lidos = atributos(&ctx);
        let valor = |nome: &str| {
            lidos
                .iter()
                .find(|(n, _)| *n == nome)
                .map(|(_, v)| v.as_str())
        };
        assert_eq!(valor("ce-specversion"), Some("1.0"));
        assert_eq!(valor("ce-id"), Some(id.to_string().as_str()));
        assert_eq!(valor("ce-type"), Some("com.example.someevent"));
        assert_eq!(valor("ce-source"), Some("/mycontext/subcontext"));
        assert_eq!(valor("ce-time"), Some("2018-04-05T03:56:24.000Z"));
        for (nome, valor) in &lidos {
            assert!(
                valor.bytes().all(|b| (0x21..=0x7e).contains(&b)),
                "{nome}: {valor}"
            );
        }
        // A hand-built context: no app, an id without a timestamp.
        let ctx = ContextoEnvio::new(uuid::Uuid::nil(), "a.b");
        let lidos = atributos(&ctx);
        assert!(lidos.contains(&("ce-source", "mensageria".to_owned())));
        assert!(!lidos.iter().any(|(nome, _)| *nome == "ce-time"));
    }

    #[test]
    fn atributo_fora_do_ascii_imprimivel_e_codificado() {
        assert_eq!(codificar_atributo("emissor"), "emissor");
        assert_eq!(codificar_atributo("faturação 1"), "fatura%C3%A7%C3%A3o%201");
        assert_eq!(codificar_atributo("a\"b%c"), "a%22b%25c");
    }
}
