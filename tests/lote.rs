//! The batch route of every receptor (`POST /m2m/{tipo}/lote`) over real HTTP on 127.0.0.1,
//! on PostgreSQL and SQLite: one transaction per batch, an outcome per event, and one event's
//! rejection, panic or temporary failure neither losing, doubling nor blocking the others.

use std::time::Duration;

use mensageria_axum::{Config, Rejeicao, receptor};
use mensageria_core::sqlx::{Encode, Executor, Postgres, Sqlite, Transaction, Type};
use mensageria_testes::{Sql, e_postgres, nos_dois_bancos};
use serde::Deserialize;
use serde_json::{Value, json};

#[derive(Deserialize)]
struct Item {
    chave: String,
    #[serde(default)]
    versao: i64,
}

/// The effect, once for both backends; some keys misbehave on purpose.
async fn aplicar<DB: Sql>(tx: &mut Transaction<'_, DB>, item: Item) -> Result<(), Rejeicao>
where
    for<'c> &'c mut DB::Connection: Executor<'c, Database = DB>,
    String: for<'q> Encode<'q, DB> + Type<DB>,
    i64: for<'q> Encode<'q, DB> + Type<DB>,
{
    sqlx::query("INSERT INTO efeito (chave, versao) VALUES ($1, $2)")
        .bind(item.chave.clone())
        .bind(item.versao)
        .execute(&mut **tx)
        .await?;
    match item.chave.as_str() {
        "recusar" => Err(Rejeicao::permanente("chave recusada")),
        "tarde" => Err(Rejeicao::temporaria_apos(
            "volte depois",
            Duration::from_secs(7),
        )),
        "panico" => panic!("o receptor entrou em pânico"),
        _ => Ok(()),
    }
}

const EFEITO: &str = "CREATE TABLE efeito (chave TEXT NOT NULL, versao BIGINT NOT NULL)";

#[receptor(tipo = "teste.lote", chave_natural = evento.chave)]
async fn lote_pg(tx: &mut Transaction<'_, Postgres>, evento: Item) -> Result<(), Rejeicao> {
    aplicar(tx, evento).await
}

#[receptor(tipo = "teste.lote-lite", chave_natural = evento.chave)]
async fn lote_lite(tx: &mut Transaction<'_, Sqlite>, evento: Item) -> Result<(), Rejeicao> {
    aplicar(tx, evento).await
}

#[receptor(tipo = "teste.lote-versao", chave_natural = evento.chave, versao = evento.versao)]
async fn versao_pg(tx: &mut Transaction<'_, Postgres>, evento: Item) -> Result<(), Rejeicao> {
    aplicar(tx, evento).await
}

#[receptor(tipo = "teste.lote-versao-lite", chave_natural = evento.chave, versao = evento.versao)]
async fn versao_lite(tx: &mut Transaction<'_, Sqlite>, evento: Item) -> Result<(), Rejeicao> {
    aplicar(tx, evento).await
}

/// An event of the counted receptors: `falha` makes its run panic or reject it for good.
#[derive(Deserialize)]
struct ItemContado {
    chave: String,
    #[serde(default)]
    falha: Option<String>,
}

/// Runs of the counted receptors' function, per natural key (one map per backend, since the
/// two tests run at the same time).
type Execucoes = std::sync::LazyLock<std::sync::Mutex<std::collections::HashMap<String, usize>>>;
static EXECUCOES_PG: Execucoes = std::sync::LazyLock::new(Default::default);
static EXECUCOES_LITE: Execucoes = std::sync::LazyLock::new(Default::default);

/// The counted effect: counts the run, writes the effect, then fails as the event says.
async fn aplicar_contado<DB: Sql>(
    tx: &mut Transaction<'_, DB>,
    item: ItemContado,
    execucoes: &Execucoes,
) -> Result<(), Rejeicao>
where
    for<'c> &'c mut DB::Connection: Executor<'c, Database = DB>,
    String: for<'q> Encode<'q, DB> + Type<DB>,
    i64: for<'q> Encode<'q, DB> + Type<DB>,
{
    *execucoes
        .lock()
        .unwrap()
        .entry(item.chave.clone())
        .or_default() += 1;
    sqlx::query("INSERT INTO efeito (chave, versao) VALUES ($1, $2)")
        .bind(item.chave.clone())
        .bind(0_i64)
        .execute(&mut **tx)
        .await?;
    match item.falha.as_deref() {
        Some("panico") => panic!("o receptor entrou em pânico"),
        Some("recusar") => Err(Rejeicao::permanente("evento recusado")),
        _ => Ok(()),
    }
}

#[receptor(tipo = "teste.lote-contado", chave_natural = evento.chave)]
async fn contado_pg(
    tx: &mut Transaction<'_, Postgres>,
    evento: ItemContado,
) -> Result<(), Rejeicao> {
    aplicar_contado(tx, evento, &EXECUCOES_PG).await
}

#[receptor(tipo = "teste.lote-contado-lite", chave_natural = evento.chave)]
async fn contado_lite(
    tx: &mut Transaction<'_, Sqlite>,
    evento: ItemContado,
) -> Result<(), Rejeicao> {
    aplicar_contado(tx, evento, &EXECUCOES_LITE).await
}

struct Receptor {
    url: String,
    cliente: reqwest::Client,
}

impl Receptor {
    async fn iniciar<DB: Sql + mensageria_core::Banco>(
        pool: &sqlx::Pool<DB>,
        tipo: &str,
        config: Config,
    ) -> Self
    where
        for<'c> &'c mut DB::Connection: Executor<'c, Database = DB>,
        for<'q> &'q str: Encode<'q, DB> + Type<DB>,
    {
        mensageria_core::migrar(pool).await.unwrap();
        mensageria_testes::executar(pool, EFEITO.to_owned(), &[], "effect table").await;
        let app = mensageria_axum::router(pool.clone(), config).unwrap();
        let ouvinte = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/m2m/{tipo}/lote", ouvinte.local_addr().unwrap());
        tokio::spawn(async move {
            let _ = axum::serve(ouvinte, app).await;
        });
        Self {
            url,
            // A new connection per request: a refusal answered before the body is read (401,
            // 413) closes its connection, and a request sent on it meanwhile would fail with a
            // broken pipe (seen once on a loaded machine) instead of getting its own answer.
            cliente: reqwest::Client::builder()
                .pool_max_idle_per_host(0)
                .build()
                .unwrap(),
        }
    }

    async fn postar(&self, corpo: String) -> (u16, Value) {
        let resposta = self
            .cliente
            .post(&self.url)
            .bearer_auth("t0k-de-teste-1234")
            .header("content-type", "application/json")
            .body(corpo)
            .send()
            .await
            .unwrap();
        let status = resposta.status().as_u16();
        (status, resposta.json().await.unwrap())
    }

    /// Posts `itens` as a batch; returns each event's `resultado`, in order.
    async fn lote(&self, itens: &[Value]) -> Vec<String> {
        let eventos: Vec<Value> = itens
            .iter()
            .map(|payload| json!({ "id": uuid::Uuid::now_v7(), "payload": payload }))
            .collect();
        let (status, corpo) = self.postar(json!({ "eventos": eventos }).to_string()).await;
        assert_eq!(status, 200, "{corpo}");
        let resultados = corpo["resultados"].as_array().unwrap();
        assert_eq!(resultados.len(), itens.len(), "{corpo}");
        resultados
            .iter()
            .map(|r| r["resultado"].as_str().unwrap().to_owned())
            .collect()
    }
}

fn tipo_de<DB: Sql>(pool: &sqlx::Pool<DB>, base: &str) -> String {
    if e_postgres(pool) {
        base.to_owned()
    } else {
        format!("{base}-lite")
    }
}

async fn efeitos<DB: Sql>(pool: &sqlx::Pool<DB>) -> Vec<(String, i64)>
where
    for<'c> &'c mut DB::Connection: Executor<'c, Database = DB>,
    for<'r> (String, i64): sqlx::FromRow<'r, DB::Row>,
{
    sqlx::query_as("SELECT chave, versao FROM efeito ORDER BY chave, versao")
        .fetch_all(pool)
        .await
        .unwrap()
}

nos_dois_bancos! {
    /// A batch of 64 with one rejection, one panic and one temporary failure in the middle: only
    /// those three are not applied, each with its own outcome; the other 61 are applied once
    /// in the batch's transaction; the batch sent again (its answer lost) applies nothing.
    async fn uma_falha_no_lote_nao_perde_nem_dobra_as_outras(db) {
        let tipo = tipo_de(&db.pool, "teste.lote");
        let receptor = Receptor::iniciar(&db.pool, &tipo, Config::new("receptor", ["t0k-de-teste-1234"])).await;
        let mut itens: Vec<Value> = (0..64).map(|n| json!({ "chave": format!("k{n:02}") })).collect();
        itens[10] = json!({ "chave": "recusar" });
        itens[20] = json!({ "chave": "panico" });
        itens[30] = json!({ "chave": "tarde" });
        let resultados = receptor.lote(&itens).await;
        for (n, resultado) in resultados.iter().enumerate() {
            let esperado = match n {
                10 => "rejected",
                20 => "panic",
                30 => "temporary",
                _ => "applied",
            };
            assert_eq!(resultado, esperado, "event {n}");
        }
        let aplicados = efeitos(&db.pool).await;
        assert_eq!(aplicados.len(), 61);
        assert!(aplicados.iter().all(|(chave, _)| chave.starts_with('k')));
        let recebidas = mensageria_testes::contar(&db.pool, "mensageria_recebidas").await;
        assert_eq!(recebidas, 61, "the failed events' dedup records rolled back with them");

        // The same batch again (the relay never saw the answer): duplicates, nothing applied.
        let de_novo = receptor.lote(&itens).await;
        for (n, resultado) in de_novo.iter().enumerate() {
            let esperado = match n {
                10 => "rejected",
                20 => "panic",
                30 => "temporary",
                _ => "duplicate",
            };
            assert_eq!(resultado, esperado, "event {n}, sent again");
        }
        assert_eq!(efeitos(&db.pool).await.len(), 61);
    }
}

nos_dois_bancos! {
    /// 128 good events and 64 panicking and 64 rejected ones in one batch, interleaved and then
    /// the good ones first: the receptor's function runs at most twice per event (issue 25: it
    /// ran once more for every earlier event after each failure, 8,512 times interleaved and
    /// 16,640 good first; now 257 and 384), every good event is applied once and every failing
    /// one answered with its own outcome.
    async fn lote_com_metade_falhando_roda_cada_evento_no_maximo_duas_vezes(db) {
        let tipo = tipo_de(&db.pool, "teste.lote-contado");
        let execucoes = if e_postgres(&db.pool) { &EXECUCOES_PG } else { &EXECUCOES_LITE };
        let receptor = Receptor::iniciar(&db.pool, &tipo, Config::new("receptor", ["t0k-de-teste-1234"])).await;
        // What event `n` of a layout does: `None` applies, `Some(falha)` fails.
        let intercalados = |n: usize| [None, Some("panico"), None, Some("recusar")][n % 4];
        let bons_primeiro = |n: usize| match n {
            0..128 => None,
            _ if n.is_multiple_of(2) => Some("panico"),
            _ => Some("recusar"),
        };
        type Falha<'f> = &'f dyn Fn(usize) -> Option<&'static str>;
        let layouts: [(&str, Falha<'_>); 2] =
            [("interleaved", &intercalados), ("good first", &bons_primeiro)];
        let mut esperados: Vec<String> = Vec::new();
        for (layout, falha_de) in layouts {
            execucoes.lock().unwrap().clear();
            let chave = |n: usize| format!("{}{n:03}", &layout[..1]);
            let itens: Vec<Value> = (0..256)
                .map(|n| json!({ "chave": chave(n), "falha": falha_de(n) }))
                .collect();
            let inicio = std::time::Instant::now();
            let resultados = receptor.lote(&itens).await;
            let tempo = inicio.elapsed();
            let por_chave = execucoes.lock().unwrap().clone();
            let total: usize = por_chave.values().sum();
            let banco = if e_postgres(&db.pool) { "PostgreSQL" } else { "SQLite" };
            eprintln!("{banco}, {layout}, 128 good + 128 failing: {total} receptor runs in {tempo:?}");
            for (n, resultado) in resultados.iter().enumerate() {
                let esperado = match falha_de(n) {
                    Some("panico") => "panic",
                    Some(_) => "rejected",
                    None => "applied",
                };
                assert_eq!(resultado, esperado, "{layout}: event {n}");
            }
            assert!(total <= 2 * 256, "{layout}: {total} runs of the receptor for 256 events");
            let mais_que_duas: Vec<_> = por_chave.iter().filter(|&(_, &n)| n > 2).collect();
            assert!(mais_que_duas.is_empty(), "{layout}: run more than twice: {mais_que_duas:?}");
            assert_eq!(por_chave.len(), 256, "{layout}: every event's function ran");
            esperados.extend((0..256).filter(|&n| falha_de(n).is_none()).map(chave));
            esperados.sort();
            let aplicados: Vec<String> = efeitos(&db.pool).await.into_iter().map(|(c, _)| c).collect();
            assert_eq!(aplicados, esperados, "{layout}: each good event applied once, no failing one");
        }
        assert_eq!(mensageria_testes::contar(&db.pool, "mensageria_recebidas").await, 256);
    }
}

nos_dois_bancos! {
    /// New, duplicate, invalid payload, invalid key and one key twice in one batch; the
    /// temporary failure carries its Retry-After per event.
    async fn lote_misto_tem_um_desfecho_por_evento(db) {
        let tipo = tipo_de(&db.pool, "teste.lote");
        let receptor = Receptor::iniciar(&db.pool, &tipo, Config::new("receptor", ["t0k-de-teste-1234"])).await;
        assert_eq!(receptor.lote(&[json!({ "chave": "velho" })]).await, ["applied"]);
        let longa = "x".repeat(2000);
        let eventos = json!({ "eventos": [
            { "id": uuid::Uuid::now_v7(), "payload": { "chave": "novo" } },
            { "id": uuid::Uuid::now_v7(), "payload": { "chave": "velho" } },
            { "id": uuid::Uuid::now_v7(), "payload": { "nada": 1 } },
            { "id": uuid::Uuid::now_v7(), "payload": { "chave": longa } },
            { "id": uuid::Uuid::now_v7(), "payload": { "chave": "dobro" } },
            { "id": uuid::Uuid::now_v7(), "payload": { "chave": "dobro" } },
            { "id": uuid::Uuid::now_v7(), "correlacao": "corr-1", "payload": { "chave": "tarde" } },
        ]});
        let (status, corpo) = receptor.postar(eventos.to_string()).await;
        assert_eq!(status, 200, "{corpo}");
        let resultados: Vec<&str> = corpo["resultados"].as_array().unwrap().iter().map(|r| r["resultado"].as_str().unwrap()).collect();
        assert_eq!(resultados, ["applied", "duplicate", "invalid_payload", "invalid_key", "applied", "duplicate", "temporary"]);
        assert_eq!(corpo["resultados"][6]["retry_after_s"], 7);
        assert!(corpo["resultados"][2]["mensagem"].as_str().unwrap().contains("missing field `chave`"), "{corpo}");
        assert_eq!(corpo["resultados"][0]["id"], eventos["eventos"][0]["id"]);
        assert!(corpo["resultados"][0].get("mensagem").is_none());
        let chaves: Vec<String> = efeitos(&db.pool).await.into_iter().map(|(c, _)| c).collect();
        assert_eq!(chaves, ["dobro", "novo", "velho"]);
    }
}

nos_dois_bancos! {
    /// Convergent receptor: versions of one key in one batch are applied in order (v1, then v3;
    /// v2 after v3 is stale), a version older than the stored one is a duplicate.
    async fn lote_convergente_aplica_as_versoes_em_ordem(db) {
        let tipo = tipo_de(&db.pool, "teste.lote-versao");
        let receptor = Receptor::iniciar(&db.pool, &tipo, Config::new("receptor", ["t0k-de-teste-1234"])).await;
        assert_eq!(receptor.lote(&[json!({ "chave": "a", "versao": 5 })]).await, ["applied"]);
        let resultados = receptor.lote(&[
            json!({ "chave": "a", "versao": 4 }),
            json!({ "chave": "b", "versao": 1 }),
            json!({ "chave": "b", "versao": 3 }),
            json!({ "chave": "b", "versao": 2 }),
            json!({ "chave": "a", "versao": 6 }),
        ]).await;
        assert_eq!(resultados, ["duplicate", "applied", "applied", "duplicate", "applied"]);
        assert_eq!(efeitos(&db.pool).await, [("a".into(), 5), ("a".into(), 6), ("b".into(), 1), ("b".into(), 3)]);
    }
}

nos_dois_bancos! {
    /// Whole-batch refusals, each with its status and code, and nothing written.
    async fn lote_recusado_inteiro_nao_escreve_nada(db) {
        let tipo = tipo_de(&db.pool, "teste.lote");
        let config = Config::new("receptor", ["t0k-de-teste-1234"]).com_limite_lote(3, 64 * 1024);
        let receptor = Receptor::iniciar(&db.pool, &tipo, config).await;
        let um = |chave: &str| json!({ "id": uuid::Uuid::now_v7(), "payload": { "chave": chave } });

        let (status, corpo) = receptor.postar(json!({ "eventos": [um("a"), um("b"), um("c"), um("d")] }).to_string()).await;
        assert_eq!((status, corpo["erro"].as_str()), (413, Some("batch_too_large")), "{corpo}");
        let (status, corpo) = receptor.postar(json!({ "eventos": [{ "payload": { "chave": "a" } }] }).to_string()).await;
        assert_eq!((status, corpo["erro"].as_str()), (400, Some("invalid_batch")), "{corpo}");
        assert!(corpo["mensagem"].as_str().unwrap().contains("missing field `id`"), "{corpo}");
        let (status, corpo) = receptor.postar(r#"{"eventos": [}"#.to_owned()).await;
        assert_eq!((status, corpo["erro"].as_str()), (400, Some("invalid_batch")), "{corpo}");
        let (status, corpo) = receptor.postar(json!([um("a")]).to_string()).await;
        assert_eq!((status, corpo["erro"].as_str()), (400, Some("invalid_batch")), "{corpo}");
        let enorme = json!({ "eventos": [um(&"z".repeat(70 * 1024))] }).to_string();
        let (status, corpo) = receptor.postar(enorme).await;
        assert_eq!((status, corpo["erro"].as_str()), (413, Some("payload_too_large")), "{corpo}");

        let sem_token = receptor.cliente.post(&receptor.url).header("content-type", "application/json").body(json!({ "eventos": [um("a")] }).to_string()).send().await.unwrap();
        assert_eq!(sem_token.status(), 401);
        let texto = receptor.cliente.post(&receptor.url).bearer_auth("t0k-de-teste-1234").header("content-type", "text/plain").body(json!({ "eventos": [um("a")] }).to_string()).send().await.unwrap();
        assert_eq!(texto.status(), 415);
        let desconhecido = receptor.cliente.post(receptor.url.replace(&tipo, "nao.existe")).bearer_auth("t0k-de-teste-1234").body("{}").send().await.unwrap();
        assert_eq!(desconhecido.status(), 404);

        // An empty batch is a valid batch with nothing in it.
        assert!(receptor.lote(&[]).await.is_empty());
        assert!(efeitos(&db.pool).await.is_empty());
        assert_eq!(mensageria_testes::contar(&db.pool, "mensageria_recebidas").await, 0);
    }
}

nos_dois_bancos! {
    /// A batch over the event count is refused as soon as its count passes the limit, not after
    /// the whole body was parsed (issue 25: 70k events were parsed, 10 MB, before the 413): the
    /// events after the limit + 1st are never read, so a body cut short after them is still a
    /// 413 `batch_too_large`, not a 400; and a 70,000-event batch is refused in milliseconds.
    async fn lote_com_eventos_demais_e_recusado_antes_de_ler_o_resto(db) {
        let tipo = tipo_de(&db.pool, "teste.lote");
        let config = Config::new("receptor", ["t0k-de-teste-1234"]).com_limite_lote(3, 16 * 1024 * 1024);
        let receptor = Receptor::iniciar(&db.pool, &tipo, config).await;
        let um = |n: usize| json!({ "id": uuid::Uuid::now_v7(), "payload": { "chave": format!("k{n}") } }).to_string();
        let quatro: Vec<String> = (0..4).map(um).collect();
        let cortado = format!(r#"{{"eventos": [{}, {{"id": "#, quatro.join(", "));
        let (status, corpo) = receptor.postar(cortado).await;
        assert_eq!((status, corpo["erro"].as_str()), (413, Some("batch_too_large")), "{corpo}");
        assert!(corpo["mensagem"].as_str().unwrap().contains("at most 3"), "{corpo}");
        // Three events and then a broken body: not over the count, so the body is read and refused.
        let tres_e_lixo = format!(r#"{{"eventos": [{}, {{"id": "#, quatro[..3].join(", "));
        let (status, corpo) = receptor.postar(tres_e_lixo).await;
        assert_eq!((status, corpo["erro"].as_str()), (400, Some("invalid_batch")), "{corpo}");

        let muitos: Vec<String> = (0..70_000).map(um).collect();
        let enorme = format!(r#"{{"eventos": [{}]}}"#, muitos.join(","));
        let bytes = enorme.len();
        let inicio = std::time::Instant::now();
        let (status, corpo) = receptor.postar(enorme).await;
        eprintln!("70,000 events ({bytes} bytes) refused in {:?}", inicio.elapsed());
        assert_eq!((status, corpo["erro"].as_str()), (413, Some("batch_too_large")), "{corpo}");
        assert!(efeitos(&db.pool).await.is_empty());
        assert_eq!(mensageria_testes::contar(&db.pool, "mensageria_recebidas").await, 0);
    }
}

nos_dois_bancos! {
    /// Two events with one message id in one batch (issue 25: both were applied and answered
    /// under that id twice): the first is applied, and the repeat, one message sent twice, is
    /// answered with its outcome (`duplicate` for `applied`) without being applied; a repeat of
    /// a rejected event is rejected too, so no entry for its id acks it.
    async fn lote_com_um_id_repetido_aplica_o_primeiro_uma_vez(db) {
        let tipo = tipo_de(&db.pool, "teste.lote");
        let receptor = Receptor::iniciar(&db.pool, &tipo, Config::new("receptor", ["t0k-de-teste-1234"])).await;
        let (repetido, recusado) = (uuid::Uuid::now_v7(), uuid::Uuid::now_v7());
        let eventos = json!({ "eventos": [
            { "id": repetido, "payload": { "chave": "a" } },
            { "id": recusado, "payload": { "chave": "recusar" } },
            { "id": uuid::Uuid::now_v7(), "payload": { "chave": "b" } },
            { "id": repetido, "payload": { "chave": "c" } },
            { "id": recusado, "payload": { "chave": "d" } },
        ]});
        let (status, corpo) = receptor.postar(eventos.to_string()).await;
        assert_eq!(status, 200, "{corpo}");
        let resultados: Vec<(&str, &str)> = corpo["resultados"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| (r["id"].as_str().unwrap(), r["resultado"].as_str().unwrap()))
            .collect();
        let (repetido, recusado) = (repetido.to_string(), recusado.to_string());
        assert_eq!(
            [resultados[0], resultados[1], resultados[3], resultados[4]],
            [
                (repetido.as_str(), "applied"),
                (recusado.as_str(), "rejected"),
                (repetido.as_str(), "duplicate"),
                (recusado.as_str(), "rejected"),
            ],
            "{corpo}"
        );
        assert_eq!(resultados[2].1, "applied");
        let chaves: Vec<String> = efeitos(&db.pool).await.into_iter().map(|(c, _)| c).collect();
        assert_eq!(chaves, ["a", "b"], "the repeats were not applied");
        assert_eq!(mensageria_testes::contar(&db.pool, "mensageria_recebidas").await, 2);
    }
}

// ---------------------------------------------------------------------------------------------
// The relay's side: a `Destino` groups the deliveries of one tipo that are in flight together.

/// What the sender enqueues for the `teste.lote` receptor (PostgreSQL).
#[derive(serde::Serialize, Deserialize)]
struct ItemEnviado {
    chave: String,
}

#[mensageria_core::enviador(tipo = "teste.lote")]
async fn enviar_item(
    evento: ItemEnviado,
    ctx: &mensageria_core::ContextoEnvio,
) -> Result<(), mensageria_core::FalhaEnvio> {
    ctx.exigir::<mensageria_core::Destino>()?
        .postar(&evento, ctx)
        .await
}

/// Requests seen by the receptor: on the single route and on the batch route.
#[derive(Default)]
struct Pedidos {
    unicos: std::sync::atomic::AtomicU64,
    lotes: std::sync::atomic::AtomicU64,
}

/// The receptor's router behind a counter of requests per route; `so_unica` mounts only the
/// single route (an older receptor, with no batch route).
async fn receptor_contado(
    pool: &sqlx::PgPool,
    so_unica: bool,
) -> (String, std::sync::Arc<Pedidos>) {
    receptor_contado_com_portao(pool, so_unica, tokio::sync::watch::channel(true).1).await
}

/// [`receptor_contado`] whose batch route holds each request (after counting it) while
/// `aberto` says false.
async fn receptor_contado_com_portao(
    pool: &sqlx::PgPool,
    so_unica: bool,
    aberto: tokio::sync::watch::Receiver<bool>,
) -> (String, std::sync::Arc<Pedidos>) {
    use std::sync::atomic::Ordering::Relaxed;
    mensageria_core::migrar(pool).await.unwrap();
    sqlx::query(EFEITO).execute(pool).await.unwrap();
    let app = if so_unica {
        let estado = mensageria_axum::Estado::new(
            pool.clone(),
            Config::new("receptor", ["t0k-de-teste-1234"]),
        )
        .unwrap();
        axum::Router::new()
            .route(
                "/m2m/teste.lote",
                mensageria_axum::rota::<ReceptorLotePg, _>(),
            )
            .with_state(estado)
    } else {
        mensageria_axum::router(pool.clone(), Config::new("receptor", ["t0k-de-teste-1234"]))
            .unwrap()
    };
    let pedidos = std::sync::Arc::new(Pedidos::default());
    let contador = std::sync::Arc::clone(&pedidos);
    let app = app.layer(axum::middleware::from_fn(
        move |pedido: axum::extract::Request, proximo: axum::middleware::Next| {
            let contador = std::sync::Arc::clone(&contador);
            let mut aberto = aberto.clone();
            async move {
                if pedido.uri().path().ends_with("/lote") {
                    contador.lotes.fetch_add(1, Relaxed);
                    let _ = aberto.wait_for(|aberto| *aberto).await;
                } else {
                    contador.unicos.fetch_add(1, Relaxed);
                }
                proximo.run(pedido).await
            }
        },
    ));
    let ouvinte = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", ouvinte.local_addr().unwrap());
    tokio::spawn(async move {
        let _ = axum::serve(ouvinte, app).await;
    });
    (url, pedidos)
}

async fn enfileirar_itens(pool: &sqlx::PgPool, chaves: impl IntoIterator<Item = String>) {
    let mut tx = pool.begin().await.unwrap();
    for chave in chaves {
        mensageria_core::enfileirar(&mut *tx, &ItemEnviado { chave })
            .await
            .unwrap();
    }
    tx.commit().await.unwrap();
}

fn relay_para(pool: &sqlx::PgPool, url: &str) -> mensageria_core::relay::Relay<Postgres> {
    let config = mensageria_core::relay::Config::new("emissor-lote")
        .com_lote(64)
        .com_concorrencia(64)
        .com_backoff(Duration::from_millis(10), Duration::from_millis(10));
    mensageria_core::relay::Relay::new(pool.clone(), config).recurso(
        mensageria_core::Destino::new(url)
            .unwrap()
            .com_token("t0k-de-teste-1234"),
    )
}

/// 320 messages through a relay with 64 deliveries in flight: every effect applied once, and
/// most of them rode shared requests to the batch route; a lone message later goes alone on
/// the single route.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn relay_agrupa_as_entregas_em_voo_num_lote() {
    use std::sync::atomic::Ordering::Relaxed;
    let db = mensageria_testes::PgIsolado::novo().await;
    let (url, pedidos) = receptor_contado(&db.pool, false).await;
    enfileirar_itens(&db.pool, (0..320).map(|n| format!("k{n}"))).await;
    let relay = relay_para(&db.pool, &url);
    let rodada = relay.drenar().await.unwrap();
    assert_eq!(rodada.entregues, 320, "{rodada:?}");
    assert_eq!(mensageria_testes::contar(&db.pool, "efeito").await, 320);
    assert_eq!(
        mensageria_testes::contar(&db.pool, "mensageria_saida").await,
        0
    );
    let (unicos, lotes) = (pedidos.unicos.load(Relaxed), pedidos.lotes.load(Relaxed));
    assert!(lotes >= 1, "no batch request ({unicos} single)");
    assert!(
        unicos + lotes <= 320 / 4,
        "{unicos} single + {lotes} batch requests for 320 messages"
    );

    enfileirar_itens(&db.pool, ["sozinha".to_owned()]).await;
    let antes = pedidos.unicos.load(Relaxed);
    assert_eq!(relay.drenar().await.unwrap().entregues, 1);
    assert_eq!(
        pedidos.unicos.load(Relaxed),
        antes + 1,
        "an idle route sends at once, alone"
    );
    db.descartar().await;
}

/// Issue 36: with producers running, each claim's few rows left at once in a request of their
/// own while earlier ones were still being applied, so a receptor got a request and a
/// transaction for every 15–20 events. Now, while a batch request of the route is out, a new
/// batch lingers for its answer and takes what starts meanwhile: three deliveries started one
/// by one while a batch is held at the receptor leave together in the next batch request (they
/// went alone, three single requests, before); an idle route still sends at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn com_um_lote_em_voo_o_seguinte_espera_a_resposta_e_junta_o_que_chega() {
    use std::sync::atomic::Ordering::Relaxed;
    let db = mensageria_testes::PgIsolado::novo().await;
    let (portao, aberto) = tokio::sync::watch::channel(true);
    let (url, pedidos) = receptor_contado_com_portao(&db.pool, false, aberto).await;
    let destino = mensageria_core::Destino::new(&url)
        .unwrap()
        .com_token("t0k-de-teste-1234");
    let postar = move |chave: &str| {
        let (destino, evento) = (
            destino.clone(),
            ItemEnviado {
                chave: chave.to_owned(),
            },
        );
        async move {
            let ctx = mensageria_core::ContextoEnvio::new(uuid::Uuid::now_v7(), "teste.lote");
            destino.postar(&evento, &ctx).await
        }
    };
    // The route's probe, answered: batches open freely from here on.
    let (a, b) = tokio::join!(postar("sonda-1"), postar("sonda-2"));
    a.unwrap();
    b.unwrap();
    assert_eq!(
        (pedidos.unicos.load(Relaxed), pedidos.lotes.load(Relaxed)),
        (0, 1)
    );

    portao.send_replace(false);
    let reter = postar.clone();
    let retido = tokio::spawn(async move {
        let (a, b) = tokio::join!(reter("retido-1"), reter("retido-2"));
        a.and(b)
    });
    mensageria_testes::esperar_ate(Duration::from_secs(5), || async {
        pedidos.lotes.load(Relaxed) == 2
    })
    .await;
    let mut seguintes = vec![];
    for n in 0..3 {
        seguintes.push(tokio::spawn(postar(&format!("seguinte-{n}"))));
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    tokio::time::sleep(Duration::from_millis(1)).await;
    portao.send_replace(true);
    retido.await.unwrap().unwrap();
    for entrega in seguintes {
        entrega.await.unwrap().unwrap();
    }
    assert_eq!(
        (pedidos.unicos.load(Relaxed), pedidos.lotes.load(Relaxed)),
        (0, 3),
        "(single, batch) requests: the three deliveries started while a batch was out should \
         have left together in one batch request"
    );
    assert_eq!(mensageria_testes::contar(&db.pool, "efeito").await, 7);
    db.descartar().await;
}

/// A poison event among 64 in flight together: only it is dead-lettered; the other 63 are
/// applied once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn relay_lote_com_veneno_so_ele_vai_para_as_mortas() {
    let db = mensageria_testes::PgIsolado::novo().await;
    let (url, _) = receptor_contado(&db.pool, false).await;
    let chaves = (0..64).map(|n| {
        if n == 40 {
            "recusar".to_owned()
        } else {
            format!("k{n}")
        }
    });
    enfileirar_itens(&db.pool, chaves).await;
    let relay = relay_para(&db.pool, &url);
    let rodada = relay.drenar().await.unwrap();
    assert_eq!((rodada.entregues, rodada.mortas), (63, 1), "{rodada:?}");
    assert_eq!(mensageria_testes::contar(&db.pool, "efeito").await, 63);
    let morta: String = sqlx::query_scalar("SELECT ultimo_erro FROM mensageria_mortas")
        .fetch_one(&db.pool)
        .await
        .unwrap();
    assert!(
        morta.contains("rejected") && morta.contains("chave recusada"),
        "{morta}"
    );
    db.descartar().await;
}

/// A receptor without the batch route (404 there): asked once, then one request per event;
/// nothing lost, nothing doubled.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn relay_volta_a_um_pedido_por_evento_sem_rota_de_lote() {
    use std::sync::atomic::Ordering::Relaxed;
    let db = mensageria_testes::PgIsolado::novo().await;
    let (url, pedidos) = receptor_contado(&db.pool, true).await;
    enfileirar_itens(&db.pool, (0..200).map(|n| format!("k{n}"))).await;
    let relay = relay_para(&db.pool, &url);
    assert_eq!(relay.drenar().await.unwrap().entregues, 200);
    assert_eq!(mensageria_testes::contar(&db.pool, "efeito").await, 200);
    assert_eq!(
        pedidos.lotes.load(Relaxed),
        1,
        "the batch route is asked once"
    );
    assert!(pedidos.unicos.load(Relaxed) >= 200);
    db.descartar().await;
}

/// Batches whose answers are lost after the receptor committed (the connection is reset instead
/// of the answer, a third of the time), or cut right after the request reached the receptor
/// (which may have committed or not: its handler is cancelled mid-batch): the relay sends them
/// again, the receptor answers `duplicate` for what it had applied, and every effect is applied
/// exactly once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn relay_lote_com_resposta_perdida_ou_cortada_aplica_uma_vez() {
    use mensageria_core::teste::ModoProxy;
    for (semente, modo) in [
        (7, ModoProxy::PerderResposta { fracao: 0.3 }),
        (8, ModoProxy::CortarAposEncaminhar),
    ] {
        let db = mensageria_testes::PgIsolado::novo().await;
        let (url, _) = receptor_contado(&db.pool, false).await;
        let destino: std::net::SocketAddr = url.trim_start_matches("http://").parse().unwrap();
        let proxy = mensageria_core::teste::ProxyDeFalhas::iniciar(destino, semente)
            .await
            .unwrap();
        proxy.modo(modo);
        enfileirar_itens(&db.pool, (0..300).map(|n| format!("k{n}"))).await;
        let relay = relay_para(&db.pool, &proxy.url());
        // A few rounds under the fault, then the network heals.
        for _ in 0..3 {
            relay.rodada().await.unwrap();
        }
        proxy.modo(ModoProxy::Passar);
        mensageria_testes::esperar_ate(Duration::from_secs(60), || async {
            relay.drenar().await.unwrap();
            mensageria_testes::contar(&db.pool, "mensageria_saida").await == 0
        })
        .await;
        let efeitos: i64 = sqlx::query_scalar("SELECT count(DISTINCT chave) FROM efeito")
            .fetch_one(&db.pool)
            .await
            .unwrap();
        let total = mensageria_testes::contar(&db.pool, "efeito").await;
        assert_eq!(
            (efeitos, total),
            (300, 300),
            "{modo:?}: {:?}",
            proxy.contagem()
        );
        assert_eq!(
            mensageria_testes::contar(&db.pool, "mensageria_mortas").await,
            0
        );
        db.descartar().await;
    }
}
