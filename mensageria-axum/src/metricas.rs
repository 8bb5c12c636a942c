//! The Prometheus `/metrics` route (feature `prometheus`).
//!
//! mensageria emits through the [`metrics`] facade only and never installs a recorder or binds
//! a port: the **application** installs the Prometheus recorder once, at start, and mounts
//! [`rota`] on the router it already serves (behind its own auth, if it wants).
//!
//! ```
//! use mensageria_axum::metricas::PrometheusBuilder; // the exporter mensageria is built with
//!
//! # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! // The application's choice, once per process: mensageria never does this itself.
//! let handle = PrometheusBuilder::new().install_recorder()?;
//! mensageria_axum::metricas::descrever(); // optional: HELP lines for mensageria's metrics
//!
//! let pool = mensageria_core::sqlx::SqlitePool::connect("sqlite::memory:").await?;
//! mensageria_core::migrar(&pool).await?;
//! let app: axum::Router = mensageria_axum::router(pool, mensageria_axum::Config::new("receptor", ["segredo-0123456789"]))?
//!     .merge(mensageria_axum::metricas::rota(handle)); // GET /metrics
//! // axum::serve(listener, app).await?;
//! # Ok(()) }
//! ```
//!
//! Every metric, its type and labels are listed in the *Metrics* table of the guide's observing
//! chapter (`docs/guide/src/observing.md`).

use axum::Router;
use axum::http::header;
use axum::response::IntoResponse;
use axum::routing::get;
/// Re-exported so the recorder the application installs is the exporter version this route
/// renders (no version to match by hand).
pub use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusHandle};

/// Where [`rota`] serves the metrics.
pub const CAMINHO: &str = "/metrics";

/// The content type of Prometheus' text exposition format.
const TIPO_DE_CONTEUDO: &str = "text/plain; version=0.0.4; charset=utf-8";

/// A router with `GET /metrics` rendering `handle`'s recorder in Prometheus' text format. Merge
/// it into the application's router (any state `S`). Each scrape also runs the recorder's
/// upkeep, so nothing else needs to.
pub fn rota<S>(handle: PrometheusHandle) -> Router<S>
where
    S: Clone + Send + Sync + 'static,
{
    Router::new().route(
        CAMINHO,
        get(move || {
            let handle = handle.clone();
            async move {
                handle.run_upkeep();
                ([(header::CONTENT_TYPE, TIPO_DE_CONTEUDO)], handle.render()).into_response()
            }
        }),
    )
}

/// Describes mensageria's metrics (type, unit, help text) to the recorder in force. Optional:
/// call it once after installing the recorder so the scrape carries `# HELP` lines.
pub fn descrever() {
    use metrics::{Unit, describe_counter, describe_gauge, describe_histogram};
    describe_counter!(
        "mensageria_enqueued_total",
        Unit::Count,
        "Messages written to the saída (label tipo)"
    );
    describe_counter!(
        "mensageria_delivered_total",
        Unit::Count,
        "Messages delivered and deleted from the saída (label tipo)"
    );
    describe_counter!(
        "mensageria_redelivered_total",
        Unit::Count,
        "Deliveries that were not the first attempt (label tipo)"
    );
    describe_counter!(
        "mensageria_retried_total",
        Unit::Count,
        "Temporary failures scheduled for another attempt (label tipo)"
    );
    describe_counter!(
        "mensageria_overloaded_total",
        Unit::Count,
        "Deliveries the destination refused for overload (503 busy, 429): retried without counting an attempt, with fewer in flight (label tipo)"
    );
    describe_counter!(
        "mensageria_receptor_busy_total",
        Unit::Count,
        "Requests a receptor answered 503 busy: no database connection free within Config::com_espera_por_conexao"
    );
    describe_counter!(
        "mensageria_dead_lettered_total",
        Unit::Count,
        "Messages moved to the dead letters (label tipo)"
    );
    describe_counter!(
        "mensageria_received_total",
        Unit::Count,
        "Receptor outcomes (labels app, tipo, resultado: applied, duplicate, rejected, temporary, panic)"
    );
    describe_histogram!(
        "mensageria_claim_seconds",
        Unit::Seconds,
        "Time of one claim round trip to the database"
    );
    describe_histogram!(
        "mensageria_delivery_age_seconds",
        Unit::Seconds,
        "Enqueue to delivery, measured at delivery (label tipo)"
    );
    describe_histogram!(
        "mensageria_effect_lag_seconds",
        Unit::Seconds,
        "Enqueue (the message id's UUIDv7) to the receptor's commit, measured at commit, applied events only (labels app, tipo)"
    );
    describe_gauge!(
        "mensageria_backlog",
        Unit::Count,
        "Rows of the tipo waiting in the saída, pending or in flight, measured with the relay's heartbeat (label tipo)"
    );
    describe_gauge!(
        "mensageria_backlog_oldest_age_seconds",
        Unit::Seconds,
        "Age of the tipo's oldest row in the saída, measured with the relay's heartbeat (label tipo)"
    );
    descrever_consumidores();
}

/// The JetStream consumers' and publishers' metrics (part of [`descrever`]).
fn descrever_consumidores() {
    use metrics::{Unit, describe_counter, describe_gauge};
    describe_gauge!(
        "mensageria_consumer_pending",
        Unit::Count,
        "Messages of the tipo in the stream waiting for the receiving app's JetStream consumer (labels app, tipo)"
    );
    describe_gauge!(
        "mensageria_consumer_ack_pending",
        Unit::Count,
        "Messages delivered to the consumer and not settled yet (labels app, tipo)"
    );
    describe_gauge!(
        "mensageria_consumer_redelivered",
        Unit::Count,
        "Messages the server delivered to the consumer more than once (labels app, tipo)"
    );
    describe_gauge!(
        "mensageria_consumer_oldest_age_seconds",
        Unit::Seconds,
        "Age of the oldest message the consumer has not settled, 0 when none waits (labels app, tipo)"
    );
    describe_gauge!(
        "mensageria_stream_max_age_seconds",
        Unit::Seconds,
        "The stream's max_age the consumer reads from: past it a message is deleted, applied or not (labels app, tipo)"
    );
    describe_counter!(
        "mensageria_published_duplicate_total",
        Unit::Count,
        "PubAcks that said duplicate: a message the stream already had, published again and dropped (label tipo)"
    );
    describe_counter!(
        "mensageria_consumer_expired_total",
        Unit::Count,
        "Messages the stream deleted before the consumer settled them, each kept as a receiving-side dead letter (labels app, tipo)"
    );
    describe_counter!(
        "mensageria_consumer_recreated_total",
        Unit::Count,
        "Durable consumers recreated after they were deleted under the running consumer (labels app, tipo)"
    );
    describe_counter!(
        "mensageria_consumer_skipped_total",
        Unit::Count,
        "Ordered-lane messages of tipos this binary does not receive, acknowledged and skipped (label app)"
    );
    describe_counter!(
        "mensageria_nats_server_changes_total",
        Unit::Count,
        "Times a publisher or a consumer moved its NATS client off a server through which JetStream stayed silent for 3 s (a node cut from its cluster's majority)"
    );
}
