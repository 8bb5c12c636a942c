//! CloudEvents 1.0 on the wire (HTTP binding, binary mode), over real HTTP on 127.0.0.1, on
//! PostgreSQL and SQLite:
//!
//! - a relay delivering to a real receptor sends `ce-specversion: 1.0`, `ce-id` = the message
//!   id, `ce-type` = the tipo, `ce-source` = the app and `ce-time` = the enqueue instant, and the
//!   receptor applies each event once;
//! - a CloudEvents producer that is not a relay (the binding's binary-mode example, sent to a
//!   registered tipo, no `x-request-id`) is applied, then answered `duplicate`, with `ce-id` as
//!   the request id and as the message id of the dedup record;
//! - a `ce-type` of another tipo, a `ce-specversion` other than `1.0` and a structured-mode
//!   envelope are refused (400, 400, 415) and write nothing; so is a `ce-*` attribute sent
//!   twice, and the batch route checks the same.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::extract::{Request, State};
use axum::http::HeaderMap;
use axum::middleware::{Next, from_fn_with_state};
use axum::response::Response;
use chrono::{DateTime, Utc};
use mensageria_axum::{Config as ConfigReceptor, Rejeicao, receptor};
use mensageria_core::relay::{Config, Relay};
use mensageria_core::sqlx::{Executor, FromRow, Pool, Postgres, Sqlite, Transaction};
use mensageria_core::{Banco, ContextoEnvio, Destino, FalhaEnvio, enviador};
use mensageria_testes::{Sql, contar, e_postgres, esperar_saida_vazia, nos_dois_bancos};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

const TOKEN: &str = "t0k-ce-de-teste-1234";
const APP: &str = "pedidos";

#[derive(Debug, Serialize, Deserialize)]
struct Pedido {
    numero: String,
}

#[derive(Debug, Serialize, Deserialize)]
struct PedidoLite {
    numero: String,
}

#[enviador(tipo = "ce.pedido")]
async fn enviar_pedido(evento: Pedido, ctx: &ContextoEnvio) -> Result<(), FalhaEnvio> {
    ctx.exigir::<Destino>()?.postar(&evento, ctx).await
}

#[enviador(tipo = "ce.pedido-lite")]
async fn enviar_pedido_lite(evento: PedidoLite, ctx: &ContextoEnvio) -> Result<(), FalhaEnvio> {
    ctx.exigir::<Destino>()?.postar(&evento, ctx).await
}

#[receptor(tipo = "ce.pedido", chave_natural = evento.numero)]
async fn receber_pg(tx: &mut Transaction<'_, Postgres>, evento: Pedido) -> Result<(), Rejeicao> {
    sqlx::query("INSERT INTO efeito (numero) VALUES ($1)")
        .bind(&evento.numero)
        .execute(&mut **tx)
        .await?;
    Ok(())
}

#[receptor(tipo = "ce.pedido-lite", chave_natural = evento.numero)]
async fn receber_lite(
    tx: &mut Transaction<'_, Sqlite>,
    evento: PedidoLite,
) -> Result<(), Rejeicao> {
    sqlx::query("INSERT INTO efeito (numero) VALUES ($1)")
        .bind(&evento.numero)
        .execute(&mut **tx)
        .await?;
    Ok(())
}

/// The tipo of this backend's receptor (a tipo registers once, so SQLite has its own).
fn tipo_em<P>(pool: &P) -> &'static str {
    if e_postgres(pool) {
        "ce.pedido"
    } else {
        "ce.pedido-lite"
    }
}

/// Migrates `pool` and creates the effect table.
async fn preparar<DB: Sql + Banco>(pool: &Pool<DB>)
where
    for<'c> &'c mut DB::Connection: Executor<'c, Database = DB>,
{
    mensageria_core::migrar(pool).await.unwrap();
    sqlx::query("CREATE TABLE efeito (numero TEXT NOT NULL)")
        .execute(pool)
        .await
        .unwrap();
}

