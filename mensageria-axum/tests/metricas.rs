//! The `/metrics` route after a real delivery: an enviador posts over HTTP on 127.0.0.1 to a
//! receptor served by the same axum app, and the scrape shows what happened.
//!
//! One test in this binary: the Prometheus recorder is global to the process.

use std::time::Duration;

use mensageria_axum::{Config, Rejeicao, metricas, receptor};
use mensageria_core::relay::{self, Relay};
use mensageria_core::sqlx::{Sqlite, Transaction};
use mensageria_core::{ContextoEnvio, Destino, FalhaEnvio, enviador};
use metrics_exporter_prometheus::PrometheusBuilder;
use serde::{Deserialize, Serialize};

const TIPO: &str = "metricas.aviso";

#[derive(Serialize, Deserialize)]
struct Aviso {
    chave: String,
}

#[enviador(tipo = "metricas.aviso")]
async fn enviar(evento: Aviso, ctx: &ContextoEnvio) -> Result<(), FalhaEnvio> {
    ctx.exigir::<Destino>()?.postar(&evento, ctx).await
}

#[receptor(tipo = "metricas.aviso", chave_natural = evento.chave)]
async fn receber(tx: &mut Transaction<'_, Sqlite>, evento: Aviso) -> Result<(), Rejeicao> {
    sqlx_insert(tx, &evento.chave).await
}

async fn sqlx_insert(tx: &mut Transaction<'_, Sqlite>, chave: &str) -> Result<(), Rejeicao> {
    mensageria_core::sqlx::query("INSERT INTO efeito (chave) VALUES ($1)")
        .bind(chave)
        .execute(&mut **tx)
        .await?;
    Ok(())
}

/// The value of the sample line `serie` (name and labels exactly as rendered), if present.
fn amostra(texto: &str, serie: &str) -> Option<f64> {
    texto.lines().find_map(|linha| {
        let resto = linha.strip_prefix(serie)?.strip_prefix(' ')?;
        resto.trim().parse().ok()
    })
}

async fn raspar(url: &str) -> (String, String) {
    let resposta = reqwest::get(format!("{url}/metrics")).await.unwrap();
    assert_eq!(resposta.status(), 200);
    let tipo = resposta.headers()["content-type"]
        .to_str()
        .unwrap()
        .to_owned();
    (tipo, resposta.text().await.unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rota_mostra_os_contadores_depois_de_uma_entrega() {
    // What the application does at start; the library never installs a recorder.
    let handle = PrometheusBuilder::new().install_recorder().unwrap();
    metricas::descrever();

    let dir = tempfile::tempdir().unwrap();
    let pool = mensageria_core::banco::sqlite::abrir(dir.path().join("metricas.db"))
        .await
        .unwrap();
    mensageria_core::migrar(&pool).await.unwrap();
    mensageria_core::sqlx::query("CREATE TABLE efeito (chave TEXT NOT NULL)")
        .execute(&pool)
        .await
        .unwrap();

    let app: axum::Router = mensageria_axum::router(
        pool.clone(),
        Config::new("receptor", ["segredo-0123456789"]),
    )
    .unwrap()
    .merge(metricas::rota(handle));
    let ouvinte = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", ouvinte.local_addr().unwrap());
    tokio::spawn(async move {
        let _ = axum::serve(ouvinte, app).await;
    });

    // Two messages with one natural key: one applied, one duplicate.
    let mut tx = pool.begin().await.unwrap();
    for _ in 0..2 {
        let aviso = Aviso {
            chave: "k-1".into(),
        };
        mensageria_core::enfileirar(&mut *tx, &aviso).await.unwrap();
    }
    tx.commit().await.unwrap();

    let relay = Relay::new(
        pool.clone(),
        relay::Config::new("emissor")
            .com_intervalo(Duration::from_millis(50))
            .com_intervalo_registro(Duration::from_millis(100)),
    )
    .recurso(Destino::new(&url).unwrap().com_token("segredo-0123456789"))
    .spawn()
    .unwrap();

    // Wait for the deliveries and for a heartbeat after them (the backlog gauge reads 0).
    let fim = tokio::time::Instant::now() + Duration::from_secs(20);
    let texto = loop {
        let (tipo_conteudo, texto) = raspar(&url).await;
        assert!(tipo_conteudo.starts_with("text/plain"), "{tipo_conteudo}");
        let entregues = amostra(
            &texto,
            &format!("mensageria_delivered_total{{tipo=\"{TIPO}\"}}"),
        );
        let backlog = amostra(&texto, &format!("mensageria_backlog{{tipo=\"{TIPO}\"}}"));
        if entregues == Some(2.0) && backlog == Some(0.0) {
            break texto;
        }
        assert!(
            tokio::time::Instant::now() < fim,
            "deliveries not seen in /metrics within 20 s:\n{texto}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    relay.shutdown(Duration::from_secs(5)).await;

    let valor = |serie: String| amostra(&texto, &serie);
    assert_eq!(
        valor(format!("mensageria_enqueued_total{{tipo=\"{TIPO}\"}}")),
        Some(2.0),
        "{texto}"
    );
    assert_eq!(
        valor(format!(
            "mensageria_received_total{{app=\"receptor\",tipo=\"{TIPO}\",resultado=\"applied\"}}"
        )),
        Some(1.0),
        "{texto}"
    );
    assert_eq!(
        valor(format!(
            "mensageria_received_total{{app=\"receptor\",tipo=\"{TIPO}\",resultado=\"duplicate\"}}"
        )),
        Some(1.0),
        "{texto}"
    );
    assert_eq!(
        valor(format!(
            "mensageria_backlog_oldest_age_seconds{{tipo=\"{TIPO}\"}}"
        )),
        Some(0.0),
        "{texto}"
    );
    assert!(
        valor("mensageria_claim_seconds_count".into()).is_some_and(|n| n >= 1.0),
        "{texto}"
    );
    assert!(
        texto.contains("# HELP mensageria_delivered_total"),
        "{texto}"
    );
    // The effect's lag: one sample, for the applied event only (not the duplicate), no older
    // than this test, and described.
    assert_eq!(
        valor(format!(
            "mensageria_effect_lag_seconds_count{{app=\"receptor\",tipo=\"{TIPO}\"}}"
        )),
        Some(1.0),
        "{texto}"
    );
    assert!(
        valor(format!(
            "mensageria_effect_lag_seconds_sum{{app=\"receptor\",tipo=\"{TIPO}\"}}"
        ))
        .is_some_and(|segundos| (0.0..20.0).contains(&segundos)),
        "{texto}"
    );
    assert!(
        texto.contains("# HELP mensageria_effect_lag_seconds"),
        "{texto}"
    );
    // The effect ran once for the two deliveries.
    let efeitos: i64 = mensageria_core::sqlx::query_scalar("SELECT count(*) FROM efeito")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(efeitos, 1);
    // Nothing redelivered, retried or dead-lettered.
    assert_eq!(
        valor(format!("mensageria_dead_lettered_total{{tipo=\"{TIPO}\"}}")),
        None
    );
}
