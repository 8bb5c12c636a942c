//! The network lab's app (`tests/rede.rs`, issue 27): one binary in two roles, each run inside
//! a host (network namespace) of the lab ([`mensageria_testes::rede`]).
//!
//! - `app-rede relay`: the relay of tipo `rede.evento` (app `app-rede`) on `DATABASE_URL`,
//!   delivering to `REDE_DESTINO`, with short settings for the lab: lease `REDE_LEASE_MS`
//!   (default 2000), HTTP timeout `REDE_ENVIO_MS` (default 2000; the send timeout is 500 ms
//!   more), polling every 100 ms, backoff 100 ms doubling to 1 s, claims of 32, 16 deliveries
//!   at once (`REDE_CONCORRENCIA`), 1000 attempts before a dead letter; `MENSAGERIA_INSTANCE` names the instance.
//! - `app-rede receptor`: the receptor of `rede.evento` (one row in `efeito` per application)
//!   on `DATABASE_URL`, served by `mensageria_axum::servir` on `REDE_ESCUTAR` behind the fault
//!   suite's counting layer ([`Lado`]); `REDE_ATRASO_MS` holds every request that long before
//!   it reaches the receptor, `REDE_EFEITO_MS` keeps each receptor transaction open that much
//!   longer after its effect. It answers commands on stdin, one line each: `contar` (the
//!   deliveries that reached it so far) and `verificar <json>` (the ledger check, [`verificar`],
//!   through the lab's PostgreSQL Unix socket in `REDE_CONTROLE`, as one JSON line).
//!
//! Both log through `tracing` to stderr (no colours; `RUST_LOG`, default `info`), print
//! `pronto` once running, and exit when their stdin closes (the test is gone).

#[path = "../comum/evento_rede.rs"]
mod evento_rede;

use std::io::BufRead as _;
use std::time::Duration;

use evento_rede::EventoRede;
use mensageria_axum::{Rejeicao, receptor};
use mensageria_core::relay::{Config, Relay, RelayHandle};
use mensageria_core::{ContextoEnvio, Destino, FalhaEnvio, enviador};
use mensageria_testes::faltas::{FalhaResposta, Lado, verificar};
use sqlx::postgres::PgPoolOptions;
use sqlx::{Postgres, Transaction};

const TOKEN: &str = "rede-token-de-teste";

#[enviador(tipo = "rede.evento")]
async fn enviar(evento: EventoRede, ctx: &ContextoEnvio) -> Result<(), FalhaEnvio> {
    ctx.exigir::<Destino>()?.postar(&evento, ctx).await
}

#[receptor(tipo = "rede.evento", chave_natural = evento.n)]
async fn aplicar(tx: &mut Transaction<'_, Postgres>, evento: EventoRede) -> Result<(), Rejeicao> {
    sqlx::query("INSERT INTO efeito (n) VALUES ($1)")
        .bind(evento.n)
        .execute(&mut **tx)
        .await?;
    // The rest of the receptor's work, inside its transaction (`REDE_EFEITO_MS`).
    let trabalho = *TRABALHO;
    if !trabalho.is_zero() {
        tokio::time::sleep(trabalho).await;
    }
    Ok(())
}

static TRABALHO: std::sync::LazyLock<Duration> =
    std::sync::LazyLock::new(|| milissegundos("REDE_EFEITO_MS", 0));

/// What `verificar` needs besides the counts.
#[derive(serde::Deserialize)]
struct PedidoDeVerificacao {
    cenario: String,
    descricao: String,
    tentadas: u64,
    semente: u64,
    drenagem_ms: u64,
}

fn variavel(nome: &str) -> String {
    std::env::var(nome).unwrap_or_else(|_| panic!("{nome} is not set"))
}

fn milissegundos(nome: &str, padrao: u64) -> Duration {
    Duration::from_millis(
        std::env::var(nome)
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(padrao),
    )
}

