//! `analise`: a third app that needs `pedido.criado` too. A pure receiver on a schema of its
//! own (it owns and migrates it, so its dedup records are its own), with a durable consumer of
//! its own on the stream: it gets every order, whatever `estoque` does with it. Its effect keeps
//! one row per order and counts the applications, so an order applied twice would show.

use std::time::Duration;

use loja::contratos::PedidoCriado;
use mensageria_axum::{Rejeicao, receptor};
use mensageria_core::sqlx::{self, Postgres, Transaction};
use mensageria_nats::{ConfigConsumidor, Consumidor};

#[receptor(chave_natural = evento.id)]
async fn analisar(
    tx: &mut Transaction<'_, Postgres>,
    evento: PedidoCriado,
) -> Result<(), Rejeicao> {
    sqlx::query(
        "INSERT INTO analises (pedido, item, aplicacoes) VALUES ($1, $2, 1) \
         ON CONFLICT (pedido) DO UPDATE SET aplicacoes = analises.aplicacoes + 1",
    )
    .bind(evento.id)
    .bind(&evento.item)
    .execute(&mut **tx)
    .await?;
    Ok(())
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let _rastreamento = loja::rastreamento::instalar("analise")?; // when LOJA_SPANS is set
    let pool = loja::pool_do_servico().await?;
    mensageria_core::migrar(&pool).await?; // its own schema: it is the owner
    sqlx::query(
        "CREATE TABLE IF NOT EXISTS analises \
         (pedido BIGINT PRIMARY KEY, item TEXT NOT NULL, aplicacoes BIGINT NOT NULL)",
    )
    .execute(&pool)
    .await?;

    let app = std::env::var("MENSAGERIA_APP").unwrap_or_else(|_| "analise".into());
    let js = loja::jetstream(&app).await?;
    let fluxo = loja::fluxo()?;
    loja::esperar_fluxo(&js, &fluxo, Duration::from_secs(60)).await?;
    let consumidor = Consumidor::new(pool, js.clone(), fluxo, ConfigConsumidor::new(app))
        .spawn()
        .await?;
    // No enviador: no relay to run.
    loja::consumir_ate_sigint(consumidor, &js, None).await
}
