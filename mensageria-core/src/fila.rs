//! The saída's backlog as gauges: how many rows of each of this app's tipos wait (pending or in
//! flight) and how old the oldest one is. The relay measures it with its heartbeat (every 15 s
//! by default): one grouped query over its own tipos, never over other apps' rows.
//!
//! Gauges (label `tipo`): `mensageria_backlog` and `mensageria_backlog_oldest_age_seconds`.

use std::any::Any;

use sqlx::Pool;

use crate::Banco;

/// One tipo's backlog.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Backlog {
    pub(crate) tipo: String,
    /// Rows of the tipo in the saída.
    pub(crate) linhas: i64,
    /// Age of the oldest, in seconds (0 when there is none).
    pub(crate) idade_segundos: f64,
}

/// Measures the backlog of `tipos` (every one of them, 0 when empty).
#[cfg_attr(
    not(any(feature = "postgres", feature = "sqlite")),
    allow(unused_variables)
)]
pub(crate) async fn medir<DB: Banco>(
    pool: &Pool<DB>,
    tipos: &[&str],
) -> Result<Vec<Backlog>, sqlx::Error> {
    // `Banco` is sealed to these two backends; its trait stays untouched by this gauge.
    let qualquer: &dyn Any = pool;
    #[cfg(feature = "postgres")]
    if let Some(pool) = qualquer.downcast_ref::<sqlx::PgPool>() {
        let linhas: Vec<(String, i64, f64)> = sqlx::query_as(
            "SELECT t.tipo, count(s.id), \
                 coalesce(extract(epoch FROM now() - min(s.criada_em)), 0)::float8 \
             FROM unnest($1::text[]) AS t(tipo) \
             LEFT JOIN mensageria_saida s ON s.tipo = t.tipo \
             GROUP BY t.tipo",
        )
        .bind(tipos)
        .fetch_all(pool)
        .await?;
        return Ok(linhas
            .into_iter()
            .map(|(tipo, linhas, idade_segundos)| Backlog {
                tipo,
                linhas,
                idade_segundos,
            })
            .collect());
    }
    #[cfg(feature = "sqlite")]
    if let Some(pool) = qualquer.downcast_ref::<sqlx::SqlitePool>() {
        let mut medidas = Vec::with_capacity(tipos.len());
        for tipo in tipos {
            let (linhas, idade_ms): (i64, i64) = sqlx::query_as(
                "SELECT count(*), \
                     coalesce(CAST(unixepoch('subsec') * 1000 AS INTEGER) - min(criada_em), 0) \
                 FROM mensageria_saida WHERE tipo = $1",
            )
            .bind(tipo)
            .fetch_one(pool)
            .await?;
            medidas.push(Backlog {
                tipo: (*tipo).to_owned(),
                linhas,
                idade_segundos: idade_ms.max(0) as f64 / 1000.0,
            });
        }
        return Ok(medidas);
    }
    Ok(Vec::new())
}

/// Measures and sets the gauges; a database error only skips this reading.
pub(crate) async fn publicar<DB: Banco>(pool: &Pool<DB>, tipos: &[&str]) {
    match medir(pool, tipos).await {
        Ok(medidas) => {
            for m in medidas {
                metrics::gauge!("mensageria_backlog", "tipo" => m.tipo.clone())
                    .set(m.linhas as f64);
                metrics::gauge!("mensageria_backlog_oldest_age_seconds", "tipo" => m.tipo)
                    .set(m.idade_segundos.max(0.0));
            }
        }
        Err(erro) => {
            tracing::warn!(error = %erro, "mensageria relay: could not measure the backlog for the gauges (they keep their last values); the next heartbeat tries again");
        }
    }
}
