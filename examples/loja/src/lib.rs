//! `examples/loja`: two services on one PostgreSQL schema, each a sender and a receiver, each
//! running its relay and its router in one process.
//!
//! - `pedidos` (`src/bin/pedidos.rs`) owns the schema and runs `migrar`. `POST /pedidos`
//!   inserts an order and enqueues `pedido.criado` in the same transaction; its receptor of
//!   `estoque.reservado` records the reservation.
//! - `estoque` (`src/bin/estoque.rs`) does not own the schema: it waits for it
//!   (`esperar_schema`). Its receptor of `pedido.criado` (natural key: the order id)
//!   decrements the stock and replies by enqueueing `estoque.reservado` in the receptor's own
//!   transaction.
//!
//! Each service is its own binary: registrations travel with the code that is linked, so each
//! relay claims only its own tipo. This library holds what the services share — the event
//! types ([`contratos`], declared once with `#[evento]`, which registers nothing), the pool —
//! and the orchestration of `demo` and of the test: no enviador, no receptor.
//!
//! `cargo run -p loja --bin demo` runs both against the local PostgreSQL in a schema of its own.

pub mod contratos {
    //! The events the two services exchange, each with its tipo declared once next to it: the
    //! sender's `#[enviador]` and the receiver's `#[receptor]` both take it from the type.

    use mensageria_core::evento;
    use serde::{Deserialize, Serialize};

    /// Sent by `pedidos` when an order is created.
    #[evento(tipo = "pedido.criado")]
    #[derive(Debug, Serialize, Deserialize)]
    pub struct PedidoCriado {
        /// The order id (the receptor's natural key).
        pub id: i64,
        /// The item ordered.
        pub item: String,
    }

    /// `estoque`'s reply: the order's unit is reserved.
    #[evento(tipo = "estoque.reservado")]
    #[derive(Debug, Serialize, Deserialize)]
    pub struct EstoqueReservado {
        /// The order whose unit was reserved.
        pub pedido: i64,
    }
}

use std::process::Stdio;
use std::str::FromStr as _;
use std::time::{Duration, Instant};

use mensageria_core::sqlx::PgPool;
use mensageria_core::sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use mensageria_core::teste::PgIsolado;

/// The token both services accept and present (one shared secret, for the example).
pub const TOKEN: &str = "loja-segredo-0123456789";

/// The services' pool: `DATABASE_URL`, with `search_path` set to `LOJA_SCHEMA` when given.
/// Three connections: a relay and a router each get one of these.
pub async fn pool_do_servico() -> Result<PgPool, Box<dyn std::error::Error>> {
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
}

impl Resultado {
    /// Every order accepted, reserved exactly once, and one unit taken per order.
    pub fn certo(&self, n: i64) -> bool {
        self.pedidos == n
            && self.reservados_uma_vez == n
            && self.reservados_mais_de_uma_vez == 0
            && self.unidades_baixadas == n
    }
}

/// The table the demo prints: one line per figure, what it must be beside it.
impl std::fmt::Display for Resultado {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let linhas = [
            ("orders", self.pedidos, "accepted by pedidos (POST /pedidos)"),
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
        ];
        for (nome, valor, sentido) in linhas {
            writeln!(f, "  {nome:<16}{valor:>8}  {sentido}")?;
        }
        Ok(())
    }
}