fn main() {
    tracing_subscriber::fmt()
        .with_ansi(false)
        .with_writer(std::io::stderr)
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .init();
    let papel = std::env::args().nth(1).unwrap_or_default();
    let runtime = tokio::runtime::Runtime::new().expect("tokio runtime");
    // The relay's handle lives until the process ends.
    let (_relay, lado) = match papel.as_str() {
        "relay" => (Some(runtime.block_on(relay())), None),
        "receptor" => (None, Some(runtime.block_on(receptor()))),
        _ => panic!("usage: app-rede relay|receptor"),
    };
    println!("pronto");
    // Runs until stdin closes, answering the receptor's commands.
    for linha in std::io::stdin().lock().lines() {
        let Ok(linha) = linha else { break };
        let Some(lado) = &lado else { continue };
        let resposta = runtime.block_on(comando(lado, &linha));
        println!("{resposta}");
    }
}

async fn relay() -> RelayHandle {
    let pool = PgPoolOptions::new()
        .max_connections(4)
        .connect(&variavel("DATABASE_URL"))
        .await
        .expect("connect to the lab's PostgreSQL");
    let envio = milissegundos("REDE_ENVIO_MS", 2000);
    let destino = Destino::new(&variavel("REDE_DESTINO"))
        .expect("a destination URL")
        .com_token(TOKEN)
        .com_tempo_limite(envio);
    let config = Config::do_ambiente("app-rede")
        .com_intervalo(Duration::from_millis(100))
        .com_backoff(Duration::from_millis(100), Duration::from_secs(1))
        .com_lease(milissegundos("REDE_LEASE_MS", 2000))
        .com_tempo_limite_envio(envio + Duration::from_millis(500))
        .com_lote(32)
        .com_concorrencia(
            std::env::var("REDE_CONCORRENCIA")
                .ok()
                .and_then(|v| v.parse().ok())
                .unwrap_or(16),
        )
        .com_max_tentativas(1000)
        .com_intervalo_registro(Duration::from_millis(500));
    Relay::new(pool, config)
        .recurso(destino)
        .spawn()
        .expect("start the relay")
}

async fn receptor() -> Lado {
    let pool = PgPoolOptions::new()
        .max_connections(8)
        .connect(&variavel("DATABASE_URL"))
        .await
        .expect("connect to the lab's PostgreSQL");
    let lado = Lado::new(0);
    let atraso = milissegundos("REDE_ATRASO_MS", 0);
    if !atraso.is_zero() {
        lado.falhar(FalhaResposta::Lento(atraso));
    }
    let app = mensageria_axum::router(pool, mensageria_axum::Config::new("receptor", [TOKEN]))
        .expect("the receptor's router");
    let ouvinte = tokio::net::TcpListener::bind(variavel("REDE_ESCUTAR"))
        .await
        .expect("listen on REDE_ESCUTAR");
    tokio::spawn(std::future::IntoFuture::into_future(
        mensageria_axum::servir(ouvinte, lado.envolver(app)),
    ));
    lado
}

async fn comando(lado: &Lado, linha: &str) -> String {
    if linha.trim() == "contar" {
        return lado.entregas.total().to_string();
    }
    let Some(pedido) = linha.strip_prefix("verificar ") else {
        return format!("unknown command: {linha}");
    };
    let pedido: PedidoDeVerificacao = serde_json::from_str(pedido).expect("a verification request");
    let controle = std::path::PathBuf::from(variavel("REDE_CONTROLE"));
    let pool = mensageria_testes::rede::pool_por_socket(&controle, 2).await;
    let linha = verificar(
        &pool,
        lado,
        &pedido.cenario,
        &pedido.descricao,
        pedido.tentadas,
        pedido.semente,
        Duration::from_millis(pedido.drenagem_ms),
    )
    .await;
    pool.close().await;
    serde_json::to_string(&linha).expect("a matrix row as JSON")
}
