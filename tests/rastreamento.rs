//! W3C trace context through the saída (feature `otel`), with OpenTelemetry's SDK and its
//! in-memory exporter, over real HTTP on 127.0.0.1, on PostgreSQL and SQLite:
//!
//! - an event enqueued inside a request's span is one trace: the request span, the enqueue
//!   (`mensageria.enfileirar`), each delivery (`mensageria.entrega`, a child of the enqueue:
//!   a redelivery is a second delivery span in the same trace) and, under each delivery, the
//!   receptor's span (`mensageria.receptor`) where the user's function ran;
//! - the context is stored with the row (`traceparent`, `tracestate`) and sent as W3C headers
//!   and as the CloudEvents distributed-tracing attributes; nothing is stored or sent for an
//!   event enqueued outside any trace;
//! - a batch carries one context per event, and each event's work is attributed to its own
//!   trace;
//! - a hostile `traceparent` is ignored: the event is applied, in a trace of its own.
//!
//! One subscriber for the whole binary (the `tracing` default is global): each test finds its
//! spans by its own trace ids.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use axum::extract::{Request, State};
use axum::http::HeaderMap;
use axum::middleware::{Next, from_fn_with_state};
use axum::response::Response;
use mensageria_axum::{Config as ConfigReceptor, Rejeicao, receptor};
use mensageria_core::relay::{Config, Relay};
use mensageria_core::sqlx::{Executor, Pool, Postgres, Sqlite, Transaction};
use mensageria_core::{Banco, ContextoEnvio, Destino, FalhaEnvio, enviador};
use mensageria_testes::{Sql, contar, e_postgres, esperar_saida_vazia, nos_dois_bancos};
use opentelemetry::trace::{SpanId, TraceContextExt, TraceId, TracerProvider as _};
use opentelemetry_sdk::trace::{InMemorySpanExporter, SdkTracerProvider, SpanData};
use serde::{Deserialize, Serialize};
use serde_json::json;
use tracing::Instrument;
use tracing_opentelemetry::OpenTelemetrySpanExt;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;

const TOKEN: &str = "t0k-rastro-de-teste-1234";

#[derive(Debug, Serialize, Deserialize)]
struct Pedido {
    numero: String,
}

#[derive(Debug, Serialize, Deserialize)]
struct PedidoLite {
    numero: String,
}

#[enviador(tipo = "rastro.pedido")]
async fn enviar_pedido(evento: Pedido, ctx: &ContextoEnvio) -> Result<(), FalhaEnvio> {
    ctx.exigir::<Destino>()?.postar(&evento, ctx).await
}

#[enviador(tipo = "rastro.pedido-lite")]
async fn enviar_pedido_lite(evento: PedidoLite, ctx: &ContextoEnvio) -> Result<(), FalhaEnvio> {
    ctx.exigir::<Destino>()?.postar(&evento, ctx).await
}

/// Attempts per order number: an order whose number starts with `falha-` is refused
/// (temporarily) the first time, so it is delivered twice.
static TENTATIVAS: OnceLock<Mutex<HashMap<String, u32>>> = OnceLock::new();

async fn aplicar<DB: Sql>(tx: &mut Transaction<'_, DB>, numero: &str) -> Result<(), Rejeicao>
where
    for<'c> &'c mut DB::Connection: Executor<'c, Database = DB>,
    for<'q> String: sqlx::Encode<'q, DB> + sqlx::Type<DB>,
{
    let tentativa = {
        let mut tentativas = TENTATIVAS.get_or_init(Default::default).lock().unwrap();
        let n = tentativas.entry(numero.to_owned()).or_insert(0);
        *n += 1;
        *n
    };
    // A span of the user's own, inside the receptor's: it belongs to the sender's trace too.
    async {
        if numero.starts_with("falha-") && tentativa == 1 {
            return Err(Rejeicao::temporaria("first attempt refused by the test"));
        }
        sqlx::query("INSERT INTO efeito (numero) VALUES ($1)")
            .bind(numero.to_owned())
            .execute(&mut **tx)
            .await?;
        Ok(())
    }
    .instrument(tracing::info_span!("efeito", numero))
    .await
}

#[receptor(tipo = "rastro.pedido", chave_natural = evento.numero)]
async fn receber_pg(tx: &mut Transaction<'_, Postgres>, evento: Pedido) -> Result<(), Rejeicao> {
    aplicar(tx, &evento.numero).await
}

#[receptor(tipo = "rastro.pedido-lite", chave_natural = evento.numero)]
async fn receber_lite(
    tx: &mut Transaction<'_, Sqlite>,
    evento: PedidoLite,
) -> Result<(), Rejeicao> {
    aplicar(tx, &evento.numero).await
}

fn tipo_em<P>(pool: &P) -> &'static str {
    if e_postgres(pool) {
        "rastro.pedido"
    } else {
        "rastro.pedido-lite"
    }
}

