//! 7. Trace context at enqueue (issue 26): the enqueue section's transaction (business INSERT +
//!    `enfileirar`, committed) in three variants, at 1 and 16 clients on PostgreSQL, in the
//!    same repetitions (the order rotating), each with the `tracing` dispatcher of its own:
//!
//!    - (a) no span and no subscriber: what the enqueue section measures;
//!    - (b) each message inside a request span of a `tracing` subscriber without OpenTelemetry
//!      (a registry at INFO): what an app without OpenTelemetry pays, `mensageria.enfileirar`'s
//!      span and the check that finds no trace;
//!    - (c) (feature `otel`) each message inside a request span that is the root of a new,
//!      sampled OpenTelemetry trace (`tracing-opentelemetry`, `AlwaysOn`, a batch span processor
//!      feeding an exporter that counts and drops): the context captured and stored with the
//!      row, the SDK's span handling paid, no export I/O.
//!
//! Then one client runs the three variants interleaved message by message, each repetition:
//! their median transaction times, whose differences a load change on the shared machine
//! does not move (it hits every variant alike).
//!
//! The dispatcher is set on every poll of every producer's step (`WithSubscriber`), so it
//! holds whichever worker thread runs the step; (c) is checked after each run: two spans
//! exported per message (the request's and the enqueue's), a stored context on every row, one
//! trace id per row. (a) and (b) store none.

use std::time::{Duration, Instant};

use sqlx::PgPool;
use tracing::Dispatch;
use tracing::instrument::{Instrument as _, WithSubscriber as _};
use tracing_subscriber::filter::LevelFilter;
use tracing_subscriber::layer::SubscriberExt as _;

use crate::Parametros;
use crate::ambiente::{Cpu, Pg};
use crate::carga::{Passo, contar, negocio_pg, vazao};
use crate::estatistica::{maximo, mediana, minimo};
use crate::relatorio::{Relatorio, fmt};

/// What one variant installs around its producers.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Variante {
    SemSpan,
    SpanSemOtel,
    #[cfg(feature = "otel")]
    RastroOtel,
}

impl Variante {
    fn rotulo(self) -> &'static str {
        match self {
            Variante::SemSpan => "(a)",
            Variante::SpanSemOtel => "(b)",
            #[cfg(feature = "otel")]
            Variante::RastroOtel => "(c)",
        }
    }

    fn descricao(self) -> &'static str {
        match self {
            Variante::SemSpan => "no span, no subscriber",
            Variante::SpanSemOtel => "request span, subscriber without OpenTelemetry",
            #[cfg(feature = "otel")]
            Variante::RastroOtel => "request span, sampled OpenTelemetry trace",
        }
    }

    /// Whether its messages belong to a trace, and so carry a context: (c) only.
    fn rastreia(self) -> bool {
        match self {
            Variante::SemSpan | Variante::SpanSemOtel => false,
            #[cfg(feature = "otel")]
            Variante::RastroOtel => true,
        }
    }

    fn nome(self) -> String {
        format!("{} {}", self.rotulo(), self.descricao())
    }
}

/// The variants this build can run: (c) needs the `otel` feature.
const VARIANTES: &[Variante] = &[
    Variante::SemSpan,
    Variante::SpanSemOtel,
    #[cfg(feature = "otel")]
    Variante::RastroOtel,
];

/// One variant's figures over the repetitions.
#[derive(Default)]
struct Figuras {
    vazao: Vec<f64>,
    cpu_proprio: Vec<f64>,
}

/// Each variant's `tracing` dispatcher.
struct Despachos {
    sem_span: Dispatch,
    sem_otel: Dispatch,
    #[cfg(feature = "otel")]
    otel: otel::Otel,
}

impl Despachos {
    fn novos() -> Self {
        Self {
            sem_span: Dispatch::none(),
            sem_otel: Dispatch::new(tracing_subscriber::registry().with(LevelFilter::INFO)),
            #[cfg(feature = "otel")]
            otel: otel::Otel::novo(),
        }
    }

    /// The dispatcher of `variante`'s producers, and whether each message has a request span.
    fn de(&self, variante: Variante) -> (Dispatch, bool) {
        match variante {
            Variante::SemSpan => (self.sem_span.clone(), false),
            Variante::SpanSemOtel => (self.sem_otel.clone(), true),
            #[cfg(feature = "otel")]
            Variante::RastroOtel => (self.otel.dispatch.clone(), true),
        }
    }

