//! The relay against real databases and a real HTTP receiver on 127.0.0.1: every scenario
//! asserts the final state (what arrived, what is left in the saída, what is dead).

use std::collections::HashSet;
use std::time::Duration;

use mensageria_core::relay::{Config, Modo, Relay};
use mensageria_core::{ContextoEnvio, Destino, FalhaEnvio, enfileirar, enviador};
use mensageria_testes::servidor::{Resposta, Servidor};
use mensageria_testes::{
    PgIsolado, Sql, e_postgres, esperar_ate, esperar_saida_vazia, nos_dois_bancos,
};
use serde::{Deserialize, Serialize};
use sqlx::{Executor, FromRow, Pool};

#[derive(Debug, Serialize, Deserialize)]
struct Aviso {
    n: u32,
    marca: String,
}

#[enviador(tipo = "teste.aviso")]
async fn enviar_aviso(evento: Aviso, ctx: &ContextoEnvio) -> Result<(), FalhaEnvio> {
    ctx.exigir::<Destino>()?.postar(&evento, ctx).await
}

fn aviso(n: u32) -> Aviso {
    Aviso {
        n,
        marca: "normal".into(),
    }
}

/// Fast settings for tests: short backoff, short poll.
fn config(app: &str) -> Config {
    Config::new(app)
        .com_intervalo(Duration::from_millis(50))
        .com_backoff(Duration::from_millis(20), Duration::from_millis(200))
        .com_tempo_limite_envio(Duration::from_secs(5))
        .com_lease(Duration::from_secs(30))
}

/// Waits (up to 20 s) until `servidor` has received at least `n` requests.
async fn esperar_recebidas(servidor: &Servidor, n: usize) {
    let s = servidor.clone();
    esperar_ate(Duration::from_secs(20), || {
        let s = s.clone();
        async move { s.recebidas().len() >= n }
    })
    .await;
}

const PENDENTES: &str = "SELECT count(*) FROM mensageria_saida";

/// The stored next attempt (database clock) minus now, in milliseconds.
async fn espera_armazenada_ms<DB: Sql>(pool: &Pool<DB>) -> f64
where
    for<'c> &'c mut DB::Connection: Executor<'c, Database = DB>,
    (f64,): for<'r> FromRow<'r, DB::Row>,
{
    sqlx::query_scalar(if e_postgres(pool) {
        "SELECT CAST(extract(epoch FROM proxima_tentativa_em - now()) * 1000 AS float8) FROM mensageria_saida"
    } else {
        "SELECT CAST(proxima_tentativa_em - unixepoch('subsec') * 1000 AS REAL) FROM mensageria_saida"
    })
    .fetch_one(pool)
    .await
    .unwrap()
}

const MORTAS: &str = "SELECT count(*) FROM mensageria_mortas";

nos_dois_bancos! {
    async fn tudo_que_foi_commitado_chega(db) {
        mensageria_core::migrar(&db.pool).await.unwrap();
        let servidor = Servidor::iniciar().await;
        let mut ids = HashSet::new();
        for n in 0..60 {
            let mut tx = db.pool.begin().await.unwrap();
            ids.insert(enfileirar(&mut *tx, &aviso(n)).await.unwrap().to_string());
            tx.commit().await.unwrap();
        }
        let relay = Relay::new(db.pool.clone(), config("emissor").com_lote(16).com_concorrencia(8))
            .recurso(Destino::new(&servidor.url()).unwrap().com_token("t0k"))
            .spawn()
            .unwrap();
        esperar_saida_vazia(&db.pool, 30).await;
        relay.shutdown(Duration::from_secs(5)).await;

        let aceitas = servidor.aceitas_por_id();
        assert_eq!(aceitas.keys().cloned().collect::<HashSet<_>>(), ids, "every committed message arrived");
        let recebidas = servidor.recebidas();
        assert!(recebidas.iter().all(|r| r.tipo == "teste.aviso" && r.tentativa == "1"));
        assert!(recebidas.iter().all(|r| r.autorizacao.as_deref() == Some("Bearer t0k")));
        let mortas: i64 = sqlx::query_scalar(MORTAS).fetch_one(&db.pool).await.unwrap();
        assert_eq!(mortas, 0);
    }
}

nos_dois_bancos! {
    async fn linhas_de_outro_app_ficam_intactas(db) {
        mensageria_core::migrar(&db.pool).await.unwrap();
        let servidor = Servidor::iniciar().await;
        // App B's rows on the shared schema: a tipo this binary has no enviador for.
        for n in 0..5 {
            mensageria_core::sqlx::query(
                if e_postgres(&db.pool) {
                    "INSERT INTO mensageria_saida (id_mensagem, tipo, payload) VALUES ($1::uuid, 'outro.app', '{}')"
                } else {
                    "INSERT INTO mensageria_saida (id_mensagem, tipo, payload) VALUES ($1, 'outro.app', '{}')"
                },
            )
            .bind(format!("00000000-0000-7000-8000-00000000000{n}"))
            .execute(&db.pool)
            .await
            .unwrap();
        }
        let antes: Vec<(String, i32, String)> = sqlx::query_as(
            "SELECT CAST(id_mensagem AS TEXT), tentativas, CAST(proxima_tentativa_em AS TEXT) \
             FROM mensageria_saida ORDER BY id",
        )
        .fetch_all(&db.pool)
        .await
        .unwrap();
        for n in 0..10 {
            enfileirar(&db.pool, &aviso(n)).await.unwrap();
        }
        let relay = Relay::new(db.pool.clone(), config("app-a")).recurso(Destino::new(&servidor.url()).unwrap());
        let rodada = relay.drenar().await.unwrap();
        assert_eq!(rodada.entregues, 10);

        let depois: Vec<(String, i32, String)> = sqlx::query_as(
            "SELECT CAST(id_mensagem AS TEXT), tentativas, CAST(proxima_tentativa_em AS TEXT) \
             FROM mensageria_saida ORDER BY id",
        )
        .fetch_all(&db.pool)
        .await
        .unwrap();
        assert_eq!(depois, antes, "app B's rows: same attempts, same schedule");
        let com_lease: i64 = sqlx::query_scalar("SELECT count(*) FROM mensageria_saida WHERE lease_token IS NOT NULL")
            .fetch_one(&db.pool)
            .await
            .unwrap();
        assert_eq!(com_lease, 0, "never leased");
        let mortas: i64 = sqlx::query_scalar(MORTAS).fetch_one(&db.pool).await.unwrap();
        assert_eq!(mortas, 0, "never dead-lettered");
        assert_eq!(servidor.recebidas().len(), 10);
    }
}