/// The process's exporter: an OpenTelemetry tracer provider exporting every finished span to
/// memory, installed once as a `tracing-opentelemetry` layer of the global subscriber.
fn exportador() -> &'static InMemorySpanExporter {
    static EXPORTADOR: OnceLock<InMemorySpanExporter> = OnceLock::new();
    EXPORTADOR.get_or_init(|| {
        let exportador = InMemorySpanExporter::default();
        let provedor = SdkTracerProvider::builder()
            .with_simple_exporter(exportador.clone())
            .build();
        tracing_subscriber::registry()
            .with(tracing_opentelemetry::layer().with_tracer(provedor.tracer("mensageria-testes")))
            .with(tracing_subscriber::filter::LevelFilter::INFO)
            .init();
        exportador
    })
}

/// The finished spans of trace `id`, waiting (at most 10 s) until at least `minimo` are there.
async fn spans_do_rastro(id: TraceId, minimo: usize) -> Vec<SpanData> {
    let fim = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let spans: Vec<SpanData> = exportador()
            .get_finished_spans()
            .unwrap()
            .into_iter()
            .filter(|span| span.span_context.trace_id() == id)
            .collect();
        if spans.len() >= minimo || tokio::time::Instant::now() > fim {
            return spans;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn nomeados<'a>(spans: &'a [SpanData], nome: &str) -> Vec<&'a SpanData> {
    spans.iter().filter(|span| span.name == nome).collect()
}

/// The span tree as `name <- parent name` lines, for failure messages.
fn arvore(spans: &[SpanData]) -> String {
    let nomes: HashMap<SpanId, &str> = spans
        .iter()
        .map(|s| (s.span_context.span_id(), s.name.as_ref()))
        .collect();
    spans
        .iter()
        .map(|s| {
            format!(
                "{} <- {}\n",
                s.name,
                nomes.get(&s.parent_span_id).copied().unwrap_or("(outside)")
            )
        })
        .collect()
}

type Gravados = Arc<Mutex<Vec<HeaderMap>>>;

async fn gravar(State(gravados): State<Gravados>, pedido: Request, next: Next) -> Response {
    gravados.lock().unwrap().push(pedido.headers().clone());
    next.run(pedido).await
}

async fn preparar<DB: Sql + Banco>(pool: &Pool<DB>) -> (String, Gravados)
where
    for<'c> &'c mut DB::Connection: Executor<'c, Database = DB>,
{
    exportador();
    mensageria_core::migrar(pool).await.unwrap();
    sqlx::query("CREATE TABLE efeito (numero TEXT NOT NULL)")
        .execute(pool)
        .await
        .unwrap();
    let gravados = Gravados::default();
    let app = mensageria_axum::router(pool.clone(), ConfigReceptor::new("receptor", [TOKEN]))
        .unwrap()
        .layer(from_fn_with_state(Arc::clone(&gravados), gravar));
    let ouvinte = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let endereco = ouvinte.local_addr().unwrap();
    tokio::spawn(async move {
        let _ = axum::serve(ouvinte, app).await;
    });
    (format!("http://{endereco}"), gravados)
}

fn relay<DB: Banco>(pool: &Pool<DB>, base: &str, app: &str) -> mensageria_core::relay::RelayHandle {
    Relay::new(
        pool.clone(),
        Config::new(app)
            .com_intervalo(Duration::from_millis(50))
            .com_backoff(Duration::from_millis(20), Duration::from_millis(200))
            .com_tempo_limite_envio(Duration::from_secs(5)),
    )
    .recurso(
        Destino::new(base)
            .unwrap()
            .com_token(TOKEN)
            .com_lote_maximo(1),
    )
    .spawn()
    .unwrap()
}

