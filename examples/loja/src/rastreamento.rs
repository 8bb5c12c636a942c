//! Each service's spans, when `LOJA_SPANS` names a file: an OpenTelemetry tracer provider
//! (resource `service.name` = the service, every trace sampled) installed as a
//! `tracing-opentelemetry` layer, whose exporter appends one JSON line per finished span to that
//! file. The three services append to the same file, so one `POST /pedidos` can be read back as
//! one trace across the three processes: the request, the enqueue of `pedido.criado`, its
//! delivery to the stream, the receptors of `estoque` and `analise`, the reply's enqueue and
//! delivery, and `pedidos`' receptor of the reply.
//!
//! The exporter runs in OpenTelemetry's simple processor: each span is written when it ends, so
//! what a service recorded is on disk when it stops, whatever stops it. Without `LOJA_SPANS`
//! nothing is installed, as before.
//!
//! ```no_run
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! // At the start of a service's `main`; kept until it returns.
//! let _rastreamento = loja::rastreamento::instalar("pedidos")?;
//! # Ok(())
//! # }
//! ```

use std::collections::{BTreeMap, HashMap};
use std::error::Error;
use std::fs::{File, OpenOptions};
use std::io::Write as _;
use std::path::Path;
use std::sync::Mutex;
use std::time::{SystemTime, UNIX_EPOCH};

use opentelemetry::trace::{SpanId, TracerProvider as _};
use opentelemetry::{Key, KeyValue};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::error::{OTelSdkError, OTelSdkResult};
use opentelemetry_sdk::trace::{Sampler, SdkTracerProvider, SpanData, SpanExporter};
use serde::{Deserialize, Serialize};
use tracing_subscriber::Layer as _;
use tracing_subscriber::filter::{EnvFilter, LevelFilter};
use tracing_subscriber::layer::SubscriberExt as _;
use tracing_subscriber::util::SubscriberInitExt as _;

/// The environment variable naming the file the spans are appended to.
pub const VARIAVEL: &str = "LOJA_SPANS";

/// One finished span: one line of the file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SpanGravado {
    /// The resource's `service.name`: the process that recorded it.
    pub service: String,
    /// The span's name (`POST /pedidos`, `mensageria.entrega`, …).
    pub name: String,
    /// 32 hex digits.
    pub trace_id: String,
    /// 16 hex digits.
    pub span_id: String,
    /// The parent's span id (maybe another process's), `None` for a trace's root.
    pub parent_span_id: Option<String>,
    /// Start, in nanoseconds since the Unix epoch.
    pub start_unix_nanos: u64,
    /// End, in nanoseconds since the Unix epoch.
    pub end_unix_nanos: u64,
    /// The span's fields (`tipo`, `id_mensagem`, `pedido`, …), as text.
    pub attributes: BTreeMap<String, String>,
}

impl SpanGravado {
    /// The attribute `chave`, if the span has it.
    pub fn atributo(&self, chave: &str) -> Option<&str> {
        self.attributes.get(chave).map(String::as_str)
    }

    fn duracao_ms(&self) -> f64 {
        self.end_unix_nanos.saturating_sub(self.start_unix_nanos) as f64 / 1e6
    }
}

/// An OpenTelemetry span exporter appending one JSON line ([`SpanGravado`]) per span to a file,
/// opened for appending (several processes may share it: each batch is one `write`).
#[derive(Debug)]
pub struct ExportadorJsonl {
    arquivo: Mutex<File>,
    servico: String,
}

impl ExportadorJsonl {
    /// Opens (or creates) `caminho` for appending.
    pub fn abrir(caminho: &Path) -> std::io::Result<Self> {
        let arquivo = OpenOptions::new().create(true).append(true).open(caminho)?;
        Ok(Self {
            arquivo: Mutex::new(arquivo),
            servico: "unknown_service".into(),
        })
    }

