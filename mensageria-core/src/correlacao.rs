//! The correlation id: the thread that ties an incoming request to the messages it enqueues.
//!
//! [`enfileirar`](crate::enfileirar) stores the correlation id in force when it runs; the relay
//! sends it with every delivery, and a receptor puts the incoming one in force while the user's
//! code runs, so a chain of apps shares one id in their logs. Outside any [`com`] scope no
//! correlation id is stored and the message id stands in for it downstream.
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")] async fn main() {
//! use mensageria_core::correlacao;
//! assert_eq!(correlacao::atual(), None);
//! correlacao::com("pedido-42", async {
//!     assert_eq!(correlacao::atual().as_deref(), Some("pedido-42"));
//! })
//! .await;
//! # }
//! ```

use std::future::Future;
use std::sync::Arc;

tokio::task_local! {
    static CORRELACAO: Arc<str>;
}

/// Runs `futuro` with `id` as the correlation id of everything it enqueues.
pub async fn com<F: Future>(id: impl Into<Arc<str>>, futuro: F) -> F::Output {
    CORRELACAO.scope(id.into(), futuro).await
}

/// The correlation id in force, if any.
pub fn atual() -> Option<String> {
    CORRELACAO.try_with(|id| id.to_string()).ok()
}
