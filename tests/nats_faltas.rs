//! JetStream fault scenarios, checked against a ledger (issue 24).
//!
//! Each scenario has a sending app (a PostgreSQL schema of its own, its relay publishing through
//! a `Publicador`) that writes a ledger row (`razao`) in the same transaction as each enqueue,
//! and one or two receiving apps (schemas or files of their own, each with a `Consumidor`) whose
//! effect table counts the applications of every event. After the fault and the drain, every
//! committed event must have been applied exactly once by every receiving app: lost 0,
//! unexpected 0, applied twice 0, and only the poison in `mensageria_mortas_recebidas`.
//!
//! The nats-server restart runs on a private server (a child process with a port and a store of
//! its own, SIGKILLed and started again); the others use the shared server at `NATS_URL`
//! (default `nats://127.0.0.1:4222`), each with a stream of its own, deleted at the end.
//! `cargo test -p mensageria-testes --all-features --test nats_faltas -- --nocapture` prints
//! each scenario's figures (docs/FAULTS.md, "JetStream").

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use mensageria_axum::{Rejeicao, receptor};
use mensageria_core::relay::{Config as ConfigRelay, Relay};
use mensageria_core::{ContextoEnvio, FalhaEnvio, enviador};
use mensageria_nats::async_nats::jetstream;
use mensageria_nats::{ConfigConsumidor, Consumidor, ConsumidorHandle, Fluxo, Publicador};
use mensageria_testes::nats::{self as bancada, Razao, ServidorNats};
use mensageria_testes::{PgIsolado, SqliteIsolado, contar, esperar_saida_vazia, esperar_valor};
use serde::{Deserialize, Serialize};
use sqlx::{PgPool, Postgres, Sqlite, Transaction};

const TIPO: &str = "faltas.lancamento";

#[derive(Debug, Serialize, Deserialize)]
struct Lancamento {
    n: i64,
    marca: String,
}

#[enviador(tipo = "faltas.lancamento")]
async fn publicar_lancamento(evento: Lancamento, ctx: &ContextoEnvio) -> Result<(), FalhaEnvio> {
    if let Some(apressado) = ctx.recurso::<PublicadorApressado>() {
        return apressado.publicar(&evento, ctx).await;
    }
    ctx.exigir::<Publicador>()?.publicar(&evento, ctx).await
}

/// How many times a `lento` event's function ran (committed or rolled back).
static RODADAS_LENTAS: AtomicU64 = AtomicU64::new(0);

/// How many times a `vagarosa` event's function ran.
static RODADAS_VAGAROSAS: AtomicU64 = AtomicU64::new(0);

/// What the receptor does before its effect: refuse `veneno` for good, take 150 ms for `lento`,
/// fail `sempre` temporarily every time (a dependency that never comes back).
async fn antes_do_efeito(evento: &Lancamento) -> Result<(), Rejeicao> {
    match evento.marca.as_str() {
        "veneno" => Err(Rejeicao::permanente("poison: never applicable")),
        "sempre" => Err(Rejeicao::temporaria("a dependency that never comes back")),
        "vagarosa" => {
            RODADAS_VAGAROSAS.fetch_add(1, Ordering::Relaxed);
            tokio::time::sleep(Duration::from_millis(400)).await;
            Ok(())
        }
        "lento" => {
            RODADAS_LENTAS.fetch_add(1, Ordering::Relaxed);
            tokio::time::sleep(Duration::from_millis(150)).await;
            Ok(())
        }
        _ => Ok(()),
    }
}

#[receptor(tipo = "faltas.lancamento", chave_natural = evento.n)]
async fn aplicar_pg(
    tx: &mut Transaction<'_, Postgres>,
    evento: Lancamento,
) -> Result<(), Rejeicao> {
    antes_do_efeito(&evento).await?;
    sqlx::query(bancada::APLICAR)
        .bind(evento.n)
        .execute(&mut **tx)
        .await?;
    Ok(())
}

#[receptor(tipo = "faltas.lancamento", chave_natural = evento.n)]
async fn aplicar_sqlite(
    tx: &mut Transaction<'_, Sqlite>,
    evento: Lancamento,
) -> Result<(), Rejeicao> {
    antes_do_efeito(&evento).await?;
    sqlx::query(bancada::APLICAR)
        .bind(evento.n)
        .execute(&mut **tx)
        .await?;
    Ok(())
}

/// The PubAck-loss scenario's publishing: each message's first two attempts do not wait for their
/// PubAck at all (an ack timeout of zero: the message is sent and stored all the same, its
/// PubAck lost to the publisher), later ones wait the usual 5 s.
#[derive(Clone)]
struct PublicadorApressado {
    apressado: Publicador,
    normal: Publicador,
    tentativas: Arc<AtomicU64>,
    sem_pub_ack: Arc<AtomicU64>,
}

impl PublicadorApressado {
    fn new(js: &jetstream::Context, fluxo: &Fluxo) -> Self {
        Self {
            apressado: Publicador::new(js.clone(), fluxo)
                .com_tempo_limite(Duration::ZERO)
                .com_persistencia(Duration::ZERO),
            normal: Publicador::new(js.clone(), fluxo),
            tentativas: Arc::default(),
            sem_pub_ack: Arc::default(),
        }
    }

    async fn publicar(&self, evento: &Lancamento, ctx: &ContextoEnvio) -> Result<(), FalhaEnvio> {
        self.tentativas.fetch_add(1, Ordering::Relaxed);
        let publicador = if ctx.tentativa() <= 2 {
            &self.apressado
        } else {
            &self.normal
        };
        let resultado = publicador.publicar(evento, ctx).await;
        if let Err(falha) = &resultado
            && falha.to_string().contains("no PubAck")
        {
            self.sem_pub_ack.fetch_add(1, Ordering::Relaxed);
        }
        resultado
    }
}

