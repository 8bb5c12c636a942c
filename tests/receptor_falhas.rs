//! The receptor when things go wrong, over real HTTP on 127.0.0.1, on PostgreSQL and SQLite.
//!
//! Every test ends by reading the effect table and `mensageria_recebidas`, not only statuses:
//!
//! - convergent mode (`versao`): a newer version is applied, an equal or older one is a
//!   duplicate, and a failed newer version leaves the stored version where it was;
//! - a panic in the receptor answers 500, rolls back effect and dedup record, leaks no connection
//!   or lock, and a redelivery once the cause is gone is applied exactly once;
//! - a temporary failure (`Rejeicao::temporaria`, `temporaria_apos`, a SQL error through `?`)
//!   answers 503 (with `Retry-After` when asked), a permanent one 422, both roll back, and the
//!   redelivery applies once;
//! - bad input (deep nesting, invalid UTF-8, empty, wrong shape) is a JSON 400 that writes
//!   nothing, and a hostile `x-request-id` is replaced by a fresh UUID;
//! - hostile strings in key parts (SQL, quotes, separators, invisible and composed Unicode) are
//!   stored verbatim and deduplicated exactly;
//! - one natural key under two tipos is two events;
//! - 50 concurrent copies of one event apply it once; 50 concurrent versions converge on the
//!   newest;
//! - a missing or wrong token is a 401 that writes nothing, and two configured tokens both work.
//!
//! The effect records `(receptor, chave, dado)` in `efeito`, then obeys the `controle` row of the
//! event, if any: failures always come after the effect and the dedup record were written, so
//! they must roll both back.

use std::time::Duration;

use mensageria_axum::{Config, Rejeicao, receptor};
use mensageria_core::Banco;
use mensageria_core::sqlx::{Encode, Executor, FromRow, Pool, Postgres, Sqlite, Transaction, Type};
use mensageria_testes::{Sql, contar, e_postgres, nos_dois_bancos};
use reqwest::header::HeaderValue;
use serde::Deserialize;
use serde_json::{Value, json};

const TOKEN: &str = "t0k-de-teste-1234";

#[derive(Deserialize)]
struct Simples {
    id: String,
}

#[derive(Deserialize)]
struct Versionado {
    entidade: String,
    versao: i64,
}

#[derive(Deserialize)]
struct Par {
    a: String,
    b: String,
}

/// The effect, written once for both backends: one row in `efeito`, then whatever the
/// `controle` row of `id` says.
async fn aplicar<DB: Sql>(
    tx: &mut Transaction<'_, DB>,
    receptor: &str,
    id: &str,
    chave: &str,
    dado: &str,
) -> Result<(), Rejeicao>
where
    for<'c> &'c mut DB::Connection: Executor<'c, Database = DB>,
    for<'q> &'q str: Encode<'q, DB> + Type<DB>,
    (String,): for<'r> FromRow<'r, DB::Row>,
{
    sqlx::query("INSERT INTO efeito (receptor, chave, dado) VALUES ($1, $2, $3)")
        .bind(receptor)
        .bind(chave)
        .bind(dado)
        .execute(&mut **tx)
        .await?;
    let modo: Option<String> = sqlx::query_scalar("SELECT modo FROM controle WHERE id = $1")
        .bind(id)
        .fetch_optional(&mut **tx)
        .await?;
    match modo.as_deref() {
        None => {}
        Some("panico") => panic!("receptor panicking on purpose"),
        Some("falhar") => return Err(Rejeicao::temporaria("downstream unavailable")),
        Some("falhar-apos") => {
            return Err(Rejeicao::temporaria_apos(
                "downstream busy",
                Duration::from_secs(7),
            ));
        }
        Some("falhar-ms") => {
            return Err(Rejeicao::temporaria_apos(
                "downstream busy",
                Duration::from_millis(250),
            ));
        }
        Some("recusar") => return Err(Rejeicao::permanente("refused by the domain")),
        Some("sql-invalido") => {
            sqlx::query("SELECT coluna_que_nao_existe FROM efeito")
                .execute(&mut **tx)
                .await?;
        }
        Some("lento") => tokio::time::sleep(Duration::from_millis(200)).await,
        Some(outro) => panic!("unknown control mode {outro}"),
    }
    Ok(())
}

#[receptor(tipo = "falhas.simples", chave_natural = evento.id)]
async fn simples_pg(tx: &mut Transaction<'_, Postgres>, evento: Simples) -> Result<(), Rejeicao> {
    aplicar(tx, "simples", &evento.id, &evento.id, "").await
}

#[receptor(tipo = "falhas.simples-lite", chave_natural = evento.id)]
async fn simples_lite(tx: &mut Transaction<'_, Sqlite>, evento: Simples) -> Result<(), Rejeicao> {
    aplicar(tx, "simples", &evento.id, &evento.id, "").await
}

