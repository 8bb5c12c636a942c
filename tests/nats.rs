//! NATS JetStream as the transport, against the real nats-server at `NATS_URL` (default
//! `nats://127.0.0.1:4222`, JetStream on; `scripts/test` starts it when it is down), real
//! PostgreSQL and SQLite. Each test has a stream of its own (unique name and subject prefix),
//! deleted at the end, and its own schemas: sending app, and one per receiving app.
//!
//! Every scenario checks the final state: each receiving app applied every event exactly once
//! (its effect table counts applications), nothing is left in the saída, and only the poison
//! events are in the receiving side's dead letters.

use std::collections::HashSet;
use std::sync::{LazyLock, Mutex};
use std::time::Duration;

use mensageria_axum::{Rejeicao, receptor};
use mensageria_core::operacoes;
use mensageria_core::relay::{Config as ConfigRelay, Relay};
use mensageria_core::{ContextoEnvio, FalhaEnvio, enfileirar, enfileirar_ordenado, enviador};
use mensageria_nats::async_nats::jetstream;
use mensageria_nats::{ConfigConsumidor, Consumidor, Fluxo, Publicador};
use mensageria_testes::{PgIsolado, SqliteIsolado, esperar_saida_vazia, esperar_valor};
use serde::{Deserialize, Serialize};
use sqlx::{Postgres, Sqlite, Transaction};

#[derive(Debug, Serialize, Deserialize)]
struct Pedido {
    id: i64,
    marca: String,
}

#[enviador(tipo = "nats.pedido")]
async fn publicar_pedido(evento: Pedido, ctx: &ContextoEnvio) -> Result<(), FalhaEnvio> {
    ctx.exigir::<Publicador>()?.publicar(&evento, ctx).await
}

/// Events (by `marca` and id) that already failed once: a `temporaria` event fails its first
/// delivery only.
static FALHARAM: LazyLock<Mutex<HashSet<(String, i64)>>> = LazyLock::new(Mutex::default);

/// The cause of the `veneno` refusals was fixed (the replay test flips it).
static CURADO: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// How many times a `lento` event's function ran (rolled back or not).
static RODADAS_LENTAS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// How many times a `sempre` event's function ran (each a temporary refusal).
static RODADAS_SEMPRE: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// How many times a `travada` event's function ran; its first run hangs.
static RODADAS_TRAVADAS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// What the receptor does before its effect: refuse `veneno` for good, fail `temporaria` once,
/// take 300 ms for `lento`, fail `sempre` every time, hang on the first run of `travada`.
async fn antes_do_efeito(evento: &Pedido) -> Result<(), Rejeicao> {
    match evento.marca.as_str() {
        "sempre" => {
            RODADAS_SEMPRE.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            Err(Rejeicao::temporaria("a dependency that never comes back"))
        }
        "travada" => {
            if RODADAS_TRAVADAS.fetch_add(1, std::sync::atomic::Ordering::Relaxed) == 0 {
                tokio::time::sleep(Duration::from_secs(3600)).await;
            }
            Ok(())
        }
        "veneno" if !CURADO.load(std::sync::atomic::Ordering::Relaxed) => {
            Err(Rejeicao::permanente("poison: never applicable"))
        }
        "temporaria" => {
            let primeira = FALHARAM
                .lock()
                .unwrap()
                .insert((evento.marca.clone(), evento.id));
            if primeira {
                Err(Rejeicao::temporaria_apos(
                    "first delivery fails",
                    Duration::from_millis(200),
                ))
            } else {
                Ok(())
            }
        }
        "lento" => {
            RODADAS_LENTAS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            tokio::time::sleep(Duration::from_millis(300)).await;
            Ok(())
        }
        _ => Ok(()),
    }
}

const EFEITO: &str = "CREATE TABLE efeito (id BIGINT PRIMARY KEY, aplicacoes BIGINT NOT NULL)";
const APLICAR: &str = "INSERT INTO efeito (id, aplicacoes) VALUES ($1, 1) \
     ON CONFLICT (id) DO UPDATE SET aplicacoes = efeito.aplicacoes + 1";

#[receptor(tipo = "nats.pedido", chave_natural = evento.id)]
async fn receber_pg(tx: &mut Transaction<'_, Postgres>, evento: Pedido) -> Result<(), Rejeicao> {
    antes_do_efeito(&evento).await?;
    sqlx::query(APLICAR)
        .bind(evento.id)
        .execute(&mut **tx)
        .await?;
    Ok(())
}

#[receptor(tipo = "nats.pedido", chave_natural = evento.id)]
async fn receber_sqlite(tx: &mut Transaction<'_, Sqlite>, evento: Pedido) -> Result<(), Rejeicao> {
    antes_do_efeito(&evento).await?;
    sqlx::query(APLICAR)
        .bind(evento.id)
        .execute(&mut **tx)
        .await?;
    Ok(())
}

/// The shared server's JetStream.
async fn conectar() -> jetstream::Context {
    let url = std::env::var("NATS_URL").unwrap_or_else(|_| "nats://127.0.0.1:4222".into());
    let cliente = mensageria_nats::async_nats::connect(&url)
        .await
        .unwrap_or_else(|erro| panic!("nats-server at {url} (scripts/test starts it): {erro}"));
    jetstream::new(cliente)
}

/// A stream of this test's own on the shared server, deleted by [`Bancada::fechar`].
struct Bancada {
    js: jetstream::Context,
    fluxo: Fluxo,
}

impl Bancada {
    async fn nova(janela: Duration) -> Self {
        Self::nova_com(|fluxo| fluxo.com_janela_de_duplicatas(janela)).await
    }

    /// A stream of a unique name and prefix, set up by `configurar` before it is created.
    async fn nova_com(configurar: impl FnOnce(Fluxo) -> Fluxo) -> Self {
        let js = conectar().await;
        let sufixo = uuid::Uuid::now_v7().simple().to_string();
        let fluxo = configurar(
            Fluxo::new(format!("T{sufixo}"), format!("t{sufixo}"))
                .unwrap()
                .com_replicas(1),
        )
        .garantir(&js)
        .await
        .unwrap();
        Self { js, fluxo }
    }

    fn publicador(&self) -> Publicador {
        Publicador::new(self.js.clone(), &self.fluxo)
    }

    fn consumidor<DB: mensageria_core::Banco>(
        &self,
        pool: &sqlx::Pool<DB>,
        config: ConfigConsumidor,
    ) -> Consumidor<DB> {
        Consumidor::new(pool.clone(), self.js.clone(), self.fluxo.clone(), config)
    }

    async fn fechar(self) {
        self.js.delete_stream(self.fluxo.nome()).await.unwrap();
    }
}

fn config_consumidor(app: &str) -> ConfigConsumidor {
    ConfigConsumidor::new(app)
        .com_tipos(["nats.pedido"])
        .com_espera(Duration::from_millis(200))
        .com_backoff(Duration::from_millis(100), Duration::from_millis(500))
}

fn config_relay() -> ConfigRelay {
    ConfigRelay::new("nats-emissor")
        .com_intervalo(Duration::from_millis(50))
        .com_backoff(Duration::from_millis(50), Duration::from_millis(500))
}

async fn enfileirar_pedidos(
    pool: &sqlx::PgPool,
    ids: std::ops::Range<i64>,
    marca: impl Fn(i64) -> &'static str,
) {
    for id in ids {
        let mut tx = pool.begin().await.unwrap();
        enfileirar(
            &mut *tx,
            &Pedido {
                id,
                marca: marca(id).into(),
            },
        )
        .await
        .unwrap();
        tx.commit().await.unwrap();
    }
}