    fn gravado(&self, span: &SpanData) -> SpanGravado {
        let pai = span.parent_span_id;
        SpanGravado {
            service: self.servico.clone(),
            name: span.name.to_string(),
            trace_id: span.span_context.trace_id().to_string(),
            span_id: span.span_context.span_id().to_string(),
            parent_span_id: (pai != SpanId::INVALID).then(|| pai.to_string()),
            start_unix_nanos: nanos(span.start_time),
            end_unix_nanos: nanos(span.end_time),
            attributes: span
                .attributes
                .iter()
                .map(|KeyValue { key, value, .. }| (key.to_string(), value.to_string()))
                .collect(),
        }
    }
}

fn nanos(instante: SystemTime) -> u64 {
    instante
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
}

impl SpanExporter for ExportadorJsonl {
    async fn export(&self, lote: Vec<SpanData>) -> OTelSdkResult {
        let mut linhas = Vec::new();
        for span in &lote {
            serde_json::to_writer(&mut linhas, &self.gravado(span))
                .map_err(|erro| OTelSdkError::InternalFailure(erro.to_string()))?;
            linhas.push(b'\n');
        }
        let mut arquivo = self
            .arquivo
            .lock()
            .map_err(|_| OTelSdkError::InternalFailure("span file lock poisoned".into()))?;
        arquivo
            .write_all(&linhas)
            .map_err(|erro| OTelSdkError::InternalFailure(format!("{VARIAVEL}: {erro}")))
    }

    fn set_resource(&mut self, resource: &Resource) {
        if let Some(nome) = resource.get(&Key::from_static_str("service.name")) {
            self.servico = nome.to_string();
        }
    }
}

/// What [`instalar`] installed. Dropping it (at the end of `main`) shuts the tracer provider
/// down; the spans are already on disk by then.
#[derive(Debug)]
pub struct Rastreamento {
    provedor: SdkTracerProvider,
}

impl Drop for Rastreamento {
    fn drop(&mut self) {
        let _ = self.provedor.shutdown();
    }
}

/// Installs the process's `tracing` subscriber: log lines on stderr (`RUST_LOG`, `info` by
/// default), and, when `LOJA_SPANS` names a file, a `tracing-opentelemetry` layer over a tracer
/// provider of resource `service.name` = `servico`, sampling every trace, exporting through
/// [`ExportadorJsonl`] (INFO spans and above: the request's and mensageria's); its handle is
/// returned then, `None` otherwise.
pub fn instalar(servico: &'static str) -> Result<Option<Rastreamento>, Box<dyn Error>> {
    let Some(caminho) = std::env::var_os(VARIAVEL).filter(|c| !c.is_empty()) else {
        tracing_subscriber::registry().with(linhas()).try_init()?;
        return Ok(None);
    };
    let exportador = ExportadorJsonl::abrir(Path::new(&caminho))
        .map_err(|erro| format!("{VARIAVEL}={}: {erro}", caminho.to_string_lossy()))?;
    let provedor = SdkTracerProvider::builder()
        .with_resource(Resource::builder_empty().with_service_name(servico).build())
        .with_sampler(Sampler::AlwaysOn)
        .with_simple_exporter(exportador)
        .build();
    let camada = tracing_opentelemetry::layer()
        .with_tracer(provedor.tracer("loja"))
        // The span's own fields only: no source location, thread or busy/idle times.
        .with_location(false)
        .with_threads(false)
        .with_tracked_inactivity(false)
        .with_filter(LevelFilter::INFO);
    tracing_subscriber::registry()
        .with(camada)
        .with(linhas())
        .try_init()?;
    Ok(Some(Rastreamento { provedor }))
}

