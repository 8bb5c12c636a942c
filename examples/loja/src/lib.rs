//! `examples/loja`: three services, each its own process. `pedido.criado` goes through a NATS
//! JetStream stream to two receiving apps (fan-out); `estoque.reservado` comes back over HTTP.
//!
//! - `pedidos` (`src/bin/pedidos.rs`) owns the PostgreSQL schema (runs `migrar`) and the stream
//!   (`Fluxo::garantir`). `POST /pedidos` inserts an order and enqueues `pedido.criado` in the
//!   same transaction; its relay publishes it to the stream (`mensageria_nats::Publicador`); its
//!   router's receptor of `estoque.reservado` records the reservation.
//! - `estoque` (`src/bin/estoque.rs`) shares the schema without owning it (`esperar_schema`)
//!   and waits for the stream. Its receptor of `pedido.criado` (natural key: the order id),
//!   fed by its durable consumer (`mensageria_nats::Consumidor`), decrements the stock and
//!   replies by enqueueing `estoque.reservado` in the receptor's own transaction; its relay
//!   posts the reply to `pedidos` over HTTP.
//! - `analise` (`src/bin/analise.rs`), a pure receiver on the same schema (it waits for it, as
//!   `estoque` does), has a durable consumer of its own on the same stream, so it gets every
//!   `pedido.criado` too, and records one row per order with a count of applications. Its dedup
//!   records are keyed by its app name: `estoque`'s, in the same table, never hide an order from
//!   it.
//!
//! Each service is its own binary: registrations travel with the code that is linked, so each
//! relay claims only its own tipo and each consumer feeds only its own receptores. This library
//! holds what the services share — the event types ([`contratos`], declared once with
//! `#[evento]`, which registers nothing), the pool, the stream — and the orchestration of
//! `demo` and of the test: no enviador, no receptor.
//!
//! `cargo run -p loja --bin demo` runs the three against the local PostgreSQL (one schema of
//! their own) and the NATS server at `NATS_URL` (a stream of their own).
//!
//! With `LOJA_SPANS` naming a file, each service exports its spans there ([`rastreamento`]):
//! one order is one trace across the three processes, from `POST /pedidos` to the reply's
//! receptor.

pub mod rastreamento;

pub mod contratos {
    //! The events the two services exchange, each with its tipo declared once next to it: the
    //! sender's `#[enviador]` and the receiver's `#[receptor]` both take it from the type. Each
    //! derives its JSON Schema (`ToSchema`): every service commits its contracts
    //! (`examples/loja/contratos/<service>/`) and a test of each binary refuses a change of these
    //! types that a service still running the old one could not read.

    use mensageria_axum::utoipa::{self, ToSchema};
    use mensageria_core::evento;
    use serde::{Deserialize, Serialize};

    /// Sent by `pedidos` when an order is created.
    #[evento(tipo = "pedido.criado")]
    #[derive(Debug, Serialize, Deserialize, ToSchema)]
    pub struct PedidoCriado {
        /// The order id (the receptor's natural key).
        pub id: i64,
        /// The item ordered.
        pub item: String,
    }

    /// `estoque`'s reply: the order's unit is reserved.
    #[evento(tipo = "estoque.reservado")]
    #[derive(Debug, Serialize, Deserialize, ToSchema)]
    pub struct EstoqueReservado {
        /// The order whose unit was reserved.
        pub pedido: i64,
    }
}

use std::error::Error;
use std::path::Path;
use std::process::Stdio;
use std::str::FromStr as _;
use std::time::{Duration, Instant};

use mensageria_core::sqlx::PgPool;
use mensageria_core::sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use mensageria_core::teste::PgIsolado;
use mensageria_nats::async_nats::jetstream;
use mensageria_nats::{ConsumidorHandle, Fluxo};

/// The token both HTTP ends accept and present (one shared secret, for the example).
pub const TOKEN: &str = "loja-segredo-0123456789";

/// The stock every item starts with.
pub const ESTOQUE_INICIAL: i64 = 1_000_000;

/// The services' pool: `DATABASE_URL`, with `search_path` set to `LOJA_SCHEMA` when given.
/// Three connections: a relay, a router and a consumer each get one of these.
pub async fn pool_do_servico() -> Result<PgPool, Box<dyn Error>> {
    let url = mensageria_core::teste::database_url();
    let mut opcoes = PgConnectOptions::from_str(&url)?;
    if let Ok(schema) = std::env::var("LOJA_SCHEMA") {
        opcoes = opcoes.options([("search_path", schema.as_str())]);
    }
    Ok(PgPoolOptions::new()
        .max_connections(3)
        .connect_with(opcoes)
        .await?)
}

