//! Schema ownership: `migrar` for the owner, `verificar_schema` for everybody else.

use std::time::{Duration, Instant};

use mensageria_core::{Erro, esperar_schema, migrar, verificar_schema};
use mensageria_testes::{PgIsolado, nos_dois_bancos};

nos_dois_bancos! {
    async fn migrar_duas_vezes_e_no_op(db) {
        migrar(&db.pool).await.unwrap();
        sqlx::query("INSERT INTO mensageria_apps (app, tipo) VALUES ('a', 'b')")
            .execute(&db.pool)
            .await
            .unwrap();
        migrar(&db.pool).await.unwrap();
        let apps: i64 = sqlx::query_scalar("SELECT count(*) FROM mensageria_apps")
            .fetch_one(&db.pool)
            .await
            .unwrap();
        assert_eq!(apps, 1, "a second migrar keeps the data");
        let versao = verificar_schema(&db.pool).await.unwrap();
        assert_eq!(versao.aplicada, versao.esperada);
        // Our own migrations table, never the application's.
        let nossas: i64 = sqlx::query_scalar("SELECT count(*) FROM _mensageria_migrations")
            .fetch_one(&db.pool)
            .await
            .unwrap();
        assert_eq!(nossas, versao.esperada);
        assert!(sqlx::query("SELECT 1 FROM _sqlx_migrations").fetch_all(&db.pool).await.is_err());
    }
}

nos_dois_bancos! {
    async fn nao_dono_em_schema_vazio_recebe_erro_claro_e_nada_muda(db) {
        let erro = verificar_schema(&db.pool).await.unwrap_err();
        assert!(matches!(erro, Erro::SchemaAusente { .. }), "{erro:?}");
        let mensagem = erro.to_string();
        assert!(mensagem.contains("migrar"), "{mensagem}");
        assert!(mensagem.contains("owns"), "{mensagem}");
        // Checking created nothing.
        assert!(
            sqlx::query("SELECT 1 FROM mensageria_saida").fetch_all(&db.pool).await.is_err(),
            "verificar_schema must never migrate"
        );
    }
}

nos_dois_bancos! {
    async fn schema_mais_velho_que_o_build_e_recusado(db) {
        migrar(&db.pool).await.unwrap();
        // This build's newest version on this backend (PostgreSQL has two more than SQLite).
        let ultima = mensageria_core::operacoes::versao_aplicada(&db.pool).await.unwrap().unwrap();
        assert!(ultima >= 5, "{ultima}");
        // Pretend the database stopped at versions before this build's newest one.
        sqlx::query("UPDATE _mensageria_migrations SET version = version - 1000")
            .execute(&db.pool)
            .await
            .unwrap();
        match verificar_schema(&db.pool).await.unwrap_err() {
            Erro::SchemaDesatualizado { aplicada, esperada } => assert_eq!((aplicada, esperada), (ultima - 1000, ultima)),
            outro => panic!("expected SchemaDesatualizado, got {outro:?}"),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dois_donos_migrando_ao_mesmo_tempo_nao_colidem() {
    let db = PgIsolado::novo().await;
    let outro = db.outro_pool(2).await;
    let (a, b) = tokio::join!(migrar(&db.pool), migrar(&outro));
    a.unwrap();
    b.unwrap();
    verificar_schema(&outro).await.unwrap();
    outro.close().await;
    db.descartar().await;
}

/// This binary registers no enviador: it is a pure receiver, and its relay is a harmless no-op
/// that leaves every row of the shared saída alone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn relay_de_receptor_puro_nao_toca_em_nada() {
    use mensageria_core::relay::{Config, Relay};
    let db = mensageria_testes::SqliteIsolado::novo().await;
    migrar(&db.pool).await.unwrap();
    sqlx::query(
        "INSERT INTO mensageria_saida (id_mensagem, tipo, payload) VALUES ('x', 'de.outro', '{}')",
    )
    .execute(&db.pool)
    .await
    .unwrap();
    let relay = Relay::new(db.pool.clone(), Config::new("fiscal"));
    assert_eq!(relay.drenar().await.unwrap().reivindicadas, 0);
    let handle = relay.spawn().unwrap();
    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    assert!(!handle.is_finished(), "idles instead of exiting");
    handle.shutdown(std::time::Duration::from_secs(1)).await;
    let (tentativas, lease): (i32, Option<i64>) =
        sqlx::query_as("SELECT tentativas, lease_token FROM mensageria_saida")
            .fetch_one(&db.pool)
            .await
            .unwrap();
    assert_eq!((tentativas, lease), (0, None));
}

nos_dois_bancos! {
    /// Start in any order: the non-owner waits, the owner migrates 500 ms later, the wait ends
    /// soon after (it polls at 100 ms doubling up to 2 s), long before its deadline.
    async fn nao_dono_espera_o_dono_migrar(db) {
        let dono = db.pool.clone();
        let migracao = tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(500)).await;
            migrar(&dono).await.unwrap();
        });
        let inicio = Instant::now();
        let versao = esperar_schema(&db.pool, Duration::from_secs(20)).await.unwrap();
        let esperou = inicio.elapsed();
        migracao.await.unwrap();
        assert_eq!(versao.aplicada, versao.esperada);
        assert!(esperou >= Duration::from_millis(500), "returned before the owner migrated: {esperou:?}");
        assert!(esperou < Duration::from_secs(3), "took {esperou:?} for a schema ready after 500 ms");
    }
}