#[receptor(tipo = "falhas.gemeo", chave_natural = evento.id)]
async fn gemeo_pg(tx: &mut Transaction<'_, Postgres>, evento: Simples) -> Result<(), Rejeicao> {
    aplicar(tx, "gemeo", &evento.id, &evento.id, "").await
}

#[receptor(tipo = "falhas.gemeo-lite", chave_natural = evento.id)]
async fn gemeo_lite(tx: &mut Transaction<'_, Sqlite>, evento: Simples) -> Result<(), Rejeicao> {
    aplicar(tx, "gemeo", &evento.id, &evento.id, "").await
}

#[receptor(tipo = "falhas.par", chave_natural = (evento.a, evento.b))]
async fn par_pg(tx: &mut Transaction<'_, Postgres>, evento: Par) -> Result<(), Rejeicao> {
    aplicar(tx, "par", &evento.a, &evento.a, &evento.b).await
}

#[receptor(tipo = "falhas.par-lite", chave_natural = (evento.a, evento.b))]
async fn par_lite(tx: &mut Transaction<'_, Sqlite>, evento: Par) -> Result<(), Rejeicao> {
    aplicar(tx, "par", &evento.a, &evento.a, &evento.b).await
}

#[receptor(tipo = "falhas.convergente", chave_natural = evento.entidade, versao = evento.versao)]
async fn convergente_pg(
    tx: &mut Transaction<'_, Postgres>,
    evento: Versionado,
) -> Result<(), Rejeicao> {
    let dado = format!("v{}", evento.versao);
    aplicar(tx, "convergente", &evento.entidade, &evento.entidade, &dado).await
}

#[receptor(
    tipo = "falhas.convergente-lite",
    chave_natural = evento.entidade,
    versao = evento.versao
)]
async fn convergente_lite(
    tx: &mut Transaction<'_, Sqlite>,
    evento: Versionado,
) -> Result<(), Rejeicao> {
    let dado = format!("v{}", evento.versao);
    aplicar(tx, "convergente", &evento.entidade, &evento.entidade, &dado).await
}

/// Migrates `pool` and creates the effect and control tables.
async fn preparar<DB: Sql + Banco>(pool: &Pool<DB>)
where
    for<'c> &'c mut DB::Connection: Executor<'c, Database = DB>,
{
    mensageria_core::migrar(pool).await.unwrap();
    for ddl in [
        "CREATE TABLE efeito (receptor TEXT NOT NULL, chave TEXT NOT NULL, dado TEXT NOT NULL)",
        "CREATE TABLE controle (id TEXT PRIMARY KEY, modo TEXT NOT NULL)",
    ] {
        sqlx::query(ddl).execute(pool).await.unwrap();
    }
}

/// The effect of `id` now does `modo`; `None`: it succeeds again (the cause is fixed).
async fn controlar<DB: Sql>(pool: &Pool<DB>, id: &str, modo: Option<&str>)
where
    for<'c> &'c mut DB::Connection: Executor<'c, Database = DB>,
    for<'q> &'q str: Encode<'q, DB> + Type<DB>,
{
    let consulta = match modo {
        None => sqlx::query("DELETE FROM controle WHERE id = $1").bind(id),
        Some(modo) => sqlx::query(
            "INSERT INTO controle (id, modo) VALUES ($1, $2) \
             ON CONFLICT (id) DO UPDATE SET modo = excluded.modo",
        )
        .bind(id)
        .bind(modo),
    };
    consulta.execute(pool).await.unwrap();
}

/// `(chave, dado)` of every effect row of `receptor`, sorted (in Rust: collations differ).
async fn efeitos<DB: Sql>(pool: &Pool<DB>, receptor: &str) -> Vec<(String, String)>
where
    for<'c> &'c mut DB::Connection: Executor<'c, Database = DB>,
    for<'q> &'q str: Encode<'q, DB> + Type<DB>,
    (String, String): for<'r> FromRow<'r, DB::Row>,
{
    let mut linhas: Vec<(String, String)> =
        sqlx::query_as("SELECT chave, dado FROM efeito WHERE receptor = $1")
            .bind(receptor)
            .fetch_all(pool)
            .await
            .unwrap();
    linhas.sort();
    linhas
}

/// `(chave, versao)` of every dedup record of `tipo`, sorted.
async fn recebidas<DB: Sql>(pool: &Pool<DB>, tipo: &str) -> Vec<(String, Option<i64>)>
where
    for<'c> &'c mut DB::Connection: Executor<'c, Database = DB>,
    for<'q> &'q str: Encode<'q, DB> + Type<DB>,
    (String, Option<i64>): for<'r> FromRow<'r, DB::Row>,
{
    let mut linhas: Vec<(String, Option<i64>)> =
        sqlx::query_as("SELECT chave, versao FROM mensageria_recebidas WHERE tipo = $1")
            .bind(tipo)
            .fetch_all(pool)
            .await
            .unwrap();
    linhas.sort();
    linhas
}

