//! W3C trace context carried with a message, from the span that enqueued it to the receptor's
//! effect.
//!
//! At [`enfileirar`](crate::enfileirar) the current span's context (`traceparent`,
//! `tracestate`) is stored in the saída row; the relay's `mensageria.entrega` span continues
//! it (a child of the enqueuing span, so one business event is one trace, and a redelivery is a
//! second delivery span in it); [`Destino`](crate::destino::Destino) sends it as the W3C headers and as
//! the CloudEvents distributed-tracing attributes, a broker transport as message headers; the
//! receptor's span continues it, so the user's function and its effect belong to the trace too.
//!
//! Capturing and continuing need the `otel` feature (OpenTelemetry through
//! `tracing-opentelemetry`, with the application's own tracer provider and exporter installed
//! as a `tracing` layer). Without it, nothing is captured (the columns stay NULL and no header
//! is sent) and an incoming context is checked and passed on but not continued: an app without
//! OpenTelemetry pays nothing.
//!
//! ```
//! use mensageria_core::rastreamento::ContextoRastreamento;
//!
//! let contexto = ContextoRastreamento::new(
//!     "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
//!     Some("congo=t61rcWkgMzE"),
//! )
//! .expect("a valid traceparent");
//! assert_eq!(contexto.id_rastreamento(), "0af7651916cd43dd8448eb211c80319c");
//! // Anything else is refused, never stored or passed on:
//! assert!(ContextoRastreamento::new("00-xyz", None).is_none());
//! ```

/// The longest `tracestate` kept: W3C allows 32 list members; beyond 512 characters a
/// propagator may drop it, and so do we (the `traceparent` is kept).
const LIMITE_TRACESTATE: usize = 512;

/// A message's W3C trace context: a valid `traceparent` and, if any, its `tracestate`.
#[derive(Debug, Clone, PartialEq, Eq)]
#[doc(alias("traceparent", "tracestate", "trace context", "W3C"))]
pub struct ContextoRastreamento {
    traceparent: String,
    tracestate: Option<String>,
}

impl ContextoRastreamento {
    /// The context of `traceparent` (version `00`: `00-<32 hex>-<16 hex>-<2 hex>`, lowercase,
    /// neither id all zeros) and `tracestate` (printable ASCII, at most 512 characters; kept
    /// only when the `traceparent` is valid, dropped when it is not). `None` for an invalid
    /// `traceparent`: hostile or broken input is never stored, continued or passed on.
    pub fn new(traceparent: &str, tracestate: Option<&str>) -> Option<Self> {
        if !traceparent_valido(traceparent) {
            return None;
        }
        let tracestate = tracestate
            .map(str::trim)
            .filter(|estado| tracestate_valido(estado))
            .map(str::to_owned);
        Some(Self {
            traceparent: traceparent.to_owned(),
            tracestate,
        })
    }

    /// The `traceparent` header's value.
    pub fn traceparent(&self) -> &str {
        &self.traceparent
    }

    /// The `tracestate` header's value, if any.
    pub fn tracestate(&self) -> Option<&str> {
        self.tracestate.as_deref()
    }

    /// The trace id (32 hex digits): what an operator searches for in the tracing backend.
    pub fn id_rastreamento(&self) -> &str {
        &self.traceparent[3..35]
    }

    /// The context of the current `tracing` span, if OpenTelemetry is in use (feature `otel`
    /// and a `tracing-opentelemetry` layer) and the span belongs to a trace. Always `None`
    /// without the feature.
    pub fn do_span_atual() -> Option<Self> {
        #[cfg(feature = "otel")]
        {
            otel::do_span(&tracing::Span::current())
        }
        #[cfg(not(feature = "otel"))]
        {
            None
        }
    }

    /// Whether the current `tracing` span belongs to an OpenTelemetry trace (feature `otel`);
    /// always `false` without the feature.
    pub fn em_rastro() -> bool {
        #[cfg(feature = "otel")]
        {
            otel::em_rastro(&tracing::Span::current())
        }
        #[cfg(not(feature = "otel"))]
        {
            false
        }
    }

    /// Makes `span` a child of this context (feature `otel`), so the work done in it (a
    /// delivery, a receptor's function and its effect) belongs to the message's trace. Call it
    /// before the span is first entered. Does nothing without the feature.
    pub fn continuar(&self, span: &tracing::Span) {
        #[cfg(feature = "otel")]
        otel::continuar(self, span);
        #[cfg(not(feature = "otel"))]
        let _ = span;
    }

    /// The headers that carry it: `traceparent` and, if any, `tracestate` (W3C Trace Context's
    /// names, used by HTTP and by NATS message headers alike).
    pub fn cabecalhos(&self) -> impl Iterator<Item = (&'static str, &str)> {
        std::iter::once(("traceparent", self.traceparent.as_str())).chain(
            self.tracestate
                .as_deref()
                .map(|estado| ("tracestate", estado)),
        )
    }

    /// Reads it from headers, with `valor(nome)` the value of the header `nome` (W3C's
    /// `traceparent`/`tracestate`, or, when those are absent, the CloudEvents
    /// distributed-tracing extension's `ce-traceparent`/`ce-tracestate`). `None` when there is
    /// none or it is invalid.
    pub fn de_cabecalhos<'a>(valor: impl Fn(&str) -> Option<&'a str>) -> Option<Self> {
        let (traceparent, tracestate) = match valor("traceparent") {
            Some(traceparent) => (traceparent, valor("tracestate")),
            None => (valor("ce-traceparent")?, valor("ce-tracestate")),
        };
        Self::new(traceparent.trim(), tracestate)
    }
}

