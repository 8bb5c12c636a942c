//! 4. The receptor: a first delivery vs a duplicate vs a bare Axum handler doing the same
//!    effect without mensageria, over HTTP on loopback (16 concurrent clients); the same events
//!    in batches of 64 on the batch route, new and duplicate; and the three single-event cases
//!    in the database alone, without HTTP.

use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Json;
use axum::routing::post;
use mensageria_core::operacoes::{Recebida, registrar_recebida};
use sqlx::{PgPool, Postgres};

use crate::Parametros;
use crate::ambiente::Pg;
use crate::carga::{EventoBench, Passo, TOKEN, evento_n, reservar, servir, vazao};
use crate::estatistica::percentil;
use crate::relatorio::{Relatorio, fmt};

const CLIENTES: usize = 16;

/// What one HTTP load run saw.
struct Carga {
    por_segundo: f64,
    p50_ms: f64,
    p99_ms: f64,
}

/// `CLIENTES` closed loops POSTing `corpo(i)` to `url` for `duracao`, each request carrying
/// `por_pedido` events (`i` advances by that much); every answer must be 200. Throughput is in
/// events per second.
async fn carga<F>(
    cliente: &reqwest::Client,
    url: String,
    duracao: Duration,
    por_pedido: usize,
    corpo: F,
) -> Carga
where
    F: Fn(i64) -> serde_json::Value + Clone + Send + Sync + 'static,
{
    let contador = Arc::new(AtomicI64::new(0));
    let latencias = Arc::new(Mutex::new(Vec::new()));
    let inicio = Instant::now();
    let tarefas: Vec<_> = (0..CLIENTES)
        .map(|_| {
            let (cliente, url, corpo) = (cliente.clone(), url.clone(), corpo.clone());
            let (contador, latencias) = (Arc::clone(&contador), Arc::clone(&latencias));
            tokio::spawn(async move {
                let mut minhas = Vec::new();
                while inicio.elapsed() < duracao {
                    let i = contador.fetch_add(por_pedido as i64, Ordering::Relaxed);
                    let t = Instant::now();
                    let resposta = cliente
                        .post(&url)
                        .bearer_auth(TOKEN)
                        .json(&corpo(i))
                        .send()
                        .await
                        .expect("request");
                    assert!(resposta.status().is_success(), "{}", resposta.status());
                    let _ = resposta.bytes().await;
                    minhas.push(t.elapsed().as_secs_f64() * 1000.0);
                }
                latencias.lock().expect("latencies").extend(minhas);
            })
        })
        .collect();
    for tarefa in tarefas {
        tarefa.await.expect("a load task panicked");
    }
    let segundos = inicio.elapsed().as_secs_f64();
    let latencias = latencias.lock().expect("latencies");
    Carga {
        por_segundo: (latencias.len() * por_pedido) as f64 / segundos,
        p50_ms: percentil(&latencias, 50.0),
        p99_ms: percentil(&latencias, 99.0),
    }
}

/// Events per batch in the batch runs.
const POR_LOTE: usize = 64;

/// One event as the single route takes it.
fn um(n: i64) -> serde_json::Value {
    serde_json::to_value(evento_n(n)).expect("event")
}

/// `POR_LOTE` events from `n(i)`, `n(i + 1)`, ... as the batch route takes them.
fn lote(i: i64, n: impl Fn(i64) -> i64) -> serde_json::Value {
    let eventos: Vec<_> = (i..i + POR_LOTE as i64)
        .map(|j| serde_json::json!({ "id": uuid::Uuid::now_v7(), "payload": um(n(j)) }))
        .collect();
    serde_json::json!({ "eventos": eventos })
}

/// The bare handler: decode, one transaction with the effect, answer. No auth, no dedup.
async fn puro(pool: PgPool, Json(evento): Json<EventoBench>) -> Json<serde_json::Value> {
    let mut tx = pool.begin().await.expect("begin");
    sqlx::query("INSERT INTO efeito_puro (n) VALUES ($1)")
        .bind(evento.n)
        .execute(&mut *tx)
        .await
        .expect("effect");
    tx.commit().await.expect("commit");
    Json(serde_json::json!({ "resultado": "applied" }))
}

