//! A receiving app owns its dedup records (rule 16): two apps that receive one tipo on **one**
//! schema (PostgreSQL, or one SQLite file) each apply every event exactly once. Before schema
//! version 10 (SQLite 6) the records were keyed `(tipo, chave)` per schema and the two apps split
//! the events between them, silently (each answered `duplicate` for the keys the other had
//! applied). Also: convergent receptors the same way, and an upgrade from the old key with rows
//! in place keeps every old key deduplicated until `adotar_recebidas` gives them to their owner.
//!
//! One test binary holds one receptor per tipo and backend, so both apps run the same function
//! on the same effect table: an event applied once by each app counts 2 applications, and each
//! app's dedup records (written in the effect's transaction, at most one per app and key) say
//! that each applied it once.

use std::num::NonZeroU32;
use std::time::Duration;

use mensageria_axum::{Config, Rejeicao, receptor};
use mensageria_core::operacoes::{self, Recebida};
use mensageria_core::relay::{Config as ConfigRelay, Relay};
use mensageria_core::sqlx::{Encode, Executor, Postgres, Sqlite, Transaction, Type};
use mensageria_core::{ContextoEnvio, Destino, FalhaEnvio, enfileirar, enviador};
use mensageria_testes::{Sql, contar, e_postgres, esperar_saida_vazia, nos_dois_bancos};
use serde::{Deserialize, Serialize};

const TOKEN: &str = "identidade-token-0123456789";

#[derive(Debug, Clone, Serialize, Deserialize)]
struct Pedido {
    n: i64,
}

/// The first receiving app's destination and the second's.
struct Estoque(Destino);
struct Analise(Destino);

/// One enviador posting each event to both receiving apps (the guide's "one enviador, several
/// destinations").
#[enviador(tipo = "identidade.pedido")]
async fn enviar_pedido(evento: Pedido, ctx: &ContextoEnvio) -> Result<(), FalhaEnvio> {
    let (estoque, analise) = (ctx.exigir::<Estoque>()?, ctx.exigir::<Analise>()?);
    let (a, b) = tokio::join!(
        estoque.0.postar(&evento, ctx),
        analise.0.postar(&evento, ctx)
    );
    a.and(b)
}

const EFEITO: &str = "CREATE TABLE efeito (n BIGINT PRIMARY KEY, aplicacoes BIGINT NOT NULL)";

async fn aplicar<DB: Sql>(tx: &mut Transaction<'_, DB>, n: i64) -> Result<(), Rejeicao>
where
    for<'c> &'c mut DB::Connection: Executor<'c, Database = DB>,
    i64: for<'q> Encode<'q, DB> + Type<DB>,
{
    sqlx::query(
        "INSERT INTO efeito (n, aplicacoes) VALUES ($1, 1) \
         ON CONFLICT (n) DO UPDATE SET aplicacoes = efeito.aplicacoes + 1",
    )
    .bind(n)
    .execute(&mut **tx)
    .await?;
    Ok(())
}

#[receptor(tipo = "identidade.pedido", chave_natural = evento.n)]
async fn receber_pg(tx: &mut Transaction<'_, Postgres>, evento: Pedido) -> Result<(), Rejeicao> {
    aplicar(tx, evento.n).await
}

#[receptor(tipo = "identidade.pedido", chave_natural = evento.n)]
async fn receber_lite(tx: &mut Transaction<'_, Sqlite>, evento: Pedido) -> Result<(), Rejeicao> {
    aplicar(tx, evento.n).await
}

#[derive(Debug, Deserialize)]
struct Cadastro {
    entidade: String,
    versao: i64,
}

const CADASTRO: &str = "CREATE TABLE cadastro (entidade TEXT NOT NULL, versao BIGINT NOT NULL, \
     aplicacoes BIGINT NOT NULL, PRIMARY KEY (entidade, versao))";

async fn aplicar_cadastro<DB: Sql>(
    tx: &mut Transaction<'_, DB>,
    evento: Cadastro,
) -> Result<(), Rejeicao>
where
    for<'c> &'c mut DB::Connection: Executor<'c, Database = DB>,
    i64: for<'q> Encode<'q, DB> + Type<DB>,
    String: for<'q> Encode<'q, DB> + Type<DB>,
{
    sqlx::query(
        "INSERT INTO cadastro (entidade, versao, aplicacoes) VALUES ($1, $2, 1) \
         ON CONFLICT (entidade, versao) DO UPDATE SET aplicacoes = cadastro.aplicacoes + 1",
    )
    .bind(evento.entidade)
    .bind(evento.versao)
    .execute(&mut **tx)
    .await?;
    Ok(())
}

#[receptor(tipo = "identidade.cadastro", chave_natural = evento.entidade, versao = evento.versao)]
async fn cadastro_pg(tx: &mut Transaction<'_, Postgres>, evento: Cadastro) -> Result<(), Rejeicao> {
    aplicar_cadastro(tx, evento).await
}

#[receptor(tipo = "identidade.cadastro", chave_natural = evento.entidade, versao = evento.versao)]
async fn cadastro_lite(tx: &mut Transaction<'_, Sqlite>, evento: Cadastro) -> Result<(), Rejeicao> {
    aplicar_cadastro(tx, evento).await
}

/// Serves receiving app `app`'s router on a free port of 127.0.0.1; its base URL.
async fn servir<DB: mensageria_core::Banco>(pool: &sqlx::Pool<DB>, app: &str) -> String {
    let router = mensageria_axum::router(pool.clone(), Config::new(app, [TOKEN])).unwrap();
    let ouvinte = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let endereco = ouvinte.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(ouvinte, router).await });
    format!("http://{endereco}")
}