/// For the schema's owner (`pedidos`): creates `LOJA_SCHEMA` when it is missing, so a fresh
/// database needs no hand step (`migrar` itself never creates a schema: that is the owner's
/// decision, taken here). The others wait for it (`esperar_schema`).
pub async fn criar_schema_do_dono(pool: &PgPool) -> Result<(), Box<dyn Error>> {
    let Ok(schema) = std::env::var("LOJA_SCHEMA") else {
        return Ok(());
    };
    let valido = !schema.is_empty()
        && schema.len() <= 63
        && schema
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_')
        && !schema.starts_with(|c: char| c.is_ascii_digit());
    if !valido {
        return Err(format!(
            "LOJA_SCHEMA={schema:?}: use letters, digits and `_` (not first), at most 63"
        )
        .into());
    }
    mensageria_core::sqlx::query(mensageria_core::sqlx::AssertSqlSafe(format!(
        "CREATE SCHEMA IF NOT EXISTS \"{schema}\""
    )))
    .execute(pool)
    .await?;
    Ok(())
}

/// `NATS_URL` (one URL, or a comma-separated list of a cluster's servers), or the local server
/// (`nats://127.0.0.1:4222`).
pub fn nats_url() -> String {
    std::env::var("NATS_URL").unwrap_or_else(|_| "nats://127.0.0.1:4222".into())
}

/// A JetStream context on [`nats_url`], its connection named `app` (as the server lists it).
pub async fn jetstream(app: &str) -> Result<jetstream::Context, Box<dyn Error>> {
    // A comma-separated list follows a cluster when the node in use dies.
    mensageria_nats::conectar(&nats_url(), app)
        .await
        .map_err(|erro| {
            format!(
            "{erro} (NATS_URL); for a single local server: nats-server -a 127.0.0.1 -p 4222 -js \
             -sd <dir>"
        )
        .into()
        })
}

/// The stream `pedido.criado` travels on: `LOJA_FLUXO` (default `LOJA`), its subjects
/// `{LOJA_PREFIXO}.{tipo}` (default prefix `loja`), with `LOJA_NATS_REPLICAS` replicas: 3 on a
/// cluster (production), 1 (the default here, so the demo runs on one laptop server) when one
/// server holds it — which does not survive the loss of that server's disk. `pedidos` owns it
/// ([`Fluxo::garantir`]); the receiving services wait for it ([`esperar_fluxo`]) and check it
/// when they start consuming.
pub fn fluxo() -> Result<Fluxo, Box<dyn Error>> {
    let nome = std::env::var("LOJA_FLUXO").unwrap_or_else(|_| "LOJA".into());
    let prefixo = std::env::var("LOJA_PREFIXO").unwrap_or_else(|_| "loja".into());
    let replicas = match std::env::var("LOJA_NATS_REPLICAS") {
        Ok(texto) => texto
            .parse()
            .map_err(|_| format!("LOJA_NATS_REPLICAS={texto:?}: a number of replicas, 1 to 5"))?,
        Err(_) => 1,
    };
    Ok(Fluxo::new(nome, prefixo)?.com_replicas(replicas))
}

/// For a service that consumes the stream without owning it: waits (bounded) until `pedidos`
/// has created it, as `esperar_schema` waits for the tables. So the services start in any order.
pub async fn esperar_fluxo(
    js: &jetstream::Context,
    fluxo: &Fluxo,
    prazo: Duration,
) -> Result<(), Box<dyn Error>> {
    let fim = Instant::now() + prazo;
    loop {
        match js.get_stream(fluxo.nome()).await {
            Ok(_) => return Ok(()),
            Err(erro) if Instant::now() >= fim => {
                return Err(format!(
                    "the JetStream stream {} is still missing after {prazo:?} ({erro}): its \
                     owner, pedidos, creates it at start (Fluxo::garantir); start pedidos with \
                     the same LOJA_FLUXO and NATS_URL",
                    fluxo.nome()
                )
                .into());
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(200)).await,
        }
    }
}

