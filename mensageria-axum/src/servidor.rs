//! Serving the router on a hardened HTTP server: [`servir`].
//!
//! `axum::serve` has no header-read timeout, no idle timeout and no connection limit: 200 idle
//! sockets, or sockets that send half a request line and stop, stay open for ever. A receiving
//! service is reachable by other machines, so [`servir`] closes them:
//!
//! - a request whose head has not arrived within the header timeout (10 s by default) closes
//!   its connection, and so does a new connection that has not sent a whole request head within
//!   that time, whether it sent some bytes or none at all;
//! - a connection with no request in flight and no activity for the idle timeout (60 s by
//!   default, below common load balancers' and clients' idle timeouts) is closed; while the
//!   server is near its connection limit (fewer than an eighth of the slots free), the header
//!   timeout is the idle timeout too, so idle keep-alives make room for new clients;
//! - at most `maximo_de_conexoes` (1024 by default) connections are served at once; the next
//!   ones wait in the listener's backlog until one closes.
//!
//! So sockets that connect and say nothing cannot hold the server's slots for longer than the
//! header timeout: with more such sockets than the limit, legitimate clients are served within
//! about one header timeout.
//!
//! Normal requests keep flowing meanwhile, over HTTP/1.1 (keep-alive) or HTTP/2. The request
//! timeout itself is the router's (`Config::com_tempo_limite`, 408).

use std::convert::Infallible;
use std::future::{Future, IntoFuture};
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Body;
use axum::http::{Request, Response};
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Semaphore, watch};
use tower_service::Service;

/// Serves `app` on `ouvinte`, hardened: a request head not received within 10 s closes its
/// connection (also a connection that sent nothing at all), a connection with nothing in flight and no activity for 60 s is closed, and at
/// most 1024 connections are served at once (the next wait in the listener's backlog); each is
/// configurable below. Normal requests keep flowing meanwhile, over HTTP/1.1 or HTTP/2. Await
/// it; with [`com_desligamento`](Servir::com_desligamento) it returns when the signal fires and
/// every request in flight has been answered.
///
/// ```no_run
/// # async fn iniciar(app: axum::Router) -> std::io::Result<()> {
/// use std::time::Duration;
///
/// // Your shutdown signal (e.g. `tokio::signal::ctrl_c()`); here a channel.
/// let (_parar, sinal) = tokio::sync::oneshot::channel::<()>();
/// let ouvinte = tokio::net::TcpListener::bind("0.0.0.0:8080").await?;
/// mensageria_axum::servir(ouvinte, app)
///     .com_tempo_de_cabecalho(Duration::from_secs(5))
///     .com_desligamento(async { let _ = sinal.await; })
///     .await
/// # }
/// ```
#[doc(alias = "serve")]
pub fn servir(ouvinte: TcpListener, app: Router) -> Servir {
    Servir {
        ouvinte,
        app,
        limites: Limites {
            cabecalho: Duration::from_secs(10),
            ocioso: Duration::from_secs(60),
        },
        maximo_de_conexoes: 1024,
        desligamento: None,
    }
}

/// The server [`servir`] builds; await it to run it.
#[must_use = "a server does nothing until awaited"]
pub struct Servir {
    ouvinte: TcpListener,
    app: Router,
    limites: Limites,
    maximo_de_conexoes: usize,
    desligamento: Option<Pin<Box<dyn Future<Output = ()> + Send>>>,
}

#[derive(Clone, Copy, Debug)]
struct Limites {
    cabecalho: Duration,
    ocioso: Duration,
}

impl std::fmt::Debug for Servir {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Servir")
            .field("ouvinte", &self.ouvinte.local_addr().ok())
            .field("tempo_de_cabecalho", &self.limites.cabecalho)
            .field("ocioso", &self.limites.ocioso)
            .field("maximo_de_conexoes", &self.maximo_de_conexoes)
            .finish_non_exhaustive()
    }
}

