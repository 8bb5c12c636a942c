//! A receiving app says it is there: its `(app, tipo, transport)` rows in
//! `mensageria_receptores`, written at start and every [`INTERVALO`] while it runs, so `status`,
//! `doctor` and `recebidas listar` see a pure receiver (an app with no relay) and which apps
//! receive one tipo on the schema. [`router`](crate::router) keeps its app's rows while the
//! router lives; `mensageria-nats`'s consumer while it runs.

use std::future::Future;
use std::time::Duration;

use mensageria_core::Banco;
use mensageria_core::operacoes;
use mensageria_core::sqlx::Pool;

/// How often a receiving app refreshes its registration.
pub const INTERVALO: Duration = Duration::from_secs(15);

/// Registers `app` as receiving `tipos` through `transporte` now and every [`INTERVALO`],
/// while `vivo()` holds and until `fim` resolves. A failure (a database down, a schema older
/// than version 10) is logged and tried again at the next turn: registration is for operators,
/// never a reason to stop receiving.
#[doc(hidden)]
pub async fn manter<DB: Banco>(
    pool: Pool<DB>,
    app: String,
    tipos: Vec<&'static str>,
    transporte: &'static str,
    vivo: impl Fn() -> bool + Send,
    fim: impl Future<Output = ()> + Send,
) {
    let laco = async {
        let mut avisado = false;
        // Checked every second, so the pool is let go soon after the app stops.
        let mut proxima = tokio::time::Instant::now();
        while vivo() && !pool.is_closed() {
            if tokio::time::Instant::now() < proxima {
                tokio::time::sleep(Duration::from_secs(1)).await;
                continue;
            }
            proxima += INTERVALO;
            match operacoes::registrar_receptores(&pool, &app, &tipos, transporte).await {
                Ok(()) => avisado = false,
                Err(erro) if !avisado => {
                    avisado = true;
                    tracing::warn!(
                        app = %app,
                        error = %erro,
                        "mensageria: could not register this receiving app in \
                         mensageria_receptores (status and doctor will not see it); retrying \
                         every 15 s"
                    );
                }
                Err(erro) => {
                    tracing::debug!(app = %app, error = %erro, "mensageria: registration failed again")
                }
            }
        }
    };
    tokio::select! {
        () = laco => {}
        () = fim => {}
    }
}