/// What [`rodar`] found at the end.
#[derive(Debug, PartialEq, Eq)]
pub struct Resultado {
    /// Orders accepted by `pedidos`.
    pub pedidos: i64,
    /// Orders with exactly one reservation.
    pub reservados_uma_vez: i64,
    /// Orders with more than one reservation (must be 0).
    pub reservados_mais_de_uma_vez: i64,
    /// Units taken from the stock (must equal `pedidos`).
    pub unidades_baixadas: i64,
    /// Orders `analise` recorded with exactly one application.
    pub analisados_uma_vez: i64,
    /// Orders `analise` applied more than once (must be 0).
    pub analisados_mais_de_uma_vez: i64,
}

impl Resultado {
    /// Every order accepted, reserved exactly once, one unit taken per order, and analysed
    /// exactly once.
    pub fn certo(&self, n: i64) -> bool {
        self.pedidos == n
            && self.reservados_uma_vez == n
            && self.reservados_mais_de_uma_vez == 0
            && self.unidades_baixadas == n
            && self.analisados_uma_vez == n
            && self.analisados_mais_de_uma_vez == 0
    }

    fn completo(&self, n: i64) -> bool {
        self.reservados_uma_vez + self.reservados_mais_de_uma_vez >= n
            && self.analisados_uma_vez + self.analisados_mais_de_uma_vez >= n
    }
}

/// The table the demo prints: one line per figure, what it must be beside it.
impl std::fmt::Display for Resultado {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let linhas = [
            (
                "orders",
                self.pedidos,
                "accepted by pedidos (POST /pedidos)",
            ),
            (
                "reserved once",
                self.reservados_uma_vez,
                "orders with exactly one reservation (must be all)",
            ),
            (
                "reserved twice",
                self.reservados_mais_de_uma_vez,
                "orders reserved more than once (must be 0)",
            ),
            (
                "units taken",
                self.unidades_baixadas,
                "from estoque's stock (must equal the orders)",
            ),
            (
                "analysed once",
                self.analisados_uma_vez,
                "orders analise applied exactly once (must be all)",
            ),
            (
                "analysed twice",
                self.analisados_mais_de_uma_vez,
                "orders analise applied more than once (must be 0)",
            ),
        ];
        for (nome, valor, sentido) in linhas {
            writeln!(f, "  {nome:<16}{valor:>8}  {sentido}")?;
        }
        Ok(())
    }
}

/// The three services' executables.
#[derive(Debug, Clone, Copy)]
pub struct Executaveis<'a> {
    /// `pedidos`: owner of the shared schema and of the stream.
    pub pedidos: &'a str,
    /// `estoque`: consumes `pedido.criado`, replies over HTTP.
    pub estoque: &'a str,
    /// `analise`: consumes `pedido.criado` on the same schema, with dedup records of its own.
    pub analise: &'a str,
}

/// Starts `estoque`, `analise` (first: they wait for their owner) and `pedidos` as child
/// processes — the three on one schema of their own and a JetStream stream named after it —
/// sends `n` orders, waits until every one is reserved and analysed (or `prazo` passes), stops
/// the three with SIGTERM (graceful shutdown), deletes the stream and the schema, and returns the
/// counts. The services inherit
/// this process's environment (`LOJA_SPANS` included, see [`rastreamento`]).
pub async fn rodar(
    exes: Executaveis<'_>,
    n: i64,
    prazo: Duration,
) -> Result<Resultado, Box<dyn Error>> {
    rodar_com(exes, n, prazo, None).await
}

/// [`rodar`], with each service exporting its spans to the file `spans` ([`rastreamento`],
/// `LOJA_SPANS`). The services have stopped when it returns: every span they recorded is there.
pub async fn rodar_gravando_spans(
    exes: Executaveis<'_>,
    n: i64,
    prazo: Duration,
    spans: &Path,
) -> Result<Resultado, Box<dyn Error>> {
    rodar_com(exes, n, prazo, Some(spans)).await
}