nos_dois_bancos! {
    async fn drenar_ate_vazia_espera_as_novas_tentativas(db) {
        // `drenar` returns while a retry is not yet due (the trial's ordered test needed drain,
        // sleep, drain); `drenar_ate_vazia` waits for it.
        mensageria_core::migrar(&db.pool).await.unwrap();
        let servidor = Servidor::iniciar().await;
        servidor.responder(Resposta::Status(503, None));
        for n in 0..3 {
            enfileirar(&db.pool, &aviso(n)).await.unwrap();
        }
        let relay = Relay::new(
            db.pool.clone(),
            config("emissor").com_backoff(Duration::from_millis(300), Duration::from_millis(300)),
        )
        .recurso(Destino::new(&servidor.url()).unwrap());
        let primeira = relay.drenar().await.unwrap();
        assert_eq!((primeira.entregues, primeira.reagendadas), (0, 3));
        assert_eq!(mensageria_testes::contar(&db.pool, "mensageria_saida").await, 3, "drenar left the retries");
        servidor.responder(Resposta::Ok);
        let rodada = relay.drenar_ate_vazia(Duration::from_secs(10)).await.unwrap();
        assert_eq!(rodada.entregues, 3);
        assert_eq!(mensageria_testes::contar(&db.pool, "mensageria_saida").await, 0);
        // Nothing can be delivered: it says so after the deadline, with what is left.
        servidor.responder(Resposta::Status(503, None));
        enfileirar(&db.pool, &aviso(9)).await.unwrap();
        let erro = relay.drenar_ate_vazia(Duration::from_millis(200)).await.unwrap_err();
        assert!(
            matches!(erro, mensageria_core::Erro::DrenagemIncompleta { restantes: 1, .. }),
            "{erro}"
        );
    }
}

nos_dois_bancos! {
    async fn veneno_vai_para_mortas_e_o_resto_passa(db) {
        mensageria_core::migrar(&db.pool).await.unwrap();
        let servidor = Servidor::iniciar().await;
        servidor.responder_se_contem("veneno", Resposta::Status(422, None));
        for n in 0..20 {
            let marca = if n % 5 == 0 { "veneno" } else { "normal" };
            enfileirar(&db.pool, &Aviso { n, marca: marca.into() }).await.unwrap();
        }
        let relay = Relay::new(db.pool.clone(), config("emissor")).recurso(Destino::new(&servidor.url()).unwrap());
        let rodada = relay.drenar().await.unwrap();
        assert_eq!((rodada.entregues, rodada.mortas), (16, 4));

        let mortas: Vec<(String, i32, String)> = sqlx::query_as(
            "SELECT CAST(payload AS TEXT), tentativas, ultimo_erro FROM mensageria_mortas",
        )
        .fetch_all(&db.pool)
        .await
        .unwrap();
        assert_eq!(mortas.len(), 4);
        for (payload, tentativas, erro) in &mortas {
            assert!(payload.contains("veneno"));
            assert_eq!(*tentativas, 1, "dead-lettered at once");
            assert!(erro.contains("422"), "{erro}");
        }
        let pendentes: i64 = sqlx::query_scalar(PENDENTES).fetch_one(&db.pool).await.unwrap();
        assert_eq!(pendentes, 0);

        // Replayed after the fix, they are delivered.
        servidor.responder_se_contem("veneno", Resposta::Ok);
        let servidor_corrigido = Servidor::iniciar().await;
        let relay = Relay::new(db.pool.clone(), config("emissor")).recurso(Destino::new(&servidor_corrigido.url()).unwrap());
        let voltaram = mensageria_core::operacoes::reenfileirar_mortas(&db.pool, Some("teste.aviso")).await.unwrap();
        assert_eq!(voltaram, 4);
        assert_eq!(relay.drenar().await.unwrap().entregues, 4);
        let mortas: i64 = sqlx::query_scalar(MORTAS).fetch_one(&db.pool).await.unwrap();
        assert_eq!(mortas, 0);
    }
}

nos_dois_bancos! {
    async fn destino_fora_do_ar_depois_volta_e_tudo_chega(db) {
        mensageria_core::migrar(&db.pool).await.unwrap();
        let servidor = Servidor::iniciar().await;
        servidor.responder(Resposta::Status(503, None));
        let mut ids = HashSet::new();
        for n in 0..20 {
            ids.insert(enfileirar(&db.pool, &aviso(n)).await.unwrap().to_string());
        }
        let relay = Relay::new(db.pool.clone(), config("emissor").com_max_tentativas(1000))
            .recurso(Destino::new(&servidor.url()).unwrap())
            .spawn()
            .unwrap();
        esperar_recebidas(&servidor, 20).await;
        // The circuit keeps a down destination from a retry storm: in 1 s of outage the relay
        // sends at most a few rounds, not one request per message per backoff step.
        let antes = servidor.recebidas().len();
        tokio::time::sleep(Duration::from_secs(1)).await;
        let durante = servidor.recebidas().len() - antes;
        assert!(durante <= 10, "{durante} requests in 1 s against a down destination");

        servidor.responder(Resposta::Ok);
        esperar_saida_vazia(&db.pool, 60).await;
        relay.shutdown(Duration::from_secs(5)).await;
        assert_eq!(servidor.aceitas_por_id().keys().cloned().collect::<HashSet<_>>(), ids);
        let mortas: i64 = sqlx::query_scalar(MORTAS).fetch_one(&db.pool).await.unwrap();
        assert_eq!(mortas, 0);
    }
}