/// The tipo of receptor `base` on this backend (`-lite` on SQLite: a tipo registers once).
fn tipo_em<P>(pool: &P, base: &str) -> String {
    if e_postgres(pool) {
        format!("falhas.{base}")
    } else {
        format!("falhas.{base}-lite")
    }
}

/// Owned `(chave, dado)` rows, as [`efeitos`] returns them.
fn linhas(pares: &[(&str, &str)]) -> Vec<(String, String)> {
    pares
        .iter()
        .map(|(chave, dado)| ((*chave).to_owned(), (*dado).to_owned()))
        .collect()
}

/// The stored dedup key of these parts: the JSON array of them.
fn chave(partes: &[&str]) -> String {
    serde_json::to_string(partes).unwrap()
}

/// A router on the test's pool, served on a free port of 127.0.0.1.
struct Servidor {
    endereco: std::net::SocketAddr,
    base: String,
    http: reqwest::Client,
}

async fn servir<DB: mensageria_core::Banco>(
    pool: mensageria_core::sqlx::Pool<DB>,
    config: Config,
) -> Servidor {
    let app = mensageria_axum::router(pool, config).unwrap();
    let ouvinte = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let endereco = ouvinte.local_addr().unwrap();
    tokio::spawn(async move {
        let _ = axum::serve(ouvinte, app).await;
    });
    let http = reqwest::Client::builder()
        .timeout(Duration::from_secs(60))
        .build()
        .unwrap();
    Servidor {
        endereco,
        base: format!("http://{endereco}"),
        http,
    }
}

impl Servidor {
    /// A JSON POST to the receptor of `tipo`, without a token.
    fn sem_token(&self, tipo: &str) -> reqwest::RequestBuilder {
        self.http
            .post(format!("{}/m2m/{tipo}", self.base))
            .header("content-type", "application/json")
    }

    /// A JSON POST to the receptor of `tipo`, with the token.
    fn pedido(&self, tipo: &str) -> reqwest::RequestBuilder {
        self.sem_token(tipo).bearer_auth(TOKEN)
    }

    /// Sends, without a token, only the head of a POST announcing a 2 MiB body, and returns
    /// the status line of the answer: an answer that waited for the body would never come.
    async fn so_a_cabeca(&self, tipo: &str) -> String {
        mensageria_testes::so_a_cabeca(self.endereco, &format!("/m2m/{tipo}"), "", 2 * 1024 * 1024)
            .await
    }

    /// Posts `corpo` with the token.
    async fn postar(&self, tipo: &str, corpo: impl Into<reqwest::Body>) -> Resposta {
        enviar(self.pedido(tipo).body(corpo)).await
    }

    /// Posts `corpo` as JSON with the token.
    async fn postar_json(&self, tipo: &str, corpo: Value) -> Resposta {
        self.postar(tipo, corpo.to_string()).await
    }
}

/// One answer; every answer of the receptor has a JSON body.
struct Resposta {
    status: u16,
    cabecalhos: reqwest::header::HeaderMap,
    corpo: Value,
}

async fn enviar(pedido: reqwest::RequestBuilder) -> Resposta {
    let resposta = pedido.send().await.unwrap();
    let status = resposta.status().as_u16();
    let cabecalhos = resposta.headers().clone();
    let texto = resposta.text().await.unwrap();
    let corpo = serde_json::from_str(&texto)
        .unwrap_or_else(|falha| panic!("answer {status} is not JSON ({falha}): {texto:?}"));
    Resposta {
        status,
        cabecalhos,
        corpo,
    }
}

impl Resposta {
    /// Asserts 200 `{"resultado": resultado}`.
    fn assert_resultado(&self, resultado: &str) {
        assert_eq!(
            (self.status, self.corpo["resultado"].as_str()),
            (200, Some(resultado)),
            "{}",
            self.corpo
        );
    }

    /// Asserts `status` with `{"erro": erro, "mensagem": <text>}`.
    fn assert_erro(&self, status: u16, erro: &str) {
        assert_eq!(
            (self.status, self.corpo["erro"].as_str()),
            (status, Some(erro)),
            "{}",
            self.corpo
        );
        assert!(self.corpo["mensagem"].is_string(), "{}", self.corpo);
    }

    fn cabecalho(&self, nome: &str) -> Option<&str> {
        self.cabecalhos.get(nome).map(|v| v.to_str().unwrap())
    }