    /// Spans exported so far, once every span ended so far has reached the exporter (0
    /// without the `otel` feature).
    async fn exportados(&self) -> u64 {
        #[cfg(feature = "otel")]
        {
            self.otel.esvaziar().await
        }
        #[cfg(not(feature = "otel"))]
        {
            0
        }
    }

    async fn desligar(self) {
        #[cfg(feature = "otel")]
        self.otel.desligar().await;
    }
}

pub(crate) async fn medir(rel: &mut Relatorio, p: &Parametros) {
    println!(
        "7. trace context at enqueue (mensageria-core built {} the otel feature)",
        if cfg!(feature = "otel") {
            "with"
        } else {
            "without"
        }
    );
    let despachos = Despachos::novos();
    let pg = Pg::novo().await;
    // One client: a message's overhead is its latency; sixteen: the cores are saturated, so it
    // is CPU taken from the producers and PostgreSQL. (Four, in between, adds only minutes to a
    // run on a machine whose quiet windows are short.)
    for clientes in [1usize, 16] {
        let pool = pg.pool(clientes as u32).await;
        let rodar = |variante: Variante, duracao: Duration| {
            let (dispatch, com_span) = despachos.de(variante);
            let pool = pool.clone();
            vazao(clientes, duracao, move || {
                passo_rastreado(pool.clone(), dispatch.clone(), com_span)
            })
        };
        // Untimed first: a fresh pool's connections prepare their statements, and the
        // subscribers and the span processor reach their steady state.
        for &variante in VARIANTES {
            let antes = despachos.exportados().await;
            rodar(variante, p.duracao.min(Duration::from_secs(1))).await;
            conferir(&pool, &despachos, antes, variante.rastreia()).await;
        }
        let mut figuras: Vec<Figuras> = VARIANTES.iter().map(|_| Figuras::default()).collect();
        for repeticao in 0..p.repeticoes {
            for passo in 0..VARIANTES.len() {
                let indice = (repeticao + passo) % VARIANTES.len();
                let variante = VARIANTES[indice];
                let exportados = despachos.exportados().await;
                let antes = Cpu::agora();
                let taxa = rodar(variante, p.duracao).await;
                let cpu = Cpu::agora();
                let mensagens = conferir(&pool, &despachos, exportados, variante.rastreia()).await;
                let cpu = cpu.por(antes, mensagens as f64);
                let f = &mut figuras[indice];
                f.vazao.push(taxa);
                f.cpu_proprio.push(cpu.proprio);
            }
        }
        relatar(rel, clientes, &figuras);
        pool.close().await;
    }
    intercalar(rel, p, &pg, &despachos).await;
    pg.descartar().await;
    despachos.desligar().await;
}

/// One client, the variants alternating message by message (each round starting with the
/// next variant) for each repetition's timed run: each variant's median transaction time. A
/// load change on the shared machine hits every variant alike, so the differences hold where
/// the rates of consecutive runs do not.
async fn intercalar(rel: &mut Relatorio, p: &Parametros, pg: &Pg, despachos: &Despachos) {
    let pool = pg.pool(1).await;
    let mut medianas: Vec<Vec<f64>> = VARIANTES.iter().map(|_| Vec::new()).collect();
    for _ in 0..p.repeticoes {
        let exportados = despachos.exportados().await;
        let planos: Vec<(Dispatch, bool)> = VARIANTES.iter().map(|&v| despachos.de(v)).collect();
        let (duracao, pool_da_tarefa) = (p.duracao, pool.clone());
        let (tempos, rastreadas) = tokio::spawn(async move {
            let mut tempos: Vec<Vec<f64>> = planos.iter().map(|_| Vec::new()).collect();
            let mut rastreadas = 0i64;
            let fim = Instant::now() + duracao;
            let mut rodada = 0;
            while Instant::now() < fim {
                for passo in 0..planos.len() {
                    let indice = (rodada + passo) % planos.len();
                    let (dispatch, com_span) = planos[indice].clone();
                    let inicio = Instant::now();
                    passo_rastreado(pool_da_tarefa.clone(), dispatch, com_span).await;
                    tempos[indice].push(inicio.elapsed().as_secs_f64() * 1e6);
                    if VARIANTES[indice].rastreia() {
                        rastreadas += 1;
                    }
                }
                rodada += 1;
            }
            (tempos, rastreadas)
        })
        .await
        .expect("the interleaved client panicked");
        conferir_rastreadas(&pool, despachos, exportados, rastreadas).await;
        for (da_variante, tempos) in medianas.iter_mut().zip(&tempos) {
            da_variante.push(mediana(tempos));
        }
    }
    pool.close().await;
    const SECAO: &str = "trace context";
    for (variante, valores) in VARIANTES.iter().zip(&medianas) {
        rel.medir(
            SECAO,
            format!(
                "PostgreSQL, 1 client, variants interleaved message by message, {}: transaction time p50",
                variante.nome()
            ),
            valores.clone(),
            "µs",
        );
    }
    for (i, variante) in VARIANTES.iter().enumerate().skip(1) {
        let diferencas = medianas[i]
            .iter()
            .zip(&medianas[0])
            .map(|(v, a)| v - a)
            .collect();
        rel.medir(
            SECAO,
            format!(
                "PostgreSQL, 1 client, interleaved: {} − (a), transaction time p50, per repetition",
                variante.rotulo()
            ),
            diferencas,
            "µs",
        );
    }
}

