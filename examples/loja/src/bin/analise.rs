//! `analise`: a third app that needs `pedido.criado` too. A pure receiver on the shared schema
//! (it does not own it: it waits for `pedidos` to migrate it), with a durable consumer of its own
//! on the stream: it gets every order, whatever `estoque` does with it. Its dedup records are its
//! own (keyed by its app name), so `estoque`'s, on the same schema, never hide an order from it.
//! Its effect keeps one row per order and counts the applications, so an order applied twice
//! would show.

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
    let _rastreamento = loja::rastreamento::instalar("analise")?; // logs; spans when LOJA_SPANS is set
    loja::servir_metricas(loja::metricas()?).await?; // GET /metrics on LOJA_METRICAS_PORTA
    let pool = loja::pool_do_servico().await?;
    // The shared schema is `pedidos`'s to migrate.
    mensageria_core::esperar_schema(&pool, Duration::from_secs(60)).await?;
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
    loja::consumir_ate_sigint(consumidor, None).await
}

#[cfg(test)]
mod testes {
    /// This binary's contracts against the committed ones: a change to a payload type that a
    /// service still running the old one could not read fails here, before it ships.
    #[test]
    fn contratos_compativeis() {
        mensageria_axum::contratos::verificar(loja::dir_dos_contratos("analise"))
            .unwrap_or_else(|erro| panic!("{erro}"));
    }
}