pub(crate) async fn medir(rel: &mut Relatorio, p: &Parametros) {
    println!("4. receptor ({CLIENTES} concurrent clients, loopback)");
    let pg = Pg::novo().await;
    let pool = pg.pool(16).await;
    let pool_puro = pool.clone();
    let app = mensageria_axum::router(pool.clone(), mensageria_axum::Config::new("bench", [TOKEN]))
        .expect("router")
        .route("/puro", post(move |corpo| puro(pool_puro.clone(), corpo)));
    let base = servir(app).await;
    let cliente = reqwest::Client::builder()
        .pool_max_idle_per_host(CLIENTES * 2)
        .build()
        .expect("HTTP client");
    let (mut primeiras, mut duplicatas, mut puros) = (vec![], vec![], vec![]);
    for _ in 0..p.repeticoes {
        let url = format!("{base}/m2m/bench.evento");
        let n0 = reservar(10_000_000);
        primeiras.push(carga(&cliente, url.clone(), p.duracao, 1, move |i| um(n0 + i)).await);
        let aplicadas: i64 = sqlx::query_scalar("SELECT count(*) FROM efeito WHERE n >= $1")
            .bind(n0)
            .fetch_one(&pool)
            .await
            .expect("count");
        duplicatas.push(
            carga(&cliente, url, p.duracao, 1, move |i| {
                um(n0 + i % aplicadas.max(1))
            })
            .await,
        );
        let n1 = reservar(10_000_000);
        puros.push(
            carga(&cliente, format!("{base}/puro"), p.duracao, 1, move |i| {
                um(n1 + i)
            })
            .await,
        );
    }
    let serie = |cargas: &[Carga], f: fn(&Carga) -> f64| cargas.iter().map(f).collect::<Vec<_>>();
    let mut medidas = Vec::new();
    for (nome, cargas) in [
        ("first delivery (dedup + effect)", &primeiras),
        ("duplicate (already applied)", &duplicatas),
        (
            "bare Axum handler, same effect, no mensageria (baseline)",
            &puros,
        ),
    ] {
        let rps = rel.medir(
            "receptor/HTTP",
            format!("{nome}: throughput"),
            serie(cargas, |c| c.por_segundo),
            "req/s",
        );
        let p50 = rel.medir(
            "receptor/HTTP",
            format!("{nome}: p50"),
            serie(cargas, |c| c.p50_ms),
            "ms",
        );
        let p99 = rel.medir(
            "receptor/HTTP",
            format!("{nome}: p99"),
            serie(cargas, |c| c.p99_ms),
            "ms",
        );
        medidas.push((rps, p50, p99));
    }
    let [
        (primeira, _, p99_primeira),
        (duplicata, _, _),
        (pura, _, p99_pura),
    ] = medidas[..]
    else {
        unreachable!()
    };
    rel.meta(
        "a duplicate costs ≥ 5× less than a first delivery (HTTP, throughput ratio)",
        format!(
            "{:.2}× ({} vs {} req/s)",
            duplicata / primeira,
            fmt(duplicata),
            fmt(primeira)
        ),
        duplicata / primeira >= 5.0,
    );
    rel.meta(
        "dedup + effect ≥ 75% of effect-only throughput (HTTP: receptor vs bare handler)",
        format!(
            "{:.0}% ({} vs {} req/s)",
            100.0 * primeira / pura,
            fmt(primeira),
            fmt(pura)
        ),
        primeira >= 0.75 * pura,
    );
    rel.meta(
        "receptor p99 ≤ bare handler p99 + 0.5 ms",
        format!("{} vs {} ms", fmt(p99_primeira), fmt(p99_pura)),
        p99_primeira <= p99_pura + 0.5,
    );

    // Batches of POR_LOTE on the batch route: new events, then the same events again, then new
    // events with one poison event (refused for good) in the middle of each batch.
    let (mut lotes_novos, mut lotes_duplicados, mut lotes_com_veneno) = (vec![], vec![], vec![]);
    for _ in 0..p.repeticoes {
        let url = format!("{base}/m2m/bench.evento/lote");
        let n0 = reservar(10_000_000);
        lotes_novos.push(
            carga(&cliente, url.clone(), p.duracao, POR_LOTE, move |i| {
                lote(i, |j| n0 + j)
            })
            .await,
        );
        let aplicadas: i64 = sqlx::query_scalar("SELECT count(*) FROM efeito WHERE n >= $1")
            .bind(n0)
            .fetch_one(&pool)
            .await
            .expect("count");
        lotes_duplicados.push(
            carga(&cliente, url.clone(), p.duracao, POR_LOTE, move |i| {
                lote(i, |j| n0 + j % aplicadas.max(1))
            })
            .await,
        );
        let n0 = reservar(10_000_000);
        let meio = POR_LOTE as i64 / 2;
        lotes_com_veneno.push(
            carga(&cliente, url, p.duracao, POR_LOTE, move |i| {
                lote(i, |j| if j == i + meio { -1 - (n0 + j) } else { n0 + j })
            })
            .await,
        );
    }
    // Throughput of each batch run, and the p50 per batch of the first-delivery runs.
    let mut vazoes = Vec::new();
    for (nome, cargas, com_p50) in [
        (
            format!("first deliveries, {POR_LOTE} per batch"),
            &lotes_novos,
            true,
        ),
        (
            format!("duplicates, {POR_LOTE} per batch"),
            &lotes_duplicados,
            false,
        ),
        (
            format!("first deliveries, {POR_LOTE} per batch, one refused for good"),
            &lotes_com_veneno,
            true,
        ),
    ] {
        vazoes.push(rel.medir(
            "receptor/HTTP batch",
            format!("{nome}: throughput"),
            serie(cargas, |c| c.por_segundo),
            "events/s",
        ));
        if com_p50 {
            rel.medir(
                "receptor/HTTP batch",
                format!("{nome}: p50 per batch"),
                serie(cargas, |c| c.p50_ms),
                "ms",
            );
        }
    }
    let [lote_novo, lote_duplicado, lote_veneno] = vazoes[..] else {
        unreachable!("three batch runs")
    };
    rel.nota(format!(
        "Batch rejections: a refused event is taken out and the batch's transaction applied again \
         without it (no savepoints); one poison event in a batch of {POR_LOTE} costs {:.0}% of the \
         batch's throughput ({} vs {} events/s).",
        100.0 * (1.0 - lote_veneno / lote_novo),
        fmt(lote_veneno),
        fmt(lote_novo)
    ));
    rel.meta(
        "a duplicate event ≥ 5× cheaper than a first delivery, per event, in batches",
        format!(
            "{:.2}× ({} vs {} events/s)",
            lote_duplicado / lote_novo,
            fmt(lote_duplicado),
            fmt(lote_novo)
        ),
        lote_duplicado / lote_novo >= 5.0,
    );
    rel.meta(
        "first deliveries in batches vs one request per event (HTTP, events/s)",
        format!(
            "{:.2}× ({} vs {} events/s)",
            lote_novo / primeira,
            fmt(lote_novo),
            fmt(primeira)
        ),
        lote_novo > primeira,
    );

    // The same three in the database alone: what the dedup itself costs.
    let (mut efeito, mut dedup, mut duplicado) = (vec![], vec![], vec![]);
    for _ in 0..p.repeticoes {
        let a = pool.clone();
        efeito.push(
            vazao(CLIENTES, p.duracao, move || {
                let a = a.clone();
                Box::pin(async move {
                    let n = reservar(1);
                    let mut tx = a.begin().await.expect("begin");
                    sqlx::query("INSERT INTO efeito_puro (n) VALUES ($1)")
                        .bind(n)
                        .execute(&mut *tx)
                        .await
                        .expect("effect");
                    tx.commit().await.expect("commit");
                }) as Passo<()>
            })
            .await,
        );
        let n0 = reservar(10_000_000);
        let contador = Arc::new(AtomicI64::new(n0));
        let (a, c) = (pool.clone(), Arc::clone(&contador));
        dedup.push(
            vazao(CLIENTES, p.duracao, move || {
                let (a, c) = (a.clone(), Arc::clone(&c));
                Box::pin(async move {
                    let n = c.fetch_add(1, Ordering::Relaxed);
                    let mut tx = a.begin().await.expect("begin");
                    let novo = registrar(&mut tx, n).await;
                    assert!(novo);
                    sqlx::query("INSERT INTO efeito (n) VALUES ($1)")
                        .bind(n)
                        .execute(&mut *tx)
                        .await
                        .expect("effect");
                    tx.commit().await.expect("commit");
                }) as Passo<()>
            })
            .await,
        );
        let aplicadas = contador.load(Ordering::Relaxed) - n0;
        let (a, i) = (pool.clone(), Arc::new(AtomicI64::new(0)));
        duplicado.push(
            vazao(CLIENTES, p.duracao, move || {
                let (a, i) = (a.clone(), Arc::clone(&i));
                Box::pin(async move {
                    let n = n0 + i.fetch_add(1, Ordering::Relaxed) % aplicadas.max(1);
                    let mut tx = a.begin().await.expect("begin");
                    let novo = registrar(&mut tx, n).await;
                    assert!(!novo);
                    tx.commit().await.expect("commit");
                }) as Passo<()>
            })
            .await,
        );
    }
    let e = rel.medir(
        "receptor/DB",
        "effect alone, one transaction (baseline)",
        efeito,
        "tx/s",
    );
    let d = rel.medir(
        "receptor/DB",
        "dedup record + effect, one transaction",
        dedup,
        "tx/s",
    );
    let u = rel.medir(
        "receptor/DB",
        "duplicate: dedup record already there",
        duplicado,
        "tx/s",
    );
    rel.meta(
        "a duplicate costs ≥ 5× less than a first delivery (in the database)",
        format!("{:.2}× ({} vs {} tx/s)", u / d, fmt(u), fmt(d)),
        u / d >= 5.0,
    );
    rel.meta(
        "dedup + effect ≥ 75% of effect-only throughput (in the database)",
        format!("{:.0}% ({} vs {} tx/s)", 100.0 * d / e, fmt(d), fmt(e)),
        d >= 0.75 * e,
    );
    pool.close().await;
    pg.descartar().await;
}

async fn registrar(tx: &mut sqlx::Transaction<'_, Postgres>, n: i64) -> bool {
    let chave = format!("[{n}]");
    registrar_recebida::<Postgres>(
        &mut **tx,
        Recebida {
            app: "bench",
            tipo: "bench.db",
            chave: &chave,
            id_mensagem: None,
            versao: None,
        },
    )
    .await
    .expect("dedup record")
}