async fn rodar_com(
    exes: Executaveis<'_>,
    n: i64,
    prazo: Duration,
    spans: Option<&Path>,
) -> Result<Resultado, Box<dyn Error>> {
    let js = jetstream("loja-demo").await?; // fails at once, saying so, when NATS is down
    varrer_fluxos_abandonados(&js).await;
    // An empty schema, shared by the three: `pedidos` migrates it.
    let url = mensageria_core::teste::database_url();
    let db = PgIsolado::vazio(&url, 2).await?;
    // A stream and subjects of this run's own (parallel runs share the server).
    let sufixo = db.schema().rsplit('_').next().unwrap_or("0").to_owned();
    let (nome_fluxo, prefixo) = (format!("LOJA_{sufixo}"), format!("loja_{sufixo}"));
    let porta_pedidos = porta_livre()?;
    let url_pedidos = format!("http://127.0.0.1:{porta_pedidos}");
    let comando = |exe: &str, schema: &str| {
        let mut comando = tokio::process::Command::new(exe);
        comando
            .env("LOJA_SCHEMA", schema)
            .env("LOJA_FLUXO", &nome_fluxo)
            .env("LOJA_PREFIXO", &prefixo)
            .env("NATS_URL", nats_url())
            // Each service its own app name: one durable consumer per receiving app.
            .env_remove("MENSAGERIA_APP")
            .env_remove("MENSAGERIA_INSTANCE")
            .stdin(Stdio::null())
            .kill_on_drop(true);
        if let Some(spans) = spans {
            comando.env(rastreamento::VARIAVEL, spans);
        }
        comando
    };
    let estoque = comando(exes.estoque, db.schema())
        .env("LOJA_DESTINO", &url_pedidos)
        .spawn()?;
    let analise = comando(exes.analise, db.schema()).spawn()?;
    let pedidos = comando(exes.pedidos, db.schema())
        .env("LOJA_PORTA", porta_pedidos.to_string())
        .spawn()?;
    let mut filhos = [
        ("estoque", estoque),
        ("analise", analise),
        ("pedidos", pedidos),
    ];

    let resultado = enviar_e_conferir(&db, &mut filhos, &url_pedidos, n, prazo).await;
    let mut parados = Vec::new();
    for (nome, filho) in filhos.iter_mut().rev() {
        parados.push(parar(nome, filho).await); // pedidos first: nothing more is published
    }
    // The stream, then the schema go, whatever happened.
    let apagado = apagar_fluxo(&js, &nome_fluxo).await;
    let fechado = db.fechar().await;
    let resultado = resultado?;
    for parado in parados {
        parado?;
    }
    apagado?;
    fechado?;
    Ok(resultado)
}

