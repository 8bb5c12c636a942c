//! JetStream on a three-node cluster of the test's own (nats-server 2.9 × 3 on loopback, routed,
//! each with a store of its own; `tests/src/nats.rs`, `Cluster`), with a replicated stream (R3),
//! checked against the ledger: the sending app writes a `razao` row with each enqueue, the
//! receiving app counts every application. Each row fails unless every committed event was
//! applied exactly once (lost 0, unexpected 0, twice 0).
//!
//! `cargo test -p mensageria-testes --all-features --test nats_cluster -- --nocapture` prints each
//! row's figures (docs/FAULTS.md, "JetStream cluster").

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use mensageria_axum::{Rejeicao, receptor};
use mensageria_core::relay::{Config as ConfigRelay, Relay};
use mensageria_core::{ContextoEnvio, FalhaEnvio, enviador};
use mensageria_nats::{ConfigConsumidor, Consumidor, Fluxo, Publicador};
use mensageria_testes::nats::{self as bancada, Cluster, Razao};
use mensageria_testes::{PgIsolado, contar, esperar_saida_vazia, esperar_valor};
use serde::{Deserialize, Serialize};
use sqlx::{PgPool, Postgres, Transaction};

#[derive(Debug, Serialize, Deserialize)]
struct Lancamento {
    n: i64,
}

#[enviador(tipo = "cluster.lancamento")]
async fn publicar(evento: Lancamento, ctx: &ContextoEnvio) -> Result<(), FalhaEnvio> {
    ctx.exigir::<Publicador>()?.publicar(&evento, ctx).await
}

#[receptor(tipo = "cluster.lancamento", chave_natural = evento.n)]
async fn aplicar(tx: &mut Transaction<'_, Postgres>, evento: Lancamento) -> Result<(), Rejeicao> {
    sqlx::query(bancada::APLICAR)
        .bind(evento.n)
        .execute(&mut **tx)
        .await?;
    Ok(())
}

/// Producers committing a ledger row and an enqueue every ~5 ms until stopped; the highest
/// event number committed so far is readable while they run.
struct Produtores {
    parar: Arc<AtomicBool>,
    ultimo: Arc<std::sync::atomic::AtomicI64>,
    tarefa: tokio::task::JoinHandle<i64>,
}

