//! A PostgreSQL restart in the middle of a run: producers keep enqueueing (failing while the
//! server is down), the relay and the receptor share the server, and afterwards every message
//! whose enqueue committed is applied exactly once, and delivery resumes within seconds of the
//! server accepting connections again.
//!
//! It restarts the machine's PostgreSQL (`pg_ctlcluster`), so it must run alone: it is
//! `#[ignore]`d in the parallel suite, and `scripts/test` runs it on its own afterwards
//! (`cargo test -p mensageria-testes --test reinicio_postgres -- --ignored`).

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use mensageria_axum::{Rejeicao, receptor};
use mensageria_core::relay::{Config, Relay};
use mensageria_core::{ContextoEnvio, Destino, FalhaEnvio, enfileirar, enviador};
use mensageria_testes::{PgIsolado, esperar_valor};
use serde::{Deserialize, Serialize};
use sqlx::{Postgres, Transaction};

#[derive(Debug, Serialize, Deserialize)]
struct Nota {
    n: i64,
}

#[enviador(tipo = "reinicio.nota")]
async fn enviar_nota(evento: Nota, ctx: &ContextoEnvio) -> Result<(), FalhaEnvio> {
    ctx.exigir::<Destino>()?.postar(&evento, ctx).await
}

#[receptor(tipo = "reinicio.nota", chave_natural = evento.n)]
async fn aplicar_nota(tx: &mut Transaction<'_, Postgres>, evento: Nota) -> Result<(), Rejeicao> {
    sqlx::query("INSERT INTO efeito (n) VALUES ($1)")
        .bind(evento.n)
        .execute(&mut **tx)
        .await?;
    Ok(())
}

/// `pg_ctlcluster <version> main <acao>` for the newest local cluster.
fn cluster(acao: &str) {
    let versao = std::fs::read_dir("/etc/postgresql")
        .expect("this test restarts the local PostgreSQL with pg_ctlcluster; run it through scripts/test")
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .max_by_key(|v| v.parse::<u32>().unwrap_or(0))
        .expect("a PostgreSQL cluster under /etc/postgresql");
    let mut comando = std::process::Command::new("pg_ctlcluster");
    comando.args(["--skip-systemctl-redirect", &versao, "main", acao]);
    if acao == "stop" {
        comando.args(["-m", "fast"]);
    }
    let status = comando.status().expect("run pg_ctlcluster");
    assert!(status.success(), "pg_ctlcluster {acao} failed");
}

/// Whether a fresh connection gets through.
async fn aceita_conexoes() -> bool {
    match sqlx::PgPool::connect(&mensageria_testes::database_url()).await {
        Ok(pool) => {
            pool.close().await;
            true
        }
        Err(_) => false,
    }
}

async fn aplicados(pool: &sqlx::PgPool) -> Option<i64> {
    sqlx::query_scalar("SELECT count(*) FROM efeito")
        .fetch_one(pool)
        .await
        .ok()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "restarts the machine's PostgreSQL: scripts/test runs it alone"]
