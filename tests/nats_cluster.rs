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
use mensageria_testes::nats::{self as bancada, Cluster, Lugar, Razao};
use mensageria_testes::rede::{Lab, Maquina, pular};
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

/// Where this suite's rows go for `matriz-de-faltas`.
fn matriz() -> std::path::PathBuf {
    std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("faltas-cluster")
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

/// A run in progress: see [`Cena::em_curso`].
struct EmCurso {
    consumidor: mensageria_nats::ConsumidorHandle,
    relay: mensageria_core::relay::RelayHandle,
    produtores: Produtores,
}

/// A cluster, a stream of `replicas` on it, a sending app and a receiving app (`fiscal`), both
/// given the three servers.
struct Cena {
    cluster: Cluster,
    js: mensageria_nats::async_nats::jetstream::Context,
    fluxo: Fluxo,
    emissor: PgIsolado,
    envio: PgPool,
    receptor: PgIsolado,
    recepcao: PgPool,
}

impl Cena {
    async fn nova(replicas: usize) -> Self {
        Self::em(Cluster::iniciar().await, replicas).await
    }

    async fn em(cluster: Cluster, replicas: usize) -> Self {
        bancada::registrar_no_stderr();
        let js = bancada::conectar(&cluster.urls()).await;
        let sufixo = uuid::Uuid::now_v7().simple().to_string();
        let fluxo = Fluxo::new(format!("R{sufixo}"), format!("r{sufixo}"))
            .unwrap()
            .com_replicas(replicas)
            .garantir(&js)
            .await
            .unwrap();
        assert_eq!(fluxo.replicas(), replicas);
        let (emissor, receptor) = bancada::emissor_e_receptor().await;
        let envio = emissor.outro_pool(3).await;
        let recepcao = receptor.outro_pool(3).await;
        Self {
            cluster,
            js,
            fluxo,
            emissor,
            envio,
            receptor,
            recepcao,
        }
    }

    async fn consumir(&self) -> mensageria_nats::ConsumidorHandle {
        let js = mensageria_nats::conectar(&self.cluster.urls(), "fiscal")
            .await
            .unwrap();
        Consumidor::new(
            self.recepcao.clone(),
            js,
            self.fluxo.clone(),
            ConfigConsumidor::new("fiscal").com_espera(Duration::from_millis(200)),
        )
        .spawn()
        .await
        .unwrap()
    }

    fn relay(&self) -> mensageria_core::relay::RelayHandle {
        Relay::new(self.envio.clone(), ConfigRelay::new("cluster-emissor"))
            .recurso(Publicador::new(self.js.clone(), &self.fluxo))
            .spawn()
            .unwrap()
    }

    /// The stream leader's node index.
    async fn lider(&self) -> usize {
        Cluster::indice(
            &bancada::lider_do_fluxo(&self.js, self.fluxo.nome(), Duration::from_secs(30)).await,
        )
    }

    /// The consumer, the relay and producers committing every ~5 ms, once 100 events were
    /// applied: a run in progress, for a fault.
    async fn em_curso(&self) -> EmCurso {
        let consumidor = self.consumir().await;
        let relay = self.relay();
        let produtores = Produtores::iniciar(self.envio.clone());
        esperar_valor(
            "events applied before the fault",
            Duration::from_secs(30),
            Duration::from_millis(20),
            || contar(&self.recepcao, "efeito"),
            |&n| n >= 100,
        )
        .await;
        EmCurso {
            consumidor,
            relay,
            produtores,
        }
    }

    /// Stops the producers, drains, stops the relay and the consumer: how many were committed,
    /// and the ledger's account.
    async fn terminar(&self, em_curso: EmCurso) -> (i64, bancada::Contas) {
        let commitadas = em_curso.produtores.parar().await;
        let razao = self.drenar().await;
        em_curso.relay.shutdown(Duration::from_secs(5)).await;
        assert!(em_curso.consumidor.shutdown(Duration::from_secs(5)).await);
        (
            commitadas,
            bancada::contar(&razao, "fiscal", &self.recepcao).await,
        )
    }

    /// Waits for the saída to drain and every committed event to be applied; the ledger.
    async fn drenar(&self) -> Razao {
        esperar_saida_vazia(&self.envio, 60).await;
        let razao = Razao::ler(&self.emissor.pool).await;
        tracing::info!(
            aplicaveis = razao.aplicaveis(),
            "the saída drained: every event published"
        );
        bancada::esperar_aplicadas(&self.recepcao, razao.aplicaveis(), Duration::from_secs(60))
            .await;
        razao
    }

    async fn fechar(self) {
        let _ = self.js.delete_stream(self.fluxo.nome()).await;
        self.emissor.descartar().await;
        self.receptor.descartar().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lider_do_fluxo_morto_e_reiniciado() {
    // R3 stream; producers commit every ~5 ms; the stream's leader is SIGKILLed and started
    // again 3 s later. The relay and the consumer are given the three servers.
    let mut cena = Cena::nova(3).await;
    let em_curso = cena.em_curso().await;
    let i = cena.lider().await;
    let antes = em_curso.produtores.ultimo();
    cena.cluster.matar(i);
    let morte = Instant::now();
    let eleicao = async {
        let lider =
            bancada::lider_do_fluxo(&cena.js, cena.fluxo.nome(), Duration::from_secs(30)).await;
        (lider, Instant::now())
    };
    let ((novo_lider, eleito), retomada) = tokio::join!(
        eleicao,
        primeiro_efeito_depois(&cena.recepcao, antes, Duration::from_secs(60))
    );
    tokio::time::sleep(Duration::from_secs(3).saturating_sub(morte.elapsed())).await;
    cena.cluster.subir(i).await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let (commitadas, contas) = cena.terminar(em_curso).await;
    bancada::Relato::de_contas(
        "lider_do_fluxo_morto_e_reiniciado",
        "the R3 stream's leader SIGKILLed, started again 3 s later",
        &contas,
        format!(
            "{commitadas} committed; a new leader ({novo_lider}) answered {:.1} s after the kill \
             (nats-server 2.9's election); the first event enqueued after the kill was applied \
             {:.1} s after it, {} ms after the new leader answered (publishes retried every \
             250 ms, `Publicador::com_persistencia`)",
            (eleito - morte).as_secs_f64(),
            (retomada - morte).as_secs_f64(),
            retomada.saturating_duration_since(eleito).as_millis()
        ),
    )
    .gravar(&matriz());
    contas.afirmar();
    assert_ne!(Cluster::indice(&novo_lider), i);
    cena.fechar().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn seguidor_volta_sem_armazenamento() {
    // R3 stream; producers commit every ~5 ms; a node that is not the stream's leader is
    // SIGKILLed, its store deleted, and started again 2 s later: it catches up from the others.
    let mut cena = Cena::nova(3).await;
    let em_curso = cena.em_curso().await;
    let seguidor = (cena.lider().await + 1) % 3;
    cena.cluster.matar(seguidor);
    cena.cluster.apagar_armazenamento(seguidor);
    tokio::time::sleep(Duration::from_secs(2)).await;
    cena.cluster.subir(seguidor).await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let (commitadas, contas) = cena.terminar(em_curso).await;
    bancada::Relato::de_contas(
        "seguidor_volta_sem_armazenamento",
        "a node that is not the stream's leader SIGKILLed, its store deleted, started again 2 s \
         later",
        &contas,
        format!("{commitadas} committed; it caught up from the other two"),
    )
    .gravar(&matriz());
    contas.afirmar();
    cena.fechar().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_inteiro_reiniciado() {
    // R3 stream; producers commit every ~5 ms; all three nodes are SIGKILLed and started again
    // 2 s later (a power cut of the whole cluster: each store is on disk).
    let mut cena = Cena::nova(3).await;
    let em_curso = cena.em_curso().await;
    let antes = em_curso.produtores.ultimo();
    for i in 0..3 {
        cena.cluster.matar(i);
    }
    let morte = Instant::now();
    tracing::info!(ultimo_commitado = antes, "every node SIGKILLed");
    tokio::time::sleep(Duration::from_secs(2)).await;
    for i in 0..3 {
        cena.cluster.subir(i).await;
    }
    tracing::info!("every node started again");
    let retomada = primeiro_efeito_depois(&cena.recepcao, antes, Duration::from_secs(60)).await;
    tracing::info!("delivery resumed");
    tokio::time::sleep(Duration::from_secs(2)).await;
    let (commitadas, contas) = cena.terminar(em_curso).await;
    bancada::Relato::de_contas(
        "cluster_inteiro_reiniciado",
        "all three nodes SIGKILLed, started again 2 s later",
        &contas,
        format!(
            "{commitadas} committed; delivery resumed {:.1} s after the kill (the meta and stream \
             elections of a cold cluster)",
            (retomada - morte).as_secs_f64()
        ),
    )
    .gravar(&matriz());
    contas.afirmar();
    cena.fechar().await;
}

/// With the receiving app stopped, 50 events are committed and published (the relay deletes each
/// saída row on its PubAck); then the stream leader's node is SIGKILLed and its store deleted
/// (a machine lost with its disk, or the page cache it had not synced yet), started again, and
/// the receiving app comes back. `(committed, lost)`.
async fn no_perdido_com_o_disco(replicas: usize) -> (u64, u64) {
    let mut cena = Cena::nova(replicas).await;
    let relay = cena.relay();
    for n in 0..50 {
        bancada::produzir(&cena.envio, n, false, &Lancamento { n })
            .await
            .unwrap();
    }
    esperar_saida_vazia(&cena.envio, 30).await;
    relay.shutdown(Duration::from_secs(5)).await;
    let i = cena.lider().await;
    cena.cluster.matar(i);
    cena.cluster.apagar_armazenamento(i);
    tokio::time::sleep(Duration::from_secs(1)).await;
    cena.cluster.subir(i).await;
    let razao = Razao::ler(&cena.emissor.pool).await;
    // What the stream still holds once it answers again (R1: its only copy went with the disk;
    // the stream's definition survives in the cluster's meta group).
    let guardadas = mensagens_quando_responder(&cena.js, &cena.fluxo).await;
    if guardadas > 0 {
        let consumidor = cena.consumir().await;
        bancada::esperar_aplicadas(&cena.recepcao, guardadas, Duration::from_secs(30)).await;
        assert!(consumidor.shutdown(Duration::from_secs(5)).await);
    }
    let contas = bancada::contar(&razao, "fiscal", &cena.recepcao).await;
    println!(
        "R{replicas} stream, its leader's node n{i} lost with its store while 50 events waited \
         for the receiving app ({guardadas} still in the stream): {contas}"
    );
    assert_eq!((contas.inesperadas, contas.duas_vezes), (0, 0));
    cena.fechar().await;
    (contas.commitadas, contas.perdidas)
}

/// How many messages the stream holds once it has a leader and every replica is current again
/// (up to 30 s): a node back with an empty store answers nothing until it has caught up.
async fn mensagens_quando_responder(
    js: &mensageria_nats::async_nats::jetstream::Context,
    fluxo: &Fluxo,
) -> u64 {
    let fim = Instant::now() + Duration::from_secs(30);
    let mut js = js.clone();
    js.set_timeout(Duration::from_millis(500));
    loop {
        if let Ok(mut stream) = js.get_stream(fluxo.nome()).await
            && let Ok(info) = stream.info().await
        {
            let em_dia = info.cluster.as_ref().is_some_and(|c| {
                c.leader.is_some()
                    && c.replicas.len() + 1 == fluxo.replicas()
                    && c.replicas.iter().all(|r| r.current && !r.offline)
            });
            if em_dia {
                return info.state.messages;
            }
        }
        assert!(
            Instant::now() < fim,
            "the stream's replicas were not current within 30 s"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn r1_perde_com_o_disco_do_no_r3_nao() {
    // Why the production stream is replicated: the same loss, R1 then R3.
    let (commitadas, perdidas_r1) = no_perdido_com_o_disco(1).await;
    assert_eq!(
        (commitadas, perdidas_r1),
        (50, 50),
        "R1: every waiting event went with the node"
    );
    let (commitadas, perdidas_r3) = no_perdido_com_o_disco(3).await;
    bancada::Relato {
        teste: "r1_perde_com_o_disco_do_no_r3_nao".to_owned(),
        falha: "receiving app stopped; 50 events published (the relay deleted each saída row on \
                its PubAck); the stream leader's node SIGKILLed with its store deleted (a \
                machine lost with its disk, or the page cache its file store had not synced: \
                every 2 min by default)"
            .to_owned(),
        commitadas: format!("{commitadas} + {commitadas}"),
        perdidas: format!("R1: {perdidas_r1} — R3: {perdidas_r3}"),
        duas_vezes: "0".to_owned(),
        evidencia: "R1: the stream came back empty (its definition survives in the meta group): \
                    every waiting event is gone from both places, nothing records it. R3: all \
                    still in the stream, all applied. Why the production stream is replicated"
            .to_owned(),
    }
    .gravar(&matriz());
    assert_eq!((commitadas, perdidas_r3), (50, 0), "R3: nothing lost");
}

/// The authorization block of the permissions row: an admin (the harness), a sending app that may
/// publish only its tipo's subjects, a receiving app that may only consume and ack (least
/// privilege, enforced by the servers).
fn autorizacao(fluxo: &str, prefixo: &str) -> String {
    format!(
        r#"authorization {{
  users = [
    {{ user: admin, password: "admin-senha-0123" }}
    {{ user: pedidos, password: "pedidos-senha-0123", permissions: {{
        publish: {{ allow: ["{prefixo}.cluster.lancamento", "{prefixo}._ordem.*.cluster.lancamento",
                            "$JS.API.STREAM.INFO.{fluxo}", "$JS.API.STREAM.INFO.KV_mensageria_topologia",
                            "$JS.API.DIRECT.GET.KV_mensageria_topologia.>"] }}
        subscribe: {{ allow: ["_INBOX.>"] }} }} }}
    {{ user: fiscal, password: "fiscal-senha-0123", permissions: {{
        publish: {{ allow: ["$JS.API.STREAM.INFO.{fluxo}", "$JS.API.STREAM.MSG.GET.{fluxo}",
                            "$JS.API.CONSUMER.CREATE.{fluxo}", "$JS.API.CONSUMER.CREATE.{fluxo}.>",
                            "$JS.API.CONSUMER.DURABLE.CREATE.{fluxo}.>", "$JS.API.CONSUMER.INFO.{fluxo}.>",
                            "$JS.API.CONSUMER.NAMES.{fluxo}",
                            "$JS.API.CONSUMER.MSG.NEXT.{fluxo}.>", "$JS.ACK.{fluxo}.>",
                            "$JS.API.STREAM.INFO.KV_mensageria_topologia",
                            "$JS.API.DIRECT.GET.KV_mensageria_topologia.>"] }}
        subscribe: {{ allow: ["_INBOX.>"] }} }} }}
  ]
}}"#
    )
}

/// A publish that must not be stored: `Err` (refused, or no PubAck within 1 s).
async fn publicar_recusado(
    js: &mensageria_nats::async_nats::jetstream::Context,
    assunto: String,
) -> bool {
    let mut js = js.clone();
    js.set_timeout(Duration::from_secs(1));
    match js.publish(assunto, "{\"n\": 999999}".into()).await {
        Err(_) => true,
        Ok(ack) => ack.await.is_err(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn so_quem_registrou_o_tipo_publica() {
    // The cluster runs with users and subject permissions. The sending app, allowed only its
    // tipo's subjects, delivers 50 events that the receiving app, allowed only to consume and
    // ack, applies; the sending app cannot publish another tipo, the receiving app cannot
    // publish at all (it cannot forge an event), and a client without credentials cannot connect.
    let sufixo = uuid::Uuid::now_v7().simple().to_string();
    let (nome, prefixo) = (format!("P{sufixo}"), format!("p{sufixo}"));
    let cluster =
        Cluster::iniciar_com(&autorizacao(&nome, &prefixo), "admin:admin-senha-0123").await;
    let admin = bancada::conectar(&cluster.urls()).await;
    let fluxo = Fluxo::new(nome, prefixo)
        .unwrap()
        .com_replicas(3)
        .garantir(&admin)
        .await
        .unwrap();
    let (emissor, receptor) = bancada::emissor_e_receptor().await;

    let js_pedidos =
        mensageria_nats::conectar(&cluster.urls_de("pedidos:pedidos-senha-0123"), "pedidos")
            .await
            .unwrap();
    let js_fiscal =
        mensageria_nats::conectar(&cluster.urls_de("fiscal:fiscal-senha-0123"), "fiscal")
            .await
            .unwrap();
    let consumidor = Consumidor::new(
        receptor.pool.clone(),
        js_fiscal.clone(),
        fluxo.clone(),
        ConfigConsumidor::new("fiscal").com_espera(Duration::from_millis(200)),
    )
    .spawn()
    .await
    .unwrap();
    let relay = Relay::new(emissor.pool.clone(), ConfigRelay::new("pedidos"))
        .recurso(Publicador::new(js_pedidos.clone(), &fluxo))
        .spawn()
        .unwrap();
    for n in 0..50 {
        bancada::produzir(&emissor.pool, n, false, &Lancamento { n })
            .await
            .unwrap();
    }
    esperar_saida_vazia(&emissor.pool, 30).await;
    let razao = Razao::ler(&emissor.pool).await;
    bancada::esperar_aplicadas(&receptor.pool, 50, Duration::from_secs(30)).await;

    let outro_tipo = publicar_recusado(&js_pedidos, fluxo.assunto("estoque.reservado")).await;
    let forjado = publicar_recusado(&js_fiscal, fluxo.assunto("cluster.lancamento")).await;
    let anonimo = mensageria_nats::conectar(&cluster.urls_de(""), "anonimo").await;
    let no_fluxo = bancada::mensagens_no_fluxo(&admin, &fluxo).await;
    relay.shutdown(Duration::from_secs(5)).await;
    assert!(consumidor.shutdown(Duration::from_secs(5)).await);
    let contas = bancada::contar(&razao, "fiscal", &receptor.pool).await;
    bancada::Relato::de_contas(
        "so_quem_registrou_o_tipo_publica",
        "the cluster runs with users and subject permissions: the sending app may publish only \
         its tipo's subjects, the receiving app may only consume and ack",
        &contas,
        format!(
            "the sender's publish of another tipo refused: {outro_tipo}; the receiving app's \
             publish refused: {forjado}; a client without credentials refused: {}; {no_fluxo} \
             messages in the stream",
            anonimo.is_err()
        ),
    )
    .gravar(&matriz());
    contas.afirmar();
    assert!(outro_tipo && forjado, "the servers refused both publishes");
    let erro = anonimo.map(|_| ()).unwrap_err().to_string();
    assert!(!erro.contains("senha"), "{erro}");
    assert_eq!(no_fluxo, 50, "nothing but the sender's own tipo was stored");
    let _ = admin.delete_stream(fluxo.nome()).await;
    emissor.descartar().await;
    receptor.descartar().await;
}

#[derive(Debug, Serialize, Deserialize)]
struct PassoCluster {
    chave: i64,
    passo: i64,
}

#[derive(Debug, Serialize, Deserialize)]
struct EtapaCluster {
    chave: i64,
    passo: i64,
}

#[enviador(tipo = "cluster.passo", ordem = evento.chave)]
async fn publicar_passo(evento: PassoCluster, ctx: &ContextoEnvio) -> Result<(), FalhaEnvio> {
    ctx.exigir::<Publicador>()?.publicar(&evento, ctx).await
}

#[enviador(tipo = "cluster.etapa", ordem = evento.chave)]
async fn publicar_etapa(evento: EtapaCluster, ctx: &ContextoEnvio) -> Result<(), FalhaEnvio> {
    ctx.exigir::<Publicador>()?.publicar(&evento, ctx).await
}

#[receptor(tipo = "cluster.passo", chave_natural = (evento.chave, evento.passo))]
async fn aplicar_passo(
    tx: &mut Transaction<'_, Postgres>,
    evento: PassoCluster,
) -> Result<(), Rejeicao> {
    registrar_passo(tx, evento.chave, evento.passo).await
}

#[receptor(tipo = "cluster.etapa", chave_natural = (evento.chave, evento.passo))]
async fn aplicar_etapa(
    tx: &mut Transaction<'_, Postgres>,
    evento: EtapaCluster,
) -> Result<(), Rejeicao> {
    registrar_passo(tx, evento.chave, evento.passo).await
}

async fn registrar_passo(
    tx: &mut Transaction<'_, Postgres>,
    chave: i64,
    passo: i64,
) -> Result<(), Rejeicao> {
    sqlx::query("INSERT INTO passos (chave, passo) VALUES ($1, $2)")
        .bind(chave)
        .bind(passo)
        .execute(&mut **tx)
        .await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ordem_sob_morte_do_lider_e_de_replicas() {
    // Ordered by key on the R3 stream: 200 keys × 20 steps, even steps one tipo and odd steps
    // another, consumed by two replicas of one app (ack wait 3 s). A quarter of the way in, one
    // replica is killed (aborted, as a SIGKILL would leave it) and replaced, and the stream's
    // leader is SIGKILLed and started again 3 s later. Every step applied once, every key in order.
    const CHAVES: i64 = 200;
    const PASSOS: i64 = 20;
    let mut cena = Cena::nova(3).await;
    sqlx::query(
        "CREATE TABLE passos (ordem BIGSERIAL PRIMARY KEY, chave BIGINT NOT NULL, \
         passo BIGINT NOT NULL)",
    )
    .execute(&cena.recepcao)
    .await
    .unwrap();
    let replica = || async {
        let js = mensageria_nats::conectar(&cena.cluster.urls(), "fiscal-ordem")
            .await
            .unwrap();
        let config = ConfigConsumidor::new("fiscal-ordem")
            .com_tipos(["cluster.passo", "cluster.etapa"])
            .com_espera(Duration::from_millis(200))
            .com_ack_wait(Duration::from_secs(3));
        Consumidor::new(cena.recepcao.clone(), js, cena.fluxo.clone(), config)
            .spawn()
            .await
            .unwrap()
    };
    let (primeira, segunda) = (replica().await, replica().await);
    for passo in 0..PASSOS {
        let mut tx = cena.envio.begin().await.unwrap();
        for chave in 0..CHAVES {
            if passo % 2 == 0 {
                mensageria_core::enfileirar(&mut *tx, &PassoCluster { chave, passo }).await
            } else {
                mensageria_core::enfileirar(&mut *tx, &EtapaCluster { chave, passo }).await
            }
            .unwrap();
        }
        tx.commit().await.unwrap();
    }
    let relay = cena.relay();
    let aplicados = || contar(&cena.recepcao, "passos");
    esperar_valor(
        "a quarter of the steps",
        Duration::from_secs(60),
        Duration::from_millis(20),
        aplicados,
        |&n| n >= CHAVES * PASSOS / 4,
    )
    .await;
    primeira.abort();
    let terceira = replica().await;
    let i = cena.lider().await;
    cena.cluster.matar(i);
    tokio::time::sleep(Duration::from_secs(3)).await;
    cena.cluster.subir(i).await;
    esperar_valor(
        "every step",
        Duration::from_secs(120),
        Duration::from_millis(50),
        aplicados,
        |&n| n >= CHAVES * PASSOS,
    )
    .await;
    relay.shutdown(Duration::from_secs(5)).await;
    for replica in [segunda, terceira] {
        assert!(replica.shutdown(Duration::from_secs(5)).await);
    }
    let linhas: Vec<(i64, i64)> = sqlx::query_as("SELECT chave, passo FROM passos ORDER BY ordem")
        .fetch_all(&cena.recepcao)
        .await
        .unwrap();
    let mut ultimo = std::collections::HashMap::new();
    let fora_de_ordem = linhas
        .iter()
        .filter(|(chave, passo)| *passo != ultimo.insert(*chave, *passo).unwrap_or(-1) + 1)
        .count();
    let distintas = linhas
        .iter()
        .collect::<std::collections::HashSet<_>>()
        .len();
    bancada::Relato {
        teste: "ordem_sob_morte_do_lider_e_de_replicas".to_owned(),
        falha: "ordered by key: 200 keys × 20 steps over two tipos, two consumer replicas (ack \
                wait 3 s); a quarter of the way in one replica killed (aborted) and replaced, \
                the stream leader SIGKILLed and started again 3 s later"
            .to_owned(),
        commitadas: (CHAVES * PASSOS).to_string(),
        perdidas: (CHAVES * PASSOS - distintas as i64).to_string(),
        duas_vezes: (linhas.len() - distintas).to_string(),
        evidencia: format!("**{fora_de_ordem} out of order**; the leader was n{i}"),
    }
    .gravar(&matriz());
    assert_eq!(
        linhas.len() as i64,
        CHAVES * PASSOS,
        "each step applied once"
    );
    assert_eq!(fora_de_ordem, 0, "every key's steps in order");
    cena.fechar().await;
}

/// How long [`lider_do_fluxo_isolado_da_maioria`] keeps the leader cut off.
const ISOLAMENTO: Duration = Duration::from_secs(30);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs root and network namespaces; scripts/test runs it alone, after the parallel suite"]
async fn lider_do_fluxo_isolado_da_maioria() {
    // The three nodes run in hosts of a network lab (tests/src/rede.rs): their routes cross the
    // lab's router, while the apps reach each node through a bridge outside every fault. R3
    // stream; producers commit every ~5 ms; the node of the stream's leader, where the relay's
    // client is, is cut from the other two (packets dropped in the router both ways: the
    // connections stay open and silent) for 30 s, then the cut heals. The majority elects a
    // leader, the apps leave the silent node for it and go on before the heal; the minority
    // rejoins.
    let lab = match Lab::montar_nats() {
        Ok(lab) => lab,
        Err(pulo) => return pular("lider_do_fluxo_isolado_da_maioria", &pulo),
    };
    let lugares = Maquina::NATS
        .iter()
        .map(|&maquina| Lugar {
            prefixo: ["ip", "netns", "exec", &lab.ns(maquina)]
                .map(str::to_owned)
                .to_vec(),
            escuta: "127.0.0.1:4222".to_owned(),
            rota: format!("{}:6222", lab.ip(maquina)),
            porta: lab.ponte(maquina, 4222),
        })
        .collect();
    let cena = Cena::em(Cluster::iniciar_em(lugares, "", "").await, 3).await;
    // The relay's client on the stream leader's node: the cut takes both.
    let i = cena.lider().await;
    let cliente = cena.js.client();
    for _ in 0..30 {
        if Cluster::indice(&cliente.server_info().server_name) == i {
            break;
        }
        cliente.force_reconnect().await.unwrap();
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert_eq!(Cluster::indice(&cliente.server_info().server_name), i);
    let em_curso = cena.em_curso().await;
    for j in (0..3).filter(|&j| j != i) {
        lab.separar(Maquina::NATS[i], Maquina::NATS[j]);
    }
    let corte = Instant::now();
    // Events above this one were committed after the cut.
    let antes = em_curso.produtores.ultimo();
    let maioria = bancada::conectar(&cena.cluster.url((i + 1) % 3)).await;
    let eleicao = async {
        loop {
            let lider =
                bancada::lider_do_fluxo(&maioria, cena.fluxo.nome(), Duration::from_secs(30)).await;
            if Cluster::indice(&lider) != i {
                return (lider, Instant::now());
            }
            assert!(
                corte.elapsed() < Duration::from_secs(30),
                "no new leader in the majority"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    };
    let cura = async {
        tokio::time::sleep(ISOLAMENTO).await;
        lab.curar();
        Instant::now()
    };
    let retomada = async {
        let quando = primeiro_efeito_depois(&cena.recepcao, antes, Duration::from_secs(60)).await;
        (quando, cliente.server_info().server_name)
    };
    let ((novo_lider, eleito), (retomada, onde), curado) = tokio::join!(eleicao, retomada, cura);
    let alcancou = replicas_em_dia(&maioria, cena.fluxo.nome(), Duration::from_secs(60)).await;
    let (commitadas, contas) = cena.terminar(em_curso).await;
    bancada::Relato::de_contas(
        "lider_do_fluxo_isolado_da_maioria",
        "the node of the R3 stream's leader and of the relay's client cut from the other two for \
         30 s (a partition in a network lab: packets dropped both ways, connections left \
         silent), then healed",
        &contas,
        format!(
            "{commitadas} committed; the majority elected {novo_lider} {:.1} s after the cut; the \
             first event enqueued after the cut was applied {:.1} s after it, before the heal \
             (the relay's client had left the cut node n{i} for {onde}); every replica current again \
             {:.1} s after the heal",
            (eleito - corte).as_secs_f64(),
            (retomada - corte).as_secs_f64(),
            (alcancou - curado).as_secs_f64()
        ),
    )
    .gravar(&matriz());
    contas.afirmar();
    assert!(
        retomada < curado,
        "delivery resumed only after the heal: the apps stayed on the cut node"
    );
    cena.fechar().await;
}

/// The instant every replica of stream `fluxo` is current (asked every 100 ms, within `limite`).
async fn replicas_em_dia(
    js: &mensageria_nats::async_nats::jetstream::Context,
    fluxo: &str,
    limite: Duration,
) -> Instant {
    let fim = Instant::now() + limite;
    loop {
        if let Ok(mut stream) = js.get_stream(fluxo).await
            && let Ok(info) = stream.info().await
            && let Some(cluster) = info.cluster.as_ref()
            && cluster.leader.is_some()
            && cluster.replicas.len() == 2
            && cluster.replicas.iter().all(|r| r.current)
        {
            return Instant::now();
        }
        assert!(
            Instant::now() < fim,
            "stream {fluxo}'s replicas not current after {limite:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