impl Produtores {
    fn iniciar(pool: PgPool) -> Self {
        let parar = Arc::new(AtomicBool::new(false));
        let ultimo = Arc::new(std::sync::atomic::AtomicI64::new(-1));
        let (sinal, marca) = (Arc::clone(&parar), Arc::clone(&ultimo));
        let tarefa = tokio::spawn(async move {
            let mut n = 0;
            while !sinal.load(Ordering::Relaxed) {
                bancada::produzir(&pool, n, false, &Lancamento { n })
                    .await
                    .unwrap();
                marca.store(n, Ordering::Relaxed);
                n += 1;
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            n
        });
        Self {
            parar,
            ultimo,
            tarefa,
        }
    }

    fn ultimo(&self) -> i64 {
        self.ultimo.load(Ordering::Relaxed)
    }

    async fn parar(self) -> i64 {
        self.parar.store(true, Ordering::Relaxed);
        self.tarefa.await.unwrap()
    }
}

/// The first instant an event numbered above `n` has been applied, polled every 10 ms.
async fn primeiro_efeito_depois(pool: &PgPool, n: i64, limite: Duration) -> Instant {
    let fim = Instant::now() + limite;
    loop {
        let aplicado: bool =
            sqlx::query_scalar("SELECT EXISTS (SELECT 1 FROM efeito WHERE n > $1)")
                .bind(n)
                .fetch_one(pool)
                .await
                .unwrap();
        if aplicado {
            return Instant::now();
        }
        assert!(
            Instant::now() < fim,
            "nothing enqueued after event {n} applied within {limite:?}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lider_do_fluxo_morto_e_reiniciado() {
    // R3 stream; producers commit every ~5 ms; the stream's leader is SIGKILLed and started
    // again 3 s later. The relay and the consumer are given the three servers.
    let mut cluster = Cluster::iniciar().await;
    let js = bancada::conectar(&cluster.urls()).await;
    let sufixo = uuid::Uuid::now_v7().simple().to_string();
    let fluxo = Fluxo::new(format!("R{sufixo}"), format!("r{sufixo}"))
        .unwrap()
        .com_replicas(3)
        .garantir(&js)
        .await
        .unwrap();
    assert_eq!(fluxo.replicas(), 3);
    let (emissor, receptor) = (PgIsolado::novo().await, PgIsolado::novo().await);
    mensageria_core::migrar(&emissor.pool).await.unwrap();
    sqlx::query(bancada::RAZAO)
        .execute(&emissor.pool)
        .await
        .unwrap();
    mensageria_core::migrar(&receptor.pool).await.unwrap();
    sqlx::query(bancada::EFEITO)
        .execute(&receptor.pool)
        .await
        .unwrap();
    let envio = emissor.outro_pool(3).await;
    let recepcao = receptor.outro_pool(3).await;
    let js_receptor = mensageria_nats::conectar(&cluster.urls(), "fiscal")
        .await
        .unwrap();
    let consumidor = Consumidor::new(
        recepcao.clone(),
        js_receptor,
        fluxo.clone(),
        ConfigConsumidor::new("fiscal").com_espera(Duration::from_millis(200)),
    )
    .spawn()
    .await
    .unwrap();
    let relay = Relay::new(envio.clone(), ConfigRelay::new("cluster-emissor"))
        .recurso(Publicador::new(js.clone(), &fluxo))
        .spawn()
        .unwrap();
    let produtores = Produtores::iniciar(envio.clone());
    esperar_valor(
        "events applied before the fault",
        Duration::from_secs(30),
        Duration::from_millis(20),
        || contar(&recepcao, "efeito"),
        |&n| n >= 100,
    )
    .await;

    let lider = bancada::lider_do_fluxo(&js, fluxo.nome(), Duration::from_secs(10)).await;
    let i = Cluster::indice(&lider);
    let antes = produtores.ultimo();
    cluster.matar(i);
    let morte = Instant::now();
    let eleicao = async {
        let lider = bancada::lider_do_fluxo(&js, fluxo.nome(), Duration::from_secs(30)).await;
        (lider, Instant::now())
    };
    let ((novo_lider, eleito), retomada) = tokio::join!(
        eleicao,
        primeiro_efeito_depois(&recepcao, antes, Duration::from_secs(60))
    );
    tokio::time::sleep(Duration::from_secs(3).saturating_sub(morte.elapsed())).await;
    cluster.subir(i).await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let commitadas = produtores.parar().await;
    esperar_saida_vazia(&envio, 60).await;
    let razao = Razao::ler(&emissor.pool).await;
    bancada::esperar_aplicadas(&recepcao, razao.aplicaveis(), Duration::from_secs(60)).await;
    relay.shutdown(Duration::from_secs(5)).await;
    assert!(consumidor.shutdown(Duration::from_secs(5)).await);
    let contas = bancada::contar(&razao, "fiscal", &recepcao).await;
    let parado = retomada - morte;
    let eleicao = eleito - morte;
    println!(
        "R3 stream leader {lider} SIGKILLed ({commitadas} committed): new leader {novo_lider} \
         answering {eleicao:?} after the kill; the first event enqueued after the kill applied \
         {parado:?} after it ({:?} after the new leader answered); {contas}",
        retomada.saturating_duration_since(eleito)
    );
    contas.afirmar();
    assert_ne!(novo_lider, lider);
    js.delete_stream(fluxo.nome()).await.unwrap();
    emissor.descartar().await;
    receptor.descartar().await;
}
