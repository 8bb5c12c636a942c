//! Recovery in seconds, observed from the outside:
//!
//! - a delivery slower than the lease is never taken from the live relay that runs it (its lease
//!   is renewed), so a short default lease is safe;
//! - a sibling instance of the same app takes a dead instance's rows back once its heartbeat is
//!   half a lease old, before the lease would end;
//! - an instance restarted under the same stable name takes its rows back once its earlier
//!   incarnation's heartbeat is half a lease old, before the lease would end;
//! - two live processes under one instance name never take each other's deliveries: the second
//!   is refused the name (even when it crash-loops), and a holder taken for dead loses the name;
//! - a graceful shutdown records the instance as stopped;
//! - a destination down for 20 s is back in use within a few seconds of returning (the circuit's
//!   cool-down is capped), and an outage does not walk messages to the dead letters;
//! - SIGKILL of a child-process replica running the library's defaults, with deliveries in
//!   flight: every one of its messages applied within 10 s, exactly once.

use std::collections::HashSet;
use std::time::{Duration, Instant};

use mensageria_core::relay::{Config, Relay};
use mensageria_core::{ContextoEnvio, Destino, FalhaEnvio, enfileirar, enviador};
use mensageria_testes::faltas::Filho;
use mensageria_testes::servidor::{Resposta, Servidor};
use mensageria_testes::{PgIsolado, esperar_ate, nos_dois_bancos};
use serde::{Deserialize, Serialize};

#[path = "comum/apps_ab.rs"]
mod apps_ab;

#[derive(Debug, Serialize, Deserialize)]
struct Pedido {
    n: i64,
}

#[enviador(tipo = "recuperacao.pedido")]
async fn enviar_pedido(evento: Pedido, ctx: &ContextoEnvio) -> Result<(), FalhaEnvio> {
    ctx.exigir::<Destino>()?.postar(&evento, ctx).await
}

fn destino(servidor: &Servidor) -> Destino {
    Destino::new(&servidor.url())
        .unwrap()
        .com_tempo_limite(Duration::from_secs(60))
}

async fn pendentes<DB: mensageria_core::Banco>(pool: &sqlx::Pool<DB>) -> i64
where
    for<'c> &'c mut DB::Connection: sqlx::Executor<'c, Database = DB>,
    DB::Arguments: sqlx::IntoArguments<DB>,
    i64: sqlx::Type<DB> + for<'r> sqlx::Decode<'r, DB>,
    usize: sqlx::ColumnIndex<DB::Row>,
{
    sqlx::query_scalar("SELECT count(*) FROM mensageria_saida")
        .fetch_one(pool)
        .await
        .unwrap()
}

async fn enfileirar_pedidos<DB: mensageria_core::Banco>(pool: &sqlx::Pool<DB>, quantos: i64)
where
    for<'c> &'c mut DB::Connection: sqlx::Executor<'c, Database = DB>,
{
    for n in 0..quantos {
        let mut tx = pool.begin().await.unwrap();
        enfileirar(&mut *tx, &Pedido { n }).await.unwrap();
        tx.commit().await.unwrap();
    }
}

/// Waits until the saída is empty, failing after `limite`; returns how long it took.
async fn esperar_vazia<DB: mensageria_core::Banco>(
    pool: &sqlx::Pool<DB>,
    limite: Duration,
) -> Duration
where
    for<'c> &'c mut DB::Connection: sqlx::Executor<'c, Database = DB>,
    DB::Arguments: sqlx::IntoArguments<DB>,
    i64: sqlx::Type<DB> + for<'r> sqlx::Decode<'r, DB>,
    usize: sqlx::ColumnIndex<DB::Row>,
{
    let inicio = Instant::now();
    esperar_ate(limite, || async { pendentes(pool).await == 0 }).await;
    inicio.elapsed()
}

/// Waits until the count `sql` gives `alvo`, failing after `limite`.
async fn esperar_contagem<DB: mensageria_core::Banco>(
    pool: &sqlx::Pool<DB>,
    sql: &'static str,
    alvo: i64,
    limite: Duration,
) where
    for<'c> &'c mut DB::Connection: sqlx::Executor<'c, Database = DB>,
    DB::Arguments: sqlx::IntoArguments<DB>,
    i64: sqlx::Type<DB> + for<'r> sqlx::Decode<'r, DB>,
    usize: sqlx::ColumnIndex<DB::Row>,
{
    esperar_ate(limite, || async {
        sqlx::query_scalar::<_, i64>(sql)
            .fetch_one(pool)
            .await
            .unwrap()
            == alvo
    })
    .await;
}