nos_dois_bancos! {
    async fn retry_after_e_respeitado_e_tentativas_esgotadas_viram_mortas(db) {
        mensageria_core::migrar(&db.pool).await.unwrap();
        let servidor = Servidor::iniciar().await;
        servidor.responder(Resposta::Status(503, Some(2)));
        enfileirar(&db.pool, &aviso(1)).await.unwrap();
        let relay = Relay::new(db.pool.clone(), config("emissor").com_max_tentativas(2))
            .recurso(Destino::new(&servidor.url()).unwrap());
        let rodada = relay.rodada().await.unwrap();
        assert_eq!(rodada.reagendadas, 1);
        // Retry-After: 2 is a floor over the 20 ms backoff (database clock).
        let espera_ms = espera_armazenada_ms(&db.pool).await;
        assert!((1500.0..=2100.0).contains(&espera_ms), "next attempt in {espera_ms} ms");
        // Not due yet: a round claims nothing.
        assert_eq!(relay.rodada().await.unwrap().reivindicadas, 0);
        // Make it due; the second failure exhausts max_tentativas = 2.
        sqlx::query("UPDATE mensageria_saida SET proxima_tentativa_em = criada_em")
            .execute(&db.pool)
            .await
            .unwrap();
        assert_eq!(relay.rodada().await.unwrap().mortas, 1);
        let erro: String = sqlx::query_scalar("SELECT ultimo_erro FROM mensageria_mortas")
            .fetch_one(&db.pool)
            .await
            .unwrap();
        assert!(erro.contains("gave up after 2 attempts") && erro.contains("503"), "{erro}");
    }
}

nos_dois_bancos! {
    // A 429 is the destination's overload, not the message's failure (issue 36): retried after
    // its Retry-After without counting an attempt, so a rate limit never walks messages to the
    // dead letters.
    async fn um_429_espera_o_retry_after_sem_gastar_tentativa(db) {
        mensageria_core::migrar(&db.pool).await.unwrap();
        let servidor = Servidor::iniciar().await;
        servidor.responder(Resposta::Status(429, Some(2)));
        enfileirar(&db.pool, &aviso(1)).await.unwrap();
        let relay = Relay::new(db.pool.clone(), config("emissor").com_max_tentativas(1))
            .recurso(Destino::new(&servidor.url()).unwrap());
        for _ in 0..3 {
            let rodada = relay.rodada().await.unwrap();
            assert_eq!((rodada.reagendadas, rodada.mortas), (1, 0), "{rodada:?}");
            let espera_ms = espera_armazenada_ms(&db.pool).await;
            assert!((1500.0..=2100.0).contains(&espera_ms), "next attempt in {espera_ms} ms");
            sqlx::query("UPDATE mensageria_saida SET proxima_tentativa_em = criada_em")
                .execute(&db.pool)
                .await
                .unwrap();
        }
        let tentativas: i64 = sqlx::query_scalar("SELECT CAST(tentativas AS BIGINT) FROM mensageria_saida")
            .fetch_one(&db.pool)
            .await
            .unwrap();
        assert_eq!(tentativas, 0, "three 429s cost no attempt");
    }
}

nos_dois_bancos! {
    // The probe of an open circuit answered "overloaded" (429, a receptor's busy): the
    // destination answers, so the circuit closes and the backpressure takes over. Before, the
    // probe was never settled and the tipo was blocked for good (found by tests/rede.rs's
    // receptor-partition row: 278 of 300 events stuck 90 s after the heal).
    async fn sonda_respondida_com_sobrecarga_nao_prende_o_circuito(db) {
        mensageria_core::migrar(&db.pool).await.unwrap();
        let servidor = Servidor::iniciar().await;
        servidor.responder(Resposta::Status(503, None));
        for n in 0..20 {
            enfileirar(&db.pool, &aviso(n)).await.unwrap();
        }
        let relay = Relay::new(db.pool.clone(), config("emissor").com_max_tentativas(1000))
            .recurso(Destino::new(&servidor.url()).unwrap())
            .spawn()
            .unwrap();
        esperar_recebidas(&servidor, 20).await;
        // The circuit is open (20 failures); its next probe is refused for overload.
        servidor.responder(Resposta::Status(429, Some(1)));
        let antes = servidor.recebidas().len();
        esperar_recebidas(&servidor, antes + 1).await;
        servidor.responder(Resposta::Ok);
        esperar_saida_vazia(&db.pool, 20).await;
        relay.shutdown(Duration::from_secs(5)).await;
        assert_eq!(servidor.aceitas_por_id().len(), 20);
    }
}

nos_dois_bancos! {
    async fn lease_vencido_e_recuperado_cerca_o_ack_atrasado(db) {
        mensageria_core::migrar(&db.pool).await.unwrap();
        enfileirar(&db.pool, &aviso(1)).await.unwrap();
        let tipos = ["teste.aviso"];
        let pedido = |token, lease_ms| mensageria_core::teste::reivindicacao::Pedido { tipos: &tipos, pisos_ms: &[0], lote: 10, lease_ms, dono: "r", token, bloquear_apos_morta: true };
        // A lease of 1 s: the claim just after it must fall inside it even on a loaded machine
        // (50 ms failed with the suite running four tests at a time).
        let primeiro = mensageria_core::teste::reivindicacao::reivindicar(&db.pool, pedido(111, 1_000)).await.unwrap();
        assert_eq!(primeiro.len(), 1);
        // While the lease holds, nobody else can claim it.
        assert!(mensageria_core::teste::reivindicacao::reivindicar(&db.pool, pedido(222, 50)).await.unwrap().is_empty());
        tokio::time::sleep(Duration::from_millis(1_100)).await;
        let segundo = mensageria_core::teste::reivindicacao::reivindicar(&db.pool, pedido(333, 60_000)).await.unwrap();
        assert_eq!(segundo.len(), 1, "an expired lease is claimable again");
        assert_eq!(segundo[0].tentativas, 2);
        let id = primeiro[0].id;
        // The first relay's late answers change nothing.
        assert!(mensageria_core::teste::reivindicacao::confirmar_lote(&db.pool, &[(id, 111)]).await.unwrap().is_empty());
        assert!(!mensageria_core::teste::reivindicacao::reagendar(&db.pool, id, 111, 0, "late", true).await.unwrap());
        assert!(!mensageria_core::teste::reivindicacao::matar(&db.pool, id, 111, "late", "r").await.unwrap());
        let pendentes: i64 = sqlx::query_scalar(PENDENTES).fetch_one(&db.pool).await.unwrap();
        let mortas: i64 = sqlx::query_scalar(MORTAS).fetch_one(&db.pool).await.unwrap();
        assert_eq!((pendentes, mortas), (1, 0));
        // In one batch, each pair is fenced on its own: the stale token deletes nothing, the
        // owner's ack works.
        let apagadas = mensageria_core::teste::reivindicacao::confirmar_lote(&db.pool, &[(id, 111), (id, 333)]).await.unwrap();
        assert_eq!(apagadas, vec![id]);
    }
}