/// `(chave, id_mensagem)` of every dedup record, sorted.
async fn recebidas<DB: Sql>(pool: &Pool<DB>) -> Vec<(String, Option<String>)>
where
    for<'c> &'c mut DB::Connection: Executor<'c, Database = DB>,
    (String, Option<String>): for<'r> FromRow<'r, DB::Row>,
{
    let mut linhas: Vec<(String, Option<String>)> =
        sqlx::query_as("SELECT chave, CAST(id_mensagem AS TEXT) FROM mensageria_recebidas")
            .fetch_all(pool)
            .await
            .unwrap();
    linhas.sort();
    linhas
}

/// The headers of every request the receptores got, in arrival order.
type Gravados = Arc<Mutex<Vec<HeaderMap>>>;

async fn gravar(State(gravados): State<Gravados>, pedido: Request, next: Next) -> Response {
    gravados.lock().unwrap().push(pedido.headers().clone());
    next.run(pedido).await
}

/// The app's real receptores on a free port of 127.0.0.1, behind a layer that records each
/// request's headers: `(base URL, recorded headers)`.
async fn servir<DB: Banco>(pool: Pool<DB>) -> (String, Gravados) {
    let gravados = Gravados::default();
    let app = mensageria_axum::router(pool, ConfigReceptor::new("receptor", [TOKEN]))
        .unwrap()
        .layer(from_fn_with_state(Arc::clone(&gravados), gravar));
    let ouvinte = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let endereco = ouvinte.local_addr().unwrap();
    tokio::spawn(async move {
        let _ = axum::serve(ouvinte, app).await;
    });
    (format!("http://{endereco}"), gravados)
}

/// Fast settings for tests: short backoff, short poll.
fn config() -> Config {
    Config::new(APP)
        .com_intervalo(Duration::from_millis(50))
        .com_backoff(Duration::from_millis(20), Duration::from_millis(200))
        .com_tempo_limite_envio(Duration::from_secs(5))
        .com_lease(Duration::from_secs(30))
}

/// One header as text, which must be there.
fn texto<'a>(cabecalhos: &'a HeaderMap, nome: &str) -> &'a str {
    cabecalhos
        .get(nome)
        .unwrap_or_else(|| panic!("no `{nome}` in {cabecalhos:?}"))
        .to_str()
        .unwrap()
}

nos_dois_bancos! {
    async fn o_relay_entrega_em_modo_binario_com_os_cinco_atributos(db) {
        preparar(&db.pool).await;
        let tipo = tipo_em(&db.pool);
        let (base, gravados) = servir(db.pool.clone()).await;

        // The enqueue instants, to the millisecond `ce-time` carries.
        let antes = DateTime::from_timestamp_millis(Utc::now().timestamp_millis()).unwrap();
        let mut ids = HashSet::new();
        for n in 0..3 {
            let id = mensageria_core::enfileirar_json(&db.pool, tipo, &json!({ "numero": format!("p{n}") }))
                .await
                .unwrap();
            ids.insert(id.to_string());
        }
        let depois = Utc::now();
        let relay = Relay::new(db.pool.clone(), config())
            // One CloudEvents request per message: a batch (`/lote`) is mensageria's own
            // format, not a CloudEvent.
            .recurso(Destino::new(&base).unwrap().com_token(TOKEN).com_lote_maximo(1))
            .spawn()
            .unwrap();
        esperar_saida_vazia(&db.pool, 30).await;
        relay.shutdown(Duration::from_secs(5)).await;

        let gravados = gravados.lock().unwrap().clone();
        assert_eq!(gravados.len(), 3, "one request per message: {gravados:?}");
        let mut vistos = HashSet::new();
        for cabecalhos in &gravados {
            let id = texto(cabecalhos, "ce-id");
            assert_eq!(texto(cabecalhos, "ce-specversion"), "1.0");
            assert_eq!(id, texto(cabecalhos, "x-request-id"), "ce-id is the message id");
            assert_eq!(texto(cabecalhos, "ce-type"), tipo);
            assert_eq!(texto(cabecalhos, "ce-source"), APP);
            assert_eq!(texto(cabecalhos, "content-type"), "application/json", "binary mode");
            let quando = DateTime::parse_from_rfc3339(texto(cabecalhos, "ce-time"))
                .unwrap_or_else(|erro| panic!("ce-time is not RFC 3339: {erro}"))
                .with_timezone(&Utc);
            assert!(antes <= quando && quando <= depois, "{antes} <= {quando} <= {depois}");
            let (segundos, nanos) = uuid::Uuid::parse_str(id)
                .unwrap()
                .get_timestamp()
                .expect("the message id is a UUIDv7")
                .to_unix();
            assert_eq!(
                quando,
                DateTime::from_timestamp(segundos as i64, nanos).unwrap(),
                "ce-time is the message id's timestamp"
            );
            vistos.insert(id.to_owned());
        }
        assert_eq!(vistos, ids, "every message arrived, under its own id");
        // The receptor applied each once and kept each message id.
        assert_eq!(contar(&db.pool, "efeito").await, 3);
        let ids_guardados: HashSet<String> = recebidas(&db.pool)
            .await
            .into_iter()
            .filter_map(|(_, id)| id)
            .collect();
        assert_eq!(ids_guardados, ids);
    }
}

