//! A TCP proxy that injects faults between two real endpoints on 127.0.0.1: a relay and its
//! receptor, or an app and its PostgreSQL.

use std::io;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::JoinSet;

/// What the proxy does to the traffic, switchable at any time with [`ProxyDeFalhas::modo`].
#[derive(Debug, Clone, Copy, PartialEq)]
#[non_exhaustive]
pub enum ModoProxy {
    /// Bytes flow both ways untouched.
    Passar,
    /// Every chunk, both ways, waits this long first.
    Atrasar(Duration),
    /// Nothing flows: new connections are accepted and left hanging, open ones freeze (what a
    /// dead network looks like to both ends). Switching back lets the held bytes through.
    Buraco,
    /// Every open connection is reset and new ones are reset at once (a process or host that
    /// went away).
    Recusar,
    /// The request reaches the upstream, which answers; then, with probability `fracao`, the
    /// client's connection is reset instead of getting the answer: **the ack is lost after
    /// the receptor committed**. Decided per response, seeded.
    PerderResposta {
        /// Share of responses lost, `0.0..=1.0`.
        fracao: f64,
    },
    /// The request reaches the upstream and both connections are reset before any response:
    /// the receptor may have committed or not (its handler may be cancelled mid-transaction).
    CortarAposEncaminhar,
}

/// What went through the proxy so far.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct Contagem {
    /// Connections accepted.
    pub conexoes: u64,
    /// Responses (upstream → client turns) lost on purpose.
    pub respostas_perdidas: u64,
    /// Connections reset on purpose.
    pub resets: u64,
}

#[derive(Default)]
struct Contadores {
    conexoes: AtomicU64,
    respostas_perdidas: AtomicU64,
    resets: AtomicU64,
}

/// A fault-injecting TCP proxy listening on a free port of 127.0.0.1.
///
/// ```no_run
/// # async fn exemplo() -> std::io::Result<()> {
/// use mensageria_core::teste::{ModoProxy, ProxyDeFalhas};
///
/// let receptor: std::net::SocketAddr = "127.0.0.1:8080".parse().unwrap();
/// let proxy = ProxyDeFalhas::iniciar(receptor, 42).await?;
/// // Point the relay's Destino at the proxy instead of the receptor:
/// let url = format!("http://{}", proxy.endereco());
/// proxy.modo(ModoProxy::PerderResposta { fracao: 0.3 }); // 30% of acks lost after the commit
/// # let _ = url; Ok(()) }
/// ```
pub struct ProxyDeFalhas {
    endereco: SocketAddr,
    modo: watch::Sender<ModoProxy>,
    contadores: Arc<Contadores>,
    tarefa: tokio::task::JoinHandle<()>,
}

impl ProxyDeFalhas {
    /// Starts a proxy to `destino` in [`ModoProxy::Passar`]; `semente` seeds its random choices.
    pub async fn iniciar(destino: SocketAddr, semente: u64) -> io::Result<Self> {
        let ouvinte = TcpListener::bind("127.0.0.1:0").await?;
        let endereco = ouvinte.local_addr()?;
        let (modo, _) = watch::channel(ModoProxy::Passar);
        let contadores = Arc::new(Contadores::default());
        let sorte = Arc::new(Mutex::new(fastrand::Rng::with_seed(semente)));
        let tarefa = tokio::spawn(aceitar(
            ouvinte,
            destino,
            modo.clone(),
            Arc::clone(&contadores),
            sorte,
        ));
        Ok(Self {
            endereco,
            modo,
            contadores,
            tarefa,
        })
    }

    /// Where clients should connect (`127.0.0.1:<port>`).
    pub fn endereco(&self) -> SocketAddr {
        self.endereco
    }

    /// `http://127.0.0.1:<port>`.
    pub fn url(&self) -> String {
        format!("http://{}", self.endereco)
    }

    /// Switches the fault; applies to open connections too.
    pub fn modo(&self, modo: ModoProxy) {
        self.modo.send_replace(modo);
    }

