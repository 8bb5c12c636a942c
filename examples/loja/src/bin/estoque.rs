//! `estoque`: not the owner of the schema nor of the stream (waits for both). Its durable
//! consumer feeds the receptor of `pedido.criado`, which takes one unit off the stock and replies
//! with `estoque.reservado`, enqueued in its own transaction: effect, dedup record and reply
//! commit together, or not at all. Its relay posts the reply to `pedidos` over HTTP.

use std::time::Duration;

use loja::contratos::{EstoqueReservado, PedidoCriado};
use mensageria_axum::{Rejeicao, receptor};
use mensageria_core::relay::{Config, Relay};
use mensageria_core::sqlx::{self, Postgres, Transaction};
use mensageria_core::{ContextoEnvio, Destino, FalhaEnvio, enfileirar, enviador};
use mensageria_nats::{ConfigConsumidor, Consumidor};

// The reply's tipo comes from the type (`#[evento]` in `loja::contratos`).
#[enviador]
async fn enviar_reserva(evento: EstoqueReservado, ctx: &ContextoEnvio) -> Result<(), FalhaEnvio> {
    ctx.exigir::<Destino>()?.postar(&evento, ctx).await
}

// The same receptor whether HTTP or JetStream feeds it.
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
    let _rastreamento = loja::rastreamento::instalar("estoque")?; // logs; spans when LOJA_SPANS is set
    loja::servir_metricas(loja::metricas()?).await?; // GET /metrics on LOJA_METRICAS_PORTA
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

    let config = Config::do_ambiente("estoque");
    let js = loja::jetstream(config.app()).await?;
    let fluxo = loja::fluxo()?;
    loja::esperar_fluxo(&js, &fluxo, Duration::from_secs(60)).await?;
    // The app's name names its durable consumer: `analise`, another app, has its own.
    let consumidor = Consumidor::new(
        loja::pool_do_servico().await?,
        js.clone(),
        fluxo,
        ConfigConsumidor::new(config.app()),
    )
    .spawn()
    .await?;
    let relay = Relay::new(pool_do_relay, config)
        .recurso(loja::destino()?)
        .spawn()?;
    loja::consumir_ate_sigint(consumidor, Some(relay)).await
}

#[cfg(test)]
mod testes {
    /// This binary's contracts against the committed ones: a change to a payload type that a
    /// service still running the old one could not read fails here, before it ships.
    #[test]
    fn contratos_compativeis() {
        mensageria_axum::contratos::verificar(loja::dir_dos_contratos("estoque"))
            .unwrap_or_else(|erro| panic!("{erro}"));
    }
}