nos_dois_bancos! {
    async fn shutdown_no_meio_do_lote_devolve_os_leases(db) {
        mensageria_core::migrar(&db.pool).await.unwrap();
        let servidor = Servidor::iniciar().await;
        servidor.responder(Resposta::Demorar(Duration::from_secs(3)));
        for n in 0..8 {
            enfileirar(&db.pool, &aviso(n)).await.unwrap();
        }
        let relay = Relay::new(db.pool.clone(), config("emissor").com_concorrencia(4))
            .recurso(Destino::new(&servidor.url()).unwrap())
            .spawn()
            .unwrap();
        let pool = db.pool.clone();
        esperar_ate(Duration::from_secs(10), || {
            let pool = pool.clone();
            async move {
                sqlx::query_scalar::<_, i64>("SELECT count(*) FROM mensageria_saida WHERE lease_token IS NOT NULL")
                    .fetch_one(&pool)
                    .await
                    .unwrap()
                    == 4
            }
        })
        .await;
        relay.shutdown(Duration::from_millis(100)).await;

        let linhas: Vec<(i32, Option<i64>)> = sqlx::query_as("SELECT tentativas, lease_token FROM mensageria_saida")
            .fetch_all(&db.pool)
            .await
            .unwrap();
        assert_eq!(linhas.len(), 8, "nothing lost");
        assert!(linhas.iter().all(|(t, lease)| *t == 0 && lease.is_none()), "{linhas:?}");
        // Due at once: the next relay takes them all.
        servidor.responder(Resposta::Ok);
        let relay = Relay::new(db.pool.clone(), config("emissor")).recurso(Destino::new(&servidor.url()).unwrap());
        assert_eq!(relay.drenar().await.unwrap().entregues, 8);
    }
}

