//! When to stop: the signal a service's shutdown waits for.
//!
//! systemd and Kubernetes stop a service with SIGTERM, a terminal with SIGINT (Ctrl-C): a service
//! that waits only for `tokio::signal::ctrl_c()` is killed by its orchestrator without a graceful
//! shutdown (its relay's leases kept until they end, its consumer's last acks lost, requests in
//! flight cut). [`sinal`] takes both.

/// Resolves at the first SIGINT or SIGTERM (on other platforms than Unix, at Ctrl-C), logging
/// which at INFO. Hand it to the shutdown of each part, in order: the HTTP server
/// (`mensageria_axum::servir(...).com_desligamento(...)`), then the consumer's and the relay's
/// `shutdown`.
///
/// ```no_run
/// # async fn f() {
/// mensageria_core::desligamento::sinal().await;
/// // stop accepting requests, then `consumidor.shutdown(...)`, then `relay.shutdown(...)`
/// # }
/// ```
#[doc(alias("shutdown_signal", "sigterm"))]
pub async fn sinal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        match signal(SignalKind::terminate()) {
            Ok(mut termino) => {
                tokio::select! {
                    _ = tokio::signal::ctrl_c() => tracing::info!("mensageria: SIGINT received; shutting down"),
                    _ = termino.recv() => tracing::info!("mensageria: SIGTERM received; shutting down"),
                }
            }
            Err(erro) => {
                tracing::warn!(error = %erro, "mensageria: cannot listen for SIGTERM; waiting for SIGINT only");
                let _ = tokio::signal::ctrl_c().await;
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
        tracing::info!("mensageria: Ctrl-C received; shutting down");
    }
}
