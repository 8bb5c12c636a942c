//! Opt-in LISTEN/NOTIFY: rows inserted by another process (here: plain SQL, which does not
//! touch this process's in-process wake-up) wake a relay whose poll interval is a minute.
//! Alone in its binary, so no other test's `enfileirar` wakes the relay by accident.

use std::time::Duration;

use mensageria_core::relay::{Config, Relay, notificacoes};
use mensageria_core::{ContextoEnvio, Destino, FalhaEnvio, enviador};
use mensageria_testes::servidor::Servidor;
use mensageria_testes::{PgIsolado, esperar_ate};
use serde::{Deserialize, Serialize};
use sqlx::PgPool;

#[derive(Debug, Serialize, Deserialize)]
struct Ping {
    n: u32,
}

#[enviador(tipo = "teste.ping")]
async fn enviar_ping(evento: Ping, ctx: &ContextoEnvio) -> Result<(), FalhaEnvio> {
    ctx.exigir::<Destino>()?.postar(&evento, ctx).await
}

/// What another process's enqueue looks like to this one: a committed insert, no wake-up.
async fn inserir_de_fora(pool: &PgPool, n: u32) {
    sqlx::query("INSERT INTO mensageria_saida (id_mensagem, tipo, payload) VALUES ($1, 'teste.ping', $2::json)")
        .bind(uuid::Uuid::now_v7())
        .bind(format!("{{\"n\":{n}}}"))
        .execute(pool)
        .await
        .unwrap();
}

async fn pendentes(pool: &PgPool) -> i64 {
    sqlx::query_scalar("SELECT count(*) FROM mensageria_saida")
        .fetch_one(pool)
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn notificacao_acorda_o_relay_e_sobrevive_a_conexao_derrubada() {
    let db = PgIsolado::novo().await;
    mensageria_core::migrar(&db.pool).await.unwrap();
    let servidor = Servidor::iniciar().await;
    let nome = format!("ouvinte-{}", db.schema);
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
    let relay = Relay::new(
        pool_relay,
        Config::new("ouvinte")
            .com_intervalo(Duration::from_secs(60))
            .com_notificacoes(true),
    )
    .recurso(Destino::new(&servidor.url()).unwrap())
    .spawn()
    .unwrap();
    let ouvindo = |pool: PgPool, nome: String| async move {
        sqlx::query_scalar::<_, i64>(
            "SELECT count(*) FROM pg_stat_activity WHERE application_name = $1 AND query LIKE 'LISTEN%'",
        )
        .bind(nome)
        .fetch_one(&pool)
        .await
        .unwrap()
            == 1
    };
    esperar_ate(Duration::from_secs(10), || {
        ouvindo(db.pool.clone(), nome.clone())
    })
    .await;

    // The listener wakes the relay once right after LISTEN (to catch rows inserted while it
    // was not listening); let that wake and its short re-looks pass before the control row.
    tokio::time::sleep(Duration::from_millis(500)).await;
    // Control: without the trigger nothing notifies, and a one-minute poll does not come.
    inserir_de_fora(&db.pool, 1).await;
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(
        pendentes(&db.pool).await,
        1,
        "no trigger: the row waits for the poll"
    );

    // With the trigger, the next insert wakes the relay, which takes both rows.
    notificacoes::instalar(&db.pool).await.unwrap();
    notificacoes::instalar(&db.pool).await.unwrap(); // idempotent
    inserir_de_fora(&db.pool, 2).await;
    let pool = db.pool.clone();
    esperar_ate(Duration::from_secs(5), || {
        let pool = pool.clone();
        async move { pendentes(&pool).await == 0 }
    })
    .await;
    assert_eq!(servidor.aceitas_por_id().len(), 2);

    // The listening connection dies: the relay listens again by itself.
    sqlx::query(
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = $1 AND query LIKE 'LISTEN%'",
    )
    .bind(&nome)
    .execute(&db.pool)
    .await
    .unwrap();
    tokio::time::sleep(Duration::from_millis(200)).await;
    esperar_ate(Duration::from_secs(10), || {
        ouvindo(db.pool.clone(), nome.clone())
    })
    .await;
    inserir_de_fora(&db.pool, 3).await;
    let pool = db.pool.clone();
    esperar_ate(Duration::from_secs(5), || {
        let pool = pool.clone();
        async move { pendentes(&pool).await == 0 }
    })
    .await;
    assert_eq!(servidor.aceitas_por_id().len(), 3);

    // Removed: inserts no longer notify (and no longer pay for it).
    notificacoes::remover(&db.pool).await.unwrap();
    notificacoes::remover(&db.pool).await.unwrap();
    let gatilhos: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM pg_trigger WHERE tgname = 'mensageria_saida_notificar'",
    )
    .fetch_one(&db.pool)
    .await
    .unwrap();
    assert_eq!(gatilhos, 0);
    relay.shutdown(Duration::from_secs(5)).await;
    db.descartar().await;
}