nos_dois_bancos! {
    async fn um_evento_e_um_rastro_do_pedido_ao_efeito(db) {
        let (base, gravados) = preparar(&db.pool).await;
        let tipo = tipo_em(&db.pool);
        let numero = format!("falha-{}", uuid::Uuid::now_v7());

        // The sender's request: a span of its own, the business write and the enqueue in one
        // transaction.
        let pedido = tracing::info_span!("POST /pedidos");
        let id_rastro = pedido.context().span().span_context().trace_id();
        let id_pedido = pedido.context().span().span_context().span_id();
        async {
            let mut tx = db.pool.begin().await.unwrap();
            mensageria_core::enfileirar_json(&mut *tx, tipo, &json!({ "numero": numero }))
                .await
                .unwrap();
            tx.commit().await.unwrap();
        }
        .instrument(pedido)
        .await;
        // Stored with the row, as W3C's traceparent of the enqueue span.
        let (traceparent,): (Option<String>,) =
            sqlx::query_as("SELECT traceparent FROM mensageria_saida")
                .fetch_one(&db.pool)
                .await
                .unwrap();
        let traceparent = traceparent.expect("a traceparent stored with the row");
        assert!(
            traceparent.starts_with(&format!("00-{id_rastro}-")),
            "{traceparent} is not of trace {id_rastro}"
        );

        let relay = relay(&db.pool, &base, "rastro-a");
        esperar_saida_vazia(&db.pool, 30).await;
        relay.shutdown(Duration::from_secs(5)).await;
        assert_eq!(contar(&db.pool, "efeito").await, 1);

        // request → enqueue → 2 deliveries → a receptor span under each → the user's span.
        let spans = spans_do_rastro(id_rastro, 8).await;
        let mapa = arvore(&spans);
        let enfileirar = nomeados(&spans, "mensageria.enfileirar");
        assert_eq!(enfileirar.len(), 1, "{mapa}");
        assert_eq!(enfileirar[0].parent_span_id, id_pedido, "{mapa}");
        let entregas = nomeados(&spans, "mensageria.entrega");
        assert_eq!(entregas.len(), 2, "a redelivery is a second delivery span:\n{mapa}");
        for entrega in &entregas {
            assert_eq!(
                entrega.parent_span_id,
                enfileirar[0].span_context.span_id(),
                "{mapa}"
            );
        }
        let receptores = nomeados(&spans, "mensageria.receptor");
        assert_eq!(receptores.len(), 2, "{mapa}");
        let mut pais: Vec<SpanId> = receptores.iter().map(|r| r.parent_span_id).collect();
        let mut ids_entregas: Vec<SpanId> =
            entregas.iter().map(|e| e.span_context.span_id()).collect();
        pais.sort_by_key(|id| id.to_string());
        ids_entregas.sort_by_key(|id| id.to_string());
        assert_eq!(pais, ids_entregas, "one receptor span under each delivery:\n{mapa}");
        let efeitos = nomeados(&spans, "efeito");
        assert_eq!(efeitos.len(), 2, "{mapa}");
        for efeito in efeitos {
            assert!(
                receptores
                    .iter()
                    .any(|r| r.span_context.span_id() == efeito.parent_span_id),
                "the user's span is under the receptor's:\n{mapa}"
            );
        }

        // On the wire: the W3C headers of the delivery span, and the CloudEvents attributes.
        let gravados = gravados.lock().unwrap();
        assert_eq!(gravados.len(), 2);
        for cabecalhos in gravados.iter() {
            let enviado = cabecalhos["traceparent"].to_str().unwrap();
            assert!(enviado.starts_with(&format!("00-{id_rastro}-")), "{enviado}");
            assert_eq!(cabecalhos["ce-traceparent"], cabecalhos["traceparent"]);
        }
    }
}

nos_dois_bancos! {
    async fn fora_de_um_rastro_nada_e_gravado_nem_enviado(db) {
        let (base, gravados) = preparar(&db.pool).await;
        let tipo = tipo_em(&db.pool);
        mensageria_core::enfileirar_json(&db.pool, tipo, &json!({ "numero": "sem-rastro" }))
            .await
            .unwrap();
        assert_eq!(
            contar(
                &db.pool,
                "mensageria_saida WHERE traceparent IS NULL AND tracestate IS NULL"
            )
            .await,
            1
        );
        // The relay's own delivery span starts a trace of its own: that one is sent.
        let relay = relay(&db.pool, &base, "rastro-b");
        esperar_saida_vazia(&db.pool, 30).await;
        relay.shutdown(Duration::from_secs(5)).await;
        let enviado = gravados.lock().unwrap()[0]["traceparent"]
            .to_str()
            .unwrap()
            .to_owned();
        let id = TraceId::from_hex(&enviado[3..35]).unwrap();
        let spans = spans_do_rastro(id, 2).await;
        assert!(nomeados(&spans, "mensageria.enfileirar").is_empty(), "{}", arvore(&spans));
        assert_eq!(nomeados(&spans, "mensageria.entrega").len(), 1, "{}", arvore(&spans));
    }
}