    /// The answer's `x-request-id`, which must be there.
    fn id_pedido(&self) -> &str {
        self.cabecalho("x-request-id")
            .expect("every answer carries x-request-id")
    }
}

// 1. Convergent mode.
nos_dois_bancos! {
    async fn versao_nova_aplica_e_velha_ou_igual_e_duplicata(db) {
        preparar(&db.pool).await;
        let tipo = tipo_em(&db.pool, "convergente");
        let s = servir(db.pool.clone(), Config::new("receptor", [TOKEN])).await;
        let entregar = |entidade: &str, versao: i64| {
            s.postar_json(&tipo, json!({ "entidade": entidade, "versao": versao }))
        };

        // Out of order: v2, then v1 (older), v2 (equal), v3 (newer).
        entregar("e1", 2).await.assert_resultado("applied");
        entregar("e1", 1).await.assert_resultado("duplicate");
        entregar("e1", 2).await.assert_resultado("duplicate");
        assert_eq!(recebidas(&db.pool, &tipo).await, vec![(chave(&["e1"]), Some(2))]);
        entregar("e1", 3).await.assert_resultado("applied");
        // In order: v1, then v2.
        entregar("e2", 1).await.assert_resultado("applied");
        entregar("e2", 2).await.assert_resultado("applied");
        // A newer version whose effect fails leaves the stored version alone...
        controlar(&db.pool, "e1", Some("falhar")).await;
        entregar("e1", 4).await.assert_erro(503, "temporary");
        assert_eq!(
            recebidas(&db.pool, &tipo).await,
            vec![(chave(&["e1"]), Some(3)), (chave(&["e2"]), Some(2))]
        );
        // ...and is applied when redelivered after the cause is fixed.
        controlar(&db.pool, "e1", None).await;
        entregar("e1", 4).await.assert_resultado("applied");
        entregar("e1", 4).await.assert_resultado("duplicate");
        entregar("e1", 3).await.assert_resultado("duplicate");

        assert_eq!(
            efeitos(&db.pool, "convergente").await,
            linhas(&[("e1", "v2"), ("e1", "v3"), ("e1", "v4"), ("e2", "v1"), ("e2", "v2")])
        );
        assert_eq!(
            recebidas(&db.pool, &tipo).await,
            vec![(chave(&["e1"]), Some(4)), (chave(&["e2"]), Some(2))]
        );
        assert_eq!(contar(&db.pool, "mensageria_recebidas").await, 2);
    }
}

// 2. A panic in the receptor.
nos_dois_bancos! {
    async fn panico_responde_500_desfaz_tudo_e_o_servidor_continua(db) {
        preparar(&db.pool).await;
        let tipo = tipo_em(&db.pool, "simples");
        let s = servir(db.pool.clone(), Config::new("receptor", [TOKEN])).await;

        controlar(&db.pool, "explode", Some("panico")).await;
        let resposta = s.postar_json(&tipo, json!({ "id": "explode" })).await;
        resposta.assert_erro(500, "panic");
        assert_eq!(efeitos(&db.pool, "simples").await, vec![], "the effect rolled back");
        assert_eq!(recebidas(&db.pool, &tipo).await, vec![], "the dedup record rolled back");

        // More panics than the pool has connections (8): a leaked connection, an open
        // transaction or a held row lock would stall or fail what follows.
        for _ in 0..10 {
            s.postar_json(&tipo, json!({ "id": "explode" })).await.assert_erro(500, "panic");
        }
        s.postar_json(&tipo, json!({ "id": "normal" })).await.assert_resultado("applied");

        // The cause is gone: the redelivery is applied, once.
        controlar(&db.pool, "explode", None).await;
        s.postar_json(&tipo, json!({ "id": "explode" })).await.assert_resultado("applied");
        s.postar_json(&tipo, json!({ "id": "explode" })).await.assert_resultado("duplicate");

        assert_eq!(efeitos(&db.pool, "simples").await, linhas(&[("explode", ""), ("normal", "")]));
        assert_eq!(
            recebidas(&db.pool, &tipo).await,
            vec![(chave(&["explode"]), None), (chave(&["normal"]), None)]
        );
    }
}