async fn enviar_e_conferir(
    db: &PgIsolado,
    filhos: &mut [(&str, tokio::process::Child)],
    url_pedidos: &str,
    n: i64,
    prazo: Duration,
) -> Result<Resultado, Box<dyn Error>> {
    let cliente = reqwest::Client::new();
    let fim = Instant::now() + prazo;
    for id in 1..=n {
        // Retried until `pedidos` listens (it migrates and creates the stream first).
        loop {
            let corpo = format!(r#"{{"id":{id},"item":"caneta"}}"#);
            let envio = cliente
                .post(format!("{url_pedidos}/pedidos"))
                .header("content-type", "application/json")
                .body(corpo)
                .send()
                .await;
            match envio {
                Ok(resposta) if resposta.status().is_success() => break,
                _ if Instant::now() < fim => {
                    vivos(filhos)?;
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
                Ok(resposta) => return Err(format!("order {id}: {}", resposta.status()).into()),
                Err(erro) => return Err(format!("order {id}: {erro}").into()),
            }
        }
    }
    conferir_asyncapi(&cliente, url_pedidos).await?;
    loop {
        match contar(db.pool()).await {
            Ok(resultado) if resultado.completo(n) || Instant::now() >= fim => {
                return Ok(resultado);
            }
            // Each service creates its table at start: one may not have yet.
            Err(erro) if !tabela_ausente(&erro) || Instant::now() >= fim => {
                return Err(erro.into());
            }
            Ok(_) | Err(_) => {}
        }
        vivos(filhos)?;
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// `pedidos` serves its AsyncAPI document beside its OpenAPI one: it publishes `pedido.criado`
/// to the stream (and receives `estoque.reservado` over HTTP, not through the stream).
async fn conferir_asyncapi(
    cliente: &reqwest::Client,
    url_pedidos: &str,
) -> Result<(), Box<dyn Error>> {
    let texto = cliente
        .get(format!("{url_pedidos}/m2m/asyncapi.json"))
        .send()
        .await?
        .error_for_status()?
        .text()
        .await?;
    let documento: serde_json::Value = serde_json::from_str(&texto)?;
    let operacao = |id: &str| {
        documento["operations"][id]["action"]
            .as_str()
            .map(str::to_owned)
    };
    if documento["asyncapi"] != "3.0.0"
        || operacao("envia.pedido.criado").as_deref() != Some("send")
        || operacao("recebe.estoque.reservado").is_some()
    {
        return Err(format!(
            "pedidos' /m2m/asyncapi.json is not what it sends and receives: {documento}"
        )
        .into());
    }
    Ok(())
}

/// A service that exited before its SIGTERM fails the run at once (its error is on stderr).
fn vivos(filhos: &mut [(&str, tokio::process::Child)]) -> Result<(), Box<dyn Error>> {
    for (nome, filho) in filhos {
        if let Some(status) = filho.try_wait()? {
            return Err(
                format!("{nome} exited early ({status}); its error is printed above").into(),
            );
        }
    }
    Ok(())
}

async fn contar(pool: &PgPool) -> Result<Resultado, mensageria_core::sqlx::Error> {
    let (pedidos, uma, mais, baixadas): (i64, i64, i64, i64) = mensageria_core::sqlx::query_as(
        "SELECT (SELECT count(*) FROM pedidos), \
                (SELECT count(*) FROM (SELECT pedido FROM reservas GROUP BY pedido \
                                       HAVING count(*) = 1) r), \
                (SELECT count(*) FROM (SELECT pedido FROM reservas GROUP BY pedido \
                                       HAVING count(*) > 1) r), \
                (SELECT coalesce(sum($1 - qtd), 0)::BIGINT FROM estoque)",
    )
    .bind(ESTOQUE_INICIAL)
    .fetch_one(pool)
    .await?;
    let (analisados_uma_vez, analisados_mais_de_uma_vez): (i64, i64) =
        mensageria_core::sqlx::query_as(
            "SELECT count(*) FILTER (WHERE aplicacoes = 1), \
                    count(*) FILTER (WHERE aplicacoes > 1) FROM analises",
        )
        .fetch_one(pool)
        .await?;
    Ok(Resultado {
        pedidos,
        reservados_uma_vez: uma,
        reservados_mais_de_uma_vez: mais,
        unidades_baixadas: baixadas,
        analisados_uma_vez,
        analisados_mais_de_uma_vez,
    })
}

/// PostgreSQL's `undefined_table`: a service has not created its table yet.
fn tabela_ausente(erro: &mensageria_core::sqlx::Error) -> bool {
    erro.as_database_error()
        .and_then(|erro| erro.code())
        .is_some_and(|codigo| codigo == "42P01")
}

/// Deletes the run's stream (and with it the services' durable consumers).
/// Streams `LOJA_*` created over an hour ago: what killed runs left behind (a run lasts seconds,
/// and deletes its own stream however it ends, unless it is killed). Deleted; a failure is only
/// logged (another run may be sweeping too).
async fn varrer_fluxos_abandonados(js: &jetstream::Context) {
    use futures_util::TryStreamExt as _;
    use mensageria_nats::async_nats::datetime;
    let Ok(nomes) = js.stream_names().try_collect::<Vec<String>>().await else {
        return;
    };
    for nome in nomes.into_iter().filter(|nome| nome.starts_with("LOJA_")) {
        let Ok(mut fluxo) = js.get_stream(&nome).await else {
            continue;
        };
        let Ok(info) = fluxo.info().await else {
            continue;
        };
        let abandonado = datetime::add_std_duration(info.created, Duration::from_secs(3600))
            .is_ok_and(|limite| limite < datetime::now());
        if abandonado && js.delete_stream(&nome).await.is_ok() {
            tracing::info!(stream = %nome, "loja: deleted a stream a killed run left behind");
        }
    }
}

async fn apagar_fluxo(js: &jetstream::Context, nome: &str) -> Result<(), Box<dyn Error>> {
    let resposta = js
        .delete_stream(nome)
        .await
        .map_err(|erro| format!("deleting the JetStream stream {nome}: {erro}"))?;
    if !resposta.success {
        return Err(format!("the server did not delete the JetStream stream {nome}").into());
    }
    Ok(())
}

/// A free port on 127.0.0.1 (bound, read, released).
fn porta_livre() -> std::io::Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port())
}

/// SIGTERM (what systemd and Kubernetes send: the services' graceful shutdown), then SIGKILL
/// after 15 s. A service that had to be killed, or that exited with an error, fails the run:
/// shutting down is part of the check.
async fn parar(nome: &str, filho: &mut tokio::process::Child) -> Result<(), String> {
    if let Some(pid) = filho.id() {
        let _ = tokio::process::Command::new("kill")
            .args(["-TERM", &pid.to_string()])
            .status()
            .await;
    }
    match tokio::time::timeout(Duration::from_secs(15), filho.wait()).await {
        Ok(Ok(status)) if status.success() => Ok(()),
        Ok(Ok(status)) => Err(format!("{nome} did not stop cleanly on SIGTERM ({status})")),
        Ok(Err(erro)) => Err(format!("waiting for {nome}: {erro}")),
        Err(_) => {
            let _ = filho.kill().await;
            Err(format!(
                "{nome} was still running 15 s after SIGTERM: killed"
            ))
        }
    }
}

/// `pedidos`' process, after its pool is open: serves `app` on `LOJA_PORTA` with the relay
/// already spawned, and on SIGTERM or SIGINT stops accepting HTTP first, then shuts the relay
/// down.
pub async fn servir_ate_sigint(
    app: mensageria_axum::axum::Router,
    relay: mensageria_core::relay::RelayHandle,
) -> Result<(), Box<dyn Error>> {
    let porta = std::env::var("LOJA_PORTA").unwrap_or_else(|_| "8080".into());
    let ouvinte = tokio::net::TcpListener::bind(format!("127.0.0.1:{porta}")).await?;
    mensageria_axum::servir(ouvinte, app)
        .com_desligamento(mensageria_core::desligamento::sinal())
        .await?; // 1. no new requests; those in flight answered
    relay.shutdown(Duration::from_secs(10)).await; // 2. then the relay
    Ok(())
}

/// A consuming service's process, once its consumer (and relay, if it sends) run: on SIGTERM
/// or SIGINT the consumer stops fetching, settles the batch it is applying and flushes its
/// last acks to the server, then the relay shuts down (it may still hold replies that batch
/// enqueued).
pub async fn consumir_ate_sigint(
    consumidor: ConsumidorHandle,
    relay: Option<mensageria_core::relay::RelayHandle>,
) -> Result<(), Box<dyn Error>> {
    mensageria_core::desligamento::sinal().await;
    consumidor.shutdown(Duration::from_secs(10)).await; // 1. nothing more applied; acks flushed
    if let Some(relay) = relay {
        relay.shutdown(Duration::from_secs(10)).await; // 2. then the relay
    }
    Ok(())
}

/// Installs this process's Prometheus recorder (once, at start) with mensageria's metric
/// descriptions; mount [`mensageria_axum::metricas::rota`] with the handle, or
/// [`servir_metricas`] for a service without a router of its own.
pub fn metricas() -> Result<mensageria_axum::metricas::PrometheusHandle, Box<dyn Error>> {
    let handle = mensageria_axum::metricas::PrometheusBuilder::new().install_recorder()?;
    mensageria_axum::metricas::descrever();
    Ok(handle)
}

/// For `estoque` and `analise`, which serve no HTTP otherwise: `GET /metrics` on 127.0.0.1 at
/// `LOJA_METRICAS_PORTA` (a free port when unset), its address logged at INFO. Runs until the
/// process ends.
pub async fn servir_metricas(
    handle: mensageria_axum::metricas::PrometheusHandle,
) -> Result<(), Box<dyn Error>> {
    let porta = std::env::var("LOJA_METRICAS_PORTA").unwrap_or_else(|_| "0".into());
    let ouvinte = tokio::net::TcpListener::bind(format!("127.0.0.1:{porta}")).await?;
    tracing::info!(endereco = %ouvinte.local_addr()?, "loja: serving GET /metrics");
    let app: mensageria_axum::axum::Router = mensageria_axum::metricas::rota(handle);
    tokio::spawn(async move {
        let _ = mensageria_axum::axum::serve(ouvinte, app).await;
    });
    Ok(())
}

/// `LOJA_DESTINO`: the base URL `estoque` posts its replies to (`pedidos`).
pub fn destino() -> Result<mensageria_core::Destino, Box<dyn Error>> {
    let url = std::env::var("LOJA_DESTINO").unwrap_or_else(|_| "http://127.0.0.1:8080".into());
    Ok(mensageria_core::Destino::new(&url)?.com_token(TOKEN))
}

/// The directory of `servico`'s committed contracts (`examples/loja/contratos/<servico>`).
pub fn dir_dos_contratos(servico: &str) -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("contratos")
        .join(servico)
}
