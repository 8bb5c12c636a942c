//! Backpressure (issue 36): a receiving app whose pool is exhausted says so at once, and the
//! sending relay keeps fewer deliveries in flight instead of timing out and sending again.
//!
//! Observed from the outside: on a slow link to its database, a receiving app's pool of 8 under
//! 128 deliveries in flight made requests outlive the relay's timeout, and the relay delivered
//! again what the receptor then applied anyway (121–126 duplicate deliveries for 300 events).
//! Here the link is a fault proxy that delays every chunk between the receptor and PostgreSQL
//! by 25 ms both ways (each transaction takes about 150 ms, so 8 connections apply about 50 a
//! second and 128 requests queue for several seconds), one request per event, and the relay's
//! request timeout is 3 s: a request that waits its turn in the pool's queue outlives it. The
//! receptor waits up to its default 1 s for a connection.
//!
//! Real PostgreSQL behind a real TCP proxy on 127.0.0.1, the real router served by `servir`, a
//! layer that reads every answer's outcome.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Body;
use axum::extract::{Request, State};
use axum::middleware::{Next, from_fn_with_state};
use axum::response::Response;
use mensageria_axum::{Config as ConfigReceptor, Rejeicao, receptor};
use mensageria_core::relay::{Config, Relay};
use mensageria_core::sqlx::{Postgres, Transaction};
use mensageria_core::teste::{ModoProxy, ProxyDeFalhas};
use mensageria_core::{ContextoEnvio, Destino, FalhaEnvio, enfileirar, enviador};
use mensageria_testes::{PgIsolado, contar, cronometrar_dreno};
use serde::{Deserialize, Serialize};

const TOKEN: &str = "t0k-contrapressao-de-teste";
const EVENTOS: i64 = 300;
const CONEXOES_DO_RECEPTOR: u32 = 8;

#[derive(Serialize, Deserialize)]
struct Pressionado {
    n: i64,
}

#[enviador(tipo = "contrapressao.evento")]
async fn enviar(evento: Pressionado, ctx: &ContextoEnvio) -> Result<(), FalhaEnvio> {
    ctx.exigir::<Destino>()?.postar(&evento, ctx).await
}

#[receptor(tipo = "contrapressao.evento", chave_natural = evento.n)]
async fn receber(tx: &mut Transaction<'_, Postgres>, evento: Pressionado) -> Result<(), Rejeicao> {
    mensageria_core::sqlx::query("INSERT INTO efeitos (n) VALUES ($1)")
        .bind(evento.n)
        .execute(&mut **tx)
        .await?;
    Ok(())
}

/// The outcome of every answer the receptor gave, by its code.
#[derive(Debug, Default)]
struct Respostas {
    aplicadas: usize,
    duplicadas: usize,
    ocupadas: usize,
    outras: Vec<String>,
}

type Contagem = Arc<Mutex<Respostas>>;

async fn ler_resposta(State(contagem): State<Contagem>, pedido: Request, next: Next) -> Response {
    let resposta = next.run(pedido).await;
    let (partes, corpo) = resposta.into_parts();
    let bytes = axum::body::to_bytes(corpo, 1024 * 1024)
        .await
        .expect("the answer's body");
    let texto = String::from_utf8_lossy(&bytes);
    {
        let mut contagem = contagem.lock().unwrap();
        if texto.contains("\"applied\"") {
            contagem.aplicadas += 1;
        } else if texto.contains("\"duplicate\"") {
            contagem.duplicadas += 1;
        } else if texto.contains("\"busy\"") {
            contagem.ocupadas += 1;
        } else {
            contagem.outras.push(format!("{} {texto}", partes.status));
        }
    }
    Response::from_parts(partes, Body::from(bytes))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn um_pool_esgotado_responde_ocupado_e_o_relay_recua_sem_duplicar() {
    let db = PgIsolado::novo().await;
    mensageria_core::migrar(&db.pool).await.unwrap();
    mensageria_core::sqlx::query("CREATE TABLE efeitos (n BIGINT NOT NULL)")
        .execute(&db.pool)
        .await
        .unwrap();
    let postgres: std::net::SocketAddr = "127.0.0.1:5432".parse().unwrap();
    let proxy = ProxyDeFalhas::iniciar(postgres, 36).await.unwrap();
    let receptor = db.pool_via(proxy.endereco(), CONEXOES_DO_RECEPTOR).await;
    proxy.modo(ModoProxy::Atrasar(Duration::from_millis(25)));
    let contagem = Contagem::default();
    let app = mensageria_axum::router(
        receptor.clone(),
        ConfigReceptor::new("receptor-lento", [TOKEN]),
    )
    .unwrap()
    .layer(from_fn_with_state(Arc::clone(&contagem), ler_resposta));
    let (base, servidor) = mensageria_testes::servir_em_porta_livre(app).await;

    let mut tx = db.pool.begin().await.unwrap();
    for n in 0..EVENTOS {
        enfileirar(&mut *tx, &Pressionado { n }).await.unwrap();
    }
    tx.commit().await.unwrap();
    let destino = Destino::new(&base)
        .unwrap()
        .com_token(TOKEN)
        .com_lote_maximo(1)
        .com_tempo_limite(Duration::from_secs(3));
    let relay = Relay::new(db.outro_pool(3).await, Config::new("pressionado")).recurso(destino);
    let segundos = cronometrar_dreno(&db.pool, relay, Duration::from_secs(90)).await;
    servidor.abort();
    receptor.close().await;

    let respostas = std::mem::take(&mut *contagem.lock().unwrap());
    eprintln!("{EVENTOS} events through a slow database link in {segundos:.1} s: {respostas:?}");
    assert_eq!(
        contar(&db.pool, "mensageria_saida").await,
        0,
        "not drained: {respostas:?}"
    );
    assert_eq!(
        contar(&db.pool, "mensageria_mortas").await,
        0,
        "{respostas:?}"
    );
    assert_eq!(
        contar(&db.pool, "efeitos").await,
        EVENTOS,
        "each effect once"
    );
    let distintos: i64 =
        mensageria_core::sqlx::query_scalar("SELECT count(DISTINCT n) FROM efeitos")
            .fetch_one(&db.pool)
            .await
            .unwrap();
    assert_eq!(distintos, EVENTOS);
    assert_eq!(respostas.aplicadas, EVENTOS as usize, "{respostas:?}");
    assert!(respostas.outras.is_empty(), "{respostas:?}");
    // A duplicate is a delivery the relay gave up on (its request outlived the timeout) that
    // the receptor applied anyway. A few may remain (a request admitted just before its
    // timeout); before, 121–126 of 300.
    assert!(
        respostas.duplicadas <= EVENTOS as usize / 50,
        "{} duplicate deliveries of {EVENTOS}: requests still outlive the relay's timeout \
         ({respostas:?})",
        respostas.duplicadas
    );
    assert!(
        respostas.ocupadas > 0,
        "the pool was never exhausted: {respostas:?}"
    );
    db.descartar().await;
}
