//! Private nats-servers: one node (`ServidorNats`) or a three-node JetStream cluster
//! (`Cluster`), child processes on free ports of 127.0.0.1 with stores of their own, killed by PID
//! on drop. Self-contained (std, tokio, tempfile, uuid, futures-util and mensageria-nats), so the
//! benchmark includes this file too (`#[path]`) instead of depending on the test crate.

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use uuid::Uuid;

/// A nats-server of one test's own: a child process with JetStream on, on a free port of
/// 127.0.0.1 and a store in a temporary directory, so the test can SIGKILL it and start it again
/// on the same port and store without disturbing the shared server. Killed on drop.
pub struct ServidorNats {
    filho: Option<Child>,
    porta: u16,
    armazenamento: tempfile::TempDir,
}

impl ServidorNats {
    /// Starts it and returns once it accepts connections.
    pub async fn iniciar() -> Self {
        for _ in 0..5 {
            let porta = std::net::TcpListener::bind("127.0.0.1:0")
                .and_then(|ouvinte| ouvinte.local_addr())
                .expect("a free port")
                .port();
            let mut servidor = Self {
                filho: None,
                porta,
                armazenamento: tempfile::tempdir().expect("a store directory"),
            };
            // None: someone took the port between our probe and the server's bind.
            if servidor.tentar_subir().await.is_some() {
                return servidor;
            }
        }
        panic!("nats-server (on PATH; scripts/test needs it too) did not start on a free port");
    }

    /// `nats://127.0.0.1:<port>`.
    pub fn url(&self) -> String {
        format!("nats://127.0.0.1:{}", self.porta)
    }

    /// SIGKILLs it (no shutdown of any kind) and waits for the process to end.
    pub fn matar(&mut self) {
        if let Some(mut filho) = self.filho.take() {
            let _ = filho.kill();
            let _ = filho.wait();
        }
    }

    /// Starts it again on the same port and store; returns the instant it accepted a
    /// connection.
    pub async fn subir(&mut self) -> Instant {
        self.tentar_subir()
            .await
            .unwrap_or_else(|| panic!("nats-server did not start again on port {}", self.porta))
    }

    async fn tentar_subir(&mut self) -> Option<Instant> {
        let mut filho = Command::new("nats-server")
            .args([
                "-a",
                "127.0.0.1",
                "-p",
                &self.porta.to_string(),
                "-js",
                "-sd",
            ])
            .arg(self.armazenamento.path())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("run nats-server (it must be on PATH)");
        let aceitou = aceitar(&mut filho, self.porta).await;
        if aceitou.is_some() {
            self.filho = Some(filho);
        } else {
            let _ = filho.kill();
            let _ = filho.wait();
        }
        aceitou
    }
}

impl Drop for ServidorNats {
    fn drop(&mut self) {
        self.matar();
    }
}

/// A three-node JetStream cluster of one test's own: three nats-server processes on free ports of
/// 127.0.0.1, routed to each other, each with a store of its own in a temporary directory. A
/// node can be SIGKILLed and started again (same ports and store, or an emptied store); all are
/// killed on drop (by PID: the child processes).
pub struct Cluster {
    nos: Vec<No>,
    nome: String,
    /// Extra configuration every node gets (an `authorization` block, say), or none.
    extra: String,
    /// `user:password@` for the harness's own connections, when `extra` requires one.
    credenciais: String,
}

struct No {
    filho: Option<Child>,
    lugar: Lugar,
    armazenamento: tempfile::TempDir,
}

/// Where a node runs. [`Lugar::aqui`]: on 127.0.0.1 of this process's network; elsewhere (a
/// host of a network lab), through a command prefix such as `ip netns exec <ns>`.
#[derive(Debug, Clone)]
pub struct Lugar {
    /// What runs a program there (empty: here).
    pub prefixo: Vec<String>,
    /// The node's client listen address, as seen there (`127.0.0.1:4222`).
    pub escuta: String,
    /// The address of its routes (`host:port`), listened on there and dialed by the others.
    pub rota: String,
    /// The port on this process's 127.0.0.1 through which the harness and the apps reach the
    /// node's client port (the same port when the node runs here; a bridge's otherwise).
    pub porta: u16,
}