async fn reinicio_do_postgres_nada_se_perde_e_a_entrega_volta_em_segundos() {
    let db = PgIsolado::novo().await;
    mensageria_core::migrar(&db.pool).await.unwrap();
    sqlx::query("CREATE TABLE efeito (n BIGINT NOT NULL)")
        .execute(&db.pool)
        .await
        .unwrap();
    let receptores = db.outro_pool(4).await;
    let app = mensageria_axum::router(
        receptores,
        mensageria_axum::Config::new("receptor", ["t0k-de-teste-1234"]),
    )
    .unwrap();
    let (url, _servidor) = mensageria_testes::servir_em_porta_livre(app).await;
    let relay = Relay::new(db.outro_pool(4).await, Config::new("reinicio"))
        .recurso(Destino::new(&url).unwrap().com_token("t0k-de-teste-1234"))
        .spawn()
        .unwrap();

    // Producers: one enqueue every 10 ms. What committed is the ledger; a commit whose outcome
    // was lost with the connection is "maybe".
    let confirmados = Arc::new(Mutex::new(HashSet::new()));
    let talvez = Arc::new(Mutex::new(HashSet::new()));
    let parar = Parar::default();
    let produtor = {
        let (pool, confirmados, talvez, parar) = (
            db.outro_pool(2).await,
            Arc::clone(&confirmados),
            Arc::clone(&talvez),
            parar.clone(),
        );
        tokio::spawn(async move {
            let mut n = 0_i64;
            while !parar.parado() {
                n += 1;
                let Ok(mut tx) = pool.begin().await else {
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                };
                if enfileirar(&mut *tx, &Nota { n }).await.is_err() {
                    continue;
                }
                match tx.commit().await {
                    Ok(()) => confirmados.lock().unwrap().insert(n),
                    Err(_) => talvez.lock().unwrap().insert(n),
                };
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            pool.close().await;
        })
    };

    tokio::time::sleep(Duration::from_secs(3)).await;
    cluster("stop");
    let parado_em = Instant::now();
    tokio::time::sleep(Duration::from_secs(3)).await;
    cluster("start");
    esperar_valor(
        "PostgreSQL accepting connections after its start",
        Duration::from_secs(60),
        Duration::from_millis(50),
        aceita_conexoes,
        |&aceita| aceita,
    )
    .await;
    let aceitando = Instant::now();
    let fora = aceitando - parado_em;
    // Delivery resumed: an effect applied after the server came back.
    let base = esperar_valor(
        "the effect table readable after the restart",
        Duration::from_secs(60),
        Duration::from_millis(50),
        || aplicados(&db.pool),
        Option::is_some,
    )
    .await
    .unwrap_or_default();
    let retomada = loop {
        if aplicados(&db.pool).await.is_some_and(|n| n > base) {
            break aceitando.elapsed();
        }
        assert!(
            aceitando.elapsed() < Duration::from_secs(60),
            "delivery never resumed"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    tokio::time::sleep(Duration::from_secs(3)).await;
    parar.parar();
    produtor.await.unwrap();
    let inicio = Instant::now();
    loop {
        let pendentes: i64 = sqlx::query_scalar("SELECT count(*) FROM mensageria_saida")
            .fetch_one(&db.pool)
            .await
            .unwrap_or(-1);
        if pendentes == 0 {
            break;
        }
        assert!(
            inicio.elapsed() < Duration::from_secs(60),
            "{pendentes} still pending"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    relay.shutdown(Duration::from_secs(5)).await;

    let efeitos: Vec<i64> = sqlx::query_scalar("SELECT n FROM efeito")
        .fetch_all(&db.pool)
        .await
        .unwrap();
    let unicos: HashSet<i64> = efeitos.iter().copied().collect();
    let confirmados = confirmados.lock().unwrap().clone();
    let talvez = talvez.lock().unwrap().clone();
    let perdidos = confirmados.difference(&unicos).count();
    let inesperados = unicos
        .iter()
        .filter(|n| !confirmados.contains(n) && !talvez.contains(n))
        .count();
    let dobrados = efeitos.len() - unicos.len();
    println!(
        "PostgreSQL down {fora:?}; delivery resumed {retomada:?} after it accepted connections; \
         {} committed, {} maybe, {} applied, lost {perdidos}, applied twice {dobrados}, unexpected {inesperados}",
        confirmados.len(),
        talvez.len(),
        unicos.len()
    );
    assert_eq!((perdidos, dobrados, inesperados), (0, 0, 0));
    assert!(retomada <= Duration::from_secs(10), "{retomada:?}");
    db.descartar().await;
}

/// A stop flag for the producer.
#[derive(Clone, Default)]
struct Parar(Arc<AtomicBool>);

impl Parar {
    fn parar(&self) {
        self.0.store(true, Ordering::Relaxed);
    }

    fn parado(&self) -> bool {
        self.0.load(Ordering::Relaxed)
    }
}