/// Two relays of one app (two pools, like two replicas), default mode then leader mode: every
/// message delivered exactly once while leases hold.
async fn duas_replicas(modo: Modo) {
    let db = PgIsolado::novo().await;
    mensageria_core::migrar(&db.pool).await.unwrap();
    let servidor = Servidor::iniciar().await;
    let mut ids = HashSet::new();
    for n in 0..300 {
        ids.insert(enfileirar(&db.pool, &aviso(n)).await.unwrap().to_string());
    }
    let replica = |pool| {
        Relay::new(
            pool,
            config("emissor")
                .com_lote(8)
                .com_concorrencia(8)
                .com_modo(modo),
        )
        .recurso(Destino::new(&servidor.url()).unwrap())
        .spawn()
        .unwrap()
    };
    let a = replica(db.pool.clone());
    let b = replica(db.outro_pool(4).await);
    esperar_saida_vazia(&db.pool, 60).await;
    a.shutdown(Duration::from_secs(5)).await;
    b.shutdown(Duration::from_secs(5)).await;
    let aceitas = servidor.aceitas_por_id();
    assert_eq!(aceitas.keys().cloned().collect::<HashSet<_>>(), ids);
    assert!(
        aceitas.values().all(|&n| n == 1),
        "a message was delivered twice while its lease held"
    );
    db.descartar().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn duas_replicas_reivindicam_disjunto() {
    duas_replicas(Modo::Todos).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn duas_replicas_em_modo_lider() {
    duas_replicas(Modo::Lider).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn conexao_derrubada_no_meio_nao_perde_nada() {
    let db = PgIsolado::novo().await;
    mensageria_core::migrar(&db.pool).await.unwrap();
    let servidor = Servidor::iniciar().await;
    servidor.responder(Resposta::Demorar(Duration::from_millis(5)));
    let nome = format!("relay-{}", db.schema);
    let opcoes = <sqlx::postgres::PgConnectOptions as std::str::FromStr>::from_str(
        &mensageria_testes::database_url(),
    )
    .unwrap()
    .options([("search_path", db.schema.as_str())])
    .application_name(&nome);
    let pool_relay = sqlx::postgres::PgPoolOptions::new()
        .max_connections(4)
        .connect_with(opcoes)
        .await
        .unwrap();
    let mut ids = HashSet::new();
    for n in 0..200 {
        ids.insert(enfileirar(&db.pool, &aviso(n)).await.unwrap().to_string());
    }
    let relay = Relay::new(
        pool_relay,
        config("emissor").com_lote(4).com_concorrencia(4),
    )
    .recurso(Destino::new(&servidor.url()).unwrap())
    .spawn()
    .unwrap();
    for _ in 0..5 {
        tokio::time::sleep(Duration::from_millis(60)).await;
        sqlx::query(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = $1",
        )
        .bind(&nome)
        .execute(&db.pool)
        .await
        .unwrap();
    }
    esperar_saida_vazia(&db.pool, 90).await;
    relay.shutdown(Duration::from_secs(5)).await;
    assert_eq!(
        servidor
            .aceitas_por_id()
            .keys()
            .cloned()
            .collect::<HashSet<_>>(),
        ids,
        "none lost"
    );
    db.descartar().await;
}

/// The plan trap: a claim planned while the table was empty must not stay Seq Scan + Sort once
/// the table is large. The claim is never prepared, so each call is planned with its real
/// parameters; this asserts the plan on a 300k-row table after claims ran on an empty one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plano_da_reivindicacao_segue_no_indice_com_300k_linhas() {
    let db = PgIsolado::novo().await;
    mensageria_core::migrar(&db.pool).await.unwrap();
    let tipos = ["teste.aviso"];
    for _ in 0..10 {
        let pedido = mensageria_core::teste::reivindicacao::Pedido {
            tipos: &tipos,
            pisos_ms: &[0],
            lote: 64,
            lease_ms: 1000,
            dono: "r",
            token: 1,
            bloquear_apos_morta: true,
        };
        mensageria_core::teste::reivindicacao::reivindicar(&db.pool, pedido)
            .await
            .unwrap();
    }
    sqlx::query(
        "INSERT INTO mensageria_saida (id_mensagem, tipo, payload) \
         SELECT gen_random_uuid(), CASE WHEN g % 3 = 0 THEN 'outro.app' ELSE 'teste.aviso' END, '{}' \
         FROM generate_series(1, 300000) g",
    )
    .execute(&db.pool)
    .await
    .unwrap();
    sqlx::query("ANALYZE mensageria_saida")
        .execute(&db.pool)
        .await
        .unwrap();
    let tipos_vec: Vec<String> = tipos.iter().map(|t| t.to_string()).collect();
    let plano: Vec<String> = sqlx::query_scalar(sqlx::AssertSqlSafe(format!(
        "EXPLAIN {}",
        mensageria_core::teste::reivindicacao::SQL_REIVINDICAR
    )))
    .persistent(false)
    .bind(&tipos_vec)
    .bind(64_i64)
    .bind(1000_i64)
    .bind("r")
    .bind(1_i64)
    .bind(vec![0_i64])
    .bind(true)
    .fetch_all(&db.pool)
    .await
    .unwrap();
    let plano = plano.join("\n");
    assert!(
        plano.contains("Index Scan using mensageria_saida_fila"),
        "{plano}"
    );
    assert!(!plano.contains("Seq Scan on mensageria_saida"), "{plano}");
    assert!(!plano.contains("Sort"), "{plano}");
    // And the claim itself works and takes only our tipo.
    let pedido = mensageria_core::teste::reivindicacao::Pedido {
        tipos: &tipos,
        pisos_ms: &[0],
        lote: 64,
        lease_ms: 1000,
        dono: "r",
        token: 2,
        bloquear_apos_morta: true,
    };
    let linhas = mensageria_core::teste::reivindicacao::reivindicar(&db.pool, pedido)
        .await
        .unwrap();
    assert_eq!(linhas.len(), 64);
    assert!(linhas.iter().all(|l| l.tipo == "teste.aviso"));
    db.descartar().await;
}

/// `mensageria_saida`'s sequential scans, index scans, updates and HOT updates so far, with this
/// connection's pending counts flushed first (PostgreSQL flushes a backend's statistics when it
/// goes idle, and `pg_stat_force_next_flush` makes that flush unconditional).
async fn contadores_da_saida(pool: &sqlx::PgPool) -> [i64; 4] {
    sqlx::query("SELECT pg_stat_force_next_flush()")
        .execute(pool)
        .await
        .unwrap();
    let (seq, idx, upd, hot) = sqlx::query_as(
        "SELECT coalesce(seq_scan, 0), coalesce(idx_scan, 0), n_tup_upd, n_tup_hot_upd \
         FROM pg_stat_user_tables WHERE relid = 'mensageria_saida'::regclass",
    )
    .persistent(false)
    .fetch_one(pool)
    .await
    .unwrap();
    [seq, idx, upd, hot]
}

/// The plan trap, for every statement the relay runs per message on PostgreSQL, and its
/// heartbeat. On a saída that
/// was analyzed while nearly empty, each statement runs eight times on one connection (a
/// prepared statement switches to its cached generic plan after five: a sequential scan, the
/// cheapest plan of a three-row table); then the backlog grows to 20,000 rows before any new
/// ANALYZE (autovacuum may take a minute to come). Run once more, each statement must still
/// probe an index: no sequential scan of the saída (the scan counts must move: the statistics
/// were read after the statement).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plano_generico_nenhum_comando_do_relay_varre_a_saida_que_cresceu() {
    use mensageria_core::teste::reivindicacao as r;
    let db = PgIsolado::novo().await;
    mensageria_core::migrar(&db.pool).await.unwrap();
    // One connection: the relay's statements and the statistics reads share its plan cache.
    let pool = db.outro_pool(1).await;
    let inserir = |n: i32| {
        sqlx::query(
            "INSERT INTO mensageria_saida (id_mensagem, tipo, payload) \
             SELECT gen_random_uuid(), 'teste.aviso', '{}' FROM generate_series(1, $1) g",
        )
        .bind(n)
    };
    inserir(3).execute(&pool).await.unwrap();
    sqlx::query("ANALYZE mensageria_saida")
        .execute(&pool)
        .await
        .unwrap();
    let tipos = ["teste.aviso"];
    let pedido = |token: i64| r::Pedido {
        tipos: &tipos,
        pisos_ms: &[0],
        lote: 1,
        lease_ms: 60_000,
        dono: "r",
        token,
        bloquear_apos_morta: true,
    };
    // Settlements fenced by a token no row holds: they find their row and change nothing.
    let fenced = [(1_i64, -1_i64), (2, -1)];
    let r::Posse::Tomada { marca, .. } = r::iniciar_instancia(&pool, "app@r", "app", 60_000)
        .await
        .unwrap()
    else {
        panic!("a new instance name is free");
    };
    for token in 1..=8 {
        r::reivindicar(&pool, pedido(token)).await.unwrap();
        r::confirmar_lote(&pool, &fenced).await.unwrap();
        r::renovar_leases(&pool, &fenced, 60_000).await.unwrap();
        r::reagendar(&pool, 1, -1, 1000, "x", true).await.unwrap();
        r::matar(&pool, 1, -1, "x", "app").await.unwrap();
        r::liberar(&pool, 1, -1).await.unwrap();
        r::bater_instancia(&pool, "app@r", "app", marca)
            .await
            .unwrap();
    }
    sqlx::query("UPDATE mensageria_saida SET proxima_tentativa_em = now(), lease_token = NULL")
        .execute(&pool)
        .await
        .unwrap();
    inserir(20_000).execute(&pool).await.unwrap();

    let mut varreram = Vec::new();
    for nome in [
        "reivindicar",
        "confirmar_lote",
        "renovar_leases",
        "reagendar",
        "matar",
        "liberar",
    ] {
        let [seq_antes, idx_antes, ..] = contadores_da_saida(&pool).await;
        match nome {
            "reivindicar" => assert_eq!(r::reivindicar(&pool, pedido(100)).await.unwrap().len(), 1),
            "confirmar_lote" => {
                assert!(r::confirmar_lote(&pool, &fenced).await.unwrap().is_empty())
            }
            "renovar_leases" => {
                assert_eq!(r::renovar_leases(&pool, &fenced, 60_000).await.unwrap(), 0)
            }
            "reagendar" => assert!(!r::reagendar(&pool, 1, -1, 1000, "x", true).await.unwrap()),
            "matar" => assert!(!r::matar(&pool, 1, -1, "x", "app").await.unwrap()),
            "liberar" => assert!(!r::liberar(&pool, 1, -1).await.unwrap()),
            _ => assert_eq!(
                r::bater_instancia(&pool, "app@r", "app", marca)
                    .await
                    .unwrap(),
                r::Batimento::Batido { recuperadas: 0 }
            ),
        }
        let [seq_depois, idx_depois, ..] = contadores_da_saida(&pool).await;
        // The heartbeat reads the saída only when a sibling died (here none did).
        assert!(
            nome == "bater_instancia" || idx_depois > idx_antes || seq_depois > seq_antes,
            "{nome}: the statistics did not move"
        );
        if seq_depois > seq_antes {
            varreram.push(nome);
        }
    }
    assert!(
        varreram.is_empty(),
        "statements that scanned the whole saída with a plan cached while it was small: {varreram:?}"
    );
    pool.close().await;
    db.descartar().await;
}

/// Issue 29: a claim writes no index entry (a HOT update), so draining a
/// backlog costs an insert, an update in place and a delete per row, not a new entry in every
/// index of the saída. A leased row stays due in the queue's index: the next claims skip it
/// while its lease runs and take it when the lease has ended.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reivindicar_e_renovar_nao_escrevem_entradas_de_indice() {
    use mensageria_core::teste::reivindicacao as r;
    let db = PgIsolado::novo().await;
    mensageria_core::migrar(&db.pool).await.unwrap();
    let pool = db.outro_pool(1).await;
    sqlx::query(
        "INSERT INTO mensageria_saida (id_mensagem, tipo, payload) \
         SELECT gen_random_uuid(), 'teste.aviso', json_build_object('n', g) \
         FROM generate_series(1, 300) g",
    )
    .execute(&pool)
    .await
    .unwrap();
    let tipos = ["teste.aviso"];
    let pedido = |token: i64, lease_ms: i64| r::Pedido {
        tipos: &tipos,
        pisos_ms: &[0],
        lote: 100,
        lease_ms,
        dono: "app@r",
        token,
        bloquear_apos_morta: true,
    };
    let [.., upd_antes, hot_antes] = contadores_da_saida(&pool).await;
    let mut pares = Vec::new();
    for token in 1..=3 {
        let linhas = r::reivindicar(&pool, pedido(token, 60_000)).await.unwrap();
        assert_eq!(linhas.len(), 100);
        pares.extend(linhas.iter().map(|l| (l.id, token)));
    }
    let [.., upd_depois, hot_depois] = contadores_da_saida(&pool).await;
    let (atualizadas, hot) = (upd_depois - upd_antes, hot_depois - hot_antes);
    assert_eq!(atualizadas, 300);
    assert!(
        hot * 4 >= atualizadas * 3,
        "{hot} of {atualizadas} claims were HOT: each of the others wrote an entry in every index of the saída"
    );
    // A renewal is HOT too when its page has room (once the claim's old versions are pruned,
    // which a transaction open elsewhere on the database can hold back): not asserted here.
    assert_eq!(r::renovar_leases(&pool, &pares, 60_000).await.unwrap(), 300);
    // Every row is due and leased: nothing to claim.
    assert!(
        r::reivindicar(&pool, pedido(4, 60_000))
            .await
            .unwrap()
            .is_empty()
    );
    // A lease that ended makes its row claimable again, where it was in the queue.
    assert_eq!(
        r::confirmar_lote(&pool, &pares[1..]).await.unwrap().len(),
        299
    );
    let curta = r::reivindicar(&pool, pedido(5, 60_000)).await.unwrap();
    assert!(curta.is_empty(), "the last row's lease still runs");
    assert_eq!(r::renovar_leases(&pool, &pares[..1], 1).await.unwrap(), 1);
    tokio::time::sleep(Duration::from_millis(50)).await;
    let de_novo = r::reivindicar(&pool, pedido(6, 60_000)).await.unwrap();
    assert_eq!(
        de_novo.iter().map(|l| l.id).collect::<Vec<_>>(),
        [pares[0].0]
    );
    assert_eq!(de_novo[0].tentativas, 2);
    pool.close().await;
    db.descartar().await;
}

