//! The load: the bench's payloads, its enviadores and receptor, the producers' business
//! transaction, and a closed-loop driver that counts completions per second.

use std::future::Future;
use std::future::IntoFuture as _;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use mensageria_axum::{Rejeicao, receptor};
use mensageria_core::{ContextoEnvio, Destino, FalhaEnvio, enfileirar, enviador};
use serde::{Deserialize, Serialize};
use sqlx::{PgPool, Postgres, SqlitePool, Transaction};

/// The bearer token between the bench's relay and its receptor.
pub(crate) const TOKEN: &str = "bench-token-0123456789";

/// A business event of realistic size (~100 bytes of JSON).
#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct EventoBench {
    pub(crate) n: i64,
    pub(crate) cnpj: String,
    pub(crate) chave: String,
}

#[enviador(tipo = "bench.evento")]
async fn enviar_evento(evento: EventoBench, ctx: &ContextoEnvio) -> Result<(), FalhaEnvio> {
    ctx.exigir::<Destino>()?.postar(&evento, ctx).await
}

/// A payload whose enviador does nothing: measures the relay's own cost (claim and settle).
#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct Nada {
    pub(crate) n: i64,
}

#[enviador(tipo = "bench.nada")]
async fn enviar_nada(_evento: Nada, _ctx: &ContextoEnvio) -> Result<(), FalhaEnvio> {
    Ok(())
}

#[receptor(tipo = "bench.evento", chave_natural = evento.n)]
async fn receber_evento(
    tx: &mut Transaction<'_, Postgres>,
    evento: EventoBench,
) -> Result<(), Rejeicao> {
    sqlx::query("INSERT INTO efeito (n) VALUES ($1)")
        .bind(evento.n)
        .execute(&mut **tx)
        .await?;
    if evento.n < 0 {
        // The poison event of the batch runs: refused after its effect was written.
        return Err(Rejeicao::permanente("negative n: the bench's poison event"));
    }
    Ok(())
}

static PROXIMO: AtomicI64 = AtomicI64::new(1);

/// A fresh event (unique `n` for the whole run).
pub(crate) fn evento() -> EventoBench {
    evento_n(PROXIMO.fetch_add(1, Ordering::Relaxed))
}

pub(crate) fn evento_n(n: i64) -> EventoBench {
    EventoBench {
        n,
        cnpj: "12345678000195".into(),
        chave: format!("3524{n:040}"),
    }
}

/// Reserves `quantos` consecutive `n`s; returns the first.
pub(crate) fn reservar(quantos: i64) -> i64 {
    PROXIMO.fetch_add(quantos, Ordering::Relaxed)
}

/// One step of a closed loop, boxed: every kind of step has the same type, and it is
/// `Send + 'static` so that [`vazao`] can spawn it.
pub(crate) type Passo<T> = Pin<Box<dyn Future<Output = T> + Send + 'static>>;

/// One producer step on PostgreSQL: the business write and its enqueue, committed. Resolves to
/// the message id.
pub(crate) fn negocio_pg(pool: PgPool) -> Passo<uuid::Uuid> {
    Box::pin(async move {
        let mut tx = abrir_negocio(&pool).await;
        let id = enfileirar(&mut *tx, &evento()).await.expect("enqueue");
        tx.commit().await.expect("commit");
        id
    })
}

/// A raw single-row INSERT transaction: the baseline of sections 1 and 2.
pub(crate) fn insert_cru(pool: PgPool) -> Passo<()> {
    Box::pin(async move {
        sqlx::query("INSERT INTO negocio (valor) VALUES ($1)")
            .bind("pedido faturado")
            .execute(&pool)
            .await
            .expect("raw insert");
    })
}

/// A business transaction begun on `pool`, its business row written: BEGIN and one INSERT.
pub(crate) async fn abrir_negocio(pool: &PgPool) -> Transaction<'static, Postgres> {
    let mut tx = pool.begin().await.expect("begin");
    sqlx::query("INSERT INTO negocio (valor) VALUES ($1)")
        .bind("pedido faturado")
        .execute(&mut *tx)
        .await
        .expect("business insert");
    tx
}

/// The same on SQLite.
pub(crate) fn negocio_sqlite(pool: SqlitePool, com_saida: bool) -> Passo<()> {
    Box::pin(async move { negocio_sqlite_em(&pool, com_saida).await })
}

async fn negocio_sqlite_em(pool: &SqlitePool, com_saida: bool) {
    let mut tx = pool.begin().await.expect("begin");
    sqlx::query("INSERT INTO negocio (valor) VALUES ($1)")
        .bind("pedido faturado")
        .execute(&mut *tx)
        .await
        .expect("business insert");
    if com_saida {
        enfileirar(&mut *tx, &evento()).await.expect("enqueue");
    }
    tx.commit().await.expect("commit");
}

/// Runs `clientes` closed loops of `passo` for `duracao`; returns completions per second.
pub(crate) async fn vazao<F, T>(clientes: usize, duracao: Duration, passo: F) -> f64
where
    F: Fn() -> Passo<T> + Clone + Send + 'static,
    T: 'static,
{
    let feitos = Arc::new(AtomicU64::new(0));
    let inicio = Instant::now();
    let fim = inicio + duracao;
    let tarefas: Vec<_> = (0..clientes)
        .map(|_| {
            let passo = passo.clone();
            let feitos = Arc::clone(&feitos);
            tokio::spawn(async move {
                while Instant::now() < fim {
                    passo().await;
                    feitos.fetch_add(1, Ordering::Relaxed);
                }
            })
        })
        .collect();
    for tarefa in tarefas {
        tarefa.await.expect("a load task panicked");
    }
    feitos.load(Ordering::Relaxed) as f64 / inicio.elapsed().as_secs_f64()
}

/// Serves `app` on a free port of 127.0.0.1; returns its base URL.
pub(crate) async fn servir(app: axum::Router) -> String {
    let ouvinte = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind 127.0.0.1:0");
    let endereco = ouvinte.local_addr().expect("local address");
    tokio::spawn(mensageria_axum::servir(ouvinte, app).into_future());
    format!("http://{endereco}")
}

/// Polls `condicao` every 50 ms for at most `limite`; true when it held.
pub(crate) async fn esperar<F, Fut>(limite: Duration, condicao: F) -> bool
where
    F: Fn() -> Fut,
    Fut: Future<Output = bool>,
{
    let fim = Instant::now() + limite;
    while Instant::now() < fim {
        if condicao().await {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    false
}

/// Waits up to `limite` for the saída behind `pool` to be empty; whether it emptied.
pub(crate) async fn esperar_saida_vazia(pool: &PgPool, limite: Duration) -> bool {
    esperar(limite, || async {
        contar(pool, "SELECT count(*) FROM mensageria_saida").await == 0
    })
    .await
}

pub(crate) async fn contar(pool: &PgPool, sql: &'static str) -> i64 {
    sqlx::query_scalar(sql)
        .fetch_one(pool)
        .await
        .expect("count")
}