nos_dois_bancos! {
    async fn num_lote_cada_evento_segue_o_seu_rastro(db) {
        let (base, _) = preparar(&db.pool).await;
        let tipo = tipo_em(&db.pool);
        // Trace ids of this test's own (the other backend's run shares the exporter).
        let rastros = [0, 1].map(|_| format!("{:032x}", fastrand::u128(1..)));
        let eventos: Vec<serde_json::Value> = rastros
            .iter()
            .enumerate()
            .map(|(n, rastro)| {
                json!({
                    "id": uuid::Uuid::now_v7(),
                    "correlacao": format!("c{n}"),
                    "traceparent": format!("00-{rastro}-00f067aa0ba902b7-01"),
                    "tracestate": "congo=t61rcWkgMzE",
                    "payload": { "numero": format!("lote-{n}-{}", uuid::Uuid::now_v7()) },
                })
            })
            .collect();
        let resposta = reqwest::Client::new()
            .post(format!("{base}/m2m/{tipo}/lote"))
            .bearer_auth(TOKEN)
            .json(&json!({ "eventos": eventos }))
            .send()
            .await
            .unwrap();
        assert_eq!(resposta.status(), 200);
        let corpo: serde_json::Value = resposta.json().await.unwrap();
        for resultado in corpo["resultados"].as_array().unwrap() {
            assert_eq!(resultado["resultado"], "applied", "{corpo}");
        }
        for rastro in &rastros {
            let id = TraceId::from_hex(rastro).unwrap();
            let spans = spans_do_rastro(id, 2).await;
            let receptores = nomeados(&spans, "mensageria.receptor");
            assert_eq!(receptores.len(), 1, "{}", arvore(&spans));
            assert_eq!(
                receptores[0].parent_span_id,
                SpanId::from_hex("00f067aa0ba902b7").unwrap()
            );
            assert_eq!(nomeados(&spans, "efeito").len(), 1, "{}", arvore(&spans));
        }
    }
}

nos_dois_bancos! {
    async fn traceparent_hostil_e_ignorado_e_o_evento_aplicado(db) {
        let (base, _) = preparar(&db.pool).await;
        let tipo = tipo_em(&db.pool);
        let cliente = reqwest::Client::new();
        let hostis = [
            "00-../../etc/passwd-b7ad6b7169203331-01",
            "00-00000000000000000000000000000000-b7ad6b7169203331-01",
            "ff-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
            &"0".repeat(10_000),
        ];
        for (n, hostil) in hostis.iter().enumerate() {
            let resposta = cliente
                .post(format!("{base}/m2m/{tipo}"))
                .bearer_auth(TOKEN)
                .header("x-request-id", uuid::Uuid::now_v7().to_string())
                .header("traceparent", *hostil)
                .header("tracestate", "x=1,'; DROP TABLE efeito; --")
                .json(&json!({ "numero": format!("hostil-{n}-{}", uuid::Uuid::now_v7()) }))
                .send()
                .await
                .unwrap();
            assert_eq!(resposta.status(), 200, "{hostil:?}");
        }
        assert_eq!(contar(&db.pool, "efeito WHERE numero LIKE 'hostil-%'").await, 4);
    }
}

nos_dois_bancos! {
    async fn morta_recebida_guarda_o_rastro_e_a_reaplicacao_o_continua(db) {
        let _ = preparar(&db.pool).await;
        let tipo = tipo_em(&db.pool);
        let rastro = format!("{:032x}", fastrand::u128(1..));
        let traceparent = format!("00-{rastro}-00f067aa0ba902b7-01");
        // What a JetStream consumer keeps of an event its receptor refused for good.
        mensageria_core::operacoes::registrar_morta_recebida(
            &db.pool,
            &mensageria_core::operacoes::MortaRecebida {
                app: "fiscal".to_owned(),
                id_mensagem: uuid::Uuid::now_v7(),
                tipo: tipo.to_owned(),
                origem: format!("nats:MENSAGERIA:mensageria.{tipo}"),
                payload: json!({ "numero": format!("morta-{rastro}") }).to_string(),
                correlacao: None,
                motivo: "rejected: fixed since".to_owned(),
                entregas: 1,
                morta_em_ms: 0,
                traceparent: Some(traceparent.clone()),
                tracestate: Some("congo=t61rcWkgMzE".to_owned()),
                sequencia: None,
                chave_ordem: None,
            },
        )
        .await
        .unwrap();
        let guardadas = mensageria_core::operacoes::mortas_recebidas(&db.pool, Some("fiscal"), 10)
            .await
            .unwrap();
        assert_eq!(guardadas[0].traceparent.as_deref(), Some(traceparent.as_str()));

        let feito = mensageria_axum::recepcao::reaplicar_mortas_recebidas(&db.pool, "fiscal", 10)
            .await
            .unwrap();
        assert_eq!(feito.aplicadas, 1, "{feito:?}");
        let spans = spans_do_rastro(TraceId::from_hex(&rastro).unwrap(), 1).await;
        let receptores = nomeados(&spans, "mensageria.receptor");
        assert_eq!(receptores.len(), 1, "{}", arvore(&spans));
        assert_eq!(
            receptores[0].parent_span_id,
            SpanId::from_hex("00f067aa0ba902b7").unwrap()
        );
    }
}