/// Starts `estoque` (first: it waits for the owner) and `pedidos` as child processes on a
/// schema of their own, sends `n` orders, waits until every one is reserved (or `prazo`
/// passes), stops both with SIGINT (graceful shutdown) and returns the counts.
pub async fn rodar(
    exe_pedidos: &str,
    exe_estoque: &str,
    n: i64,
    prazo: Duration,
) -> Result<Resultado, Box<dyn std::error::Error>> {
    // An empty schema: `pedidos`, its owner, migrates it.
    let db = PgIsolado::vazio(&mensageria_core::teste::database_url(), 2).await?;
    let (porta_pedidos, porta_estoque) = (porta_livre()?, porta_livre()?);
    let url_pedidos = format!("http://127.0.0.1:{porta_pedidos}");
    let url_estoque = format!("http://127.0.0.1:{porta_estoque}");
    let iniciar = |exe: &str, porta: u16, destino: &str| {
        tokio::process::Command::new(exe)
            .env("LOJA_SCHEMA", db.schema())
            .env("LOJA_PORTA", porta.to_string())
            .env("LOJA_DESTINO", destino)
            .stdin(Stdio::null())
            .kill_on_drop(true)
            .spawn()
    };
    let estoque = iniciar(exe_estoque, porta_estoque, &url_pedidos)?;
    let pedidos = iniciar(exe_pedidos, porta_pedidos, &url_estoque)?;

    let resultado = enviar_e_conferir(&db, &url_pedidos, n, prazo).await;
    for mut filho in [pedidos, estoque] {
        parar(&mut filho).await;
    }
    let fechado = db.fechar().await; // the schema goes, whatever happened
    let resultado = resultado?;
    fechado?;
    Ok(resultado)
}

async fn enviar_e_conferir(
    db: &PgIsolado,
    url_pedidos: &str,
    n: i64,
    prazo: Duration,
) -> Result<Resultado, Box<dyn std::error::Error>> {
    let cliente = reqwest::Client::new();
    let fim = Instant::now() + prazo;
    for id in 1..=n {
        // Retried until `pedidos` listens (it migrates first).
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
                _ if Instant::now() < fim => tokio::time::sleep(Duration::from_millis(100)).await,
                Ok(resposta) => return Err(format!("order {id}: {}", resposta.status()).into()),
                Err(erro) => return Err(format!("order {id}: {erro}").into()),
            }
        }
    }
    loop {
        let resultado = contar(db.pool()).await?;
        if resultado.reservados_uma_vez + resultado.reservados_mais_de_uma_vez >= n
            || Instant::now() >= fim
        {
            return Ok(resultado);
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
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
    Ok(Resultado {
        pedidos,
        reservados_uma_vez: uma,
        reservados_mais_de_uma_vez: mais,
        unidades_baixadas: baixadas,
    })
}

/// A free port on 127.0.0.1 (bound, read, released).
fn porta_livre() -> std::io::Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port())
}

/// SIGINT (the services' graceful shutdown), then SIGKILL after 15 s.
async fn parar(filho: &mut tokio::process::Child) {
    if let Some(pid) = filho.id() {
        let _ = tokio::process::Command::new("kill")
            .args(["-INT", &pid.to_string()])
            .status()
            .await;
    }
    if tokio::time::timeout(Duration::from_secs(15), filho.wait())
        .await
        .is_err()
    {
        let _ = filho.kill().await;
    }
}

/// The stock every item starts with.
pub const ESTOQUE_INICIAL: i64 = 1_000_000;

/// A service's process, after its pool is open: serves `app` on `LOJA_PORTA` with the relay
/// already spawned, and on SIGINT stops accepting HTTP first, then shuts the relay down.
pub async fn servir_ate_sigint(
    app: mensageria_axum::axum::Router,
    relay: mensageria_core::relay::RelayHandle,
) -> Result<(), Box<dyn std::error::Error>> {
    let porta = std::env::var("LOJA_PORTA").unwrap_or_else(|_| "8080".into());
    let ouvinte = tokio::net::TcpListener::bind(format!("127.0.0.1:{porta}")).await?;
    mensageria_axum::servir(ouvinte, app)
        .com_desligamento(async {
            let _ = tokio::signal::ctrl_c().await;
        })
        .await?; // 1. no new requests; those in flight answered
    relay.shutdown(Duration::from_secs(10)).await; // 2. then the relay
    Ok(())
}

/// `LOJA_DESTINO`: the other service's base URL.
pub fn destino() -> Result<mensageria_core::Destino, Box<dyn std::error::Error>> {
    let url = std::env::var("LOJA_DESTINO").unwrap_or_else(|_| "http://127.0.0.1:8081".into());
    Ok(mensageria_core::Destino::new(&url)?.com_token(TOKEN))
}