    /// What went through so far.
    pub fn contagem(&self) -> Contagem {
        Contagem {
            conexoes: self.contadores.conexoes.load(Ordering::Relaxed),
            respostas_perdidas: self.contadores.respostas_perdidas.load(Ordering::Relaxed),
            resets: self.contadores.resets.load(Ordering::Relaxed),
        }
    }
}

impl Drop for ProxyDeFalhas {
    fn drop(&mut self) {
        self.tarefa.abort();
    }
}

async fn aceitar(
    ouvinte: TcpListener,
    destino: SocketAddr,
    modo: watch::Sender<ModoProxy>,
    contadores: Arc<Contadores>,
    sorte: Arc<Mutex<fastrand::Rng>>,
) {
    // Connections live in this set: aborting the proxy's task drops them all.
    let mut conexoes = JoinSet::new();
    loop {
        tokio::select! {
            aceita = ouvinte.accept() => {
                let Ok((cliente, _)) = aceita else {
                    // Out of file descriptors or the like: do not spin.
                    tokio::time::sleep(Duration::from_millis(10)).await;
                    continue;
                };
                contadores.conexoes.fetch_add(1, Ordering::Relaxed);
                conexoes.spawn(conduzir(
                    cliente,
                    destino,
                    modo.subscribe(),
                    Arc::clone(&contadores),
                    Arc::clone(&sorte),
                ));
            }
            Some(_) = conexoes.join_next(), if !conexoes.is_empty() => {}
        }
    }
}

/// Drops `conexao` with an RST instead of a FIN (the peer sees "connection reset").
fn resetar(conexao: TcpStream) {
    let _ = conexao.set_zero_linger();
    drop(conexao);
}

async fn conduzir(
    mut cliente: TcpStream,
    destino: SocketAddr,
    mut modo: watch::Receiver<ModoProxy>,
    contadores: Arc<Contadores>,
    sorte: Arc<Mutex<fastrand::Rng>>,
) {
    let _ = cliente.set_nodelay(true);
    // A dead network: hold the connection until the mode changes, then decide again.
    if congelar(&mut modo).await.is_err() {
        return;
    }
    if *modo.borrow() == ModoProxy::Recusar {
        contadores.resets.fetch_add(1, Ordering::Relaxed);
        resetar(cliente);
        return;
    }
    let Ok(mut servidor) = TcpStream::connect(destino).await else {
        resetar(cliente);
        return;
    };
    let _ = servidor.set_nodelay(true);
    let fim = bombear(&mut cliente, &mut servidor, &mut modo, &sorte).await;
    match fim {
        Fim::Fechou => {} // dropping both streams closes them (FIN)
        Fim::Resetar { perdeu_resposta } => {
            contadores.resets.fetch_add(1, Ordering::Relaxed);
            if perdeu_resposta {
                contadores
                    .respostas_perdidas
                    .fetch_add(1, Ordering::Relaxed);
            }
            resetar(cliente);
            resetar(servidor);
        }
    }
}

/// How one proxied connection ended.
enum Fim {
    /// One side closed (or failed): close the other.
    Fechou,
    /// A fault: reset both sides.
    Resetar { perdeu_resposta: bool },
}

/// Waits while the mode is [`ModoProxy::Buraco`]; `Err` when the proxy is gone.
async fn congelar(modo: &mut watch::Receiver<ModoProxy>) -> Result<(), watch::error::RecvError> {
    while *modo.borrow_and_update() == ModoProxy::Buraco {
        modo.changed().await?;
    }
    Ok(())
}