/// Test settings with this lease: a fast poll and a send timeout no test reaches.
fn config_com_lease(lease: Duration) -> Config {
    Config::new("recuperacao")
        .com_lease(lease)
        .com_intervalo(Duration::from_millis(50))
        .com_tempo_limite_envio(Duration::from_secs(300))
}

/// Every 2xx the server gave, per message id: each exactly once.
fn cada_um_uma_vez(servidor: &Servidor, esperados: usize) {
    let aceitas = servidor.aceitas_por_id();
    assert_eq!(aceitas.len(), esperados, "{aceitas:?}");
    assert!(aceitas.values().all(|&n| n == 1), "{aceitas:?}");
}

/// A migrated store with 4 messages whose deliveries take 2.5 s each at the returned server, and
/// a maker of relays with an 800 ms lease (renewed every 200 ms): each delivery lasts three
/// leases.
async fn quatro_entregas_lentas<DB: mensageria_core::Banco>(
    pool: &sqlx::Pool<DB>,
) -> (Servidor, impl Fn() -> mensageria_core::relay::RelayHandle)
where
    for<'c> &'c mut DB::Connection: sqlx::Executor<'c, Database = DB>,
{
    mensageria_core::migrar(pool).await.unwrap();
    let servidor = Servidor::iniciar().await;
    servidor.responder(Resposta::Demorar(Duration::from_millis(2500)));
    enfileirar_pedidos(pool, 4).await;
    let (pool, alvo) = (pool.clone(), servidor.clone());
    let relay = move || {
        Relay::new(pool.clone(), config_com_lease(Duration::from_millis(800)))
            .recurso(destino(&alvo))
            .spawn()
            .unwrap()
    };
    (servidor, relay)
}

nos_dois_bancos! {
    async fn entrega_mais_lenta_que_o_lease_nao_e_tomada_de_um_relay_vivo(db) {
        let (servidor, relay) = quatro_entregas_lentas(&db.pool).await;
        let (a, b) = (relay(), relay());
        esperar_vazia(&db.pool, Duration::from_secs(30)).await;
        a.shutdown(Duration::from_secs(5)).await;
        b.shutdown(Duration::from_secs(5)).await;
        assert_eq!(servidor.recebidas().len(), 4, "no delivery was taken over and sent again");
        cada_um_uma_vez(&servidor, 4);
    }
}

nos_dois_bancos! {
    async fn desligamento_gracioso_mantem_os_leases_das_entregas_que_espera(db) {
        // A shuts down gracefully while its deliveries run, waiting for them up to 5 s: three of
        // its leases go by during the drain. B, a sibling, polls all along.
        let (servidor, relay) = quatro_entregas_lentas(&db.pool).await;
        let a = relay();
        let em_voo = "SELECT count(*) FROM mensageria_saida WHERE lease_token IS NOT NULL";
        esperar_contagem(&db.pool, em_voo, 4, Duration::from_secs(10)).await;
        let b = relay();
        a.shutdown(Duration::from_secs(5)).await;
        esperar_vazia(&db.pool, Duration::from_secs(10)).await;
        b.shutdown(Duration::from_secs(5)).await;
        assert_eq!(
            servidor.recebidas().len(),
            4,
            "no delivery A was waiting for during its shutdown was taken over and sent again"
        );
        cada_um_uma_vez(&servidor, 4);
    }
}