#[tokio::test]
async fn relay_de_receptor_puro_e_no_op_e_desligado_nem_inicia() {
    // This binary has enviadores, so exercise the disabled switch here; the pure-receiver
    // case (no enviador) is covered in the `schema` test binary, which registers none.
    let db = mensageria_testes::SqliteIsolado::novo().await;
    mensageria_core::migrar(&db.pool).await.unwrap();
    let relay = Relay::new(db.pool.clone(), config("x").com_habilitado(false))
        .spawn()
        .unwrap();
    assert!(relay.is_finished());
    relay.shutdown(Duration::from_millis(10)).await;
}

/// The dead-rows trap: 100k delivered rows that vacuum has not cleared sit at the head of the
/// index. A claim from the keyset floor reads a handful of buffers; one from the start of the
/// index walks all of them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn piso_evita_caminhar_sobre_linhas_mortas() {
    let db = PgIsolado::novo().await;
    mensageria_core::migrar(&db.pool).await.unwrap();
    sqlx::query("ALTER TABLE mensageria_saida SET (autovacuum_enabled = false)")
        .execute(&db.pool)
        .await
        .unwrap();
    sqlx::query(
        "INSERT INTO mensageria_saida (id_mensagem, tipo, payload, proxima_tentativa_em) \
         SELECT gen_random_uuid(), 'teste.aviso', '{}', now() - interval '1 hour' FROM generate_series(1, 100000)",
    )
    .execute(&db.pool)
    .await
    .unwrap();
    sqlx::query("DELETE FROM mensageria_saida")
        .execute(&db.pool)
        .await
        .unwrap();
    for n in 0..200 {
        enfileirar(&db.pool, &aviso(n)).await.unwrap();
    }
    let buffers = |piso_ms: i64| {
        let pool = db.pool.clone();
        async move {
            let plano: Vec<String> = sqlx::query_scalar(sqlx::AssertSqlSafe(format!(
                "EXPLAIN (ANALYZE, BUFFERS, FORMAT TEXT) {}",
                mensageria_core::teste::reivindicacao::SQL_REIVINDICAR
            )))
            .persistent(false)
            .bind(vec!["teste.aviso".to_owned()])
            .bind(16_i64)
            .bind(60_000_i64)
            .bind("r")
            .bind(1_i64)
            .bind(vec![piso_ms])
            .bind(true)
            .fetch_all(&pool)
            .await
            .unwrap();
            // The first "Buffers:" line is the whole statement's.
            let linha = plano
                .iter()
                .find(|l| l.contains("Buffers:"))
                .cloned()
                .unwrap_or_default();
            linha
                .split_whitespace()
                .filter_map(|parte| parte.split('=').nth(1))
                .filter_map(|n| n.parse::<u64>().ok())
                .sum::<u64>()
        }
    };
    let agora_ms: i64 = sqlx::query_scalar("SELECT (extract(epoch FROM now()) * 1000)::int8")
        .fetch_one(&db.pool)
        .await
        .unwrap();
    let sem_piso = buffers(0).await;
    let com_piso = buffers(agora_ms - 60_000).await;
    assert!(
        com_piso * 5 < sem_piso,
        "floored claim read {com_piso} buffers, unfloored {sem_piso}"
    );
    db.descartar().await;
}