nos_dois_bancos! {
    /// No owner: the wait is bounded and ends with the error that says what to do.
    async fn sem_dono_a_espera_termina_no_prazo_com_schema_ausente(db) {
        let inicio = Instant::now();
        let erro = esperar_schema(&db.pool, Duration::from_millis(300)).await.unwrap_err();
        let esperou = inicio.elapsed();
        assert!(matches!(erro, Erro::SchemaAusente { .. }), "{erro:?}");
        assert!(format!("{erro:?}").contains("migrar"), "{erro:?}");
        assert!(esperou >= Duration::from_millis(300), "gave up early: {esperou:?}");
        assert!(esperou < Duration::from_secs(2), "overran its deadline: {esperou:?}");
        assert!(
            sqlx::query("SELECT 1 FROM mensageria_saida").fetch_all(&db.pool).await.is_err(),
            "waiting must never migrate"
        );
    }
}

nos_dois_bancos! {
    /// A schema already in place: no wait at all.
    async fn schema_pronto_nao_espera(db) {
        migrar(&db.pool).await.unwrap();
        let inicio = Instant::now();
        esperar_schema(&db.pool, Duration::from_secs(20)).await.unwrap();
        assert!(inicio.elapsed() < Duration::from_millis(500), "{:?}", inicio.elapsed());
    }
}

/// `migrar` on a connection whose `search_path` names a schema that does not exist: PostgreSQL
/// itself says "no schema has been selected to create in", which names neither the schema nor
/// the fix. mensageria checks first and says both; nothing is created anywhere.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn migrar_num_schema_que_nao_existe_diz_como_cria_lo() {
    use std::str::FromStr as _;
    let ausente = format!("mensageria_ausente_{}", uuid::Uuid::now_v7().simple());
    let opcoes = sqlx::postgres::PgConnectOptions::from_str(&mensageria_testes::database_url())
        .unwrap()
        .options([("search_path", ausente.as_str())]);
    let pool = sqlx::postgres::PgPoolOptions::new()
        .max_connections(1)
        .connect_with(opcoes)
        .await
        .unwrap();
    let erro = migrar(&pool).await.unwrap_err();
    let texto = erro.to_string();
    assert!(matches!(erro, Erro::SchemaInexistente { .. }), "{erro:?}");
    assert!(texto.contains(&ausente), "{texto}");
    assert!(
        texto.contains(&format!("CREATE SCHEMA {ausente}")),
        "{texto}"
    );
    pool.close().await;
}