nos_dois_bancos! {
    async fn irmao_toma_as_linhas_de_uma_instancia_morta(db) {
        mensageria_core::migrar(&db.pool).await.unwrap();
        let servidor = Servidor::iniciar().await;
        servidor.responder(Resposta::Demorar(Duration::from_secs(120)));
        enfileirar_pedidos(&db.pool, 5).await;
        // Lease 8 s: the dead instance's rows must come back well before it ends.
        let config = || config_com_lease(Duration::from_secs(8));
        let morta = Relay::new(db.pool.clone(), config()).recurso(destino(&servidor)).spawn().unwrap();
        esperar_contagem(&db.pool, "SELECT count(*) FROM mensageria_saida WHERE lease_token IS NOT NULL", 5, Duration::from_secs(10)).await;
        // A crash with five deliveries in flight, then a sibling of the same app.
        morta.abort();
        let morte = Instant::now();
        servidor.responder(Resposta::Ok);
        let irmao = Relay::new(db.pool.clone(), config()).recurso(destino(&servidor)).spawn().unwrap();
        esperar_vazia(&db.pool, Duration::from_secs(30)).await;
        let tempo = morte.elapsed();
        irmao.shutdown(Duration::from_secs(5)).await;
        println!("rows of the dead instance applied {tempo:?} after its death (lease 8 s)");
        assert!(tempo < Duration::from_secs(8), "taken back before the lease ended: {tempo:?}");
        let recuperadas: i64 = sqlx::query_scalar(
            "SELECT count(*) FROM mensageria_instancias WHERE recuperada_em IS NOT NULL",
        )
        .fetch_one(&db.pool)
        .await
        .unwrap();
        assert_eq!(recuperadas, 1, "the dead instance is recorded as taken over");
        let aceitas = servidor.aceitas_por_id();
        assert_eq!(aceitas.len(), 5);
    }
}

nos_dois_bancos! {
    async fn instancia_reiniciada_com_o_mesmo_nome_retoma_as_suas_linhas_antes_do_lease(db) {
        mensageria_core::migrar(&db.pool).await.unwrap();
        let servidor = Servidor::iniciar().await;
        servidor.responder(Resposta::Demorar(Duration::from_secs(120)));
        enfileirar_pedidos(&db.pool, 5).await;
        // Lease 8 s: the earlier incarnation is dead once its heartbeat is 4 s old.
        let config = || config_com_lease(Duration::from_secs(8)).com_instancia("pod-0");
        let antes = Relay::new(db.pool.clone(), config()).recurso(destino(&servidor)).spawn().unwrap();
        esperar_contagem(&db.pool, "SELECT count(*) FROM mensageria_saida WHERE lease_dono = 'recuperacao@pod-0'", 5, Duration::from_secs(10)).await;
        antes.abort();
        let morte = Instant::now();
        servidor.responder(Resposta::Ok);
        let depois = Relay::new(db.pool.clone(), config()).recurso(destino(&servidor)).spawn().unwrap();
        esperar_vazia(&db.pool, Duration::from_secs(30)).await;
        let tempo = morte.elapsed();
        depois.shutdown(Duration::from_secs(5)).await;
        println!("restarted instance applied its 5 rows {tempo:?} after the crash (lease 8 s)");
        assert!(tempo < Duration::from_secs(8), "taken back before the lease ended: {tempo:?}");
        assert_eq!(servidor.aceitas_por_id().len(), 5);
    }
}

nos_dois_bancos! {
    async fn duas_vivas_com_o_mesmo_nome_nao_se_roubam(db) {
        // The probe: every replica given one MENSAGERIA_INSTANCE, the second crash-looping.
        // Each start of the second used to take back every row leased to the name, rows the
        // first was delivering right then, and send them again.
        mensageria_core::migrar(&db.pool).await.unwrap();
        let servidor = Servidor::iniciar().await;
        servidor.responder(Resposta::Demorar(Duration::from_millis(2500)));
        enfileirar_pedidos(&db.pool, 40).await;
        let config = || config_com_lease(Duration::from_secs(2)).com_instancia("pod-0");
        let primeiro = Relay::new(db.pool.clone(), config()).recurso(destino(&servidor)).spawn().unwrap();
        esperar_contagem(&db.pool, "SELECT count(*) FROM mensageria_saida WHERE lease_token IS NOT NULL", 40, Duration::from_secs(10)).await;
        for _ in 0..4 {
            let segundo = Relay::new(db.pool.clone(), config()).recurso(destino(&servidor)).spawn().unwrap();
            tokio::time::sleep(Duration::from_millis(400)).await;
            segundo.abort();
        }
        let segundo = Relay::new(db.pool.clone(), config()).recurso(destino(&servidor)).spawn().unwrap();
        esperar_vazia(&db.pool, Duration::from_secs(30)).await;
        primeiro.shutdown(Duration::from_secs(5)).await;
        segundo.shutdown(Duration::from_secs(5)).await;
        let entregas = servidor.recebidas().len();
        println!("40 events, two live processes under one name: {entregas} deliveries");
        assert_eq!(entregas, 40, "no delivery was taken from the live holder and sent again");
        cada_um_uma_vez(&servidor, 40);
    }
}

