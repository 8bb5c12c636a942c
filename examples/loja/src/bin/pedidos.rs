//! `pedidos`: the owner of the schema and of the stream. `POST /pedidos` inserts an order and
//! enqueues `pedido.criado` in one transaction; its relay publishes it to the JetStream stream,
//! where every receiving app (`estoque`, `analise`) has a durable consumer of its own. The
//! receptor of `estoque.reservado` (over HTTP) records each reservation once.

use loja::contratos::{EstoqueReservado, PedidoCriado};
use mensageria_axum::axum::{self, Json, http::StatusCode, routing::post};
use mensageria_axum::{Rejeicao, receptor};
use mensageria_core::relay::{Config, Relay};
use mensageria_core::sqlx::{self, PgPool, Postgres, Transaction};
use mensageria_core::{ContextoEnvio, FalhaEnvio, enfileirar, enviador};
use mensageria_nats::Publicador;

// The tipo comes from the type (`#[evento]` in `loja::contratos`): only this app sends it. It
// goes to the stream, not to a receiver: the stream fans it out to every receiving app.
#[enviador]
async fn enviar_pedido(evento: PedidoCriado, ctx: &ContextoEnvio) -> Result<(), FalhaEnvio> {
    ctx.exigir::<Publicador>()?.publicar(&evento, ctx).await
}

#[receptor(chave_natural = evento.pedido)]
async fn reservado(
    tx: &mut Transaction<'_, Postgres>,
    evento: EstoqueReservado,
) -> Result<(), Rejeicao> {
    // No unique key: the dedup record, in this transaction, keeps it to one row per order.
    sqlx::query("INSERT INTO reservas (pedido) VALUES ($1)")
        .bind(evento.pedido)
        .execute(&mut **tx)
        .await?;
    Ok(())
}

/// `POST /pedidos {"id":1,"item":"caneta"}`: the order and its event commit together. Its span
/// is where the order's trace starts: the event carries it to `estoque` and `analise`, and the
/// reply brings it back.
#[tracing::instrument(name = "POST /pedidos", skip_all, fields(pedido = pedido.id))]
async fn criar(
    axum::extract::State(pool): axum::extract::State<PgPool>,
    Json(pedido): Json<PedidoCriado>,
) -> Result<StatusCode, (StatusCode, String)> {
    let falha = |erro: &dyn std::fmt::Display| (StatusCode::SERVICE_UNAVAILABLE, erro.to_string());
    let mut tx = pool.begin().await.map_err(|e| falha(&e))?;
    sqlx::query("INSERT INTO pedidos (id, item) VALUES ($1, $2) ON CONFLICT (id) DO NOTHING")
        .bind(pedido.id)
        .bind(&pedido.item)
        .execute(&mut *tx)
        .await
        .map_err(|e| falha(&e))?;
    enfileirar(&mut *tx, &pedido).await.map_err(|e| falha(&e))?;
    tx.commit().await.map_err(|e| falha(&e))?;
    Ok(StatusCode::CREATED)
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let _rastreamento = loja::rastreamento::instalar("pedidos")?; // logs; spans when LOJA_SPANS is set
    let metricas = loja::metricas()?; // GET /metrics beside the routes
    let pool_do_relay = loja::pool_do_servico().await?;
    loja::criar_schema_do_dono(&pool_do_relay).await?; // a fresh database needs no hand step
    mensageria_core::migrar(&pool_do_relay).await?; // the owner's job
    sqlx::raw_sql(sqlx::AssertSqlSafe(
        "CREATE TABLE IF NOT EXISTS pedidos (id BIGINT PRIMARY KEY, item TEXT NOT NULL); \
         CREATE TABLE IF NOT EXISTS reservas (pedido BIGINT NOT NULL)",
    ))
    .execute(&pool_do_relay)
    .await?;

    // The stream's owner creates it (an existing one is kept as it is), and checks that a
    // message published again after a lost PubAck falls inside its duplicate window.
    let config = Config::do_ambiente("pedidos");
    let js = loja::jetstream(config.app()).await?;
    let fluxo = loja::fluxo()?.garantir(&js).await?;
    fluxo.exigir_janela(&config)?;
    let relay = Relay::new(pool_do_relay, config)
        .recurso(Publicador::new(js, &fluxo))
        .spawn()?;
    let pool_http = loja::pool_do_servico().await?;
    let app = mensageria_axum::router(
        pool_http.clone(),
        mensageria_axum::Config::new("pedidos", [loja::TOKEN]),
    )?
    .merge(
        axum::Router::new()
            .route("/pedidos", post(criar))
            .with_state(pool_http),
    )
    .merge(mensageria_axum::metricas::rota(metricas))
    // Beside /m2m/openapi.json: what this binary sends through the stream, from its contracts
    // (estoque.reservado comes back over HTTP: the OpenAPI document's).
    .merge(mensageria_nats::rota_asyncapi(
        &fluxo,
        "pedidos",
        env!("CARGO_PKG_VERSION"),
        &["pedido.criado"],
    ));
    loja::servir_ate_sigint(app, relay).await
}

#[cfg(test)]
mod testes {
    /// This binary's contracts against the committed ones: a change to a payload type that a
    /// service still running the old one could not read fails here, before it ships.
    #[test]
    fn contratos_compativeis() {
        mensageria_axum::contratos::verificar(loja::dir_dos_contratos("pedidos"))
            .unwrap_or_else(|erro| panic!("{erro}"));
    }
}