/// One producer step: the enqueue section's transaction, with `dispatch` as the default on
/// every poll and, if `com_span`, inside a request span of its own (a root span: with
/// OpenTelemetry, a new trace per message).
fn passo_rastreado(pool: PgPool, dispatch: Dispatch, com_span: bool) -> Passo<()> {
    Box::pin(
        async move {
            // Its message id says it enqueued (`negocio_pg` panics when it cannot).
            let negocio = negocio_pg(pool);
            if com_span {
                let span = tracing::info_span!("requisicao", metodo = "POST", rota = "/pedidos");
                negocio.instrument(span).await;
            } else {
                negocio.await;
            }
        }
        .with_subscriber(dispatch),
    )
}

/// Checks a run whose messages all (`com_rastro`) or none carry a trace context; returns the
/// messages enqueued.
async fn conferir(pool: &PgPool, despachos: &Despachos, exportados: u64, com_rastro: bool) -> i64 {
    let mensagens = contar(pool, "SELECT count(*) FROM mensageria_saida").await;
    let rastreadas = if com_rastro { mensagens } else { 0 };
    conferir_rastreadas(pool, despachos, exportados, rastreadas).await;
    mensagens
}

/// Checks that exactly `rastreadas` rows carry a traceparent, each of a trace of its own, and
/// that the run exported two spans (the request's and the enqueue's) for each of them and none
/// for the others (`exportados`: the count before the run); then empties the tables.
async fn conferir_rastreadas(
    pool: &PgPool,
    despachos: &Despachos,
    exportados: u64,
    rastreadas: i64,
) {
    let com_contexto = contar(
        pool,
        "SELECT count(*) FROM mensageria_saida WHERE traceparent IS NOT NULL",
    )
    .await;
    let rastros = contar(
        pool,
        "SELECT count(DISTINCT substr(traceparent, 4, 32)) FROM mensageria_saida",
    )
    .await;
    assert_eq!(
        (com_contexto, rastros),
        (rastreadas, rastreadas),
        "rows with a stored traceparent, and distinct trace ids among them"
    );
    let novos = despachos.exportados().await - exportados;
    if cfg!(feature = "otel") {
        assert_eq!(
            novos,
            2 * rastreadas as u64,
            "two spans exported per traced message"
        );
    }
    sqlx::query("TRUNCATE mensageria_saida, negocio")
        .execute(pool)
        .await
        .expect("truncate");
}