/// The attributes a test changes in the binding's example.
struct Atributos<'a> {
    ce_specversion: &'a str,
    ce_type: &'a str,
    ce_id: &'a str,
}

/// A request as the HTTP binding's binary-mode example (section 3.1.3.1) writes it, with
/// `atributos`, sent to the receptor of `tipo` with the token and no `x-request-id`.
fn exemplo_binario(
    http: &reqwest::Client,
    base: &str,
    tipo: &str,
    atributos: Atributos<'_>,
) -> reqwest::RequestBuilder {
    let Atributos {
        ce_specversion,
        ce_type,
        ce_id,
    } = atributos;
    http.post(format!("{base}/m2m/{tipo}"))
        .bearer_auth(TOKEN)
        .header("ce-specversion", ce_specversion)
        .header("ce-type", ce_type)
        .header("ce-time", "2018-04-05T03:56:24Z")
        .header("ce-id", ce_id)
        .header("ce-source", "/mycontext/subcontext")
        .header("content-type", "application/json; charset=utf-8")
}

/// The example's attributes with `ce-type` = `ce_type` and `ce-id` = `ce_id`.
fn atributos<'a>(ce_type: &'a str, ce_id: &'a str) -> Atributos<'a> {
    Atributos {
        ce_specversion: "1.0",
        ce_type,
        ce_id,
    }
}

/// Sends and returns `(status, x-request-id of the answer, JSON body)`.
async fn enviar(pedido: reqwest::RequestBuilder, corpo: Value) -> (u16, Option<String>, Value) {
    let resposta = pedido.body(corpo.to_string()).send().await.unwrap();
    let status = resposta.status().as_u16();
    let id = resposta
        .headers()
        .get("x-request-id")
        .map(|v| v.to_str().unwrap().to_owned());
    (status, id, resposta.json().await.unwrap())
}