// 3. The effect fails after the dedup insert.
nos_dois_bancos! {
    async fn falha_temporaria_responde_503_desfaz_e_a_reentrega_aplica(db) {
        preparar(&db.pool).await;
        let tipo = tipo_em(&db.pool, "simples");
        let s = servir(db.pool.clone(), Config::new("receptor", [TOKEN])).await;
        let entregar = || s.postar_json(&tipo, json!({ "id": "f1" }));

        controlar(&db.pool, "f1", Some("falhar")).await;
        let resposta = entregar().await;
        resposta.assert_erro(503, "temporary");
        assert_eq!(resposta.cabecalho("retry-after"), None);

        controlar(&db.pool, "f1", Some("falhar-apos")).await;
        let resposta = entregar().await;
        resposta.assert_erro(503, "temporary");
        assert_eq!(resposta.cabecalho("retry-after"), Some("7"));

        // Under a second rounds up: `Retry-After` has whole seconds, and 0 would mean "now".
        controlar(&db.pool, "f1", Some("falhar-ms")).await;
        let resposta = entregar().await;
        resposta.assert_erro(503, "temporary");
        assert_eq!(resposta.cabecalho("retry-after"), Some("1"));

        // A SQL error inside the effect (`?`) is temporary; on PostgreSQL it also aborts the
        // transaction, which must still roll back cleanly.
        controlar(&db.pool, "f1", Some("sql-invalido")).await;
        entregar().await.assert_erro(503, "temporary");

        controlar(&db.pool, "f1", Some("recusar")).await;
        entregar().await.assert_erro(422, "rejected");

        assert_eq!(efeitos(&db.pool, "simples").await, vec![], "every failed attempt rolled back its effect");
        assert_eq!(recebidas(&db.pool, &tipo).await, vec![], "and its dedup record");

        controlar(&db.pool, "f1", None).await;
        entregar().await.assert_resultado("applied");
        entregar().await.assert_resultado("duplicate");
        assert_eq!(efeitos(&db.pool, "simples").await, linhas(&[("f1", "")]));
        assert_eq!(recebidas(&db.pool, &tipo).await, vec![(chave(&["f1"]), None)]);
    }
}