/// Moves bytes both ways, each direction on its own (a side that stops reading never blocks
/// the other direction), until both sides closed or a fault resets the connection. A side's
/// EOF is passed on as a half-close, so an answer can still come back.
async fn bombear(
    cliente: &mut TcpStream,
    servidor: &mut TcpStream,
    modo: &mut watch::Receiver<ModoProxy>,
    sorte: &Mutex<fastrand::Rng>,
) -> Fim {
    let (cliente_leitura, cliente_escrita) = cliente.split();
    let (servidor_leitura, servidor_escrita) = servidor.split();
    // The client sent bytes the upstream has not answered yet: the next upstream chunk starts
    // a response (the turn in which an ack can be lost).
    let pedido_pendente = AtomicBool::new(false);
    let ida = direcao(
        cliente_leitura,
        servidor_escrita,
        modo.clone(),
        Sentido::Ida,
        &pedido_pendente,
        sorte,
    );
    let volta = direcao(
        servidor_leitura,
        cliente_escrita,
        modo.clone(),
        Sentido::Volta,
        &pedido_pendente,
        sorte,
    );
    tokio::pin!(ida, volta);
    let (primeiro, ida_acabou) = tokio::select! {
        fim = &mut ida => (fim, true),
        fim = &mut volta => (fim, false),
    };
    if let Fim::Resetar { .. } = primeiro {
        return primeiro;
    }
    // One side closed its writing half; the other direction may still carry the answer.
    let outra = async { if ida_acabou { volta.await } else { ida.await } };
    match tokio::time::timeout(Duration::from_secs(30), outra).await {
        Ok(fim) => fim,
        Err(_) => Fim::Fechou,
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Sentido {
    /// Client → upstream.
    Ida,
    /// Upstream → client.
    Volta,
}

/// One direction of a connection, until its reader closes (passed on as a half-close) or the
/// mode resets the connection.
async fn direcao(
    mut leitura: tokio::net::tcp::ReadHalf<'_>,
    mut escrita: tokio::net::tcp::WriteHalf<'_>,
    mut modo: watch::Receiver<ModoProxy>,
    sentido: Sentido,
    pedido_pendente: &AtomicBool,
    sorte: &Mutex<fastrand::Rng>,
) -> Fim {
    let mut buffer = vec![0u8; 16 * 1024];
    loop {
        // `read` on a TCP stream is cancel-safe: a mode change loses no bytes.
        let lidos = tokio::select! {
            lidos = leitura.read(&mut buffer) => lidos,
            mudou = modo.changed() => {
                if mudou.is_err() {
                    return Fim::Fechou;
                }
                if *modo.borrow_and_update() == ModoProxy::Recusar {
                    return Fim::Resetar { perdeu_resposta: false };
                }
                continue;
            }
        };
        let lidos = match lidos {
            Ok(0) | Err(_) => {
                let _ = escrita.shutdown().await;
                return Fim::Fechou;
            }
            Ok(n) => n,
        };
        if congelar(&mut modo).await.is_err() {
            return Fim::Fechou;
        }
        let atual = *modo.borrow();
        if let ModoProxy::Atrasar(atraso) = atual {
            tokio::time::sleep(atraso).await;
        }
        match (sentido, atual) {
            (_, ModoProxy::Recusar) => {
                return Fim::Resetar {
                    perdeu_resposta: false,
                };
            }
            (Sentido::Ida, ModoProxy::CortarAposEncaminhar) => {
                // Forward the request — this chunk and whatever follows it within 50 ms (a
                // body written after its headers) — then cut both sides before any answer.
                let _ = escrita.write_all(&buffer[..lidos]).await;
                let ate = tokio::time::Instant::now() + Duration::from_millis(50);
                while let Ok(Ok(n)) = tokio::time::timeout_at(ate, leitura.read(&mut buffer)).await
                {
                    if n == 0 || escrita.write_all(&buffer[..n]).await.is_err() {
                        break;
                    }
                }
                let _ = escrita.flush().await;
                return Fim::Resetar {
                    perdeu_resposta: true,
                };
            }
            (Sentido::Volta, ModoProxy::CortarAposEncaminhar) => {
                return Fim::Resetar {
                    perdeu_resposta: true,
                };
            }
            (Sentido::Ida, _) => pedido_pendente.store(true, Ordering::Relaxed),
            (Sentido::Volta, ModoProxy::PerderResposta { fracao }) => {
                let nova_resposta = pedido_pendente.swap(false, Ordering::Relaxed);
                if nova_resposta && sorte.lock().expect("proxy rng").f64() < fracao {
                    return Fim::Resetar {
                        perdeu_resposta: true,
                    };
                }
            }
            (Sentido::Volta, _) => pedido_pendente.store(false, Ordering::Relaxed),
        }
        if escrita.write_all(&buffer[..lidos]).await.is_err() {
            return Fim::Fechou;
        }
    }
}