nos_dois_bancos! {
    async fn nome_de_instancia_e_de_um_processo_vivo_por_vez(db) {
        use mensageria_core::teste::reivindicacao::{self as r, Batimento, Posse};
        mensageria_core::migrar(&db.pool).await.unwrap();
        let tomar = || r::iniciar_instancia(&db.pool, "app@pod-0", "app", 3_000);
        let Posse::Tomada { marca: primeira, .. } = tomar().await.unwrap() else {
            panic!("a new name is free");
        };
        assert!(
            matches!(tomar().await.unwrap(), Posse::Ocupada { visto_ha_ms } if visto_ha_ms < 3_000),
            "a second process is refused a live name"
        );
        // The holder pauses for longer than its dead-after period: taken for dead.
        let envelhecer = if mensageria_testes::e_postgres(&db.pool) {
            "UPDATE mensageria_instancias SET visto_em = now() - interval '1 minute'"
        } else {
            "UPDATE mensageria_instancias SET visto_em = visto_em - 60000"
        };
        sqlx::query(envelhecer).execute(&db.pool).await.unwrap();
        let Posse::Tomada { marca: segunda, .. } = tomar().await.unwrap() else {
            panic!("a dead holder's name is free");
        };
        assert_ne!(primeira, segunda);
        assert_eq!(
            r::bater_instancia(&db.pool, "app@pod-0", "app", primeira).await.unwrap(),
            Batimento::Perdida,
            "the holder taken for dead learns it lost the name, and writes nothing"
        );
        assert_eq!(
            r::bater_instancia(&db.pool, "app@pod-0", "app", segunda).await.unwrap(),
            Batimento::Batido { recuperadas: 0 }
        );
    }
}