impl Servir {
    /// How long a client may take to send a request's head (line and headers) once it started
    /// one, and a new connection to send its first whole request head; the connection is closed
    /// after it. Near the connection limit it is also how long an idle keep-alive may stay.
    pub fn com_tempo_de_cabecalho(mut self, tempo: Duration) -> Self {
        self.limites.cabecalho = tempo.max(Duration::from_millis(1));
        self
    }

    /// How long a connection may stay with no request in flight and no activity.
    #[doc(alias = "keep-alive")]
    pub fn com_tempo_ocioso(mut self, tempo: Duration) -> Self {
        self.limites.ocioso = tempo.max(Duration::from_millis(1));
        self
    }

    /// The most connections served at once.
    pub fn com_maximo_de_conexoes(mut self, maximo: usize) -> Self {
        self.maximo_de_conexoes = maximo.max(1);
        self
    }

    /// Stops accepting when `sinal` completes, closes idle connections, lets requests in
    /// flight finish, then returns.
    #[doc(alias = "graceful shutdown")]
    pub fn com_desligamento(mut self, sinal: impl Future<Output = ()> + Send + 'static) -> Self {
        self.desligamento = Some(Box::pin(sinal));
        self
    }

    async fn rodar(self) -> io::Result<()> {
        let Servir {
            ouvinte,
            app,
            limites,
            maximo_de_conexoes,
            desligamento,
        } = self;
        let (avisar, desligando) = watch::channel(false);
        if let Some(sinal) = desligamento {
            let avisar = avisar.clone();
            tokio::spawn(async move {
                sinal.await;
                let _ = avisar.send(true);
            });
        }
        let permissoes = Arc::new(Semaphore::new(maximo_de_conexoes));
        let mut fim = desligando.clone();
        loop {
            let permissao = tokio::select! {
                permissao = Arc::clone(&permissoes).acquire_owned() => match permissao {
                    Ok(permissao) => permissao,
                    Err(_) => break,
                },
                _ = ate_desligar(&mut fim) => break,
            };
            let socket = tokio::select! {
                aceito = ouvinte.accept() => match aceito {
                    Ok((socket, _)) => socket,
                    Err(erro) => {
                        // Out of file descriptors and the like: wait a little rather than spin.
                        tracing::warn!(error = %erro, "mensageria servir: accept failed; retrying in 50 ms");
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        continue;
                    }
                },
                _ = ate_desligar(&mut fim) => break,
            };
            let app = app.clone();
            let desligando = desligando.clone();
            let lotacao = Lotacao {
                permissoes: Arc::clone(&permissoes),
                maximo: maximo_de_conexoes,
            };
            tokio::spawn(async move {
                conexao(socket, app, limites, lotacao, desligando).await;
                drop(permissao);
            });
        }
        drop(ouvinte);
        // Every connection holds a permit until it ends: having them all back means done.
        let _todas = permissoes
            .acquire_many(u32::try_from(maximo_de_conexoes).unwrap_or(u32::MAX))
            .await;
        drop(avisar);
        Ok(())
    }
}

impl IntoFuture for Servir {
    type Output = io::Result<()>;
    type IntoFuture = Pin<Box<dyn Future<Output = io::Result<()>> + Send>>;

    fn into_future(self) -> Self::IntoFuture {
        Box::pin(self.rodar())
    }
}

/// How full the server is: the connection slots and how many there are.
struct Lotacao {
    permissoes: Arc<Semaphore>,
    maximo: usize,
}

impl Lotacao {
    /// Fewer than an eighth of the slots are free: idle connections must make room.
    fn quase_cheia(&self) -> bool {
        self.permissoes.available_permits() < self.maximo.div_ceil(8)
    }
}

/// When a connection last did something, how many of its requests are in flight, and whether
/// it ever sent a whole request head.
struct Atividade {
    inicio: Instant,
    ultima_ms: AtomicU64,
    em_curso: AtomicUsize,
    pediu: AtomicBool,
}