nos_dois_bancos! {
    /// One enviador posts 300 events to two receiving apps whose routers share one schema.
    async fn dois_apps_http_num_schema_aplicam_cada_evento_uma_vez(db) {
        mensageria_core::migrar(&db.pool).await.unwrap();
        sqlx::query(EFEITO).execute(&db.pool).await.unwrap();
        let (estoque, analise) = (servir(&db.pool, "estoque").await, servir(&db.pool, "analise").await);
        for n in 0..300 {
            let mut tx = db.pool.begin().await.unwrap();
            enfileirar(&mut *tx, &Pedido { n }).await.unwrap();
            tx.commit().await.unwrap();
        }
        let relay = Relay::new(
            db.pool.clone(),
            ConfigRelay::new("pedidos").com_intervalo(Duration::from_millis(50)),
        )
        .recurso(Estoque(Destino::new(&estoque).unwrap().com_token(TOKEN)))
        .recurso(Analise(Destino::new(&analise).unwrap().com_token(TOKEN)))
        .spawn()
        .unwrap();
        esperar_saida_vazia(&db.pool, 60).await;
        relay.shutdown(Duration::from_secs(5)).await;

        let duas_vezes = contar(&db.pool, "efeito WHERE aplicacoes = 2").await;
        let outras = contar(&db.pool, "efeito WHERE aplicacoes <> 2").await;
        let de_estoque = contar(&db.pool, "mensageria_recebidas WHERE app = 'estoque'").await;
        let de_analise = contar(&db.pool, "mensageria_recebidas WHERE app = 'analise'").await;
        println!(
            "300 events, 2 apps on one schema: {duas_vezes} applied by both, {outras} otherwise; \
             records estoque {de_estoque}, analise {de_analise}"
        );
        assert_eq!((duas_vezes, outras), (300, 0), "every event applied by each app");
        assert_eq!((de_estoque, de_analise), (300, 300), "each app keeps its own records");
        assert_eq!(contar(&db.pool, "mensageria_mortas").await, 0);
        // Each receiving app registered itself (status and doctor see pure receivers).
        let receptores = operacoes::receptores(&db.pool).await.unwrap();
        let apps: Vec<(&str, &str, &str)> = receptores
            .iter()
            .filter(|r| r.tipo == "identidade.pedido")
            .map(|r| (r.app.as_str(), r.tipo.as_str(), r.transporte.as_str()))
            .collect();
        assert_eq!(
            apps,
            [("analise", "identidade.pedido", "http"), ("estoque", "identidade.pedido", "http")]
        );
    }
}