/// `(distinct effects, effects applied more than once)` of a receiving app.
async fn efeitos<DB: mensageria_testes::Sql>(pool: &sqlx::Pool<DB>) -> (i64, i64)
where
    for<'c> &'c mut DB::Connection: sqlx::Executor<'c, Database = DB>,
    (i64, i64): for<'r> sqlx::FromRow<'r, DB::Row>,
{
    sqlx::query_as(
        "SELECT CAST(count(*) AS BIGINT), \
                CAST(coalesce(sum(CASE WHEN aplicacoes > 1 THEN 1 ELSE 0 END), 0) AS BIGINT) \
         FROM efeito",
    )
    .fetch_one(pool)
    .await
    .unwrap()
}

/// Waits until a receiving app has `total` distinct effects.
async fn esperar_efeitos<DB: mensageria_testes::Sql>(
    pool: &sqlx::Pool<DB>,
    total: i64,
    segundos: u64,
) where
    for<'c> &'c mut DB::Connection: sqlx::Executor<'c, Database = DB>,
    (i64, i64): for<'r> sqlx::FromRow<'r, DB::Row>,
{
    esperar_valor(
        "every effect applied",
        Duration::from_secs(segundos),
        Duration::from_millis(20),
        || efeitos(pool),
        |&(aplicados, _)| aplicados >= total,
    )
    .await;
}