// 4. Bad input.
nos_dois_bancos! {
    async fn entrada_ruim_responde_400_sem_escrever_e_id_hostil_e_trocado(db) {
        preparar(&db.pool).await;
        let tipo = tipo_em(&db.pool, "simples");
        let s = servir(db.pool.clone(), Config::new("receptor", [TOKEN])).await;

        let profundo = |abre: &str, fecha: &str, n: usize| abre.repeat(n) + &fecha.repeat(n);
        let ruins: Vec<(&str, Vec<u8>)> = vec![
            ("100k unclosed [", "[".repeat(100_000).into_bytes()),
            ("100k nested arrays", profundo("[", "]", 100_000).into_bytes()),
            (
                "100k unclosed [ in an unknown field",
                format!(r#"{{"id":"x","extra":{}"#, "[".repeat(100_000)).into_bytes(),
            ),
            (
                "50k nested objects as the key",
                format!(r#"{{"id":{}}}"#, profundo(r#"{"a":"#, "}", 50_000)).into_bytes(),
            ),
            ("garbage bytes", vec![0xff, 0xfe, 0x00, 0x01, 0x80, 0xc3]),
            ("invalid UTF-8 in a string", b"{\"id\":\"\xff\xfe\"}".to_vec()),
            ("lone surrogate", br#"{"id":"\ud800"}"#.to_vec()),
            ("empty", Vec::new()),
            ("whitespace", b" \n\t ".to_vec()),
            ("byte order mark", "\u{feff}{\"id\":\"bom\"}".as_bytes().to_vec()),
            ("truncated", br#"{"id":"a""#.to_vec()),
            ("trailing garbage", br#"{"id":"a"} {"id":"b"}"#.to_vec()),
            ("wrong shape", br#"{"nome":"x"}"#.to_vec()),
            ("a number", b"42".to_vec()),
            ("null", b"null".to_vec()),
            ("a string", br#""id""#.to_vec()),
            ("an empty array", b"[]".to_vec()),
            ("wrong field type", br#"{"id":5}"#.to_vec()),
            ("null field", br#"{"id":null}"#.to_vec()),
            ("duplicate field", br#"{"id":"a","id":"b"}"#.to_vec()),
        ];
        for (caso, corpo) in ruins {
            let resposta = s.postar(&tipo, corpo).await;
            assert_eq!(resposta.status, 400, "{caso}: {}", resposta.corpo);
            resposta.assert_erro(400, "invalid_payload");
            assert!(uuid::Uuid::parse_str(resposta.id_pedido()).is_ok(), "{caso}");
        }
        assert_eq!(contar(&db.pool, "efeito").await, 0, "bad input writes no effect");
        assert_eq!(contar(&db.pool, "mensageria_recebidas").await, 0, "nor a dedup record");

        // Deep but valid: an unknown field is skipped iteratively, without recursion.
        let fundo = format!(r#"{{"id":"fundo","extra":{}}}"#, profundo("[", "]", 100_000));
        s.postar(&tipo, fundo).await.assert_resultado("applied");

        // Hostile request ids are replaced by a fresh UUID; the delivery itself goes through.
        let hostis: Vec<(&str, Vec<u8>)> = vec![
            ("too long", vec![b'x'; 129]),
            ("space", b"a b".to_vec()),
            ("tab", b"a\tb".to_vec()),
            ("non-ASCII UTF-8", "a\u{e7}\u{e3}o".as_bytes().to_vec()),
            ("non-UTF-8", vec![b'a', 0xff, 0xfe]),
            ("empty", Vec::new()),
        ];
        for (i, (caso, id)) in hostis.iter().enumerate() {
            let pedido = s
                .pedido(&tipo)
                .header("x-request-id", HeaderValue::from_bytes(id).unwrap())
                .body(json!({ "id": format!("hostil-{i}") }).to_string());
            let resposta = enviar(pedido).await;
            resposta.assert_resultado("applied");
            let devolvido = resposta.id_pedido();
            assert!(uuid::Uuid::parse_str(devolvido).is_ok(), "{caso}: {devolvido:?}");
            assert_ne!(devolvido.as_bytes(), id.as_slice(), "{caso}");
            assert_eq!(resposta.corpo["request_id"].as_str(), Some(devolvido), "{caso}");
        }
        // Printable ASCII up to 128 bytes is kept.
        for (i, id) in ["pedido-123".to_owned(), "x".repeat(128)].into_iter().enumerate() {
            let pedido = s
                .pedido(&tipo)
                .header("x-request-id", id.as_str())
                .body(json!({ "id": format!("bom-{i}") }).to_string());
            let resposta = enviar(pedido).await;
            resposta.assert_resultado("applied");
            assert_eq!(resposta.id_pedido(), id);
        }

        let mut esperados: Vec<String> = (0..hostis.len()).map(|i| format!("hostil-{i}")).collect();
        esperados.extend(["bom-0".to_owned(), "bom-1".to_owned(), "fundo".to_owned()]);
        esperados.sort();
        let efeitos: Vec<String> = efeitos(&db.pool, "simples").await.into_iter().map(|(c, _)| c).collect();
        assert_eq!(efeitos, esperados);
        let recebidas: Vec<String> = recebidas(&db.pool, &tipo).await.into_iter().map(|(c, _)| c).collect();
        let mut chaves: Vec<String> = esperados.iter().map(|e| chave(&[e])).collect();
        chaves.sort();
        assert_eq!(recebidas, chaves);
    }
}

// 5. Hostile strings in key parts.
nos_dois_bancos! {
    async fn chaves_hostis_sao_guardadas_literalmente(db) {
        preparar(&db.pool).await;
        let tipo = tipo_em(&db.pool, "par");
        let s = servir(db.pool.clone(), Config::new("receptor", [TOKEN])).await;

        let casos: Vec<(&str, &str)> = vec![
            ("'; DROP TABLE mensageria_recebidas; --", "x"),
            ("x", "'); DELETE FROM efeito; --"),
            ("a\"b", "c"),
            ("a\\\"b", "c"),
            ("a\",\"b", "c"),
            ("a", "\",\"b"),
            ("x|y", "z"),
            ("x", "y|z"),
            ("x,y", "z"),
            ("x", "y,z"),
            ("$1 ?1 :1 @p1", "%_*"),
            ("[\"x\",\"y\"]", ""),
            ("\u{200f}rtl\u{200e}", "\u{1f980}\u{1f468}\u{200d}\u{1f469}\u{200d}\u{1f467}"),
            // NFC and NFD of "é": two keys, neither normalized.
            ("\u{e9}", "n"),
            ("e\u{301}", "n"),
            ("", ""),
            (" ", " "),
            ("linha\nnova\r", "\t"),
            ("\\", "\\\\"),
        ];
        for (a, b) in &casos {
            let evento = json!({ "a": a, "b": b });
            s.postar_json(&tipo, evento.clone()).await.assert_resultado("applied");
            s.postar_json(&tipo, evento).await.assert_resultado("duplicate");
        }

        // A key over 1 KiB is refused before any write.
        let longa = "x".repeat(2000);
        s.postar_json(&tipo, json!({ "a": longa, "b": "" })).await.assert_erro(422, "invalid_key");

        let mut esperados = linhas(&casos);
        esperados.sort();
        assert_eq!(efeitos(&db.pool, "par").await, esperados);
        let mut chaves: Vec<(String, Option<i64>)> =
            casos.iter().map(|(a, b)| (chave(&[a, b]), None)).collect();
        chaves.sort();
        assert_eq!(recebidas(&db.pool, &tipo).await, chaves);

        // NUL: the dedup key escapes it (`\u0000`), but PostgreSQL TEXT refuses it in the
        // effect's own INSERT: a data exception (SQLSTATE 22), the same on every redelivery, so
        // permanent: 422 (the sender dead-letters it), nothing written. SQLite stores it as is.
        let nul = json!({ "a": "nul\u{0}byte", "b": "x" });
        if e_postgres(&db.pool) {
            let resposta = s.postar_json(&tipo, nul).await;
            resposta.assert_erro(422, "rejected");
            assert_eq!(efeitos(&db.pool, "par").await, esperados);
            assert_eq!(recebidas(&db.pool, &tipo).await, chaves);
        } else {
            s.postar_json(&tipo, nul.clone()).await.assert_resultado("applied");
            s.postar_json(&tipo, nul).await.assert_resultado("duplicate");
            let nuls: Vec<(String, String)> = efeitos(&db.pool, "par").await
                .into_iter()
                .filter(|(a, _)| a.contains('\0'))
                .collect();
            assert_eq!(nuls, linhas(&[("nul\0byte", "x")]));
            let guardada: Option<String> = sqlx::query_scalar(
                "SELECT chave FROM mensageria_recebidas WHERE chave LIKE '%nul%'",
            )
            .fetch_optional(&db.pool)
            .await
            .unwrap();
            assert_eq!(guardada.as_deref(), Some(r#"["nul\u0000byte","x"]"#));
        }
    }
}

// 6. One natural key, two tipos.
nos_dois_bancos! {
    async fn mesma_chave_em_dois_tipos_sao_dois_eventos(db) {
        preparar(&db.pool).await;
        let simples = tipo_em(&db.pool, "simples");
        let gemeo = tipo_em(&db.pool, "gemeo");
        let s = servir(db.pool.clone(), Config::new("receptor", [TOKEN])).await;

        for tipo in [&simples, &gemeo] {
            s.postar_json(tipo, json!({ "id": "mesma" })).await.assert_resultado("applied");
        }
        for tipo in [&simples, &gemeo] {
            s.postar_json(tipo, json!({ "id": "mesma" })).await.assert_resultado("duplicate");
        }

        let um = linhas(&[("mesma", "")]);
        assert_eq!(efeitos(&db.pool, "simples").await, um);
        assert_eq!(efeitos(&db.pool, "gemeo").await, um);
        assert_eq!(recebidas(&db.pool, &simples).await, vec![(chave(&["mesma"]), None)]);
        assert_eq!(recebidas(&db.pool, &gemeo).await, vec![(chave(&["mesma"]), None)]);
        assert_eq!(contar(&db.pool, "mensageria_recebidas").await, 2);
    }
}

// 7. Concurrency.
nos_dois_bancos! {
    async fn cinquenta_copias_simultaneas_aplicam_uma_vez(db) {
        preparar(&db.pool).await;
        let tipo = tipo_em(&db.pool, "simples");
        let s = servir(db.pool.clone(), Config::new("receptor", [TOKEN])).await;
        // The first holds its transaction 200 ms: the others really overlap it.
        controlar(&db.pool, "concorrente", Some("lento")).await;

        let tarefas: Vec<_> = (0..50)
            .map(|_| {
                let pedido = s.pedido(&tipo).body(r#"{"id":"concorrente"}"#);
                tokio::spawn(enviar(pedido))
            })
            .collect();
        let mut resultados = Vec::new();
        for tarefa in tarefas {
            let resposta = tarefa.await.unwrap();
            assert_eq!(resposta.status, 200, "{}", resposta.corpo);
            resultados.push(resposta.corpo["resultado"].as_str().unwrap().to_owned());
        }
        let aplicados = resultados.iter().filter(|r| *r == "applied").count();
        let duplicados = resultados.iter().filter(|r| *r == "duplicate").count();
        assert_eq!((aplicados, duplicados), (1, 49));

        assert_eq!(efeitos(&db.pool, "simples").await, linhas(&[("concorrente", "")]));
        assert_eq!(recebidas(&db.pool, &tipo).await, vec![(chave(&["concorrente"]), None)]);
    }
}

nos_dois_bancos! {
    async fn cinquenta_versoes_simultaneas_convergem_na_maior(db) {
        preparar(&db.pool).await;
        let tipo = tipo_em(&db.pool, "convergente");
        let s = servir(db.pool.clone(), Config::new("receptor", [TOKEN])).await;

        // Versions 1..=50, sent all at once in a scrambled order.
        let tarefas: Vec<_> = (1..=50_i64)
            .map(|i| (i * 17) % 50 + 1)
            .map(|versao| {
                let corpo = json!({ "entidade": "corrida", "versao": versao }).to_string();
                tokio::spawn(enviar(s.pedido(&tipo).body(corpo)))
            })
            .collect();
        let mut aplicados = 0;
        for tarefa in tarefas {
            let resposta = tarefa.await.unwrap();
            assert_eq!(resposta.status, 200, "{}", resposta.corpo);
            if resposta.corpo["resultado"] == "applied" {
                aplicados += 1;
            }
        }

        // Every "applied" is one effect row, the newest is among them, and it is what is stored.
        let efeitos = efeitos(&db.pool, "convergente").await;
        assert_eq!(efeitos.len(), aplicados);
        assert!(efeitos.iter().any(|(_, dado)| dado == "v50"), "{efeitos:?}");
        assert_eq!(recebidas(&db.pool, &tipo).await, vec![(chave(&["corrida"]), Some(50))]);
    }
}

// 8. Authentication.
nos_dois_bancos! {
    async fn sem_token_valido_responde_401_e_dois_tokens_valem(db) {
        preparar(&db.pool).await;
        let tipo = tipo_em(&db.pool, "simples");
        let s = servir(db.pool.clone(), Config::new("receptor", ["token-novo-0123456789", "token-antigo-0123456789"])).await;
        let intruso = || json!({ "id": "intruso" }).to_string();

        let mut recusados = vec![("no header", enviar(s.sem_token(&tipo).body(intruso())).await)];
        for autorizacao in [
            "Bearer errado",
            "Bearer token-novo-012345678",
            "Bearer token-novo-0123456789x",
            // (`Bearer  token-novo-0123456789`, two spaces, is valid: RFC 6750 allows 1*SP after the scheme.)
            "Bearer token-novo-0123456789 token-antigo-0123456789",
            "Basic token-novo-0123456789",
            "token-novo-0123456789",
            "Bearer",
        ] {
            let pedido = s.sem_token(&tipo).header("authorization", autorizacao).body(intruso());
            recusados.push((autorizacao, enviar(pedido).await));
        }
        for (caso, resposta) in &recusados {
            assert_eq!(resposta.status, 401, "{caso}: {}", resposta.corpo);
            resposta.assert_erro(401, "unauthorized");
            assert_eq!(resposta.cabecalho("www-authenticate"), Some("Bearer"), "{caso}");
        }
        // Authentication comes before the body is read: 401 at once, not 413, and not a wait
        // for the announced 2 MiB, which are never sent.
        assert_eq!(s.so_a_cabeca(&tipo).await, "HTTP/1.1 401 Unauthorized");
        assert_eq!(contar(&db.pool, "efeito").await, 0);
        assert_eq!(contar(&db.pool, "mensageria_recebidas").await, 0);

        // Rotation: both configured tokens are accepted, and share one dedup.
        let com = |token: &str, id: &str| {
            enviar(s.sem_token(&tipo).bearer_auth(token).body(json!({ "id": id }).to_string()))
        };
        com("token-novo-0123456789", "via-novo").await.assert_resultado("applied");
        com("token-antigo-0123456789", "via-antigo").await.assert_resultado("applied");
        com("token-antigo-0123456789", "via-novo").await.assert_resultado("duplicate");
        com("token-novo-0123456789", "via-antigo").await.assert_resultado("duplicate");

        assert_eq!(efeitos(&db.pool, "simples").await, linhas(&[("via-antigo", ""), ("via-novo", "")]));
        assert_eq!(
            recebidas(&db.pool, &tipo).await,
            vec![(chave(&["via-antigo"]), None), (chave(&["via-novo"]), None)]
        );
    }
}

// 9. The receiving side's dead letters, listed with a negative limit: nothing, on both backends
// (SQLite read `LIMIT -1` as "no limit" and listed them all, PostgreSQL refused the statement),
// so a replay asked for a negative number of them replays none.
nos_dois_bancos! {
    async fn mortas_recebidas_com_limite_negativo_nao_lista_nenhuma(db) {
        mensageria_core::migrar(&db.pool).await.unwrap();
        for n in 0..3 {
            let morta = mensageria_core::operacoes::MortaRecebida {
                app: "fiscal".to_owned(),
                id_mensagem: uuid::Uuid::now_v7(),
                tipo: "falhas.morta".to_owned(),
                origem: "nats:MENSAGERIA:mensageria.falhas.morta".to_owned(),
                payload: json!({ "n": n }).to_string(),
                correlacao: None,
                motivo: "rejected".to_owned(),
                entregas: 1,
                morta_em_ms: 0,
                traceparent: None,
                tracestate: None,
                sequencia: None,
                chave_ordem: None,
            };
            mensageria_core::operacoes::registrar_morta_recebida(&db.pool, &morta).await.unwrap();
        }
        for limite in [-1, i64::MIN] {
            let listadas =
                mensageria_core::operacoes::mortas_recebidas(&db.pool, Some("fiscal"), limite)
                    .await
                    .unwrap();
            assert!(listadas.is_empty(), "limit {limite}: {} listed", listadas.len());
        }
        let todas = mensageria_core::operacoes::mortas_recebidas(&db.pool, None, 10).await.unwrap();
        assert_eq!(todas.len(), 3);
    }
}