impl Lugar {
    /// On 127.0.0.1 here, with a client port and a route port (free ones).
    pub fn aqui(porta: u16, porta_cluster: u16) -> Self {
        Self {
            prefixo: Vec::new(),
            escuta: format!("127.0.0.1:{porta}"),
            rota: format!("127.0.0.1:{porta_cluster}"),
            porta,
        }
    }
}

impl Cluster {
    /// Starts the three nodes and returns once JetStream has a meta leader (a stream can be
    /// created).
    pub async fn iniciar() -> Self {
        Self::iniciar_com("", "").await
    }

    /// [`iniciar`](Self::iniciar), every node's configuration file ending with `extra` (e.g. an
    /// `authorization { users = [...] }` block); `credenciais` (`user:password`) is what the
    /// harness itself connects with.
    pub async fn iniciar_com(extra: &str, credenciais: &str) -> Self {
        let mut portas = Vec::new();
        let ouvintes: Vec<std::net::TcpListener> = (0..6)
            .map(|_| std::net::TcpListener::bind("127.0.0.1:0").expect("a free port"))
            .collect();
        for ouvinte in &ouvintes {
            portas.push(ouvinte.local_addr().expect("its port").port());
        }
        drop(ouvintes);
        let lugares = (0..3)
            .map(|i| Lugar::aqui(portas[2 * i], portas[2 * i + 1]))
            .collect();
        Self::iniciar_em(lugares, extra, credenciais).await
    }

    /// [`iniciar_com`](Self::iniciar_com), node `i` at `lugares[i]` (three of them).
    pub async fn iniciar_em(lugares: Vec<Lugar>, extra: &str, credenciais: &str) -> Self {
        let nos = lugares
            .into_iter()
            .map(|lugar| No {
                filho: None,
                lugar,
                armazenamento: tempfile::tempdir().expect("a store directory"),
            })
            .collect();
        let mut cluster = Self {
            nos,
            nome: format!("C{}", Uuid::now_v7().simple()),
            extra: extra.to_owned(),
            credenciais: if credenciais.is_empty() {
                String::new()
            } else {
                format!("{credenciais}@")
            },
        };
        for i in 0..3 {
            cluster.subir(i).await;
        }
        cluster.esperar_lider_de_meta().await;
        cluster
    }

    /// The three client URLs, comma-separated: what an app is given to follow the cluster
    /// (with the harness's credentials, if the cluster requires some).
    pub fn urls(&self) -> String {
        self.urls_de(self.credenciais.trim_end_matches('@'))
    }

    /// The three client URLs with `credenciais` (`user:password`; empty: none).
    pub fn urls_de(&self, credenciais: &str) -> String {
        let credenciais = if credenciais.is_empty() {
            String::new()
        } else {
            format!("{credenciais}@")
        };
        self.nos
            .iter()
            .map(|no| format!("nats://{credenciais}127.0.0.1:{}", no.lugar.porta))
            .collect::<Vec<_>>()
            .join(",")
    }

    /// Node `i`'s client URL.
    pub fn url(&self, i: usize) -> String {
        format!("nats://127.0.0.1:{}", self.nos[i].lugar.porta)
    }

    /// The index of the node whose server name is `nome` (`n0`, `n1`, `n2`).
    pub fn indice(nome: &str) -> usize {
        nome.trim_start_matches('n')
            .parse()
            .expect("a node name n<i>")
    }

    /// SIGKILLs node `i` (no shutdown of any kind) and waits for its process to end.
    pub fn matar(&mut self, i: usize) {
        if let Some(mut filho) = self.nos[i].filho.take() {
            let _ = filho.kill();
            let _ = filho.wait();
        }
    }