fn config_relay() -> ConfigRelay {
    ConfigRelay::new("nats-faltas")
        .com_intervalo(Duration::from_millis(50))
        .com_backoff(Duration::from_millis(50), Duration::from_millis(500))
}

fn config_consumidor(app: &str) -> ConfigConsumidor {
    ConfigConsumidor::new(app)
        .com_espera(Duration::from_millis(200))
        .com_backoff(Duration::from_millis(100), Duration::from_millis(500))
}

/// The sending app: its schema (migrated, with the ledger) and a pool of 3 for its work.
async fn emissor() -> (PgIsolado, PgPool) {
    let pg = PgIsolado::novo().await;
    mensageria_core::migrar(&pg.pool).await.unwrap();
    sqlx::query(bancada::RAZAO).execute(&pg.pool).await.unwrap();
    let pool = pg.outro_pool(3).await;
    (pg, pool)
}

/// A receiving app on PostgreSQL: its schema (migrated, with the effect table) and a pool of 3.
async fn receptor_pg() -> (PgIsolado, PgPool) {
    let pg = PgIsolado::novo().await;
    mensageria_core::migrar(&pg.pool).await.unwrap();
    sqlx::query(bancada::EFEITO)
        .execute(&pg.pool)
        .await
        .unwrap();
    let pool = pg.outro_pool(3).await;
    (pg, pool)
}

/// A receiving app on SQLite.
async fn receptor_sqlite() -> SqliteIsolado {
    let sqlite = SqliteIsolado::novo().await;
    mensageria_core::migrar(&sqlite.pool).await.unwrap();
    sqlx::query(bancada::EFEITO)
        .execute(&sqlite.pool)
        .await
        .unwrap();
    sqlite
}

async fn consumir<DB: mensageria_core::Banco>(
    pool: &sqlx::Pool<DB>,
    js: &jetstream::Context,
    fluxo: &Fluxo,
    config: ConfigConsumidor,
) -> ConsumidorHandle {
    Consumidor::new(pool.clone(), js.clone(), fluxo.clone(), config)
        .spawn()
        .await
        .unwrap()
}

/// Senders committing a ledger row and an enqueue every ~5 ms until stopped.
struct Produtores {
    parar: Arc<AtomicBool>,
    tarefa: tokio::task::JoinHandle<i64>,
}