async fn receptor_pronto<DB>(pool: &sqlx::Pool<DB>)
where
    for<'c> &'c mut DB::Connection: sqlx::Executor<'c, Database = DB>,
    DB: mensageria_core::Banco + mensageria_testes::Sql,
{
    mensageria_core::migrar(pool).await.unwrap();
    sqlx::query(EFEITO).execute(pool).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dois_apps_recebem_cada_evento_uma_vez() {
    // Fan-out: one sending app, two receiving apps (PostgreSQL and SQLite), each with its own
    // durable consumer; the second receiving app runs two replicas sharing its durable.
    let bancada = Bancada::nova(Duration::from_secs(120)).await;
    let (emissor, estoque, analise) = (
        PgIsolado::novo().await,
        PgIsolado::novo().await,
        SqliteIsolado::novo().await,
    );
    mensageria_core::migrar(&emissor.pool).await.unwrap();
    receptor_pronto(&estoque.pool).await;
    receptor_pronto(&analise.pool).await;
    let c_estoque = bancada
        .consumidor(&estoque.pool, config_consumidor("estoque"))
        .spawn()
        .await
        .unwrap();
    let c_analise_1 = bancada
        .consumidor(&analise.pool, config_consumidor("analise"))
        .spawn()
        .await
        .unwrap();
    let c_analise_2 = bancada
        .consumidor(&analise.pool, config_consumidor("analise"))
        .spawn()
        .await
        .unwrap();
    assert_eq!(c_estoque.tipos(), ["nats.pedido"]);
    enfileirar_pedidos(&emissor.pool, 0..300, |_| "normal").await;
    let relay = Relay::new(emissor.pool.clone(), config_relay())
        .recurso(bancada.publicador())
        .spawn()
        .unwrap();
    esperar_saida_vazia(&emissor.pool, 30).await;
    esperar_efeitos(&estoque.pool, 300, 30).await;
    esperar_efeitos(&analise.pool, 300, 30).await;
    relay.shutdown(Duration::from_secs(5)).await;
    for handle in [c_estoque, c_analise_1, c_analise_2] {
        assert!(handle.shutdown(Duration::from_secs(5)).await);
    }
    let (de_estoque, de_analise) = (efeitos(&estoque.pool).await, efeitos(&analise.pool).await);
    println!(
        "300 events, 2 receiving apps: estoque {de_estoque:?}, analise {de_analise:?} (applied, applied twice)"
    );
    assert_eq!(de_estoque, (300, 0));
    assert_eq!(de_analise, (300, 0));
    bancada.fechar().await;
    emissor.descartar().await;
    estoque.descartar().await;
    analise.descartar().await;
}

/// Fan-out to two receiving apps whose consumers share **one** schema (`pool`): every event is
/// applied by each app once, so each effect counts 2 applications, and each app keeps 300 dedup
/// records of its own. Before the records had an app, the two split the events (the first to
/// apply a key made the other answer `duplicate`).
async fn dois_apps_num_schema<DB>(pool: &sqlx::Pool<DB>)
where
    DB: mensageria_core::Banco + mensageria_testes::Sql,
    for<'c> &'c mut DB::Connection: sqlx::Executor<'c, Database = DB>,
    (i64,): for<'r> sqlx::FromRow<'r, DB::Row>,
    (i64, i64): for<'r> sqlx::FromRow<'r, DB::Row>,
{
    let bancada = Bancada::nova(Duration::from_secs(120)).await;
    let emissor = PgIsolado::novo().await;
    mensageria_core::migrar(&emissor.pool).await.unwrap();
    receptor_pronto(pool).await;
    let mut consumidores = Vec::new();
    for app in ["estoque", "analise"] {
        let handle = bancada
            .consumidor(pool, config_consumidor(app))
            .spawn()
            .await
            .unwrap();
        consumidores.push(handle);
    }
    enfileirar_pedidos(&emissor.pool, 0..300, |_| "normal").await;
    let relay = Relay::new(emissor.pool.clone(), config_relay())
        .recurso(bancada.publicador())
        .spawn()
        .unwrap();
    esperar_saida_vazia::<sqlx::Postgres>(&emissor.pool, 30).await;
    esperar_valor(
        "every event applied by both apps",
        Duration::from_secs(30),
        Duration::from_millis(20),
        || mensageria_testes::contar(pool, "efeito WHERE aplicacoes = 2"),
        |&duas| duas >= 300,
    )
    .await;
    relay.shutdown(Duration::from_secs(5)).await;
    for handle in consumidores {
        assert!(handle.shutdown(Duration::from_secs(5)).await);
    }
    let outras = mensageria_testes::contar(pool, "efeito WHERE aplicacoes <> 2").await;
    let por_app = |app: &str| {
        mensageria_testes::contar(
            pool,
            match app {
                "estoque" => "mensageria_recebidas WHERE app = 'estoque'",
                _ => "mensageria_recebidas WHERE app = 'analise'",
            },
        )
    };
    let (de_estoque, de_analise) = (por_app("estoque").await, por_app("analise").await);
    println!("JetStream, 2 apps on one schema: records estoque {de_estoque}, analise {de_analise}");
    assert_eq!(outras, 0, "no event applied other than once by each app");
    assert_eq!((de_estoque, de_analise), (300, 300));
    let registrados = operacoes::receptores(pool).await.unwrap();
    assert!(
        ["estoque", "analise"].iter().all(|app| registrados
            .iter()
            .any(|r| r.app == *app && r.tipo == "nats.pedido" && r.transporte == "nats")),
        "both consumers registered: {registrados:?}"
    );
    bancada.fechar().await;
    emissor.descartar().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dois_apps_num_schema_postgres() {
    let db = PgIsolado::novo().await;
    dois_apps_num_schema(&db.pool).await;
    db.descartar().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dois_apps_num_arquivo_sqlite() {
    let db = SqliteIsolado::novo().await;
    dois_apps_num_schema(&db.pool).await;
    db.descartar().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn falha_sem_fim_vira_morta_no_limite_de_entregas() {
    // A message that fails temporarily every time is given up at its 4th delivery, as the relay
    // gives up at `max_tentativas`: kept in the receiving side's dead letters with its last
    // error and stream sequence, terminated, never delivered again; the others are applied.
    let bancada = Bancada::nova(Duration::from_secs(120)).await;
    let (emissor, receptor) = (PgIsolado::novo().await, PgIsolado::novo().await);
    mensageria_core::migrar(&emissor.pool).await.unwrap();
    receptor_pronto(&receptor.pool).await;
    let config = config_consumidor("limite")
        .com_max_entregas(4)
        .com_backoff(Duration::from_millis(20), Duration::from_millis(50))
        .com_intervalo_de_verificacao(Duration::from_millis(200));
    let consumidor = bancada
        .consumidor(&receptor.pool, config)
        .spawn()
        .await
        .unwrap();
    enfileirar_pedidos(&emissor.pool, 5000..5020, |id| {
        if id == 5007 { "sempre" } else { "normal" }
    })
    .await;
    let relay = Relay::new(emissor.pool.clone(), config_relay())
        .recurso(bancada.publicador())
        .spawn()
        .unwrap();
    esperar_saida_vazia(&emissor.pool, 30).await;
    esperar_efeitos(&receptor.pool, 19, 30).await;
    let mortas = esperar_valor(
        "the failing event kept",
        Duration::from_secs(15),
        Duration::from_millis(20),
        || async {
            mensageria_core::operacoes::mortas_recebidas(&receptor.pool, Some("limite"), 10)
                .await
                .unwrap()
        },
        |mortas| !mortas.is_empty(),
    )
    .await;
    // Time for a redelivery that should not come.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let rodadas = RODADAS_SEMPRE.load(std::sync::atomic::Ordering::Relaxed);
    // The lag and the registration, as the watcher records them.
    let registro = esperar_valor(
        "the consumer's registration with its lag",
        Duration::from_secs(10),
        Duration::from_millis(50),
        || async { operacoes::receptores(&receptor.pool).await.unwrap() },
        |registros| {
            registros.iter().any(|r| {
                r.app == "limite" && r.consumo.is_some_and(|c| c.pendentes == 0 && c.em_voo == 0)
            })
        },
    )
    .await;
    relay.shutdown(Duration::from_secs(5)).await;
    assert!(consumidor.shutdown(Duration::from_secs(5)).await);
    println!(
        "max_entregas 4: the failing event ran {rodadas} times; dead letter: {:?}",
        mortas[0].motivo
    );
    assert_eq!(rodadas, 4, "delivered 4 times, then given up");
    assert_eq!(mortas.len(), 1);
    assert!(
        mortas[0]
            .motivo
            .starts_with("gave_up: gave up after 4 deliveries"),
        "{}",
        mortas[0].motivo
    );
    assert!(
        mortas[0]
            .motivo
            .contains("a dependency that never comes back"),
        "{}",
        mortas[0].motivo
    );
    assert_eq!(mortas[0].entregas, 4);
    assert!(
        mortas[0].sequencia.is_some_and(|s| s > 0),
        "its stream sequence is kept"
    );
    assert!(mortas[0].payload.contains("5007"));
    assert_eq!(efeitos(&receptor.pool).await, (19, 0));
    let nats = registro.iter().find(|r| r.app == "limite").unwrap();
    assert_eq!(
        (nats.tipo.as_str(), nats.transporte.as_str()),
        ("nats.pedido", "nats")
    );
    assert_eq!(nats.consumo.unwrap().max_age_ms, 7 * 24 * 3600 * 1000);
    bancada.fechar().await;
    emissor.descartar().await;
    receptor.descartar().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn efeito_travado_e_desfeito_no_tempo_limite() {
    // A batch whose effect hangs is rolled back at the consumer's `tempo_limite` (its in-progress
    // signals stop, its messages are nak'd), then redelivered and applied once.
    let bancada = Bancada::nova(Duration::from_secs(120)).await;
    let (emissor, receptor) = (PgIsolado::novo().await, PgIsolado::novo().await);
    mensageria_core::migrar(&emissor.pool).await.unwrap();
    receptor_pronto(&receptor.pool).await;
    let config = config_consumidor("travado")
        .com_lote(1)
        .com_tempo_limite(Duration::from_millis(800))
        .com_backoff(Duration::from_millis(20), Duration::from_millis(50));
    let consumidor = bancada
        .consumidor(&receptor.pool, config)
        .spawn()
        .await
        .unwrap();
    enfileirar_pedidos(&emissor.pool, 6000..6005, |id| {
        if id == 6002 { "travada" } else { "normal" }
    })
    .await;
    let relay = Relay::new(emissor.pool.clone(), config_relay())
        .recurso(bancada.publicador())
        .spawn()
        .unwrap();
    esperar_saida_vazia(&emissor.pool, 30).await;
    let inicio = std::time::Instant::now();
    esperar_efeitos(&receptor.pool, 5, 30).await;
    relay.shutdown(Duration::from_secs(5)).await;
    assert!(consumidor.shutdown(Duration::from_secs(5)).await);
    let rodadas = RODADAS_TRAVADAS.load(std::sync::atomic::Ordering::Relaxed);
    println!(
        "hung effect: ran {rodadas} times, all applied {:?} after the saída emptied",
        inicio.elapsed()
    );
    assert_eq!(
        rodadas, 2,
        "the hung run was dropped, the redelivery applied it"
    );
    assert_eq!(
        efeitos(&receptor.pool).await,
        (5, 0),
        "applied once, the hung run rolled back"
    );
    bancada.fechar().await;
    emissor.descartar().await;
    receptor.descartar().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn duravel_apagado_no_meio_e_recriado() {
    // An operator deletes the app's durable while it consumes: the watcher recreates it within
    // its check interval, and every event, before and after, is applied exactly once.
    let bancada = Bancada::nova(Duration::from_secs(120)).await;
    let (emissor, receptor) = (PgIsolado::novo().await, PgIsolado::novo().await);
    mensageria_core::migrar(&emissor.pool).await.unwrap();
    receptor_pronto(&receptor.pool).await;
    let config =
        config_consumidor("recriado").com_intervalo_de_verificacao(Duration::from_millis(200));
    let consumidor = bancada
        .consumidor(&receptor.pool, config)
        .spawn()
        .await
        .unwrap();
    enfileirar_pedidos(&emissor.pool, 7000..7050, |_| "normal").await;
    let relay = Relay::new(emissor.pool.clone(), config_relay())
        .recurso(bancada.publicador())
        .spawn()
        .unwrap();
    esperar_efeitos(&receptor.pool, 50, 30).await;
    let fluxo = bancada.js.get_stream(bancada.fluxo.nome()).await.unwrap();
    let duravel = format!("recriado__{}", "nats_2epedido");
    fluxo.delete_consumer(&duravel).await.unwrap();
    let apagado = std::time::Instant::now();
    enfileirar_pedidos(&emissor.pool, 7050..7100, |_| "normal").await;
    esperar_efeitos(&receptor.pool, 100, 30).await;
    let recuperado = apagado.elapsed();
    assert!(
        fluxo.consumer_info(&duravel).await.is_ok(),
        "the durable is back"
    );
    relay.shutdown(Duration::from_secs(5)).await;
    assert!(consumidor.shutdown(Duration::from_secs(5)).await);
    println!("durable deleted mid-run: the 50 events after it applied {recuperado:?} later");
    assert_eq!(
        efeitos(&receptor.pool).await,
        (100, 0),
        "each event applied once, none lost"
    );
    bancada.fechar().await;
    emissor.descartar().await;
    receptor.descartar().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn apps_que_sobem_juntos_convergem_num_fluxo() {
    // Eight apps start together, each asking for the stream with a duplicate window of its own:
    // every one gets the stream (none fails at start), and all agree on the settings of the one
    // that created it.
    let js = conectar().await;
    let sufixo = uuid::Uuid::now_v7().simple().to_string();
    let garantias = (1..=8_u64).map(|segundos| {
        let js = js.clone();
        let fluxo = Fluxo::new(format!("J{sufixo}"), format!("j{sufixo}"))
            .unwrap()
            .com_replicas(1)
            .com_janela_de_duplicatas(Duration::from_secs(60 + segundos));
        tokio::spawn(async move { fluxo.garantir(&js).await })
    });
    let mut janelas = HashSet::new();
    for garantia in garantias.collect::<Vec<_>>() {
        let fluxo = garantia.await.unwrap().expect("every app gets the stream");
        janelas.insert(fluxo.janela_de_duplicatas());
    }
    assert_eq!(janelas.len(), 1, "one stream, one setting: {janelas:?}");
    js.delete_stream(format!("J{sufixo}")).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn um_app_novo_comeca_onde_manda_o_inicio() {
    // 10 events already in the stream; an app that starts with `Inicio::Tudo` applies them, one
    // that starts with `Inicio::Novas` applies only the 5 published after its durable exists.
    let bancada = Bancada::nova(Duration::from_secs(120)).await;
    let (emissor, tudo, novas) = (
        PgIsolado::novo().await,
        PgIsolado::novo().await,
        PgIsolado::novo().await,
    );
    mensageria_core::migrar(&emissor.pool).await.unwrap();
    receptor_pronto(&tudo.pool).await;
    receptor_pronto(&novas.pool).await;
    let relay = Relay::new(emissor.pool.clone(), config_relay())
        .recurso(bancada.publicador())
        .spawn()
        .unwrap();
    enfileirar_pedidos(&emissor.pool, 8000..8010, |_| "normal").await;
    esperar_saida_vazia(&emissor.pool, 30).await;
    let c_tudo = bancada
        .consumidor(&tudo.pool, config_consumidor("historico"))
        .spawn()
        .await
        .unwrap();
    let c_novas = bancada
        .consumidor(
            &novas.pool,
            config_consumidor("so-novas").com_inicio(mensageria_nats::Inicio::Novas),
        )
        .spawn()
        .await
        .unwrap();
    enfileirar_pedidos(&emissor.pool, 8010..8015, |_| "normal").await;
    esperar_efeitos(&tudo.pool, 15, 30).await;
    esperar_efeitos(&novas.pool, 5, 30).await;
    relay.shutdown(Duration::from_secs(5)).await;
    assert!(c_tudo.shutdown(Duration::from_secs(5)).await);
    assert!(c_novas.shutdown(Duration::from_secs(5)).await);
    assert_eq!(efeitos(&tudo.pool).await, (15, 0));
    assert_eq!(
        efeitos(&novas.pool).await,
        (5, 0),
        "only what came after its durable"
    );
    bancada.fechar().await;
    emissor.descartar().await;
    tudo.descartar().await;
    novas.descartar().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tipo_sem_receptor_nunca_fica_num_duravel_do_app() {
    // An app asked to consume a tipo it has no receptor for gets no durable for it, and messages
    // of that tipo published to the stream never sit in any of its durables.
    use futures_util::TryStreamExt as _;
    let bancada = Bancada::nova(Duration::from_secs(120)).await;
    let receptor = PgIsolado::novo().await;
    receptor_pronto(&receptor.pool).await;
    let config = config_consumidor("seletivo").com_tipos(["nats.pedido", "ninguem.recebe"]);
    let consumidor = bancada
        .consumidor(&receptor.pool, config)
        .spawn()
        .await
        .unwrap();
    assert_eq!(consumidor.tipos(), ["nats.pedido"]);
    for _ in 0..5 {
        bancada
            .js
            .publish(bancada.fluxo.assunto("ninguem.recebe"), "{}".into())
            .await
            .unwrap()
            .await
            .unwrap();
    }
    let mut fluxo = bancada.js.get_stream(bancada.fluxo.nome()).await.unwrap();
    assert_eq!(fluxo.info().await.unwrap().state.messages, 5);
    let duraveis: Vec<_> = fluxo.consumers().try_collect().await.unwrap();
    assert_eq!(
        duraveis.len(),
        5,
        "the unordered lane of nats.pedido and the app's four ordered lanes only"
    );
    for duravel in &duraveis {
        assert!(
            duravel.name == "seletivo__nats_2epedido"
                || duravel.name.starts_with("seletivo___ordem"),
            "{}",
            duravel.name
        );
        assert_eq!(
            (duravel.num_pending, duravel.num_ack_pending),
            (0, 0),
            "{}",
            duravel.name
        );
    }
    assert!(consumidor.shutdown(Duration::from_secs(5)).await);
    bancada.fechar().await;
    receptor.descartar().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn veneno_e_guardado_e_temporaria_volta() {
    let bancada = Bancada::nova(Duration::from_secs(120)).await;
    let (emissor, receptor) = (PgIsolado::novo().await, PgIsolado::novo().await);
    mensageria_core::migrar(&emissor.pool).await.unwrap();
    receptor_pronto(&receptor.pool).await;
    let consumidor = bancada
        .consumidor(&receptor.pool, config_consumidor("fiscal"))
        .spawn()
        .await
        .unwrap();
    enfileirar_pedidos(&emissor.pool, 1000..1100, |id| match id % 10 {
        0 => "veneno",
        1 => "temporaria",
        _ => "normal",
    })
    .await;
    let relay = Relay::new(emissor.pool.clone(), config_relay())
        .recurso(bancada.publicador())
        .spawn()
        .unwrap();
    esperar_saida_vazia(&emissor.pool, 30).await;
    esperar_efeitos(&receptor.pool, 90, 30).await;
    let mortas = esperar_valor(
        "the poison events kept",
        Duration::from_secs(10),
        Duration::from_millis(20),
        || async {
            mensageria_core::operacoes::mortas_recebidas(&receptor.pool, Some("fiscal"), 100)
                .await
                .unwrap()
        },
        |mortas| mortas.len() >= 10,
    )
    .await;
    relay.shutdown(Duration::from_secs(5)).await;
    assert!(consumidor.shutdown(Duration::from_secs(5)).await);
    assert_eq!(
        efeitos(&receptor.pool).await,
        (90, 0),
        "every other event applied once"
    );
    let ids: HashSet<i64> = mortas
        .iter()
        .map(|morta| serde_json::from_str::<Pedido>(&morta.payload).unwrap().id)
        .collect();
    assert_eq!(
        ids,
        (1000..1100).filter(|id| id % 10 == 0).collect(),
        "only the poison"
    );
    assert!(
        mortas
            .iter()
            .all(|morta| morta.motivo.contains("poison") && morta.tipo == "nats.pedido")
    );
    assert!(
        mortas[0].origem.starts_with("nats:T"),
        "{}",
        mortas[0].origem
    );
    bancada.fechar().await;
    emissor.descartar().await;
    receptor.descartar().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn consumidor_morto_no_meio_do_lote_nada_perdido_nada_dobrado() {
    // A consumer killed while its batch of slow events is being applied: JetStream redelivers
    // the batch to the next one after the ack wait, and what had committed is a duplicate.
    let bancada = Bancada::nova(Duration::from_secs(120)).await;
    let (emissor, receptor) = (PgIsolado::novo().await, PgIsolado::novo().await);
    mensageria_core::migrar(&emissor.pool).await.unwrap();
    receptor_pronto(&receptor.pool).await;
    let config = || {
        config_consumidor("lento")
            .com_lote(8)
            .com_ack_wait(Duration::from_secs(2))
    };
    enfileirar_pedidos(&emissor.pool, 0..24, |_| "lento").await;
    let relay = Relay::new(emissor.pool.clone(), config_relay())
        .recurso(bancada.publicador())
        .spawn()
        .unwrap();
    esperar_saida_vazia(&emissor.pool, 30).await;
    let primeiro = bancada
        .consumidor(&receptor.pool, config())
        .spawn()
        .await
        .unwrap();
    // Mid-way through its first batch of 8 (300 ms each).
    tokio::time::sleep(Duration::from_millis(1000)).await;
    primeiro.abort();
    let segundo = bancada
        .consumidor(&receptor.pool, config())
        .spawn()
        .await
        .unwrap();
    esperar_efeitos(&receptor.pool, 24, 60).await;
    assert!(segundo.shutdown(Duration::from_secs(10)).await);
    relay.shutdown(Duration::from_secs(5)).await;
    let rodadas = RODADAS_LENTAS.load(std::sync::atomic::Ordering::Relaxed);
    println!(
        "24 slow events, consumer killed mid-batch: the function ran {rodadas} times, effects {:?}",
        efeitos(&receptor.pool).await
    );
    assert!(
        rodadas > 24,
        "the kill cut a batch whose events ran again: {rodadas}"
    );
    assert_eq!(efeitos(&receptor.pool).await, (24, 0));
    bancada.fechar().await;
    emissor.descartar().await;
    receptor.descartar().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn republicar_dentro_e_fora_da_janela() {
    // Within the duplicate window the stream drops the second publish of a message; after it
    // the stream stores it again and the receptor's natural-key dedup makes it a no-op.
    let bancada = Bancada::nova(Duration::from_secs(1)).await;
    let receptor = SqliteIsolado::novo().await;
    receptor_pronto(&receptor.pool).await;
    let publicador = bancada.publicador();
    let ctx = ContextoEnvio::new(uuid::Uuid::now_v7(), "nats.pedido");
    let evento = Pedido {
        id: 7,
        marca: "normal".into(),
    };
    publicador.publicar(&evento, &ctx).await.unwrap();
    publicador.publicar(&evento, &ctx).await.unwrap();
    let mut fluxo = bancada.js.get_stream(bancada.fluxo.nome()).await.unwrap();
    assert_eq!(
        fluxo.info().await.unwrap().state.messages,
        1,
        "the second publish was a duplicate"
    );
    tokio::time::sleep(Duration::from_millis(1500)).await;
    publicador.publicar(&evento, &ctx).await.unwrap();
    assert_eq!(
        fluxo.info().await.unwrap().state.messages,
        2,
        "past the window it is stored again"
    );
    let consumidor = bancada
        .consumidor(&receptor.pool, config_consumidor("janela"))
        .spawn()
        .await
        .unwrap();
    esperar_efeitos(&receptor.pool, 1, 10).await;
    // Both stored copies are consumed: the second is a duplicate for the receptor.
    esperar_valor(
        "both copies settled",
        Duration::from_secs(10),
        Duration::from_millis(50),
        || async {
            let mut consumidor = fluxo
                .get_consumer::<jetstream::consumer::pull::Config>("janela__nats_2epedido")
                .await
                .unwrap();
            let info = consumidor.info().await.unwrap();
            (info.num_pending, info.num_ack_pending)
        },
        |&pendentes| pendentes == (0, 0),
    )
    .await;
    assert!(consumidor.shutdown(Duration::from_secs(5)).await);
    assert_eq!(efeitos(&receptor.pool).await, (1, 0));
    bancada.fechar().await;
    receptor.descartar().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sem_fluxo_a_mensagem_fica_na_saida() {
    // No stream captures the subject: a temporary failure that names the fix; nothing is lost.
    let bancada = Bancada::nova(Duration::from_secs(120)).await;
    let orfao = Publicador::new(
        bancada.js.clone(),
        &Fluxo::new("NENHUM", format!("nenhum{}", uuid::Uuid::now_v7().simple())).unwrap(),
    );
    let ctx = ContextoEnvio::new(uuid::Uuid::now_v7(), "nats.pedido");
    let falha = orfao
        .publicar(
            &Pedido {
                id: 1,
                marca: "normal".into(),
            },
            &ctx,
        )
        .await
        .unwrap_err();
    let texto = falha.to_string();
    assert!(matches!(falha, FalhaEnvio::Temporaria { .. }), "{texto}");
    assert!(
        texto.contains("stream `NENHUM` does not exist") && texto.contains("Fluxo::garantir"),
        "{texto}"
    );
    bancada.fechar().await;
}

#[derive(Debug, Serialize, Deserialize)]
struct Passo {
    chave: i64,
    passo: i64,
}

#[enviador(tipo = "nats.passo")]
async fn publicar_passo(evento: Passo, ctx: &ContextoEnvio) -> Result<(), FalhaEnvio> {
    ctx.exigir::<Publicador>()?.publicar(&evento, ctx).await
}

/// The odd steps of an entity are another tipo: one key's order holds across its tipos.
#[derive(Debug, Serialize, Deserialize)]
struct Etapa {
    chave: i64,
    passo: i64,
}

#[enviador(tipo = "nats.etapa")]
async fn publicar_etapa(evento: Etapa, ctx: &ContextoEnvio) -> Result<(), FalhaEnvio> {
    ctx.exigir::<Publicador>()?.publicar(&evento, ctx).await
}

/// Whether key 3000's step 1 fails temporarily (the parked-key test).
static FALHA_3000: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(true);

/// Whether the held-key test has fixed the cause of its keys' refusals.
static CHAVE_CURADA: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Steps that already failed once (a step 3 of every tenth key fails its first delivery).
static PASSOS_QUE_FALHARAM: LazyLock<Mutex<HashSet<(i64, i64)>>> = LazyLock::new(Mutex::default);

#[receptor(tipo = "nats.passo", chave_natural = (evento.chave, evento.passo))]
async fn receber_passo(tx: &mut Transaction<'_, Postgres>, evento: Passo) -> Result<(), Rejeicao> {
    aplicar_passo(tx, evento.chave, evento.passo).await
}

#[receptor(tipo = "nats.etapa", chave_natural = (evento.chave, evento.passo))]
async fn receber_etapa(tx: &mut Transaction<'_, Postgres>, evento: Etapa) -> Result<(), Rejeicao> {
    aplicar_passo(tx, evento.chave, evento.passo).await
}

async fn aplicar_passo(
    tx: &mut Transaction<'_, Postgres>,
    chave: i64,
    passo: i64,
) -> Result<(), Rejeicao> {
    // Keys from 1000 on are other tests'; from 2000 on, the held-key test's: step 2 of every
    // hundredth key is refused for good until it is cured.
    if chave == 3000 && passo == 1 && FALHA_3000.load(std::sync::atomic::Ordering::Relaxed) {
        return Err(Rejeicao::temporaria("a dependency of key 3000 is down"));
    }
    if (2000..3000).contains(&chave)
        && chave % 100 == 0
        && passo == 2
        && !CHAVE_CURADA.load(std::sync::atomic::Ordering::Relaxed)
    {
        return Err(Rejeicao::permanente(
            "step 2 of this key cannot be applied yet",
        ));
    }
    if passo == 3
        && chave % 10 == 0
        && chave < 1000
        && PASSOS_QUE_FALHARAM.lock().unwrap().insert((chave, passo))
    {
        return Err(Rejeicao::temporaria_apos(
            "first delivery fails",
            Duration::from_millis(100),
        ));
    }
    sqlx::query("INSERT INTO passos (chave, passo) VALUES ($1, $2)")
        .bind(chave)
        .bind(passo)
        .execute(&mut **tx)
        .await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ordem_por_chave_de_ponta_a_ponta() {
    // The same check as tests/ordem.rs, through JetStream: 200 keys × 20 steps enqueued
    // step-major, even steps one tipo and odd steps another (a key's order holds across its
    // tipos), two consuming replicas of one app, a temporary failure on some steps (a nak'd
    // step must keep its place). Every key's steps applied once, in order.
    const CHAVES: i64 = 200;
    const PASSOS: i64 = 20;
    let bancada = Bancada::nova_com(|fluxo| fluxo.com_faixas_ordenadas(8)).await;
    let (emissor, receptor) = emissor_e_receptor_de_passos().await;
    let config = || config_consumidor("ordenado").com_tipos(["nats.passo", "nats.etapa"]);
    let replicas = [
        bancada
            .consumidor(&receptor.pool, config())
            .spawn()
            .await
            .unwrap(),
        bancada
            .consumidor(&receptor.pool, config())
            .spawn()
            .await
            .unwrap(),
    ];
    for passo in 0..PASSOS {
        let mut tx = emissor.pool.begin().await.unwrap();
        for chave in 0..CHAVES {
            let chave_ordem = format!("k{chave}");
            if passo % 2 == 0 {
                enfileirar_ordenado(&mut *tx, &Passo { chave, passo }, &chave_ordem).await
            } else {
                enfileirar_ordenado(&mut *tx, &Etapa { chave, passo }, &chave_ordem).await
            }
            .unwrap();
        }
        tx.commit().await.unwrap();
    }
    let inicio = std::time::Instant::now();
    let relay = Relay::new(emissor.pool.clone(), config_relay())
        .recurso(bancada.publicador())
        .spawn()
        .unwrap();
    esperar_valor(
        "every step applied",
        Duration::from_secs(90),
        Duration::from_millis(50),
        || async {
            sqlx::query_scalar::<_, i64>("SELECT count(*) FROM passos")
                .fetch_one(&receptor.pool)
                .await
                .unwrap()
        },
        |&aplicados| aplicados >= CHAVES * PASSOS,
    )
    .await;
    let tempo = inicio.elapsed();
    relay.shutdown(Duration::from_secs(5)).await;
    for replica in replicas {
        assert!(replica.shutdown(Duration::from_secs(10)).await);
    }
    let linhas: Vec<(i64, i64)> = sqlx::query_as("SELECT chave, passo FROM passos ORDER BY ordem")
        .fetch_all(&receptor.pool)
        .await
        .unwrap();
    let mut ultimo = std::collections::HashMap::new();
    let mut fora_de_ordem = 0;
    for (chave, passo) in &linhas {
        let anterior = ultimo.insert(*chave, *passo).unwrap_or(-1);
        if *passo != anterior + 1 {
            fora_de_ordem += 1;
        }
    }
    println!(
        "{CHAVES} keys x {PASSOS} steps through JetStream, 2 replicas: {} applied in {tempo:?}, {fora_de_ordem} out of order",
        linhas.len()
    );
    assert_eq!(
        linhas.len() as i64,
        CHAVES * PASSOS,
        "each step applied once"
    );
    assert_eq!(fora_de_ordem, 0, "every key's steps in order");
    assert_eq!(
        PASSOS_QUE_FALHARAM.lock().unwrap().len(),
        20,
        "the nak'd steps happened"
    );
    bancada.fechar().await;
    emissor.descartar().await;
    receptor.descartar().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn binarios_de_um_app_com_tipos_diferentes_recebem_cada_um_os_seus() {
    // Two binaries of one app, each receiving one of a key's two tipos: an ordered lane carries
    // both, and each binary skips the other's. They must not share the lane's durable, or one
    // would acknowledge away the other's messages: each gets its own, and every step is applied.
    const CHAVES: i64 = 20;
    const PASSOS: i64 = 6;
    let bancada = Bancada::nova(Duration::from_secs(120)).await;
    let (emissor, receptor) = emissor_e_receptor_de_passos().await;
    let binarios = [
        bancada
            .consumidor(
                &receptor.pool,
                config_consumidor("dividido").com_tipos(["nats.passo"]),
            )
            .spawn()
            .await
            .unwrap(),
        bancada
            .consumidor(
                &receptor.pool,
                config_consumidor("dividido").com_tipos(["nats.etapa"]),
            )
            .spawn()
            .await
            .unwrap(),
    ];
    let mut tx = emissor.pool.begin().await.unwrap();
    for passo in 0..PASSOS {
        for chave in 1000..1000 + CHAVES {
            let chave_ordem = format!("d{chave}");
            if passo % 2 == 0 {
                enfileirar_ordenado(&mut *tx, &Passo { chave, passo }, &chave_ordem).await
            } else {
                enfileirar_ordenado(&mut *tx, &Etapa { chave, passo }, &chave_ordem).await
            }
            .unwrap();
        }
    }
    tx.commit().await.unwrap();
    let relay = Relay::new(emissor.pool.clone(), config_relay())
        .recurso(bancada.publicador())
        .spawn()
        .unwrap();
    let contar = || async {
        sqlx::query_scalar::<_, i64>("SELECT count(*) FROM passos")
            .fetch_one(&receptor.pool)
            .await
            .unwrap()
    };
    esperar_valor(
        "every step applied by the binary that receives its tipo",
        Duration::from_secs(60),
        Duration::from_millis(50),
        contar,
        |&aplicados| aplicados >= CHAVES * PASSOS,
    )
    .await;
    relay.shutdown(Duration::from_secs(5)).await;
    for binario in binarios {
        assert!(binario.shutdown(Duration::from_secs(10)).await);
    }
    let distintos: i64 = sqlx::query_scalar("SELECT count(DISTINCT (chave, passo)) FROM passos")
        .fetch_one(&receptor.pool)
        .await
        .unwrap();
    assert_eq!(
        (contar().await, distintos),
        (CHAVES * PASSOS, CHAVES * PASSOS)
    );
    bancada.fechar().await;
    emissor.descartar().await;
    receptor.descartar().await;
}

/// The sending app's schema and a receiving app's, with the `passos` table the step receptores
/// write to (in the order applied).
async fn emissor_e_receptor_de_passos() -> (PgIsolado, PgIsolado) {
    let (emissor, receptor) = (PgIsolado::novo().await, PgIsolado::novo().await);
    mensageria_core::migrar(&emissor.pool).await.unwrap();
    mensageria_core::migrar(&receptor.pool).await.unwrap();
    sqlx::query("CREATE TABLE passos (ordem BIGSERIAL PRIMARY KEY, chave BIGINT NOT NULL, passo BIGINT NOT NULL)")
        .execute(&receptor.pool)
        .await
        .unwrap();
    (emissor, receptor)
}

/// Enqueues `passos` steps of each key in `chaves` (even steps one tipo, odd steps the other)
/// and delivers them with a relay until the saída is empty.
async fn entregar_passos(
    bancada: &Bancada,
    emissor: &PgIsolado,
    chaves: std::ops::Range<i64>,
    passos: i64,
) {
    let mut tx = emissor.pool.begin().await.unwrap();
    for passo in 0..passos {
        for chave in chaves.clone() {
            let ordem = format!("h{chave}");
            if passo % 2 == 0 {
                enfileirar_ordenado(&mut *tx, &Passo { chave, passo }, &ordem).await
            } else {
                enfileirar_ordenado(&mut *tx, &Etapa { chave, passo }, &ordem).await
            }
            .unwrap();
        }
    }
    tx.commit().await.unwrap();
    let relay = Relay::new(emissor.pool.clone(), config_relay())
        .recurso(bancada.publicador())
        .spawn()
        .unwrap();
    esperar_saida_vazia(&emissor.pool, 30).await;
    relay.shutdown(Duration::from_secs(5)).await;
}

/// The steps a receiving app applied, per key, in the order applied.
async fn passos_por_chave(pool: &sqlx::PgPool) -> std::collections::BTreeMap<i64, Vec<i64>> {
    let linhas: Vec<(i64, i64)> = sqlx::query_as("SELECT chave, passo FROM passos ORDER BY ordem")
        .fetch_all(pool)
        .await
        .unwrap();
    let mut por_chave = std::collections::BTreeMap::<i64, Vec<i64>>::new();
    for (chave, passo) in linhas {
        por_chave.entry(chave).or_default().push(passo);
    }
    por_chave
}

/// Fails unless each key of `chaves` applied steps `0..passos`, once each, in order.
fn afirmar_passos(
    depois: &std::collections::BTreeMap<i64, Vec<i64>>,
    chaves: impl IntoIterator<Item = i64>,
    passos: i64,
) {
    let todos: Vec<i64> = (0..passos).collect();
    for chave in chaves {
        assert_eq!(
            depois.get(&chave),
            Some(&todos),
            "key {chave}: once each, in order"
        );
    }
}

/// Steps applied in all.
async fn passos_aplicados(pool: &sqlx::PgPool) -> usize {
    passos_por_chave(pool).await.values().map(Vec::len).sum()
}

/// Publishes `app`'s dead letters of a key again, in the key's order, as `mensageria
/// mortas-recebidas reenviar` does (new id; the id, key and place they replay).
async fn reenviar_como_a_cli(bancada: &Bancada, mortas: &[operacoes::MortaRecebida]) {
    for morta in mortas {
        let assunto = morta.origem.splitn(3, ':').nth(2).unwrap().to_owned();
        assert!(assunto.contains("._ordem."), "{assunto}");
        let mut cabecalhos = mensageria_nats::async_nats::HeaderMap::new();
        let nova = uuid::Uuid::now_v7().to_string();
        let sequencia = morta.sequencia.unwrap().to_string();
        cabecalhos.insert("Nats-Msg-Id", nova.as_str());
        cabecalhos.insert("ce-type", morta.tipo.as_str());
        cabecalhos.insert(
            "Mensageria-Reenvio-De",
            morta.id_mensagem.to_string().as_str(),
        );
        cabecalhos.insert("ce-partitionkey", morta.chave_ordem.as_deref().unwrap());
        cabecalhos.insert("Mensageria-Sequencia-Original", sequencia.as_str());
        bancada
            .js
            .publish_with_headers(assunto, cabecalhos, morta.payload.clone().into())
            .await
            .unwrap()
            .await
            .unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn uma_morta_retem_a_sua_chave_e_o_reenvio_vai_em_ordem() {
    // Keys 2000 and 2100 have step 2 refused for good (of six steps over two tipos), beside 8
    // keys that go through, on two lanes. Under the default policy (Bloquear) steps 3–5 of the
    // two keys wait behind their dead letter as `held` dead letters, and every other key applies
    // all its steps: only the failing keys stall. Cured, the dead letters are replayed in their
    // key's order: in process (`reaplicar_mortas_recebidas`), then, for key 2200 refused the same
    // way, published again through the stream as `mensageria mortas-recebidas reenviar` does.
    // Every key ends 0..5, in order, once. Before: the lane let the key move on (steps 3–5
    // applied before step 2), and a replay applied step 2 after them.
    let bancada = Bancada::nova_com(|fluxo| fluxo.com_faixas_ordenadas(2)).await;
    let (emissor, receptor) = emissor_e_receptor_de_passos().await;
    let config = config_consumidor("bloqueio")
        .com_tipos(["nats.passo", "nats.etapa"])
        .com_intervalo_de_verificacao(Duration::from_millis(200));
    let consumidor = bancada
        .consumidor(&receptor.pool, config)
        .spawn()
        .await
        .unwrap();
    let chaves = [2000, 2001, 2002, 2003, 2004, 2100, 2101, 2102, 2103, 2104];
    for chave in chaves {
        entregar_passos(&bancada, &emissor, chave..chave + 1, 6).await;
    }
    let mortas = esperar_valor(
        "two refused steps and six held behind them",
        Duration::from_secs(30),
        Duration::from_millis(50),
        || async {
            operacoes::mortas_recebidas(&receptor.pool, Some("bloqueio"), 100)
                .await
                .unwrap()
        },
        |mortas: &Vec<operacoes::MortaRecebida>| mortas.len() >= 8,
    )
    .await;
    esperar_valor(
        "every other key's steps",
        Duration::from_secs(30),
        Duration::from_millis(50),
        || passos_aplicados(&receptor.pool),
        |&n| n >= 8 * 6 + 2 * 2,
    )
    .await;
    let retidas = mortas.iter().filter(|m| m.motivo.starts_with("held:"));
    assert_eq!(
        (mortas.len(), retidas.clone().count()),
        (8, 6),
        "{mortas:#?}"
    );
    assert!(
        retidas.clone().all(|m| m.chave_ordem.is_some()),
        "{mortas:#?}"
    );
    assert!(
        retidas
            .clone()
            .all(|m| m.motivo.contains("mortas-recebidas reenviar"))
    );
    let antes = passos_por_chave(&receptor.pool).await;
    for chave in chaves {
        let esperado: Vec<i64> = if chave % 100 == 0 {
            vec![0, 1]
        } else {
            (0..6).collect()
        };
        assert_eq!(antes.get(&chave), Some(&esperado), "key {chave}");
    }

    CHAVE_CURADA.store(true, std::sync::atomic::Ordering::Relaxed);
    let da_chave = |chave: i64| {
        let pool = receptor.pool.clone();
        async move {
            operacoes::mortas_recebidas_da_chave(&pool, "bloqueio", &format!("h{chave}"))
                .await
                .unwrap()
        }
    };
    let reaplicacao =
        mensageria_axum::recepcao::reaplicar_mortas_recebidas(&receptor.pool, "bloqueio", 100)
            .await
            .unwrap();
    assert_eq!(reaplicacao.aplicadas, 8, "{reaplicacao:?}");
    assert!(da_chave(2000).await.is_empty() && da_chave(2100).await.is_empty());

    // Key 2200: refused and held the same way, then published again through the stream.
    CHAVE_CURADA.store(false, std::sync::atomic::Ordering::Relaxed);
    entregar_passos(&bancada, &emissor, 2200..2201, 6).await;
    let retida = esperar_valor(
        "key 2200 held",
        Duration::from_secs(30),
        Duration::from_millis(50),
        || da_chave(2200),
        |mortas: &Vec<operacoes::MortaRecebida>| mortas.len() >= 4,
    )
    .await;
    CHAVE_CURADA.store(true, std::sync::atomic::Ordering::Relaxed);
    reenviar_como_a_cli(&bancada, &retida).await;
    esperar_valor(
        "key 2200 replayed, applied and forgotten",
        Duration::from_secs(30),
        Duration::from_millis(50),
        || async {
            (
                da_chave(2200).await.len(),
                passos_aplicados(&receptor.pool).await,
            )
        },
        |&(mortas, aplicados)| mortas == 0 && aplicados >= 11 * 6,
    )
    .await;

    // Key 2300: refused and held the same way; the operator discards the refused step instead.
    // Nothing is before the held ones any more: the consumer applies them by itself, in order.
    CHAVE_CURADA.store(false, std::sync::atomic::Ordering::Relaxed);
    entregar_passos(&bancada, &emissor, 2300..2301, 6).await;
    let retida = esperar_valor(
        "key 2300 held",
        Duration::from_secs(30),
        Duration::from_millis(50),
        || da_chave(2300),
        |mortas: &Vec<operacoes::MortaRecebida>| mortas.len() >= 4,
    )
    .await;
    // A round of the consumer's resume task sees the key waiting for an operator before the
    // discard (it ran every 200 ms; a race in CI before): the discard must still take effect at
    // the next round, not 30 s later.
    tokio::time::sleep(Duration::from_millis(600)).await;
    operacoes::descartar_morta_recebida(&receptor.pool, "bloqueio", retida[0].id_mensagem)
        .await
        .unwrap();
    esperar_valor(
        "key 2300's held steps applied once the refused one was discarded",
        Duration::from_secs(10),
        Duration::from_millis(50),
        || da_chave(2300),
        |mortas: &Vec<operacoes::MortaRecebida>| mortas.is_empty(),
    )
    .await;
    assert!(consumidor.shutdown(Duration::from_secs(10)).await);
    let depois = passos_por_chave(&receptor.pool).await;
    assert_eq!(
        depois.get(&2300),
        Some(&vec![0, 1, 3, 4, 5]),
        "the discarded step skipped"
    );
    afirmar_passos(&depois, chaves.iter().copied().chain([2200]), 6);
    bancada.fechar().await;
    emissor.descartar().await;
    receptor.descartar().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn uma_chave_que_falha_estaciona_e_as_outras_andam() {
    // One ordered lane for ten keys × six steps; key 3000's step 1 fails temporarily until its
    // dependency comes back. After 3 deliveries it is parked (a `parked` dead letter, steps 2–5
    // held behind it) and the lane goes on: the other nine keys apply every step meanwhile. When
    // the dependency is back, the consumer applies the parked key by itself, in order. Before:
    // the lane waited for each redelivery of the failing step (up to 25, the backoff doubling to
    // 5 min), and every other key of the lane with it.
    let bancada = Bancada::nova_com(|fluxo| fluxo.com_faixas_ordenadas(1)).await;
    let (emissor, receptor) = emissor_e_receptor_de_passos().await;
    let config = config_consumidor("estaciona")
        .com_tipos(["nats.passo", "nats.etapa"])
        .com_intervalo_de_verificacao(Duration::from_millis(200));
    let consumidor = bancada
        .consumidor(&receptor.pool, config)
        .spawn()
        .await
        .unwrap();
    let inicio = std::time::Instant::now();
    entregar_passos(&bancada, &emissor, 3000..3010, 6).await;
    esperar_valor(
        "the nine other keys, while key 3000 fails",
        Duration::from_secs(30),
        Duration::from_millis(50),
        || passos_aplicados(&receptor.pool),
        |&n| n > 9 * 6, // and key 3000's step 0
    )
    .await;
    let outras = inicio.elapsed();
    let mortas = operacoes::mortas_recebidas_da_chave(&receptor.pool, "estaciona", "h3000")
        .await
        .unwrap();
    let motivos: Vec<&str> = mortas
        .iter()
        .map(|m| m.motivo.split(':').next().unwrap())
        .collect();
    assert_eq!(
        motivos,
        ["parked", "held", "held", "held", "held"],
        "{mortas:#?}"
    );
    assert_eq!(
        passos_por_chave(&receptor.pool).await.get(&3000),
        Some(&vec![0])
    );

    FALHA_3000.store(false, std::sync::atomic::Ordering::Relaxed);
    esperar_valor(
        "key 3000 applied by the consumer itself once its dependency is back",
        Duration::from_secs(30),
        Duration::from_millis(50),
        || async {
            let mortas = operacoes::mortas_recebidas_da_chave(&receptor.pool, "estaciona", "h3000");
            (
                mortas.await.unwrap().len(),
                passos_aplicados(&receptor.pool).await,
            )
        },
        |&(mortas, aplicados)| mortas == 0 && aplicados >= 10 * 6,
    )
    .await;
    println!(
        "one lane, key 3000 failing: the nine other keys applied all their steps {outras:?} after \
         the start; key 3000 parked, then applied in order {:?} after the start",
        inicio.elapsed()
    );
    assert!(consumidor.shutdown(Duration::from_secs(10)).await);
    let depois = passos_por_chave(&receptor.pool).await;
    afirmar_passos(&depois, 3000..3010, 6);
    bancada.fechar().await;
    emissor.descartar().await;
    receptor.descartar().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn um_binario_que_passa_a_receber_outro_tipo_herda_a_posicao_das_faixas() {
    // An app's binary receiving `nats.passo` runs, then stops; ordered steps of two tipos wait in
    // the lane; a new build of the app that also receives `nats.etapa` starts with `Inicio::Novas`.
    // Its lane durable has a new name (another tipo set): it starts where the old one had settled,
    // so every waiting step is applied. Before: it started at "new", and the 24 waiting steps
    // were skipped for good.
    let bancada = Bancada::nova_com(|fluxo| fluxo.com_faixas_ordenadas(1)).await;
    let (emissor, receptor) = emissor_e_receptor_de_passos().await;
    let config = |tipos: &[&str]| {
        config_consumidor("reimplantado")
            .com_tipos(tipos.iter().copied())
            .com_inicio(mensageria_nats::Inicio::Novas)
    };
    let antigo = bancada
        .consumidor(&receptor.pool, config(&["nats.passo"]))
        .spawn()
        .await
        .unwrap();
    assert!(antigo.shutdown(Duration::from_secs(5)).await);
    entregar_passos(&bancada, &emissor, 4000..4006, 4).await;
    let novo = bancada
        .consumidor(&receptor.pool, config(&["nats.passo", "nats.etapa"]))
        .spawn()
        .await
        .unwrap();
    esperar_valor(
        "every waiting step, by the new build",
        Duration::from_secs(30),
        Duration::from_millis(50),
        || passos_aplicados(&receptor.pool),
        |&n| n >= 6 * 4,
    )
    .await;
    assert!(novo.shutdown(Duration::from_secs(5)).await);
    let depois = passos_por_chave(&receptor.pool).await;
    afirmar_passos(&depois, 4000..4006, 4);
    bancada.fechar().await;
    emissor.descartar().await;
    receptor.descartar().await;
}