/// A sender whose transaction commits after a later one (its row is due earlier than the head
/// the relay saw) is below the floor for a while, and found by the next full scan: delayed,
/// never skipped.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn commit_fora_de_ordem_nao_e_pulado() {
    let db = PgIsolado::novo().await;
    mensageria_core::migrar(&db.pool).await.unwrap();
    let servidor = Servidor::iniciar().await;
    let mut atrasada = db.pool.begin().await.unwrap();
    let id_atrasada = enfileirar(&mut *atrasada, &aviso(1)).await.unwrap();
    tokio::time::sleep(Duration::from_millis(50)).await;
    enfileirar(&db.pool, &aviso(2)).await.unwrap();

    let relay = Relay::new(
        db.pool.clone(),
        config("emissor").com_piso(Duration::ZERO, Duration::from_millis(300)),
    )
    .recurso(Destino::new(&servidor.url()).unwrap());
    assert_eq!(relay.rodada().await.unwrap().entregues, 1);
    atrasada.commit().await.unwrap();
    // Committed now, but due before the floor: not seen by the floored claim...
    assert_eq!(relay.rodada().await.unwrap().reivindicadas, 0);
    // ...and found by the next full scan.
    tokio::time::sleep(Duration::from_millis(350)).await;
    assert_eq!(relay.rodada().await.unwrap().entregues, 1);
    assert!(
        servidor
            .aceitas_por_id()
            .contains_key(&id_atrasada.to_string())
    );
    db.descartar().await;
}

nos_dois_bancos! {
    /// The schedule lives on the database clock (so replicas and restarts agree on it): after
    /// the k-th failure the next attempt is `base · 2^(k−1)` capped, times a jitter in [½, 1].
    async fn backoff_dobra_com_jitter_e_para_no_teto(db) {
        mensageria_core::migrar(&db.pool).await.unwrap();
        let servidor = Servidor::iniciar().await;
        servidor.responder(Resposta::Status(503, None));
        enfileirar(&db.pool, &aviso(1)).await.unwrap();
        let relay = Relay::new(
            db.pool.clone(),
            config("emissor")
                .com_backoff(Duration::from_secs(1), Duration::from_secs(8))
                .com_circuito_limiar(100),
        )
        .recurso(Destino::new(&servidor.url()).unwrap());
        let mut vistos = Vec::new();
        for tentativa in 1..=6u32 {
            assert_eq!(relay.rodada().await.unwrap().reagendadas, 1, "attempt {tentativa}");
            let espera = espera_armazenada_ms(&db.pool).await;
            let bruto = (1000u64 << (tentativa - 1)).min(8000) as f64;
            assert!(
                (bruto * 0.5 - 100.0..=bruto + 50.0).contains(&espera),
                "after failure {tentativa}: next attempt in {espera} ms, expected within [{}, {bruto}]",
                bruto * 0.5
            );
            vistos.push(espera.round() as i64);
            // Not due yet, then made due for the next step.
            assert_eq!(relay.rodada().await.unwrap().reivindicadas, 0);
            sqlx::query("UPDATE mensageria_saida SET proxima_tentativa_em = criada_em")
                .execute(&db.pool)
                .await
                .unwrap();
        }
        let tentativas: i32 = sqlx::query_scalar("SELECT tentativas FROM mensageria_saida")
            .fetch_one(&db.pool)
            .await
            .unwrap();
        assert_eq!(tentativas, 6, "schedule seen: {vistos:?} ms");
        assert_eq!(servidor.recebidas().len(), 6);
    }
}