/// The migrations table is created with `IF NOT EXISTS`, and PostgreSQL answers every start
/// after the first with a NOTICE that sqlx logs at INFO (`relation "_mensageria_migrations"
/// already exists, skipping`): noise in every app's start-up log. `migrar` logs nothing.
#[tokio::test(flavor = "current_thread")]
async fn migrar_de_novo_nao_loga_o_aviso_do_postgres() {
    let db = PgIsolado::novo().await;
    migrar(&db.pool).await.unwrap();
    let captura = mensageria_testes::log::Captura::default();
    {
        let _assinante = tracing::subscriber::set_default(captura.assinante());
        migrar(&db.pool).await.unwrap();
        migrar(&db.pool).await.unwrap();
    }
    let logado = captura.texto();
    assert!(!logado.contains("already exists"), "{logado}");
    assert!(!logado.contains("sqlx::postgres::notice"), "{logado}");
    // The connection the migrations ran on went back to the pool with the server's default.
    let nivel: String = sqlx::query_scalar("SHOW client_min_messages")
        .fetch_one(&db.pool)
        .await
        .unwrap();
    assert_eq!(nivel, "notice");
    db.descartar().await;
}

/// Whether a schema of this name exists on the test server.
async fn schema_existe(nome: &str) -> bool {
    let pool = sqlx::PgPool::connect(&mensageria_testes::database_url())
        .await
        .unwrap();
    let existe: bool =
        sqlx::query_scalar("SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = $1)")
            .bind(nome)
            .fetch_one(&pool)
            .await
            .unwrap();
    pool.close().await;
    existe
}

/// A test that fails its assertion never reaches `descartar`: its schema goes away anyway (the
/// isolated schema drops itself, on a connection of its own, when it is dropped unclosed).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pg_isolado_de_um_teste_que_falha_nao_fica_para_tras() {
    let (enviar, receber) = std::sync::mpsc::channel();
    let teste = std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async move {
            let db = PgIsolado::novo().await;
            migrar(&db.pool).await.unwrap();
            enviar.send(db.schema.clone()).unwrap();
            assert_eq!(1 + 1, 3, "a test's failing assertion");
            db.descartar().await;
        });
    })
    .join();
    assert!(teste.is_err(), "the test thread panicked");
    let schema = receber.recv().unwrap();
    assert!(!schema_existe(&schema).await, "{schema} was left behind");
}

/// A test process killed outright (SIGKILL, a CI timeout) runs no destructor: the next isolated
/// schema created sweeps the test schemas older than six hours (their names carry their
/// creation time, a UUIDv7), and leaves younger ones (tests running now) alone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn schemas_de_teste_velhos_sao_varridos() {
    use uuid::{NoContext, Timestamp, Uuid};
    let agora = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let nome = |segundos_atras: u64| {
        let id = Uuid::new_v7(Timestamp::from_unix(NoContext, agora - segundos_atras, 0));
        format!("mensageria_teste_{}", id.simple())
    };
    let velho = nome(7 * 3600);
    let recente = nome(600);
    let pool = sqlx::PgPool::connect(&mensageria_testes::database_url())
        .await
        .unwrap();
    for schema in [&velho, &recente] {
        sqlx::query(sqlx::AssertSqlSafe(format!("CREATE SCHEMA {schema}")))
            .execute(&pool)
            .await
            .unwrap();
    }
    let db = PgIsolado::novo().await;
    assert!(
        !schema_existe(&velho).await,
        "{velho} (7 h old) was not swept"
    );
    assert!(
        schema_existe(&recente).await,
        "{recente} (10 min old) was swept"
    );
    sqlx::query(sqlx::AssertSqlSafe(format!("DROP SCHEMA {recente}")))
        .execute(&pool)
        .await
        .unwrap();
    pool.close().await;
    db.descartar().await;
}