    /// Deletes node `i`'s store (the node must be down): it comes back empty-handed.
    pub fn apagar_armazenamento(&mut self, i: usize) {
        let caminho = self.nos[i].armazenamento.path().to_owned();
        let _ = std::fs::remove_dir_all(&caminho);
        std::fs::create_dir_all(&caminho).expect("recreate the store directory");
    }

    /// Starts node `i` on its ports and store; the instant it accepted a connection.
    pub async fn subir(&mut self, i: usize) -> Instant {
        let rotas: Vec<String> = self
            .nos
            .iter()
            .enumerate()
            .filter(|(j, _)| *j != i)
            .map(|(_, no)| format!("nats://{}", no.lugar.rota))
            .collect();
        let no = &self.nos[i];
        let configuracao = format!(
            "listen: {escuta}\nserver_name: n{i}\n\
             jetstream {{ store_dir: {dir:?} }}\n\
             cluster {{ name: {nome}, listen: {rota}, routes: [{rotas}], no_advertise: true }}\n\
             {extra}\n",
            escuta = no.lugar.escuta,
            dir = no.armazenamento.path().display().to_string(),
            nome = self.nome,
            rota = no.lugar.rota,
            rotas = rotas.join(", "),
            extra = self.extra,
        );
        let arquivo = no.armazenamento.path().join("no.conf");
        std::fs::write(&arquivo, configuracao).expect("write the node's configuration");
        let (programa, antes) = match no.lugar.prefixo.split_first() {
            Some((programa, resto)) => (programa.as_str(), resto.to_vec()),
            None => ("nats-server", Vec::new()),
        };
        let mut comando = Command::new(programa);
        if !antes.is_empty() {
            comando.args(&antes).arg("nats-server");
        }
        let mut filho = comando
            .arg("-c")
            .arg(&arquivo)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("run nats-server (it must be on PATH)");
        let porta = no.lugar.porta;
        match aceitar(&mut filho, porta).await {
            Some(aceitou) => {
                self.nos[i].filho = Some(filho);
                aceitou
            }
            None => {
                let _ = filho.kill();
                let _ = filho.wait();
                panic!(
                    "nats-server node {i} did not accept connections on port {porta} within 10 s"
                );
            }
        }
    }

    /// Waits (up to 30 s) until JetStream lists its streams: the meta group has a leader.
    async fn esperar_lider_de_meta(&self) {
        let js = mensageria_nats::conectar(&self.urls(), "harness")
            .await
            .expect("connect to the cluster");
        let limite = Instant::now() + Duration::from_secs(30);
        let mut ultimo = String::new();
        while Instant::now() < limite {
            use futures_util::StreamExt as _;
            match js.stream_names().next().await {
                None | Some(Ok(_)) => return,
                Some(Err(erro)) => ultimo = erro.to_string(),
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        panic!("the cluster's JetStream has no meta leader after 30 s: {ultimo}");
    }
}

/// Whether a connection to `porta` on 127.0.0.1 is greeted by a nats-server's `INFO` line within
/// a second.
async fn saudou(porta: u16) -> bool {
    use tokio::io::AsyncReadExt as _;
    let Ok(mut conexao) = tokio::net::TcpStream::connect(("127.0.0.1", porta)).await else {
        return false;
    };
    let mut inicio = [0u8; 4];
    matches!(
        tokio::time::timeout(Duration::from_secs(1), conexao.read_exact(&mut inicio)).await,
        Ok(Ok(_)) if &inicio == b"INFO"
    )
}

impl Drop for Cluster {
    fn drop(&mut self) {
        for i in 0..self.nos.len() {
            self.matar(i);
        }
    }
}

/// The instant `filho` greeted a connection on `porta` with its `INFO` (within 10 s), or `None`
/// when it did not or exited first. The greeting, not the connection: a bridge accepts even when
/// the node behind it is down.
async fn aceitar(filho: &mut Child, porta: u16) -> Option<Instant> {
    let limite = Instant::now() + Duration::from_secs(10);
    while Instant::now() < limite {
        if saudou(porta).await {
            return Some(Instant::now());
        }
        if filho.try_wait().ok().flatten().is_some() {
            return None;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    None
}