nos_dois_bancos! {
    async fn um_produtor_cloudevents_e_aplicado_uma_vez(db) {
        preparar(&db.pool).await;
        let tipo = tipo_em(&db.pool);
        let (base, _) = servir(db.pool.clone()).await;
        let http = reqwest::Client::new();

        let ce_id = uuid::Uuid::now_v7().to_string();
        let pedido = || exemplo_binario(&http, &base, tipo, atributos(tipo, &ce_id));
        for esperado in ["applied", "duplicate"] {
            let (status, id, corpo) = enviar(pedido(), json!({ "numero": "ce-1" })).await;
            assert_eq!((status, corpo["resultado"].as_str()), (200, Some(esperado)), "{corpo}");
            assert_eq!(corpo["tipo"], tipo);
            assert_eq!(corpo["request_id"], ce_id.as_str(), "ce-id is the request id");
            assert_eq!(id.as_deref(), Some(ce_id.as_str()));
        }
        // The spec's own id is not a UUID: it is still the request id, and no message id.
        let (status, id, corpo) = enviar(
            exemplo_binario(&http, &base, tipo, atributos(tipo, "1234-1234-1234")),
            json!({ "numero": "ce-2" }),
        )
        .await;
        assert_eq!((status, corpo["resultado"].as_str()), (200, Some("applied")), "{corpo}");
        assert_eq!(id.as_deref(), Some("1234-1234-1234"));

        assert_eq!(contar(&db.pool, "efeito").await, 2);
        assert_eq!(
            recebidas(&db.pool).await,
            vec![
                (r#"["ce-1"]"#.to_owned(), Some(ce_id.clone())),
                (r#"["ce-2"]"#.to_owned(), None),
            ],
            "the dedup record keeps ce-id as the message id when it is a UUID"
        );
    }
}

nos_dois_bancos! {
    async fn atributos_que_nao_cabem_na_rota_sao_recusados_sem_escrever(db) {
        preparar(&db.pool).await;
        let tipo = tipo_em(&db.pool);
        let (base, _) = servir(db.pool.clone()).await;
        let http = reqwest::Client::new();
        let ce_id = uuid::Uuid::now_v7().to_string();
        let corpo = json!({ "numero": "ce-recusado" });

        // Another tipo's event, posted to this route (the spec example's type as is).
        let (status, id, resposta) = enviar(
            exemplo_binario(&http, &base, tipo, atributos("com.example.someevent", &ce_id)),
            corpo.clone(),
        )
        .await;
        assert_eq!((status, resposta["erro"].as_str()), (400, Some("invalid_cloudevent")), "{resposta}");
        let mensagem = resposta["mensagem"].as_str().unwrap();
        assert!(mensagem.contains("com.example.someevent") && mensagem.contains(tipo), "{mensagem}");
        assert_eq!(id.as_deref(), Some(ce_id.as_str()));

        // A CloudEvents version this receptor does not read.
        let (status, _, resposta) = enviar(
            exemplo_binario(
                &http,
                &base,
                tipo,
                Atributos { ce_specversion: "0.3", ..atributos(tipo, &ce_id) },
            ),
            corpo.clone(),
        )
        .await;
        assert_eq!((status, resposta["erro"].as_str()), (400, Some("invalid_cloudevent")), "{resposta}");
        assert!(resposta["mensagem"].as_str().unwrap().contains("ce-specversion"), "{resposta}");

        // Structured mode: the whole event as an envelope, which is not the data.
        let envelope = json!({
            "specversion": "1.0", "type": tipo, "source": "/mycontext", "id": ce_id,
            "datacontenttype": "application/json", "data": corpo,
        });
        let (status, _, resposta) = enviar(
            http.post(format!("{base}/m2m/{tipo}"))
                .bearer_auth(TOKEN)
                .header("content-type", "application/cloudevents+json; charset=utf-8"),
            envelope,
        )
        .await;
        assert_eq!((status, resposta["erro"].as_str()), (415, Some("unsupported_media_type")), "{resposta}");
        assert!(resposta["mensagem"].as_str().unwrap().contains("structured mode"), "{resposta}");

        assert_eq!(contar(&db.pool, "efeito").await, 0);
        assert_eq!(contar(&db.pool, "mensageria_recebidas").await, 0);
        // And the same event, sent right, is applied.
        let (status, _, resposta) = enviar(exemplo_binario(&http, &base, tipo, atributos(tipo, &ce_id)), corpo).await;
        assert_eq!((status, resposta["resultado"].as_str()), (200, Some("applied")), "{resposta}");
        assert_eq!(contar(&db.pool, "efeito").await, 1);
    }
}

nos_dois_bancos! {
    /// The batch route checks the CloudEvents attributes as the single route does (issue 25: a
    /// `ce-type` of another tipo and `ce-specversion: 9.9` were answered 200 and applied), and
    /// both routes refuse a `ce-*` attribute sent twice (the single route read only the first
    /// of two `ce-type`s).
    async fn a_rota_de_lote_confere_os_atributos_e_um_atributo_repetido_e_recusado(db) {
        preparar(&db.pool).await;
        let tipo = tipo_em(&db.pool);
        let (base, _) = servir(db.pool.clone()).await;
        let http = reqwest::Client::new();
        let lote = |numero: &str| json!({ "eventos": [{ "id": uuid::Uuid::now_v7(), "payload": { "numero": numero } }] });
        let na_rota_de_lote = |cabecalhos: &[(&str, &str)]| {
            let mut pedido = http
                .post(format!("{base}/m2m/{tipo}/lote"))
                .bearer_auth(TOKEN)
                .header("content-type", "application/json");
            for (nome, valor) in cabecalhos {
                pedido = pedido.header(*nome, *valor);
            }
            pedido
        };
        let recusado = |(status, _, resposta): (u16, Option<String>, Value), atributo: &str| {
            assert_eq!((status, resposta["erro"].as_str()), (400, Some("invalid_cloudevent")), "{resposta}");
            assert!(resposta["mensagem"].as_str().unwrap().contains(atributo), "{resposta}");
        };

        let outro_tipo = [("ce-specversion", "1.0"), ("ce-type", "com.example.someevent")];
        recusado(enviar(na_rota_de_lote(&outro_tipo), lote("l1")).await, "ce-type");
        let outra_versao = [("ce-specversion", "9.9"), ("ce-type", tipo)];
        recusado(enviar(na_rota_de_lote(&outra_versao), lote("l2")).await, "ce-specversion");
        let tipo_duas_vezes = [("ce-specversion", "1.0"), ("ce-type", tipo), ("ce-type", tipo)];
        recusado(enviar(na_rota_de_lote(&tipo_duas_vezes), lote("l3")).await, "ce-type");

        // The single route: the first `ce-type` fits, the second does not; a repeated `ce-id`.
        let ce_id = uuid::Uuid::now_v7().to_string();
        let dois_tipos = exemplo_binario(&http, &base, tipo, atributos(tipo, &ce_id))
            .header("ce-type", "com.example.someevent");
        recusado(enviar(dois_tipos, json!({ "numero": "u1" })).await, "ce-type");
        let dois_ids = exemplo_binario(&http, &base, tipo, atributos(tipo, &ce_id))
            .header("ce-id", uuid::Uuid::now_v7().to_string());
        recusado(enviar(dois_ids, json!({ "numero": "u2" })).await, "ce-id");
        assert_eq!(contar(&db.pool, "efeito").await, 0);
        assert_eq!(contar(&db.pool, "mensageria_recebidas").await, 0);

        // Attributes that fit, once each: applied on both routes.
        let certos = [("ce-specversion", "1.0"), ("ce-type", tipo), ("ce-id", ce_id.as_str())];
        let (status, _, resposta) = enviar(na_rota_de_lote(&certos), lote("l4")).await;
        assert_eq!((status, resposta["resultados"][0]["resultado"].as_str()), (200, Some("applied")), "{resposta}");
        let (status, _, resposta) = enviar(exemplo_binario(&http, &base, tipo, atributos(tipo, &ce_id)), json!({ "numero": "u3" })).await;
        assert_eq!((status, resposta["resultado"].as_str()), (200, Some("applied")), "{resposta}");
        assert_eq!(contar(&db.pool, "efeito").await, 2);
    }
}