nos_dois_bancos! {
    async fn parada_graciosa_fica_registrada(db) {
        mensageria_core::migrar(&db.pool).await.unwrap();
        let relay = Relay::new(db.pool.clone(), Config::new("recuperacao").com_instancia("web-1"))
            .spawn()
            .unwrap();
        esperar_contagem(&db.pool, "SELECT count(*) FROM mensageria_instancias WHERE parada_em IS NULL", 1, Duration::from_secs(10)).await;
        relay.shutdown(Duration::from_secs(5)).await;
        let (instancia, parada): (String, bool) = sqlx::query_as(
            "SELECT instancia, parada_em IS NOT NULL FROM mensageria_instancias",
        )
        .fetch_one(&db.pool)
        .await
        .unwrap();
        assert_eq!((instancia.as_str(), parada), ("recuperacao@web-1", true));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn destino_fora_do_ar_por_20_s_volta_a_ser_usado_em_segundos() {
    let db = PgIsolado::novo().await;
    mensageria_core::migrar(&db.pool).await.unwrap();
    let servidor = Servidor::iniciar().await;
    servidor.responder(Resposta::Status(503, None));
    enfileirar_pedidos(&db.pool, 20).await;
    // The library's defaults (circuit, backoff, lease), as a user runs it.
    let relay = Relay::new(db.pool.clone(), Config::new("recuperacao"))
        .recurso(destino(&servidor))
        .spawn()
        .unwrap();
    tokio::time::sleep(Duration::from_secs(20)).await;
    let durante = servidor.recebidas().len();
    servidor.responder(Resposta::Ok);
    let tempo = esperar_vazia(&db.pool, Duration::from_secs(30)).await;
    relay.shutdown(Duration::from_secs(5)).await;
    println!(
        "destination down 20 s: {durante} requests while down; everything applied {tempo:?} after it came back"
    );
    assert!(tempo <= Duration::from_secs(5), "{tempo:?}");
    // While down it got about one probe per cool-down (2 s cap), not a retry storm.
    assert!(durante < 60, "{durante} requests in 20 s of outage");
    let mortas: i64 = sqlx::query_scalar("SELECT count(*) FROM mensageria_mortas")
        .fetch_one(&db.pool)
        .await
        .unwrap();
    assert_eq!(mortas, 0);
    cada_um_uma_vez(&servidor, 20);
    db.descartar().await;
}

/// A child-process replica of `app-a` with the library's defaults, a stable instance name and,
/// with `lider`, leader mode.
async fn replica(schema: &str, destino: &str, instancia: &str, lider: bool) -> Filho {
    let mut ambiente = vec![
        ("MENSAGERIA_TESTE_PADRAO", "1"),
        ("MENSAGERIA_INSTANCE", instancia),
    ];
    if lider {
        ambiente.push(("MENSAGERIA_TESTE_LIDER", "1"));
    }
    Filho::iniciar_com(env!("CARGO_BIN_EXE_app-a"), schema, destino, &ambiente).await
}

/// The receptor of `faltas.a` on the test's schema, each request held 300 ms so that deliveries
/// are in flight when a kill comes; returns its base URL.
async fn receptor_lento(db: &PgIsolado) -> String {
    sqlx::query("CREATE TABLE efeito (n BIGINT NOT NULL)")
        .execute(&db.pool)
        .await
        .unwrap();
    let app = mensageria_axum::router(
        db.outro_pool(4).await,
        mensageria_axum::Config::new("receptor", ["faltas-token-de-teste"]),
    )
    .unwrap()
    .layer(axum::middleware::from_fn(
        |pedido: axum::extract::Request, proximo: axum::middleware::Next| async move {
            tokio::time::sleep(Duration::from_millis(300)).await;
            proximo.run(pedido).await
        },
    ));
    let (url, _servidor) = mensageria_testes::servir_em_porta_livre(app).await;
    url
}

/// Enqueues `faltas.a` events `de..ate`.
async fn enfileirar_a(pool: &sqlx::PgPool, de: i64, ate: i64) {
    for n in de..ate {
        let mut tx = pool.begin().await.unwrap();
        enfileirar(&mut *tx, &apps_ab::EventoA { n }).await.unwrap();
        tx.commit().await.unwrap();
    }
}

/// Every `faltas.a` event `0..total` applied exactly once.
async fn cada_evento_uma_vez(pool: &sqlx::PgPool, total: i64) {
    let (linhas, distintas): (i64, i64) =
        sqlx::query_as("SELECT count(*), count(DISTINCT n) FROM efeito")
            .fetch_one(pool)
            .await
            .unwrap();
    assert_eq!((linhas, distintas), (total, total), "applied twice or lost");
    let aplicados: HashSet<i64> = sqlx::query_scalar::<_, i64>("SELECT n FROM efeito")
        .fetch_all(pool)
        .await
        .unwrap()
        .into_iter()
        .collect();
    assert_eq!(aplicados, (0..total).collect::<HashSet<_>>());
}

/// How many kills the SIGKILL scenarios do: 3 in the suite, more for a distribution
/// (`MENSAGERIA_TESTE_MORTES=20`).
fn mortes() -> usize {
    std::env::var("MENSAGERIA_TESTE_MORTES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(3)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_do_lider_com_entregas_em_voo_drena_em_segundos() {
    let db = PgIsolado::novo().await;
    mensageria_core::migrar(&db.pool).await.unwrap();
    let url = receptor_lento(&db).await;
    let mut replicas = [
        Some(replica(&db.schema, &url, "r0-0", true).await),
        Some(replica(&db.schema, &url, "r1-0", true).await),
    ];
    let mut tempos = Vec::new();
    let mut total = 0_i64;
    for rodada in 1..=mortes() {
        enfileirar_a(&db.pool, total, total + 60).await;
        total += 60;
        // The replica delivering now is the one holding leases (`app-a@r<i>-<n>`).
        let inicio = Instant::now();
        let lider = loop {
            let dono: Option<String> = sqlx::query_scalar(
                "SELECT max(lease_dono) FROM mensageria_saida WHERE lease_token IS NOT NULL",
            )
            .fetch_one(&db.pool)
            .await
            .unwrap();
            if let Some(dono) = dono {
                break dono;
            }
            assert!(
                inicio.elapsed() < Duration::from_secs(20),
                "no replica delivered"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        };
        let indice = usize::from(lider.starts_with("app-a@r1"));
        if let Some(replica) = replicas[indice].take() {
            replica.matar();
        }
        let morte = Instant::now();
        esperar_contagem(
            &db.pool,
            "SELECT count(DISTINCT n) FROM efeito",
            total,
            Duration::from_secs(120),
        )
        .await;
        tempos.push(morte.elapsed());
        // The killed replica comes back (a new process, a new name) for the next kill.
        let nome = format!("r{indice}-{rodada}");
        replicas[indice] = Some(replica(&db.schema, &url, &nome, true).await);
    }
    let mut ordenados = tempos.clone();
    ordenados.sort();
    println!(
        "leader mode, SIGKILL of the delivering replica: drained after {ordenados:?} (median {:?}, max {:?})",
        ordenados[ordenados.len() / 2],
        ordenados[ordenados.len() - 1]
    );
    assert!(
        ordenados[ordenados.len() - 1] <= Duration::from_secs(10),
        "{ordenados:?}"
    );
    cada_evento_uma_vez(&db.pool, total).await;
    db.descartar().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_de_uma_replica_com_entregas_em_voo_se_recupera_em_segundos() {
    use apps_ab::EventoA;
    let db = PgIsolado::novo().await;
    mensageria_core::migrar(&db.pool).await.unwrap();
    let url = receptor_lento(&db).await;

    let mut tempos = Vec::new();
    let mut total = 0_i64;
    let _sobrevivente = replica(&db.schema, &url, "sobrevivente", false).await;
    for rodada in 0..mortes() {
        let vitima_nome = format!("vitima-{rodada}");
        let vitima = replica(&db.schema, &url, &vitima_nome, false).await;
        // Kill the victim once it holds deliveries in flight: events go in twenty at a time
        // until it does (the survivor may take a whole round's rows while the victim's process
        // is still slow to claim, on a loaded machine).
        let dono = format!("app-a@{vitima_nome}");
        let fim = Instant::now() + Duration::from_secs(30);
        loop {
            for _ in 0..20 {
                let mut tx = db.pool.begin().await.unwrap();
                enfileirar(&mut *tx, &EventoA { n: total }).await.unwrap();
                tx.commit().await.unwrap();
                total += 1;
            }
            let mut em_voo = 0;
            for _ in 0..20 {
                em_voo = sqlx::query_scalar::<_, i64>(
                    "SELECT count(*) FROM mensageria_saida WHERE lease_dono = $1",
                )
                .bind(&dono)
                .fetch_one(&db.pool)
                .await
                .unwrap();
                if em_voo >= 3 {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            if em_voo >= 3 {
                break;
            }
            assert!(
                Instant::now() < fim,
                "{vitima_nome} never held 3 deliveries in flight in 30 s"
            );
        }
        vitima.matar();
        let morte = Instant::now();
        let dela: Vec<i64> = sqlx::query_scalar(
            "SELECT (payload->>'n')::int8 FROM mensageria_saida WHERE lease_dono = $1",
        )
        .bind(&dono)
        .fetch_all(&db.pool)
        .await
        .unwrap();
        let pool = db.pool.clone();
        let dela_ = dela.clone();
        esperar_ate(Duration::from_secs(30), || {
            let (pool, dela) = (pool.clone(), dela_.clone());
            async move {
                let aplicados: i64 =
                    sqlx::query_scalar("SELECT count(DISTINCT n) FROM efeito WHERE n = ANY($1)")
                        .bind(dela.clone())
                        .fetch_one(&pool)
                        .await
                        .unwrap();
                aplicados == dela.len() as i64
            }
        })
        .await;
        tempos.push(morte.elapsed());
    }
    esperar_vazia(&db.pool, Duration::from_secs(60)).await;
    println!(
        "SIGKILL with deliveries in flight, library defaults: its messages applied after {tempos:?}"
    );
    for tempo in &tempos {
        assert!(*tempo <= Duration::from_secs(10), "{tempos:?}");
    }
    // Nothing lost, nothing applied twice.
    let (linhas, distintas): (i64, i64) =
        sqlx::query_as("SELECT count(*), count(DISTINCT n) FROM efeito")
            .fetch_one(&db.pool)
            .await
            .unwrap();
    assert_eq!((linhas, distintas), (total, total));
    let esperados: HashSet<i64> = (0..total).collect();
    let aplicados: HashSet<i64> = sqlx::query_scalar::<_, i64>("SELECT n FROM efeito")
        .fetch_all(&db.pool)
        .await
        .unwrap()
        .into_iter()
        .collect();
    assert_eq!(aplicados, esperados);
    db.descartar().await;
}