nos_dois_bancos! {
    /// Convergent receptors of two apps on one schema: each applies every newer version once,
    /// and neither an older nor a repeated one.
    async fn dois_apps_convergentes_num_schema(db) {
        mensageria_core::migrar(&db.pool).await.unwrap();
        sqlx::query(CADASTRO).execute(&db.pool).await.unwrap();
        let cliente = reqwest::Client::new();
        let mut respostas = Vec::new();
        for app in ["cadastro", "auditoria"] {
            let base = servir(&db.pool, app).await;
            for versao in [1, 3, 2, 3] {
                let resposta = cliente
                    .post(format!("{base}/m2m/identidade.cadastro"))
                    .bearer_auth(TOKEN)
                    .header("content-type", "application/json")
                    .body(format!(r#"{{"entidade":"e1","versao":{versao}}}"#))
                    .send()
                    .await
                    .unwrap();
                assert_eq!(resposta.status(), 200);
                let corpo = resposta.text().await.unwrap();
                respostas.push((app, versao, corpo.contains("\"applied\"")));
            }
        }
        let aplicadas: Vec<(&str, i64)> = respostas
            .iter()
            .filter(|(_, _, aplicada)| *aplicada)
            .map(|(app, versao, _)| (*app, *versao))
            .collect();
        assert_eq!(aplicadas, [("cadastro", 1), ("cadastro", 3), ("auditoria", 1), ("auditoria", 3)]);
        let linhas: Vec<(i64, i64)> =
            sqlx::query_as("SELECT versao, aplicacoes FROM cadastro ORDER BY versao")
                .fetch_all(&db.pool)
                .await
                .unwrap();
        assert_eq!(linhas, [(1, 2), (3, 2)]);
        let versoes: Vec<(String, i64)> = sqlx::query_as(
            "SELECT app, versao FROM mensageria_recebidas \
             WHERE tipo = 'identidade.cadastro' ORDER BY app",
        )
        .fetch_all(&db.pool)
        .await
        .unwrap();
        assert_eq!(versoes, [("auditoria".to_owned(), 3), ("cadastro".to_owned(), 3)]);
    }
}

/// The migrations of `backend` up to `ultima`, from the crate's own files, in mensageria's own
/// migrations table: a schema as an older release left it.
async fn migrar_ate<DB>(pool: &sqlx::Pool<DB>, backend: &str, ultima: i64)
where
    DB: sqlx::Database,
    DB::Connection: sqlx::migrate::Migrate,
{
    let pasta = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../mensageria-core/migrations")
        .join(backend);
    let mut migrador = sqlx::migrate::Migrator::new(pasta).await.unwrap();
    migrador.dangerous_set_table_name(mensageria_core::banco::TABELA_MIGRACOES);
    migrador.migrations = migrador
        .migrations
        .iter()
        .filter(|m| m.version <= ultima)
        .cloned()
        .collect::<Vec<_>>()
        .into();
    let mut conexao = pool.acquire().await.unwrap();
    migrador
        .run_direct(None, &mut *conexao, false)
        .await
        .unwrap();
}

fn recebida<'a>(app: &'a str, chave: &'a str) -> Recebida<'a> {
    Recebida {
        app,
        tipo: "identidade.pedido",
        chave,
        id_mensagem: None,
        versao: None,
    }
}

/// Whether `app`'s receptor would apply `chave` now (rolled back: nothing is kept).
async fn aplicaria<DB: mensageria_core::Banco>(
    pool: &sqlx::Pool<DB>,
    app: &str,
    chave: &str,
) -> bool {
    let mut tx = pool.begin().await.unwrap();
    let nova = operacoes::registrar_recebida::<DB>(&mut *tx, recebida(app, chave))
        .await
        .unwrap();
    tx.rollback().await.unwrap();
    nova
}

nos_dois_bancos! {
    /// An upgrade from the `(tipo, chave)` key with 1,000 rows in place: no old key is applied
    /// again by any app; `adotar_recebidas` gives them to their owner, after which another app
    /// applies them as its own first arrivals.
    async fn atualizar_com_registros_antigos_mantem_cada_chave(db) {
        let (backend, antes) = if e_postgres(&db.pool) { ("postgres", 7) } else { ("sqlite", 5) };
        migrar_ate(&db.pool, backend, antes).await;
        for n in 0..1000 {
            sqlx::query("INSERT INTO mensageria_recebidas (tipo, chave) VALUES ($1, $2)")
                .bind("identidade.pedido")
                .bind(format!("[{n}]"))
                .execute(&db.pool)
                .await
                .unwrap();
        }
        mensageria_core::migrar(&db.pool).await.unwrap();
        let versao = mensageria_core::verificar_schema(&db.pool).await.unwrap();
        assert_eq!(versao.aplicada, versao.esperada);
        assert_eq!(contar(&db.pool, "mensageria_recebidas WHERE app = ''").await, 1000);

        // Until adopted, an unowned record is every app's: no old key applies again.
        for app in ["estoque", "analise"] {
            assert!(!aplicaria(&db.pool, app, "[7]").await, "{app}: old key is a duplicate");
            assert!(aplicaria(&db.pool, app, "[1000]").await, "{app}: a new key applies");
        }

        let lote = NonZeroU32::new(300).unwrap();
        let adotadas = operacoes::adotar_recebidas(&db.pool, &["estoque"], None, lote).await.unwrap();
        assert_eq!(adotadas, 1000);
        assert_eq!(contar(&db.pool, "mensageria_recebidas WHERE app = ''").await, 0);
        assert_eq!(contar(&db.pool, "mensageria_recebidas WHERE app = 'estoque'").await, 1000);
        assert!(!aplicaria(&db.pool, "estoque", "[7]").await, "estoque keeps its old keys");
        assert!(aplicaria(&db.pool, "analise", "[7]").await, "analise never had it");
        let por_app = operacoes::recebidas_por_app(&db.pool).await.unwrap();
        assert_eq!(por_app.len(), 1);
        assert_eq!((por_app[0].app.as_str(), por_app[0].registros), ("estoque", 1000));
        // Naming no app adopts nothing.
        assert!(operacoes::adotar_recebidas(&db.pool, &[], None, lote).await.is_err());
    }
}