fn hex_minusculo(texto: &str) -> bool {
    texto
        .bytes()
        .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

fn traceparent_valido(valor: &str) -> bool {
    let partes: Vec<&str> = valor.split('-').collect();
    let [versao, trace_id, span_id, flags] = partes[..] else {
        return false;
    };
    versao == "00"
        && trace_id.len() == 32
        && span_id.len() == 16
        && flags.len() == 2
        && [trace_id, span_id, flags].iter().all(|p| hex_minusculo(p))
        && trace_id.bytes().any(|b| b != b'0')
        && span_id.bytes().any(|b| b != b'0')
}

fn tracestate_valido(valor: &str) -> bool {
    !valor.is_empty()
        && valor.len() <= LIMITE_TRACESTATE
        && valor.bytes().all(|b| (0x20..0x7f).contains(&b))
}

#[cfg(feature = "otel")]
mod otel {
    //! Capture and continuation through OpenTelemetry's W3C propagator.

    use std::collections::HashMap;

    use opentelemetry::propagation::TextMapPropagator;
    use opentelemetry_sdk::propagation::TraceContextPropagator;
    use tracing_opentelemetry::OpenTelemetrySpanExt;

    use super::ContextoRastreamento;

    pub(super) fn em_rastro(span: &tracing::Span) -> bool {
        use opentelemetry::trace::TraceContextExt;
        !span.is_disabled() && span.context().span().span_context().is_valid()
    }

    pub(super) fn do_span(span: &tracing::Span) -> Option<ContextoRastreamento> {
        if span.is_disabled() {
            return None;
        }
        let contexto = span.context();
        let mut cabecalhos: HashMap<String, String> = HashMap::with_capacity(2);
        TraceContextPropagator::new().inject_context(&contexto, &mut cabecalhos);
        let traceparent = cabecalhos.get("traceparent")?;
        let tracestate = cabecalhos.get("tracestate").filter(|e| !e.is_empty());
        ContextoRastreamento::new(traceparent, tracestate.map(String::as_str))
    }

    pub(super) fn continuar(contexto: &ContextoRastreamento, span: &tracing::Span) {
        let cabecalhos: HashMap<String, String> = contexto
            .cabecalhos()
            .map(|(nome, valor)| (nome.to_owned(), valor.to_owned()))
            .collect();
        let pai = TraceContextPropagator::new().extract(&cabecalhos);
        // An error here means the span is disabled or no OpenTelemetry layer is installed:
        // nothing to continue, and nothing to report.
        let _ = span.set_parent(pai);
    }
}

#[cfg(test)]
mod testes {
    use super::ContextoRastreamento;

    const VALIDO: &str = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";

    #[test]
    fn aceita_o_exemplo_da_especificacao() {
        let contexto = ContextoRastreamento::new(VALIDO, Some("rojo=00f067aa0ba902b7")).unwrap();
        assert_eq!(contexto.traceparent(), VALIDO);
        assert_eq!(contexto.tracestate(), Some("rojo=00f067aa0ba902b7"));
        let cabecalhos: Vec<_> = contexto.cabecalhos().collect();
        assert_eq!(
            cabecalhos,
            [
                ("traceparent", VALIDO),
                ("tracestate", "rojo=00f067aa0ba902b7")
            ]
        );
    }

    #[test]
    fn recusa_o_que_nao_e_traceparent() {
        for invalido in [
            "",
            "00",
            "01-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
            "00-0AF7651916CD43DD8448EB211C80319C-b7ad6b7169203331-01",
            "00-00000000000000000000000000000000-b7ad6b7169203331-01",
            "00-0af7651916cd43dd8448eb211c80319c-0000000000000000-01",
            "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01-extra",
            "00-0af7651916cd43dd8448eb211c8031ç-b7ad6b7169203331-01",
            "00-0af7651916cd43dd8448eb211c80319c-b7ad6b716920333\n-01",
        ] {
            assert!(
                ContextoRastreamento::new(invalido, None).is_none(),
                "{invalido:?}"
            );
        }
    }

    #[test]
    fn descarta_tracestate_invalido_e_mantem_o_traceparent() {
        let longo = "a=".to_owned() + &"b".repeat(600);
        for estado in ["", "x=\u{7}", longo.as_str(), "ç=1"] {
            let contexto = ContextoRastreamento::new(VALIDO, Some(estado)).unwrap();
            assert_eq!(contexto.tracestate(), None, "{estado:?}");
        }
    }

    #[test]
    fn le_os_cabecalhos_w3c_antes_dos_do_cloudevents() {
        let cabecalhos = |nome: &str| match nome {
            "ce-traceparent" => Some("00-11111111111111111111111111111111-2222222222222222-00"),
            "traceparent" => Some(VALIDO),
            _ => None,
        };
        let lido = ContextoRastreamento::de_cabecalhos(cabecalhos).unwrap();
        assert_eq!(lido.traceparent(), VALIDO);
        let so_ce = |nome: &str| (nome == "ce-traceparent").then_some(VALIDO);
        assert_eq!(
            ContextoRastreamento::de_cabecalhos(so_ce)
                .unwrap()
                .traceparent(),
            VALIDO
        );
        assert!(ContextoRastreamento::de_cabecalhos(|_| None).is_none());
    }
}