impl Atividade {
    fn agora_ms(&self) -> u64 {
        u64::try_from(self.inicio.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    fn tocar(&self) {
        self.ultima_ms.store(self.agora_ms(), Ordering::Relaxed);
    }

    /// Open for `limite` without ever sending a whole request head (silent, or a head that
    /// trickles in).
    fn calada(&self, limite: Duration) -> bool {
        !self.pediu.load(Ordering::Acquire) && self.inicio.elapsed() >= limite
    }

    /// Idle for longer than `limite`, with nothing in flight.
    fn ociosa(&self, limite: Duration) -> bool {
        self.em_curso.load(Ordering::Acquire) == 0
            && self
                .agora_ms()
                .saturating_sub(self.ultima_ms.load(Ordering::Relaxed))
                >= u64::try_from(limite.as_millis()).unwrap_or(u64::MAX)
    }
}

/// Counts a request in flight from the moment hyper hands it over until its answer is ready.
struct EmCurso(Arc<Atividade>);

impl EmCurso {
    fn new(atividade: &Arc<Atividade>) -> Self {
        atividade.em_curso.fetch_add(1, Ordering::AcqRel);
        atividade.pediu.store(true, Ordering::Release);
        atividade.tocar();
        Self(Arc::clone(atividade))
    }
}

impl Drop for EmCurso {
    fn drop(&mut self) {
        self.0.tocar();
        self.0.em_curso.fetch_sub(1, Ordering::AcqRel);
    }
}

async fn conexao(
    socket: TcpStream,
    app: Router,
    limites: Limites,
    lotacao: Lotacao,
    mut desligando: watch::Receiver<bool>,
) {
    let _ = socket.set_nodelay(true);
    let atividade = Arc::new(Atividade {
        inicio: Instant::now(),
        ultima_ms: AtomicU64::new(0),
        em_curso: AtomicUsize::new(0),
        pediu: AtomicBool::new(false),
    });
    let servico = {
        let atividade = Arc::clone(&atividade);
        hyper::service::service_fn(move |pedido: Request<Incoming>| {
            // Counted now, while hyper polls the connection: the idle check below runs between
            // polls, so it never sees a request that was handed over but not yet counted.
            let em_curso = EmCurso::new(&atividade);
            let mut app = app.clone();
            async move {
                let resposta: Result<Response<Body>, Infallible> =
                    app.call(pedido.map(Body::new)).await;
                drop(em_curso);
                resposta
            }
        })
    };
    let mut construtor = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new());
    construtor
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(limites.cabecalho);
    construtor.http2().timer(TokioTimer::new());
    let conexao = construtor.serve_connection(TokioIo::new(socket), servico);
    tokio::pin!(conexao);
    let passo = (limites.ocioso.min(limites.cabecalho) / 4)
        .clamp(Duration::from_millis(10), Duration::from_secs(1));
    let mut vigia = tokio::time::interval(passo);
    vigia.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut encerrando = false;
    loop {
        tokio::select! {
            resultado = conexao.as_mut() => {
                if let Err(erro) = resultado {
                    tracing::debug!(error = %erro, "mensageria servir: connection ended with an error");
                }
                return;
            }
            _ = ate_desligar(&mut desligando), if !encerrando => {
                if atividade.em_curso.load(Ordering::Acquire) == 0 {
                    return;
                }
                conexao.as_mut().graceful_shutdown();
                encerrando = true;
            }
            _ = vigia.tick() => {
                // Nothing in flight and quiet for too long (an idle keep-alive, a client that
                // connected and said nothing, or half a request head): dropping the connection
                // loses no request, since none was handed to the app.
                if atividade.calada(limites.cabecalho) {
                    tracing::debug!(
                        "mensageria servir: closing a connection that sent no request head within \
                         the header timeout"
                    );
                    return;
                }
                let ocioso = if lotacao.quase_cheia() {
                    limites.ocioso.min(limites.cabecalho)
                } else {
                    limites.ocioso
                };
                if atividade.ociosa(ocioso) {
                    tracing::debug!("mensageria servir: closing an idle connection");
                    return;
                }
            }
        }
    }
}

/// Until the shutdown signal fires (or the server is gone).
async fn ate_desligar(desligando: &mut watch::Receiver<bool>) {
    let _ = desligando.wait_for(|desligar| *desligar).await;
}
