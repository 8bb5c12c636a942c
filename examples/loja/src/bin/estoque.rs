//! `estoque`: not the schema's owner (waits for it). The receptor of `pedido.criado` takes one
//! unit off the stock and replies with `estoque.reservado`, enqueued in its own transaction:
//! effect, dedup record and reply commit together, or not at all.

use std::time::Duration;

use loja::contratos::{EstoqueReservado, PedidoCriado};
use mensageria_axum::{Rejeicao, receptor};
use mensageria_core::relay::{Config, Relay};
use mensageria_core::sqlx::{self, Postgres, Transaction};
use mensageria_core::{ContextoEnvio, Destino, FalhaEnvio, enfileirar, enviador};

// The reply's tipo comes from the type (`#[evento]` in `loja::contratos`).
#[enviador]
async fn enviar_reserva(evento: EstoqueReservado, ctx: &ContextoEnvio) -> Result<(), FalhaEnvio> {
    ctx.exigir::<Destino>()?.postar(&evento, ctx).await
}

#[receptor(chave_natural = evento.id)]
async fn reservar(
    tx: &mut Transaction<'_, Postgres>,
    evento: PedidoCriado,
) -> Result<(), Rejeicao> {
    let baixou = sqlx::query("UPDATE estoque SET qtd = qtd - 1 WHERE item = $1 AND qtd > 0")
        .bind(&evento.item)
        .execute(&mut **tx)
        .await?;
    if baixou.rows_affected() == 0 {
        return Err(Rejeicao::permanente(format!("no stock of {}", evento.item)));
    }
    // The reply, in the receptor's transaction.
    enfileirar(&mut *tx, &EstoqueReservado { pedido: evento.id }).await?;
    Ok(())
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let pool_do_relay = loja::pool_do_servico().await?;
    // Not the owner: wait (bounded, one log line) for `pedidos` to migrate.
    mensageria_core::esperar_schema(&pool_do_relay, Duration::from_secs(60)).await?;
    sqlx::query("CREATE TABLE IF NOT EXISTS estoque (item TEXT PRIMARY KEY, qtd BIGINT NOT NULL)")
        .execute(&pool_do_relay)
        .await?;
    sqlx::query("INSERT INTO estoque (item, qtd) VALUES ('caneta', $1) ON CONFLICT DO NOTHING")
        .bind(loja::ESTOQUE_INICIAL)
        .execute(&pool_do_relay)
        .await?;

    let relay = Relay::new(pool_do_relay, Config::do_ambiente("estoque"))
        .recurso(loja::destino()?)
        .spawn()?;
    let pool_http = loja::pool_do_servico().await?;
    let app = mensageria_axum::router(pool_http, mensageria_axum::Config::new([loja::TOKEN]))?;
    loja::servir_ate_sigint(app, relay).await
}
