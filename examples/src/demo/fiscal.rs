//! The receiving app, `fiscal`: a receptor whose effect is a row unique by the natural key,
//! served by Axum, behind a middleware that counts every delivery and its outcome.

use std::collections::HashSet;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::body::Body;
use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::Response;
use mensageria_axum::{Rejeicao, receptor};
use sqlx::{Database, Encode, Executor, IntoArguments, Postgres, Sqlite, Transaction, Type};

use super::emissor::EncerramentoMdfe;

/// The effect. The UNIQUE natural key makes a second application visible instead of silent:
/// it bumps `aplicacoes` rather than inserting a second row, and the demo's checker counts
/// every row with `aplicacoes > 1` as "applied twice".
pub(crate) const TABELA: &str = "CREATE TABLE encerramento (\
     cnpj TEXT NOT NULL, chave_mdfe TEXT NOT NULL, aplicacoes BIGINT NOT NULL DEFAULT 1, \
     UNIQUE (cnpj, chave_mdfe))";

/// Written once for both backends (`$1` placeholders and `ON CONFLICT` are common to both).
async fn aplicar<DB>(
    tx: &mut Transaction<'_, DB>,
    evento: &EncerramentoMdfe,
) -> Result<(), Rejeicao>
where
    DB: Database<Arguments: IntoArguments<DB>>,
    for<'c> &'c mut DB::Connection: Executor<'c, Database = DB>,
    String: for<'q> Encode<'q, DB> + Type<DB>,
{
    sqlx::query(
        "INSERT INTO encerramento (cnpj, chave_mdfe) VALUES ($1, $2) \
         ON CONFLICT (cnpj, chave_mdfe) DO UPDATE SET aplicacoes = encerramento.aplicacoes + 1",
    )
    .bind(&evento.cnpj)
    .bind(&evento.chave_mdfe)
    .execute(&mut **tx)
    .await?;
    Ok(())
}

/// The receptor on SQLite: `mensageria_axum::router` mounts it at `POST /m2m/demo.encerramento`.
#[receptor(tipo = "demo.encerramento", chave_natural = (evento.cnpj, evento.chave_mdfe))]
async fn receber_encerramento(
    tx: &mut Transaction<'_, Sqlite>,
    evento: EncerramentoMdfe,
) -> Result<(), Rejeicao> {
    aplicar(tx, &evento).await
}

/// The same receptor on PostgreSQL: one receptor per tipo and backend, and each backend's
/// `mensageria_axum::router` mounts its own, so the fiscal is the same one line on both.
#[receptor(tipo = "demo.encerramento", chave_natural = (evento.cnpj, evento.chave_mdfe))]
async fn receber_encerramento_pg(
    tx: &mut Transaction<'_, Postgres>,
    evento: EncerramentoMdfe,
) -> Result<(), Rejeicao> {
    aplicar(tx, &evento).await
}

/// What reached the receptor: ground truth on the receiving side.
#[derive(Debug, Default)]
pub(crate) struct Contagem {
    /// Deliveries that reached the receptor, one per message (a batch counts each of its
    /// events; the answer may be lost on the way back).
    pub(crate) entregas: AtomicU64,
    /// Answered 200 `applied`.
    pub(crate) aplicadas: AtomicU64,
    /// Answered 200 `duplicate` (the dedup record was there: a no-op).
    pub(crate) duplicatas: AtomicU64,
    /// The distinct message ids (`x-request-id`) delivered.
    pub(crate) mensagens: Mutex<HashSet<String>>,
}

impl Contagem {
    /// Deliveries beyond the first of each message.
    pub(crate) fn reentregas(&self) -> u64 {
        let distintas = self.mensagens.lock().expect("counter lock").len() as u64;
        self.entregas
            .load(Ordering::Relaxed)
            .saturating_sub(distintas)
    }
}

/// Wraps `app` in the counting middleware.
pub(crate) fn contando(app: Router, contagem: Arc<Contagem>) -> Router {
    app.layer(axum::middleware::from_fn_with_state(contagem, contar))
}

async fn contar(State(contagem): State<Arc<Contagem>>, pedido: Request, proximo: Next) -> Response {
    // A delivery is one message: a request of the single route, or each event of a batch
    // (`…/lote`, whose events carry their ids in the body).
    let (pedido, ids) = ids_entregues(pedido).await;
    contagem
        .entregas
        .fetch_add(ids.len().max(1) as u64, Ordering::Relaxed);
    contagem.mensagens.lock().expect("counter lock").extend(ids);
    let (partes, corpo) = proximo.run(pedido).await.into_parts();
    // The receptor's answers are small JSON documents: read, classify, pass on unchanged.
    let corpo = axum::body::to_bytes(corpo, 1024 * 1024)
        .await
        .unwrap_or_default();
    let texto = std::str::from_utf8(&corpo).unwrap_or_default();
    if partes.status.is_success() {
        let vezes = |resultado: &str| texto.matches(resultado).count() as u64;
        contagem
            .aplicadas
            .fetch_add(vezes(r#""resultado":"applied""#), Ordering::Relaxed);
        contagem
            .duplicatas
            .fetch_add(vezes(r#""resultado":"duplicate""#), Ordering::Relaxed);
    }
    Response::from_parts(partes, Body::from(corpo))
}

/// The message ids a request delivers: its `x-request-id`, or the `id` of each event of a batch.
async fn ids_entregues(pedido: Request) -> (Request, Vec<String>) {
    if !pedido.uri().path().ends_with("/lote") {
        let id = pedido
            .headers()
            .get("x-request-id")
            .and_then(|valor| valor.to_str().ok())
            .map(str::to_owned);
        return (pedido, id.into_iter().collect());
    }
    let (partes, corpo) = pedido.into_parts();
    let corpo = axum::body::to_bytes(corpo, 16 * 1024 * 1024)
        .await
        .unwrap_or_default();
    let ids = serde_json::from_slice::<serde_json::Value>(&corpo)
        .ok()
        .and_then(|lote| {
            lote["eventos"].as_array().map(|eventos| {
                eventos
                    .iter()
                    .filter_map(|evento| evento["id"].as_str().map(str::to_owned))
                    .collect()
            })
        })
        .unwrap_or_default();
    (Request::from_parts(partes, Body::from(corpo)), ids)
}