/// Log lines on stderr, filtered by `RUST_LOG` (`info` by default).
fn linhas<S>() -> impl tracing_subscriber::Layer<S>
where
    S: tracing::Subscriber + for<'a> tracing_subscriber::registry::LookupSpan<'a>,
{
    use std::io::IsTerminal as _;
    tracing_subscriber::fmt::layer()
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .with_filter(EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info")))
}

/// Reads the spans back from the file (every line one [`SpanGravado`]).
pub fn ler(caminho: &Path) -> Result<Vec<SpanGravado>, Box<dyn Error>> {
    let texto = std::fs::read_to_string(caminho)
        .map_err(|erro| format!("{}: {erro}", caminho.display()))?;
    texto
        .lines()
        .filter(|linha| !linha.trim().is_empty())
        .enumerate()
        .map(|(i, linha)| {
            serde_json::from_str(linha)
                .map_err(|erro| format!("{}:{}: {erro}", caminho.display(), i + 1).into())
        })
        .collect()
}

/// The trace of order `pedido`: the trace id of its latest `POST /pedidos` span.
pub fn rastro_do_pedido(spans: &[SpanGravado], pedido: i64) -> Option<&str> {
    let pedido = pedido.to_string();
    spans
        .iter()
        .filter(|s| s.name == "POST /pedidos" && s.atributo("pedido") == Some(pedido.as_str()))
        .max_by_key(|s| s.start_unix_nanos)
        .map(|s| s.trace_id.as_str())
}

/// The spans of trace `trace_id` as an indented tree, one line per span: `service: name`, the
/// span's `tipo` or `pedido`, its start after the trace's first span and its duration. Children
/// in the order they started; a span whose parent is not in the file starts a tree of its own.
pub fn arvore(spans: &[SpanGravado], trace_id: &str) -> String {
    let mut do_rastro: Vec<&SpanGravado> =
        spans.iter().filter(|s| s.trace_id == trace_id).collect();
    do_rastro.sort_by_key(|s| s.start_unix_nanos);
    let inicio = do_rastro.first().map_or(0, |s| s.start_unix_nanos);
    let ids: HashMap<&str, &SpanGravado> =
        do_rastro.iter().map(|s| (s.span_id.as_str(), *s)).collect();
    let mut filhos: HashMap<Option<&str>, Vec<&SpanGravado>> = HashMap::new();
    for span in &do_rastro {
        let pai = span
            .parent_span_id
            .as_deref()
            .filter(|pai| ids.contains_key(pai));
        filhos.entry(pai).or_default().push(span);
    }
    let mut linhas = Vec::new();
    rotular(&filhos, None, "", &mut linhas);
    let largura = linhas
        .iter()
        .map(|(r, _)| r.chars().count())
        .max()
        .unwrap_or(0);
    let cabecalho = format!("trace {trace_id}");
    let largura = largura.max(cabecalho.chars().count());
    let mut texto = format!(
        "{cabecalho:largura$}  {:>10}  {:>10}\n",
        "start", "duration"
    );
    for (rotulo, span) in linhas {
        let desde = span.start_unix_nanos.saturating_sub(inicio) as f64 / 1e6;
        let preenchimento = largura - rotulo.chars().count();
        texto.push_str(&format!(
            "{rotulo}{:preenchimento$}  {:>10}  {:>10}\n",
            "",
            format!("+{desde:.1} ms"),
            format!("{:.1} ms", span.duracao_ms()),
        ));
    }
    texto
}

type Filhos<'a> = HashMap<Option<&'a str>, Vec<&'a SpanGravado>>;

fn rotular<'a>(
    filhos: &Filhos<'a>,
    pai: Option<&'a str>,
    prefixo: &str,
    linhas: &mut Vec<(String, &'a SpanGravado)>,
) {
    let Some(deste) = filhos.get(&pai) else {
        return;
    };
    for (i, span) in deste.iter().enumerate() {
        let (ramo, continua) = match (pai, i + 1 == deste.len()) {
            (None, _) => ("", ""),
            (Some(_), false) => ("├─ ", "│  "),
            (Some(_), true) => ("└─ ", "   "),
        };
        let detalhe = match (span.atributo("pedido"), span.atributo("tipo")) {
            (Some(pedido), _) => format!(" (pedido {pedido})"),
            (None, Some(tipo)) => format!(" ({tipo})"),
            (None, None) => String::new(),
        };
        linhas.push((
            format!("{prefixo}{ramo}{}: {}{detalhe}", span.service, span.name),
            span,
        ));
        rotular(
            filhos,
            Some(&span.span_id),
            &format!("{prefixo}{continua}"),
            linhas,
        );
    }
}