/// Two apps claiming one tipo on one schema: the second to start names the first in a warning,
/// and the registration table shows both (what `mensageria doctor` reads).
#[tokio::test(flavor = "current_thread")]
async fn dois_apps_no_mesmo_tipo_geram_aviso_com_os_dois_nomes() {
    let log = mensageria_testes::log::Captura::default();
    let _guarda = tracing::subscriber::set_default(log.assinante());
    let db = PgIsolado::novo().await;
    mensageria_core::migrar(&db.pool).await.unwrap();
    let primeiro = Relay::new(db.pool.clone(), config("faturamento"))
        .spawn()
        .unwrap();
    let pool = db.pool.clone();
    let registrados = |quantos: i64| {
        let pool = pool.clone();
        move || {
            let pool = pool.clone();
            async move {
                sqlx::query_scalar::<_, i64>("SELECT count(DISTINCT app) FROM mensageria_apps")
                    .fetch_one(&pool)
                    .await
                    .unwrap()
                    == quantos
            }
        }
    };
    esperar_ate(Duration::from_secs(10), registrados(1)).await;
    assert!(
        !log.texto().contains("competing consumers"),
        "{}",
        log.texto()
    );
    let segundo = Relay::new(db.pool.clone(), config("cobranca"))
        .spawn()
        .unwrap();
    esperar_ate(Duration::from_secs(10), registrados(2)).await;
    esperar_ate(Duration::from_secs(10), || {
        let texto = log.texto();
        async move { texto.contains("competing consumers") }
    })
    .await;
    let texto = log.texto();
    let aviso = texto
        .lines()
        .find(|l| l.contains("competing consumers"))
        .unwrap();
    assert!(aviso.contains("WARN"), "{aviso}");
    assert!(
        aviso.contains("cobranca")
            && aviso.contains("faturamento")
            && aviso.contains("teste.aviso"),
        "{aviso}"
    );
    let apps: Vec<(String, String)> =
        sqlx::query_as("SELECT app, tipo FROM mensageria_apps ORDER BY app, tipo")
            .fetch_all(&db.pool)
            .await
            .unwrap();
    assert!(
        apps.contains(&("cobranca".into(), "teste.aviso".into())),
        "{apps:?}"
    );
    assert!(
        apps.contains(&("faturamento".into(), "teste.aviso".into())),
        "{apps:?}"
    );
    primeiro.shutdown(Duration::from_secs(1)).await;
    segundo.shutdown(Duration::from_secs(1)).await;
    db.descartar().await;
}

/// Resources are found by type: a second `Destino` would silently send every tipo to it.
#[tokio::test]
async fn dois_recursos_do_mesmo_tipo_sao_um_erro_de_configuracao() {
    let db = mensageria_testes::SqliteIsolado::novo().await;
    mensageria_core::migrar(&db.pool).await.unwrap();
    let relay = Relay::new(db.pool.clone(), config("emissor"))
        .recurso(Destino::new("http://127.0.0.1:1/a").unwrap())
        .recurso(Destino::new("http://127.0.0.1:1/b").unwrap());
    let erro = relay.rodada().await.unwrap_err().to_string();
    assert!(
        erro.contains("two resources of type")
            && erro.contains("Destino")
            && erro.contains("newtype"),
        "{erro}"
    );
    let erro = relay.spawn().err().expect("spawn refuses").to_string();
    assert!(erro.contains("two resources of type"), "{erro}");
    db.descartar().await;
}

nos_dois_bancos! {
    /// Start in any order: a relay started before the schema's owner waits for it, then delivers
    /// what the owner's side enqueues once migrated.
    async fn relay_iniciado_antes_do_dono_entrega_depois_da_migracao(db) {
        let servidor = Servidor::iniciar().await;
        let relay = Relay::new(db.pool.clone(), config("emissor").com_espera_pelo_schema(Duration::from_secs(20)))
            .recurso(Destino::new(&servidor.url()).unwrap())
            .spawn()
            .unwrap();
        tokio::time::sleep(Duration::from_millis(500)).await;
        assert!(!relay.is_finished(), "the relay waits instead of ending");
        mensageria_core::migrar(&db.pool).await.unwrap();
        let id = enfileirar(&db.pool, &aviso(1)).await.unwrap();
        esperar_saida_vazia(&db.pool, 20).await;
        relay.shutdown(Duration::from_secs(5)).await;
        let aceitas = servidor.aceitas_por_id();
        assert_eq!(aceitas.keys().cloned().collect::<HashSet<_>>(), HashSet::from([id.to_string()]));
        let mortas: i64 = sqlx::query_scalar(MORTAS).fetch_one(&db.pool).await.unwrap();
        assert_eq!(mortas, 0);
    }
}

/// A database that goes silent (a partition: nothing flows, nothing is reset) makes a claim hang
/// until TCP gives up; the relay says so within seconds instead of after the pool's 30 s
/// acquire timeout, and says when it answers again.
#[tokio::test(flavor = "current_thread")]
async fn banco_mudo_aparece_no_log_em_segundos() {
    use mensageria_core::teste::{ModoProxy, ProxyDeFalhas};
    let log = mensageria_testes::log::Captura::default();
    let _guarda = tracing::subscriber::set_default(log.assinante());
    let db = PgIsolado::novo().await;
    mensageria_core::migrar(&db.pool).await.unwrap();
    let endereco = "127.0.0.1:5432".parse().unwrap();
    let proxy = ProxyDeFalhas::iniciar(endereco, 7).await.unwrap();
    let pool = db.pool_via(proxy.endereco(), 3).await;
    let relay = Relay::new(
        pool,
        config("mudo").com_intervalo(Duration::from_millis(50)),
    )
    .spawn()
    .unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    proxy.modo(ModoProxy::Buraco);
    let silencio = std::time::Instant::now();
    esperar_ate(Duration::from_secs(8), || {
        let texto = log.texto();
        async move { texto.contains("had no answer from the database") }
    })
    .await;
    let visto = silencio.elapsed();
    proxy.modo(ModoProxy::Passar);
    esperar_ate(Duration::from_secs(10), || {
        let texto = log.texto();
        async move { texto.contains("the slow claim answered") }
    })
    .await;
    relay.shutdown(Duration::from_secs(5)).await;
    println!("a silent database was in the relay's log {visto:?} after the partition");
    assert!(visto < Duration::from_secs(6), "seen after {visto:?}");
    let aviso = log
        .texto()
        .lines()
        .find(|l| l.contains("had no answer from the database"))
        .unwrap()
        .to_owned();
    assert!(aviso.contains("WARN"), "{aviso}");
    db.descartar().await;
}