impl Produtores {
    fn iniciar(pool: PgPool, marca: fn(i64) -> &'static str) -> Self {
        let parar = Arc::new(AtomicBool::new(false));
        let sinal = Arc::clone(&parar);
        let tarefa = tokio::spawn(async move {
            let mut n = 0;
            while !sinal.load(Ordering::Relaxed) {
                produzir(&pool, n, marca(n)).await;
                n += 1;
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            n
        });
        Self { parar, tarefa }
    }

    /// Stops them; how many events they committed.
    async fn parar(self) -> i64 {
        self.parar.store(true, Ordering::Relaxed);
        self.tarefa.await.unwrap()
    }
}

async fn produzir(pool: &PgPool, n: i64, marca: &str) {
    let evento = Lancamento {
        n,
        marca: marca.to_owned(),
    };
    // What can never be applied ends in the dead letters: the ledger expects it there.
    bancada::produzir(pool, n, matches!(marca, "veneno" | "sempre"), &evento)
        .await
        .unwrap();
}

/// How many events a receiving app has applied so far.
async fn aplicadas<DB: mensageria_testes::Sql>(pool: &sqlx::Pool<DB>) -> i64
where
    for<'c> &'c mut DB::Connection: sqlx::Executor<'c, Database = DB>,
    (i64,): for<'r> sqlx::FromRow<'r, DB::Row>,
{
    contar(pool, "efeito").await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn servidor_nats_morto_e_reiniciado_no_meio() {
    // A private nats-server SIGKILLed while producers run, started again 2 s later on the same
    // port and store: the relay keeps its rows meanwhile, the clients reconnect by themselves.
    let mut servidor = ServidorNats::iniciar().await;
    let (js, conectou) = bancada::conectar_vigiado(&servidor.url()).await;
    let fluxo = bancada::fluxo_proprio(&js, Duration::from_secs(120)).await;
    let (emissor, envio) = emissor().await;
    let (estoque, recepcao) = receptor_pg().await;
    let consumidor = consumir(&recepcao, &js, &fluxo, config_consumidor("estoque")).await;
    let publicador = Publicador::new(js.clone(), &fluxo).com_tempo_limite(Duration::from_secs(1));
    let relay = Relay::new(envio.clone(), config_relay())
        .recurso(publicador)
        .spawn()
        .unwrap();
    let produtores = Produtores::iniciar(envio.clone(), |_| "normal");
    esperar_valor(
        "delivery flowing",
        Duration::from_secs(10),
        Duration::from_millis(20),
        || aplicadas(&recepcao),
        |&n| n >= 50,
    )
    .await;
    servidor.matar();
    let morto = Instant::now();
    tokio::time::sleep(Duration::from_secs(2)).await;
    let aceitou = servidor.subir().await;
    let antes = aplicadas(&recepcao).await;
    // Resumed: an event applied after the server accepted connections again.
    esperar_valor(
        "delivery resumed",
        Duration::from_secs(20),
        Duration::from_millis(5),
        || aplicadas(&recepcao),
        |&n| n > antes,
    )
    .await;
    let retomada = aceitou.elapsed();
    let reconectou = conectou
        .lock()
        .unwrap()
        .filter(|&quando| quando > aceitou)
        .map_or(f64::NAN, |quando| (quando - aceitou).as_secs_f64());
    tokio::time::sleep(Duration::from_secs(2)).await;
    let produzidas = produtores.parar().await;
    esperar_saida_vazia(&envio, 30).await;
    let razao = Razao::ler(&emissor.pool).await;
    bancada::esperar_aplicadas(&recepcao, razao.aplicaveis(), Duration::from_secs(30)).await;
    relay.shutdown(Duration::from_secs(5)).await;
    assert!(consumidor.shutdown(Duration::from_secs(5)).await);
    let contas = bancada::contar(&razao, "estoque", &recepcao).await;
    let no_fluxo = bancada::mensagens_no_fluxo(&js, &fluxo).await;
    bancada::Relato::de_contas(
        "servidor_nats_morto_e_reiniciado_no_meio",
        "nats-server SIGKILLed while producers commit every ~5 ms, started again on the same port \
         and store 2 s later",
        &contas,
        format!(
            "down {:.2} s until it accepted connections again; the client reconnected \
             {reconectou:.2} s and delivery resumed **{:.2} s** after that (target ≤ 5 s, \
             asserted ≤ 10 s); {produzidas} committed, {no_fluxo} messages in the stream: each \
             event once",
            (aceitou - morto).as_secs_f64(),
            retomada.as_secs_f64()
        ),
    )
    .gravar(&matriz());
    contas.afirmar();
    assert_eq!(
        no_fluxo,
        razao.commitadas(),
        "the stream holds each event once"
    );
    assert!(
        retomada <= Duration::from_secs(10),
        "delivery resumed {retomada:?} after the restart"
    );
    drop(servidor);
    emissor.descartar().await;
    estoque.descartar().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pub_acks_perdidos_o_fluxo_absorve_a_republicacao() {
    // Each message's first two PubAcks are not awaited (ack timeout 0): most time out although
    // the message is stored, so the relay publishes it again with the same Nats-Msg-Id.
    let js = bancada::conectar(&bancada::url_compartilhada()).await;
    let fluxo = bancada::fluxo_proprio(&js, Duration::from_secs(120)).await;
    let (emissor, envio) = emissor().await;
    let (estoque, recepcao) = receptor_pg().await;
    let consumidor = consumir(&recepcao, &js, &fluxo, config_consumidor("estoque")).await;
    let apressado = PublicadorApressado::new(&js, &fluxo);
    let relay = Relay::new(envio.clone(), config_relay().com_circuito_limiar(u32::MAX))
        .recurso(apressado.clone())
        .spawn()
        .unwrap();
    for n in 0..300 {
        produzir(&envio, n, "normal").await;
    }
    esperar_saida_vazia(&envio, 30).await;
    let razao = Razao::ler(&emissor.pool).await;
    bancada::esperar_aplicadas(&recepcao, razao.aplicaveis(), Duration::from_secs(30)).await;
    relay.shutdown(Duration::from_secs(5)).await;
    assert!(consumidor.shutdown(Duration::from_secs(5)).await);
    let contas = bancada::contar(&razao, "estoque", &recepcao).await;
    let no_fluxo = bancada::mensagens_no_fluxo(&js, &fluxo).await;
    let (tentativas, sem_pub_ack) = (
        apressado.tentativas.load(Ordering::Relaxed),
        apressado.sem_pub_ack.load(Ordering::Relaxed),
    );
    let duplicados = apressado.apressado.duplicados() + apressado.normal.duplicados();
    bancada::Relato::de_contas(
        "pub_acks_perdidos_o_fluxo_absorve_a_republicacao",
        "every message's first two PubAcks not awaited (ack timeout 0): the message is stored, \
         the relay publishes it again with the same `Nats-Msg-Id`",
        &contas,
        format!(
            "{tentativas} publishes for {} events, {sem_pub_ack} PubAcks timed out; one PubAck \
             per event, {duplicados} of them `duplicate: true` (`Publicador::duplicados`); \
             {no_fluxo} messages in the stream",
            razao.commitadas()
        ),
    )
    .gravar(&matriz());
    // Each event got exactly one PubAck (its last publish): the first store's, or, when that
    // PubAck was lost, a re-publish's that said duplicate (the stream had stored it already).
    assert_eq!(
        tentativas - sem_pub_ack,
        razao.commitadas(),
        "one PubAck per event"
    );
    assert!(
        duplicados > 0 && duplicados <= sem_pub_ack,
        "{duplicados} duplicate PubAcks for {sem_pub_ack} lost ones"
    );
    contas.afirmar();
    assert!(
        sem_pub_ack > 0 && tentativas > razao.commitadas(),
        "the fault happened: {sem_pub_ack} PubAcks timed out, {tentativas} publishes"
    );
    assert_eq!(
        no_fluxo,
        razao.commitadas(),
        "the stream dropped every re-publish"
    );
    js.delete_stream(fluxo.nome()).await.unwrap();
    emissor.descartar().await;
    estoque.descartar().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replica_morta_no_meio_do_lote_enquanto_outra_consome() {
    // Two replicas of one receiving app share its durable; one is killed in the middle of a
    // batch of slow effects. What it had fetched comes back to the other after the ack wait.
    let js = bancada::conectar(&bancada::url_compartilhada()).await;
    let fluxo = bancada::fluxo_proprio(&js, Duration::from_secs(120)).await;
    let (emissor, envio) = emissor().await;
    let (estoque, recepcao) = receptor_pg().await;
    let outra_replica = estoque.outro_pool(3).await;
    for n in 0..40 {
        produzir(&envio, n, "lento").await;
    }
    let relay = Relay::new(envio.clone(), config_relay())
        .recurso(Publicador::new(js.clone(), &fluxo))
        .spawn()
        .unwrap();
    esperar_saida_vazia(&envio, 30).await;
    let config = || {
        config_consumidor("estoque")
            .com_lote(8)
            .com_ack_wait(Duration::from_secs(2))
    };
    let morta = consumir(&recepcao, &js, &fluxo, config()).await;
    let viva = consumir(&outra_replica, &js, &fluxo, config()).await;
    // Mid-way through its first batch of 8 slow effects (150 ms each).
    tokio::time::sleep(Duration::from_millis(700)).await;
    morta.abort();
    let razao = Razao::ler(&emissor.pool).await;
    bancada::esperar_aplicadas(&recepcao, razao.aplicaveis(), Duration::from_secs(30)).await;
    assert!(viva.shutdown(Duration::from_secs(5)).await);
    relay.shutdown(Duration::from_secs(5)).await;
    let contas = bancada::contar(&razao, "estoque", &recepcao).await;
    let rodadas = RODADAS_LENTAS.load(Ordering::Relaxed);
    bancada::Relato::de_contas(
        "replica_morta_no_meio_do_lote_enquanto_outra_consome",
        "one of two replicas (one durable) killed in the middle of a batch of slow effects \
         (150 ms each)",
        &contas,
        format!(
            "the function ran {rodadas} times for {} events: the cut batch came back to the \
             sibling after the ack wait (2 s)",
            razao.commitadas()
        ),
    )
    .gravar(&matriz());
    contas.afirmar();
    assert!(
        rodadas > razao.commitadas(),
        "the kill cut a batch whose events ran again: {rodadas}"
    );
    js.delete_stream(fluxo.nome()).await.unwrap();
    outra_replica.close().await;
    emissor.descartar().await;
    estoque.descartar().await;
}

/// Where this suite's rows go for `matriz-de-faltas`.
fn matriz() -> std::path::PathBuf {
    std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("faltas-nats")
}

/// How the receiving app goes down in [`app_fora_do_ar`].
#[derive(Debug, Clone, Copy)]
enum Parada {
    /// Killed: its tasks aborted, as a crashed process.
    Morta,
    /// Stopped with `ConsumidorHandle::shutdown`, as in a deploy.
    Graciosa,
}

/// Two receiving apps (PostgreSQL and SQLite) while producers run; the second goes down early
/// and stays down until the producers finished and the first applied everything; then it comes
/// back and catches up from its durable. Returns how long that took.
async fn app_fora_do_ar(cenario: &str, parada: Parada, ack_wait: Duration) -> Duration {
    let js = bancada::conectar(&bancada::url_compartilhada()).await;
    let fluxo = bancada::fluxo_proprio(&js, Duration::from_secs(120)).await;
    let (emissor, envio) = emissor().await;
    let (estoque, de_estoque) = receptor_pg().await;
    let analise = receptor_sqlite().await;
    let config_analise = || config_consumidor("analise").com_ack_wait(ack_wait);
    let c_estoque = consumir(&de_estoque, &js, &fluxo, config_consumidor("estoque")).await;
    let c_analise = consumir(&analise.pool, &js, &fluxo, config_analise()).await;
    let relay = Relay::new(envio.clone(), config_relay())
        .recurso(Publicador::new(js.clone(), &fluxo))
        .spawn()
        .unwrap();
    let produtores = Produtores::iniciar(envio.clone(), |_| "normal");
    esperar_valor(
        "analise applying",
        Duration::from_secs(10),
        Duration::from_millis(10),
        || aplicadas(&analise.pool),
        |&n| n >= 30,
    )
    .await;
    match parada {
        Parada::Morta => c_analise.abort(),
        Parada::Graciosa => assert!(c_analise.shutdown(Duration::from_secs(5)).await),
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    produtores.parar().await;
    esperar_saida_vazia(&envio, 30).await;
    let razao = Razao::ler(&emissor.pool).await;
    bancada::esperar_aplicadas(&de_estoque, razao.aplicaveis(), Duration::from_secs(30)).await;
    let antes = aplicadas(&analise.pool).await as u64;
    let (pendentes, sem_ack) = bancada::pendentes_no_fluxo(&js, &fluxo).await;
    let voltou = Instant::now();
    let c_analise = consumir(&analise.pool, &js, &fluxo, config_analise()).await;
    bancada::esperar_aplicadas(&analise.pool, razao.aplicaveis(), Duration::from_secs(40)).await;
    let alcancou = voltou.elapsed();
    relay.shutdown(Duration::from_secs(5)).await;
    assert!(c_estoque.shutdown(Duration::from_secs(5)).await);
    assert!(c_analise.shutdown(Duration::from_secs(5)).await);
    let contas_estoque = bancada::contar(&razao, "estoque", &de_estoque).await;
    let contas_analise = bancada::contar(&razao, "analise", &analise.pool).await;
    let falha = match parada {
        Parada::Morta => {
            "second receiving app (SQLite) killed early, down until the producers finished and \
             the first app applied all"
        }
        Parada::Graciosa => "the same, stopped with `shutdown` (ack wait 30 s)",
    };
    println!("{cenario}: {contas_estoque}");
    bancada::Relato::de_contas(
        cenario,
        falha,
        &contas_analise,
        format!(
            "down after {antes} of {} events; back with {pendentes} waiting in its durable and \
             {sem_ack} delivered but never settled (ack wait {ack_wait:?}), caught up in {:.2} s; \
             the other app: lost {}, twice {}",
            razao.commitadas(),
            alcancou.as_secs_f64(),
            contas_estoque.perdidas,
            contas_estoque.duas_vezes
        ),
    )
    .gravar(&matriz());
    contas_estoque.afirmar();
    contas_analise.afirmar();
    assert!(
        antes < razao.commitadas(),
        "analise was behind when it came back"
    );
    js.delete_stream(fluxo.nome()).await.unwrap();
    emissor.descartar().await;
    estoque.descartar().await;
    analise.descartar().await;
    alcancou
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn app_morta_alcanca_pelo_seu_duravel() {
    // What the killed app had fetched comes back after its ack wait (3 s here).
    let alcancou = app_fora_do_ar(
        "app_morta_alcanca_pelo_seu_duravel",
        Parada::Morta,
        Duration::from_secs(3),
    )
    .await;
    assert!(alcancou <= Duration::from_secs(10), "{alcancou:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn app_parada_alcanca_pelo_seu_duravel() {
    // A graceful stop leaves nothing to wait out: back, the app catches up at once, well
    // within the default ack wait (30 s).
    let alcancou = app_fora_do_ar(
        "app_parada_alcanca_pelo_seu_duravel",
        Parada::Graciosa,
        Duration::from_secs(30),
    )
    .await;
    assert!(alcancou <= Duration::from_secs(10), "{alcancou:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn veneno_misturado_so_ele_fica_morto() {
    let js = bancada::conectar(&bancada::url_compartilhada()).await;
    let fluxo = bancada::fluxo_proprio(&js, Duration::from_secs(120)).await;
    let (emissor, envio) = emissor().await;
    let (fiscal, recepcao) = receptor_pg().await;
    let consumidor = consumir(&recepcao, &js, &fluxo, config_consumidor("fiscal")).await;
    let relay = Relay::new(envio.clone(), config_relay())
        .recurso(Publicador::new(js.clone(), &fluxo))
        .spawn()
        .unwrap();
    for n in 0..260 {
        produzir(&envio, n, if n % 13 == 5 { "veneno" } else { "normal" }).await;
    }
    esperar_saida_vazia(&envio, 30).await;
    let razao = Razao::ler(&emissor.pool).await;
    bancada::esperar_aplicadas(&recepcao, razao.aplicaveis(), Duration::from_secs(30)).await;
    esperar_valor(
        "the poison kept",
        Duration::from_secs(10),
        Duration::from_millis(20),
        || contar(&recepcao, "mensageria_mortas_recebidas"),
        |&mortas| mortas as usize >= razao.veneno().len(),
    )
    .await;
    relay.shutdown(Duration::from_secs(5)).await;
    assert!(consumidor.shutdown(Duration::from_secs(5)).await);
    let contas = bancada::contar(&razao, "fiscal", &recepcao).await;
    bancada::Relato::de_contas(
        "veneno_misturado_so_ele_fica_morto",
        "1 event in 13 refused for good",
        &contas,
        format!(
            "{} applied; the {} dead letters are exactly the poison: {}",
            contas.aplicadas, contas.mortas, contas.mortas_sao_o_veneno
        ),
    )
    .gravar(&matriz());
    contas.afirmar();
    assert_eq!(contas.veneno, 20);
    js.delete_stream(fluxo.nome()).await.unwrap();
    emissor.descartar().await;
    fiscal.descartar().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn republicado_depois_da_janela_aplica_uma_vez() {
    // A stream remembering message ids for 1 s; every event published again 1.5 s after the
    // relay published it: the stream stores it twice, the receptor's dedup applies it once.
    let js = bancada::conectar(&bancada::url_compartilhada()).await;
    let fluxo = bancada::fluxo_proprio(&js, Duration::from_secs(1)).await;
    let (emissor, envio) = emissor().await;
    let analise = receptor_sqlite().await;
    let consumidor = consumir(&analise.pool, &js, &fluxo, config_consumidor("analise")).await;
    let publicador = Publicador::new(js.clone(), &fluxo);
    let relay = Relay::new(envio.clone(), config_relay())
        .recurso(publicador.clone())
        .spawn()
        .unwrap();
    for n in 0..50 {
        produzir(&envio, n, "normal").await;
    }
    esperar_saida_vazia(&envio, 30).await;
    let razao = Razao::ler(&emissor.pool).await;
    bancada::esperar_aplicadas(&analise.pool, razao.aplicaveis(), Duration::from_secs(30)).await;
    tokio::time::sleep(Duration::from_millis(1500)).await;
    for (&n, &(id, _)) in &razao.0 {
        let evento = Lancamento {
            n,
            marca: "normal".into(),
        };
        publicador
            .publicar(&evento, &ContextoEnvio::new(id, TIPO))
            .await
            .unwrap();
    }
    let no_fluxo = bancada::mensagens_no_fluxo(&js, &fluxo).await;
    esperar_valor(
        "every copy settled",
        Duration::from_secs(20),
        Duration::from_millis(20),
        || bancada::pendentes_no_fluxo(&js, &fluxo),
        |&pendentes| pendentes == (0, 0),
    )
    .await;
    relay.shutdown(Duration::from_secs(5)).await;
    assert!(consumidor.shutdown(Duration::from_secs(5)).await);
    let contas = bancada::contar(&razao, "analise", &analise.pool).await;
    bancada::Relato::de_contas(
        "republicado_depois_da_janela_aplica_uma_vez",
        "every event published again 1.5 s after the relay did, past a 1 s duplicate window",
        &contas,
        format!(
            "{no_fluxo} messages in the stream for {} events; each applied once (the receptor's \
             natural-key dedup)",
            razao.commitadas()
        ),
    )
    .gravar(&matriz());
    assert_eq!(
        no_fluxo,
        2 * razao.commitadas(),
        "past the window each was stored again"
    );
    contas.afirmar();
    js.delete_stream(fluxo.nome()).await.unwrap();
    emissor.descartar().await;
    analise.descartar().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn parada_graciosa_nao_deixa_mensagem_sem_liquidar() {
    // Messages published every millisecond while a receiving app is stopped gracefully, 20
    // times: after each stop, nothing the app was delivered may be left unsettled (it would wait
    // out the ack wait, 30 s, before anyone got it again).
    let js = bancada::conectar(&bancada::url_compartilhada()).await;
    let fluxo = bancada::fluxo_proprio(&js, Duration::from_secs(120)).await;
    let analise = receptor_sqlite().await;
    let parar = Arc::new(AtomicBool::new(false));
    let publicacao = {
        let (publicador, parar) = (Publicador::new(js.clone(), &fluxo), Arc::clone(&parar));
        tokio::spawn(async move {
            let mut n = 0;
            while !parar.load(Ordering::Relaxed) {
                let evento = Lancamento {
                    n,
                    marca: "normal".into(),
                };
                let ctx = ContextoEnvio::new(uuid::Uuid::now_v7(), TIPO);
                publicador.publicar(&evento, &ctx).await.unwrap();
                n += 1;
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
            n
        })
    };
    let mut deixadas = Vec::new();
    for _ in 0..20 {
        let consumidor = consumir(&analise.pool, &js, &fluxo, config_consumidor("analise")).await;
        tokio::time::sleep(Duration::from_millis(150)).await;
        assert!(consumidor.shutdown(Duration::from_secs(5)).await);
        tokio::time::sleep(Duration::from_millis(300)).await;
        deixadas.push(bancada::pendentes_no_fluxo(&js, &fluxo).await.1);
    }
    parar.store(true, Ordering::Relaxed);
    let publicadas = publicacao.await.unwrap();
    println!(
        "{publicadas} events published during 20 graceful stops; delivered and left unsettled \
         after each stop: {deixadas:?}"
    );
    assert!(
        deixadas.iter().all(|&n| n == 0),
        "a graceful stop left delivered messages unsettled: {deixadas:?}"
    );
    js.delete_stream(fluxo.nome()).await.unwrap();
    analise.descartar().await;
}

/// The scenario the consumer-discipline rows share: a sending app and one receiving app,
/// `fiscal` (PostgreSQL), on a stream of their own.
struct Cena {
    js: jetstream::Context,
    fluxo: Fluxo,
    emissor: PgIsolado,
    envio: PgPool,
    fiscal: PgIsolado,
    recepcao: PgPool,
}

impl Cena {
    /// On a stream with a 120 s duplicate window and the default max_age.
    async fn nova() -> Self {
        let js = bancada::conectar(&bancada::url_compartilhada()).await;
        let fluxo = bancada::fluxo_proprio(&js, Duration::from_secs(120)).await;
        Self::com(js, fluxo).await
    }

    /// On a stream whose messages live `max_age`.
    async fn efemera(max_age: Duration) -> Self {
        let js = bancada::conectar(&bancada::url_compartilhada()).await;
        let sufixo = uuid::Uuid::now_v7().simple().to_string();
        let fluxo = Fluxo::new(format!("E{sufixo}"), format!("e{sufixo}"))
            .unwrap()
            .com_replicas(1)
            .com_janela_de_duplicatas(Duration::from_millis(500))
            .com_idade_maxima(max_age)
            .garantir(&js)
            .await
            .unwrap();
        Self::com(js, fluxo).await
    }

    async fn com(js: jetstream::Context, fluxo: Fluxo) -> Self {
        let (emissor, envio) = emissor().await;
        let (fiscal, recepcao) = receptor_pg().await;
        Self {
            js,
            fluxo,
            emissor,
            envio,
            fiscal,
            recepcao,
        }
    }

    /// `fiscal`'s consumer (one replica) with `config`.
    async fn consumir(&self, config: ConfigConsumidor) -> ConsumidorHandle {
        consumir(&self.recepcao, &self.js, &self.fluxo, config).await
    }

    /// The sending app's relay, publishing to the stream.
    fn relay(&self) -> mensageria_core::relay::RelayHandle {
        Relay::new(self.envio.clone(), config_relay())
            .recurso(Publicador::new(self.js.clone(), &self.fluxo))
            .spawn()
            .unwrap()
    }

    /// Commits events `ns`, each marked by `marca`.
    async fn produzir(&self, ns: std::ops::Range<i64>, marca: fn(i64) -> &'static str) {
        for n in ns {
            produzir(&self.envio, n, marca(n)).await;
        }
    }

    /// Waits until the saída is empty, every applicable event is applied and the dead letters
    /// hold at least the poison; the ledger.
    async fn esperar_o_fim(&self) -> Razao {
        esperar_saida_vazia(&self.envio, 30).await;
        let razao = Razao::ler(&self.emissor.pool).await;
        bancada::esperar_aplicadas(&self.recepcao, razao.aplicaveis(), Duration::from_secs(30))
            .await;
        esperar_valor(
            "the dead letters kept",
            Duration::from_secs(20),
            Duration::from_millis(20),
            || contar(&self.recepcao, "mensageria_mortas_recebidas"),
            |&mortas| mortas as usize >= razao.veneno().len(),
        )
        .await;
        razao
    }

    /// Stops the relay, then the consumers (each must stop cleanly); the ledger's account of
    /// `fiscal`.
    async fn encerrar(
        &self,
        relay: mensageria_core::relay::RelayHandle,
        consumidores: impl IntoIterator<Item = ConsumidorHandle>,
        razao: &Razao,
    ) -> bancada::Contas {
        relay.shutdown(Duration::from_secs(5)).await;
        for consumidor in consumidores {
            assert!(consumidor.shutdown(Duration::from_secs(5)).await);
        }
        bancada::contar(razao, "fiscal", &self.recepcao).await
    }

    /// `fiscal`'s receiving-side dead letters.
    async fn mortas(&self) -> Vec<mensageria_core::operacoes::MortaRecebida> {
        mensageria_core::operacoes::mortas_recebidas(&self.recepcao, Some("fiscal"), 100)
            .await
            .unwrap()
    }

    /// `(deliveries, acks)` of `fiscal`'s unordered durable, by consumer sequence: each
    /// delivery, redeliveries included, takes one.
    async fn entregas(&self) -> (u64, u64) {
        let stream = self.js.get_stream(self.fluxo.nome()).await.unwrap();
        let info = stream.consumer_info(DURAVEL).await.unwrap();
        (
            info.delivered.consumer_sequence,
            info.ack_floor.consumer_sequence,
        )
    }

    async fn fechar(self) {
        self.js.delete_stream(self.fluxo.nome()).await.unwrap();
        self.emissor.descartar().await;
        self.fiscal.descartar().await;
    }
}

/// `fiscal`'s durable of the unordered lane.
const DURAVEL: &str = "fiscal__faltas_2elancamento";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn falha_sem_fim_termina_morta_no_limite() {
    // 1 event in 10 fails temporarily forever: each is given up at its 3rd delivery into the
    // receiving side's dead letters (`gave_up`), never retried forever, never dropped.
    let cena = Cena::nova().await;
    let config = config_consumidor("fiscal")
        .com_max_entregas(3)
        .com_backoff(Duration::from_millis(20), Duration::from_millis(100));
    let consumidor = cena.consumir(config).await;
    let relay = cena.relay();
    cena.produzir(0..200, |n| if n % 10 == 3 { "sempre" } else { "normal" })
        .await;
    let razao = cena.esperar_o_fim().await;
    let contas = cena.encerrar(relay, [consumidor], &razao).await;
    let mortas = cena.mortas().await;
    let entregas: Vec<i64> = mortas.iter().map(|m| m.entregas).collect();
    bancada::Relato::de_contas(
        "falha_sem_fim_termina_morta_no_limite",
        "1 event in 10 fails temporarily forever; `com_max_entregas(3)`",
        &contas,
        format!(
            "{} applied; the {} failing ones in `mortas-recebidas` as `gave_up` after {} \
             deliveries each, with their last error, terminated",
            contas.aplicadas,
            contas.mortas,
            entregas
                .iter()
                .collect::<std::collections::BTreeSet<_>>()
                .into_iter()
                .map(i64::to_string)
                .collect::<Vec<_>>()
                .join(" or ")
        ),
    )
    .gravar(&matriz());
    contas.afirmar();
    assert_eq!(contas.veneno, 20);
    assert!(
        mortas
            .iter()
            .all(|m| m.motivo.starts_with("gave_up") && m.entregas == 3)
    );
    cena.fechar().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn duravel_apagado_com_produtores_nada_perdido() {
    // The receiving app's durable is deleted while producers commit every ~5 ms: the consumer
    // recreates it (from the stream's first message) and every event is applied once.
    let cena = Cena::nova().await;
    let config =
        config_consumidor("fiscal").com_intervalo_de_verificacao(Duration::from_millis(250));
    let consumidor = cena.consumir(config).await;
    let relay = cena.relay();
    let produtores = Produtores::iniciar(cena.envio.clone(), |_| "normal");
    esperar_valor(
        "some events applied",
        Duration::from_secs(20),
        Duration::from_millis(20),
        || aplicadas(&cena.recepcao),
        |&n| n >= 100,
    )
    .await;
    let stream = cena.js.get_stream(cena.fluxo.nome()).await.unwrap();
    stream.delete_consumer(DURAVEL).await.unwrap();
    let apagado = Instant::now();
    esperar_valor(
        "the durable recreated",
        Duration::from_secs(10),
        Duration::from_millis(20),
        || async { stream.consumer_info(DURAVEL).await.is_ok() },
        |&existe| existe,
    )
    .await;
    let recriado = apagado.elapsed();
    tokio::time::sleep(Duration::from_millis(500)).await;
    let commitadas = produtores.parar().await;
    let razao = cena.esperar_o_fim().await;
    let contas = cena.encerrar(relay, [consumidor], &razao).await;
    bancada::Relato::de_contas(
        "duravel_apagado_com_produtores_nada_perdido",
        "the receiving app's durable deleted while producers commit every ~5 ms",
        &contas,
        format!(
            "{commitadas} committed; recreated {} ms after the delete (check interval 250 ms), \
             from the stream's first message: the replays were `duplicate`s",
            recriado.as_millis()
        ),
    )
    .gravar(&matriz());
    contas.afirmar();
    cena.fechar().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn app_fora_mais_que_max_age_registra_o_que_perdeu() {
    // A receiving app stopped while 30 events are published to a stream whose max_age (3 s) is
    // shorter than its absence: the stream deletes them before the app sees them. At its restart
    // the app finds the gap in its durable and keeps one dead letter naming the stream sequences
    // deleted (which of them were its tipo's cannot be known): nothing vanishes unrecorded.
    let cena = Cena::efemera(Duration::from_secs(3)).await;
    let config =
        || config_consumidor("fiscal").com_intervalo_de_verificacao(Duration::from_millis(200));
    let consumidor = cena.consumir(config()).await;
    let relay = cena.relay();
    cena.produzir(0..30, |_| "normal").await;
    bancada::esperar_aplicadas(&cena.recepcao, 30, Duration::from_secs(30)).await;
    tokio::time::sleep(Duration::from_millis(300)).await; // one more registration
    assert!(consumidor.shutdown(Duration::from_secs(5)).await);
    cena.produzir(30..60, |_| "normal").await;
    esperar_saida_vazia(&cena.envio, 30).await;
    esperar_valor(
        "the stream's max_age deleted its messages",
        Duration::from_secs(20),
        Duration::from_millis(100),
        || bancada::mensagens_no_fluxo(&cena.js, &cena.fluxo),
        |&mensagens| mensagens == 0,
    )
    .await;
    let consumidor = cena.consumir(config()).await;
    let mortas = esperar_valor(
        "the gap recorded",
        Duration::from_secs(10),
        Duration::from_millis(50),
        || cena.mortas(),
        |mortas| !mortas.is_empty(),
    )
    .await;
    relay.shutdown(Duration::from_secs(5)).await;
    assert!(consumidor.shutdown(Duration::from_secs(5)).await);
    let razao = Razao::ler(&cena.emissor.pool).await;
    let contas = bancada::contar(&razao, "fiscal", &cena.recepcao).await;
    let faixa: serde_json::Value = serde_json::from_str(&mortas[0].payload).unwrap();
    bancada::Relato {
        perdidas: format!("{} (recorded)", contas.commitadas - contas.aplicadas),
        ..bancada::Relato::de_contas(
            "app_fora_mais_que_max_age_registra_o_que_perdeu",
            "the receiving app stopped; 30 events published; the stream's `max_age` (3 s) passes \
             before it starts again",
            &contas,
            format!(
                "{} applied before; at the restart one `possibly_expired` dead letter names \
                 stream sequences {}: exactly those the stream deleted before they were \
                 delivered. Nothing vanished unrecorded, but they must be replayed from their \
                 source",
                contas.aplicadas,
                serde_json::from_str::<serde_json::Value>(&mortas[0].payload).unwrap()
                    ["expired_sequences"]
            ),
        )
    }
    .gravar(&matriz());
    assert_eq!(mortas.len(), 1);
    assert!(
        mortas[0].motivo.starts_with("possibly_expired"),
        "{}",
        mortas[0].motivo
    );
    assert_eq!(faixa["expired_sequences"], serde_json::json!([31, 60]));
    assert_eq!(
        (
            contas.aplicadas,
            contas.perdidas,
            contas.duas_vezes,
            contas.inesperadas
        ),
        (30, 30, 0, 0)
    );
    cena.fechar().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn expirada_esperando_reentrega_vira_morta() {
    // A message nak'd with a delay longer than what is left of its life in the stream (max_age
    // 2 s, retry after 5-10 s): the stream deletes it while it waits, and the consumer keeps it,
    // payload and last error, in its dead letters (`expired`). The others are applied once.
    let cena = Cena::efemera(Duration::from_secs(2)).await;
    let config = config_consumidor("fiscal")
        .com_backoff(Duration::from_secs(10), Duration::from_secs(10))
        .com_intervalo_de_verificacao(Duration::from_millis(200));
    let consumidor = cena.consumir(config).await;
    let relay = cena.relay();
    cena.produzir(0..20, |n| if n % 5 == 0 { "sempre" } else { "normal" })
        .await;
    let razao = cena.esperar_o_fim().await;
    let contas = cena.encerrar(relay, [consumidor], &razao).await;
    let mortas = cena.mortas().await;
    bancada::Relato::de_contas(
        "expirada_esperando_reentrega_vira_morta",
        "stream `max_age` 2 s; 1 event in 5 fails and is nak'd for 5–10 s, longer than it has left",
        &contas,
        format!(
            "{} applied; the {} deleted while they waited are in `mortas-recebidas` as `expired`, \
             payload and last error kept",
            contas.aplicadas, contas.mortas
        ),
    )
    .gravar(&matriz());
    contas.afirmar();
    assert_eq!(contas.veneno, 4);
    assert!(
        mortas
            .iter()
            .all(|m| m.motivo.starts_with("expired") && m.payload.contains("sempre"))
    );
    cena.fechar().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ack_perdido_depois_do_commit_e_absorvido() {
    // Every message's first ack is lost after the receptor committed (the consumer's fault
    // hook): JetStream redelivers each after the ack wait (1 s), the receptor answers
    // `duplicate`, and every event is applied exactly once.
    let cena = Cena::nova().await;
    let config = config_consumidor("fiscal")
        .com_ack_wait(Duration::from_secs(1))
        .com_ensaio_perder_primeiro_ack();
    let consumidor = cena.consumir(config).await;
    let relay = cena.relay();
    cena.produzir(0..50, |_| "normal").await;
    let razao = cena.esperar_o_fim().await;
    let (entregas, confirmadas) = esperar_valor(
        "every message delivered again and acked",
        Duration::from_secs(20),
        Duration::from_millis(50),
        || cena.entregas(),
        |&(entregas, confirmadas)| entregas >= 100 && confirmadas == entregas,
    )
    .await;
    let contas = cena.encerrar(relay, [consumidor], &razao).await;
    bancada::Relato::de_contas(
        "ack_perdido_depois_do_commit_e_absorvido",
        "every message's first ack lost after the receptor committed \
         (`ConfigConsumidor::com_ensaio_perder_primeiro_ack`), ack wait 1 s",
        &contas,
        format!(
            "{entregas} deliveries for 50 events by the durable's consumer sequence: each \
             redelivered and answered `duplicate`"
        ),
    )
    .gravar(&matriz());
    contas.afirmar();
    // Each message came back at least once (its first ack was lost); under load a second
    // redelivery can follow a slow ack within the 1 s ack wait, and is absorbed the same way.
    assert!(
        entregas >= 100 && confirmadas == entregas,
        "each message delivered again: {entregas} deliveries, {confirmadas} acked"
    );
    cena.fechar().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lote_lento_nao_e_reentregue_a_irma() {
    // Two replicas share the durable; a batch of 4 effects of 400 ms (1.6 s) outlives the ack
    // wait (1 s): the in-progress signals keep the server from handing it to the sibling. Each
    // message delivered once, each function run once.
    let cena = Cena::nova().await;
    let config = || {
        config_consumidor("fiscal")
            .com_ack_wait(Duration::from_secs(1))
            .com_lote(4)
    };
    let primeira = cena.consumir(config()).await;
    let segunda = cena.consumir(config()).await;
    cena.produzir(0..4, |_| "vagarosa").await;
    let relay = cena.relay();
    let razao = cena.esperar_o_fim().await;
    // Longer than an ack wait after the last effect: a redelivery would have come by now.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let (entregas, confirmadas) = cena.entregas().await;
    relay.shutdown(Duration::from_secs(5)).await;
    assert!(primeira.shutdown(Duration::from_secs(5)).await);
    assert!(segunda.shutdown(Duration::from_secs(5)).await);
    let rodadas = RODADAS_VAGAROSAS.load(Ordering::Relaxed);
    let contas = bancada::contar(&razao, "fiscal", &cena.recepcao).await;
    bancada::Relato::de_contas(
        "lote_lento_nao_e_reentregue_a_irma",
        "two replicas on one durable; a batch of 4 effects of 400 ms (1.6 s) against a 1 s ack \
         wait",
        &contas,
        format!(
            "{entregas} deliveries, {rodadas} function runs: the in-progress signals kept the \
             batch from the sibling"
        ),
    )
    .gravar(&matriz());
    contas.afirmar();
    assert_eq!(
        (entregas, confirmadas),
        (4, 4),
        "no redelivery to the sibling"
    );
    assert_eq!(rodadas, 4, "each function ran once");
    cena.fechar().await;
}