/// Records one client count's figures: each variant's rate and CPU per message, the ratios to
/// (a) (of the medians, and per repetition), the CPU added per repetition, and the target
/// against (a)'s spread.
fn relatar(rel: &mut Relatorio, clientes: usize, figuras: &[Figuras]) {
    const SECAO: &str = "trace context";
    let mut medianas = Vec::new();
    for (variante, f) in VARIANTES.iter().zip(figuras) {
        let nome = format!("PostgreSQL, {clientes} clients, {}", variante.nome());
        medianas.push(rel.medir(
            SECAO,
            format!("{nome}: business tx + enfileirar"),
            f.vazao.clone(),
            "msg/s",
        ));
        rel.medir(
            SECAO,
            format!("{nome}: CPU per message, this process"),
            f.cpu_proprio.clone(),
            "µs",
        );
    }
    let base = &figuras[0].vazao;
    let ruido = (maximo(base) - minimo(base)) / medianas[0];
    for (i, variante) in VARIANTES.iter().enumerate().skip(1) {
        let pares: Vec<f64> = figuras[i]
            .vazao
            .iter()
            .zip(base)
            .map(|(v, a)| v / a)
            .collect();
        rel.medir(
            SECAO,
            format!(
                "PostgreSQL, {clientes} clients: {}/(a), per repetition",
                variante.rotulo()
            ),
            pares,
            "×",
        );
        let cpu_a_mais = figuras[i]
            .cpu_proprio
            .iter()
            .zip(&figuras[0].cpu_proprio)
            .map(|(v, a)| v - a)
            .collect();
        rel.medir(
            SECAO,
            format!(
                "PostgreSQL, {clientes} clients: {} − (a), CPU per message, this process, per repetition",
                variante.rotulo()
            ),
            cpu_a_mais,
            "µs",
        );
        let razao = medianas[i] / medianas[0];
        let diferenca_us = 1e6 / medianas[i] - 1e6 / medianas[0];
        rel.meta(
            format!(
                "enqueue {} within noise of (a), same run (PostgreSQL, {clientes} clients)",
                variante.descricao()
            ),
            format!(
                "{}× ({} vs {} msg/s, {}{} µs per message); noise: (a)'s spread {:.0}%",
                fmt(razao),
                fmt(medianas[i]),
                fmt(medianas[0]),
                if diferenca_us >= 0.0 { "+" } else { "" },
                fmt(diferenca_us),
                ruido * 100.0
            ),
            1.0 - razao <= ruido,
        );
    }
}

#[cfg(feature = "otel")]
mod otel {
    //! Variant (c)'s OpenTelemetry: a tracer provider sampling every trace, its batch span
    //! processor feeding an exporter that counts the spans and drops them.

    use std::future::Future;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicU64, Ordering};

    use opentelemetry::trace::TracerProvider as _;
    use opentelemetry_sdk::error::OTelSdkResult;
    use opentelemetry_sdk::trace::{
        BatchSpanProcessor, Sampler, SdkTracerProvider, SpanData, SpanExporter,
    };
    use tracing::Dispatch;
    use tracing_subscriber::filter::LevelFilter;
    use tracing_subscriber::layer::SubscriberExt as _;

    /// Counts the spans it is given and drops them: the SDK's span handling is paid, the
    /// export's I/O is not.
    #[derive(Debug, Clone, Default)]
    struct Descartar(Arc<AtomicU64>);

    impl SpanExporter for Descartar {
        fn export(&self, lote: Vec<SpanData>) -> impl Future<Output = OTelSdkResult> + Send {
            self.0.fetch_add(lote.len() as u64, Ordering::Relaxed);
            std::future::ready(Ok(()))
        }
    }

    pub(super) struct Otel {
        provedor: SdkTracerProvider,
        exportados: Arc<AtomicU64>,
        pub(super) dispatch: Dispatch,
    }

    impl Otel {
        pub(super) fn novo() -> Self {
            let exportador = Descartar::default();
            let exportados = Arc::clone(&exportador.0);
            let provedor = SdkTracerProvider::builder()
                .with_sampler(Sampler::AlwaysOn)
                .with_span_processor(BatchSpanProcessor::builder(exportador).build())
                .build();
            let camada =
                tracing_opentelemetry::layer().with_tracer(provedor.tracer("mensageria-bench"));
            let dispatch = Dispatch::new(
                tracing_subscriber::registry()
                    .with(camada)
                    .with(LevelFilter::INFO),
            );
            Self {
                provedor,
                exportados,
                dispatch,
            }
        }

        /// Flushes the batch span processor (every span ended so far reaches the exporter);
        /// returns the spans exported so far.
        pub(super) async fn esvaziar(&self) -> u64 {
            let provedor = self.provedor.clone();
            tokio::task::spawn_blocking(move || provedor.force_flush())
                .await
                .expect("the flush task")
                .expect("flush the span processor");
            self.exportados.load(Ordering::Relaxed)
        }

        pub(super) async fn desligar(self) {
            tokio::task::spawn_blocking(move || self.provedor.shutdown())
                .await
                .expect("the shutdown task")
                .expect("shut the tracer provider down");
        }
    }
}
