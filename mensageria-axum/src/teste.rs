//! Test support (feature `teste`): [`ServidorDeTeste`], a router served on 127.0.0.1 on a port
//! of its own, that counts the requests it receives.
//!
//! With `mensageria-core`'s `teste` feature ([`PgIsolado`](mensageria_core::teste) /
//! `SqliteIsolado` for the database, `Ensaio` for the relay's faults) this is the whole
//! scaffolding of a receptor's idempotency test.

use std::future::IntoFuture as _;
use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use axum::Router;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

/// A router served on `127.0.0.1:0` (a free port) by [`servir`](crate::servir), counting every
/// request that reaches it; [`parar`](Self::parar) shuts it down gracefully.
///
/// ```no_run
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// use mensageria_axum::teste::ServidorDeTeste;
///
/// # let pool = mensageria_core::sqlx::SqlitePool::connect("sqlite::memory:").await?;
/// let app = mensageria_axum::router(pool, mensageria_axum::Config::new("receptor", ["t0k-de-teste-1234"]))?;
/// let servidor = ServidorDeTeste::iniciar(app).await?;
/// // A relay's destination: Destino::new(&servidor.base())?.com_token("t0k-de-teste-1234")
/// println!("receptores at {}", servidor.url("/m2m"));
/// // ... enqueue, drain the relay ...
/// assert_eq!(servidor.pedidos(), 0); // requests received so far
/// servidor.parar().await?;
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct ServidorDeTeste {
    endereco: SocketAddr,
    pedidos: Arc<AtomicU64>,
    parar: oneshot::Sender<()>,
    tarefa: JoinHandle<io::Result<()>>,
}

impl ServidorDeTeste {
    /// Binds `127.0.0.1:0` and serves `app` in a task of its own, counting its requests.
    pub async fn iniciar(app: Router) -> io::Result<Self> {
        let pedidos = Arc::new(AtomicU64::new(0));
        let contador = Arc::clone(&pedidos);
        let app = app.layer(axum::middleware::from_fn(
            move |pedido, proximo: axum::middleware::Next| {
                contador.fetch_add(1, Ordering::Relaxed);
                proximo.run(pedido)
            },
        ));
        let ouvinte = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let endereco = ouvinte.local_addr()?;
        let (parar, sinal) = oneshot::channel::<()>();
        let servidor = crate::servir(ouvinte, app).com_desligamento(async move {
            let _ = sinal.await;
        });
        let tarefa = tokio::spawn(servidor.into_future());
        Ok(Self {
            endereco,
            pedidos,
            parar,
            tarefa,
        })
    }

    /// Where it listens.
    pub fn endereco(&self) -> SocketAddr {
        self.endereco
    }

    /// `http://127.0.0.1:<port>`: what `Destino::new` takes.
    pub fn base(&self) -> String {
        format!("http://{}", self.endereco)
    }

    /// [`base`](Self::base) followed by `caminho` (which starts with `/`), e.g.
    /// `servidor.url("/m2m/openapi.json")`.
    pub fn url(&self, caminho: &str) -> String {
        format!("{}{caminho}", self.base())
    }

    /// How many requests reached the router so far (any route, any answer).
    pub fn pedidos(&self) -> u64 {
        self.pedidos.load(Ordering::Relaxed)
    }

    /// Stops accepting connections, waits for the requests in flight to be answered, and
    /// returns the server's own error, if it failed.
    pub async fn parar(self) -> io::Result<()> {
        let _ = self.parar.send(());
        self.tarefa.await.map_err(io::Error::other)?
    }
}
