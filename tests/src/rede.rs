//! The network lab of the fault suite (issue 27): hosts are network namespaces joined by a
//! router namespace, so that faults happen to packets (a partition where TCP connections stay
//! open and silent, a one-way partition, a link that flaps) instead of in a proxy inside the
//! test's own process.
//!
//! ```text
//!   relay1 ──┐
//!   relay2 ──┤
//!   recv   ──┼── rede: a router (IP forwarding; policy rules cut one pair of hosts)
//!   db     ──┘
//! ```
//!
//! Each host has one veth pair to the router, in a /30 of its own inside `10.231.<s>.0/24`; its
//! only route goes through the router, whose only interfaces are the lab's: no packet can leave
//! the lab. `db` runs a PostgreSQL instance of the lab's own (`initdb` into a temporary
//! directory, `pg_ctl` inside the namespace) listening on the db host's address and on a Unix
//! socket. The test process stays where it is and reaches that PostgreSQL through the Unix
//! socket only, a path no fault touches: producers, ledger and checker never use the lab's links.
//!
//! The faults:
//! - [`Lab::cortar`] adds `from <a> to <b> blackhole` to the router's policy rules: packets from
//!   `a` to `b` vanish in the middle of the network, and neither end is told (no ICMP, no reset);
//!   [`Lab::separar`] does it both ways;
//! - [`Lab::derrubar`] / [`Lab::levantar`] set the router's end of a host's link down or up: the
//!   host loses its carrier, as with a switch port that flaps;
//! - [`Lab::degradar`] loses, delays and reorders every packet between two hosts (through a TUN
//!   device and a small program of the lab's: this kernel has no netem).
//!
//! Names carry the test's pid (`mrede-<pid>-<k>-<host>`, `/tmp/mrede-<pid>-<k>`); a lab cleans
//! itself up when dropped (also on a panic), and [`Lab::montar`] first removes what labs of dead
//! processes left behind. It refuses to run, with the reason, unless the process is root and
//! `ip netns` works.

use std::fmt::Write as _;
use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::mpsc;
use std::time::Duration;

use sqlx::PgPool;
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};

/// A host of the lab.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Maquina {
    /// Runs a relay.
    Relay1,
    /// Runs a sibling relay of the same app.
    Relay2,
    /// Runs the receiving app (router + receptor).
    Receptor,
    /// Runs the lab's PostgreSQL.
    Banco,
    /// Runs node 0 of a nats-server cluster ([`Lab::montar_nats`]).
    Nats0,
    /// Runs node 1 of a nats-server cluster.
    Nats1,
    /// Runs node 2 of a nats-server cluster.
    Nats2,
}

impl Maquina {
    /// Every host, in the order of their links.
    pub const TODAS: [Maquina; 4] = [
        Maquina::Relay1,
        Maquina::Relay2,
        Maquina::Receptor,
        Maquina::Banco,
    ];

    /// The hosts of a nats-server cluster's lab ([`Lab::montar_nats`]), node `i` at `[i]`.
    pub const NATS: [Maquina; 3] = [Maquina::Nats0, Maquina::Nats1, Maquina::Nats2];

    fn indice(self) -> u8 {
        match self {
            Maquina::Relay1 => 0,
            Maquina::Relay2 => 1,
            Maquina::Receptor => 2,
            Maquina::Banco => 3,
            Maquina::Nats0 => 4,
            Maquina::Nats1 => 5,
            Maquina::Nats2 => 6,
        }
    }

    /// The host's short name (its namespace's suffix).
    pub fn nome(self) -> &'static str {
        match self {
            Maquina::Relay1 => "relay1",
            Maquina::Relay2 => "relay2",
            Maquina::Receptor => "recv",
            Maquina::Banco => "db",
            Maquina::Nats0 => "nats0",
            Maquina::Nats1 => "nats1",
            Maquina::Nats2 => "nats2",
        }
    }
}

/// Why the lab cannot run on this machine.
#[derive(Debug)]
pub struct Pulo(pub String);

/// Says why `nome` does not run here; a failure instead when `MENSAGERIA_TESTE_REDE_EXIGIDA` is
/// set (the machine was found able to run the lab).
pub fn pular(nome: &str, pulo: &Pulo) {
    let texto = format!(
        "SKIPPED {nome}: the network lab cannot run here: {}",
        pulo.0
    );
    assert!(
        std::env::var_os("MENSAGERIA_TESTE_REDE_EXIGIDA").is_none(),
        "{texto} (and MENSAGERIA_TESTE_REDE_EXIGIDA is set)"
    );
    // Straight to stderr, past the test harness's capture of print!/eprint!: a skip is never
    // a silent pass.
    let _ = std::io::Write::write_all(&mut std::io::stderr(), format!("{texto}\n").as_bytes());
}

/// The port of the lab's PostgreSQL.
pub const PORTA_PG: u16 = 5432;
/// The port the receptor listens on.
pub const PORTA_RECEPTOR: u16 = 8080;

/// The TUN device of [`Lab::degradar`], its routing table and its rules' first preference.
const DISPOSITIVO_FIO: &str = "fio";
const TABELA_FIO: &str = "100";
const PREFERENCIA_FIO: u32 = 50;

static LABS: AtomicU32 = AtomicU32::new(0);
const PREFIXO: &str = "mrede-";

/// One lab: its namespaces, links, PostgreSQL, and the faults set on them.
pub struct Lab {
    prefixo: String,
    sub_rede: u8,
    dir: PathBuf,
    bin_pg: PathBuf,
    regras: Mutex<Vec<u32>>,
    postgres: bool,
    maquinas: Vec<Maquina>,
    pontes: Mutex<Vec<Ponte>>,
}

impl Lab {
    /// Builds a lab with its PostgreSQL running, or says why this machine cannot.
    pub fn montar() -> Result<Lab, Pulo> {
        let mut lab = Self::montar_com(&Maquina::TODAS)?;
        lab.iniciar_postgres();
        Ok(lab)
    }

    /// Builds a lab of three hosts for a nats-server cluster ([`Maquina::NATS`]) and no
    /// PostgreSQL, or says why this machine cannot: the nodes run in the hosts
    /// (`ip netns exec`), their routes cross the router, and the test process reaches each
    /// node's client port through a [`ponte`](Self::ponte).
    pub fn montar_nats() -> Result<Lab, Pulo> {
        Self::montar_com(&Maquina::NATS)
    }

    fn montar_com(maquinas: &[Maquina]) -> Result<Lab, Pulo> {
        let bin_pg = precondicoes()?;
        limpar_restos();
        let k = LABS.fetch_add(1, Ordering::Relaxed);
        let pid = std::process::id();
        let prefixo = format!("{PREFIXO}{pid}-{k}");
        let mut lab = Lab {
            dir: PathBuf::from("/tmp").join(&prefixo),
            prefixo,
            sub_rede: (1 + (pid + k * 7) % 250) as u8,
            bin_pg,
            regras: Mutex::default(),
            postgres: false,
            maquinas: maquinas.to_vec(),
            pontes: Mutex::default(),
        };
        lab.ligar();
        Ok(lab)
    }

    /// The namespace of `maquina`.
    pub fn ns(&self, maquina: Maquina) -> String {
        format!("{}-{}", self.prefixo, maquina.nome())
    }

    fn ns_rede(&self) -> String {
        format!("{}-rede", self.prefixo)
    }

    /// The address of `maquina` (the host's end of its link).
    pub fn ip(&self, maquina: Maquina) -> Ipv4Addr {
        Ipv4Addr::new(10, 231, self.sub_rede, 4 * maquina.indice() + 2)
    }

    fn ip_roteador(&self, maquina: Maquina) -> Ipv4Addr {
        Ipv4Addr::new(10, 231, self.sub_rede, 4 * maquina.indice() + 1)
    }

    /// The router's end of `maquina`'s link.
    fn porta(maquina: Maquina) -> String {
        format!("p{}", maquina.indice())
    }

    /// The lab's directory (PostgreSQL's data, the processes' logs).
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn ligar(&mut self) {
        std::fs::create_dir_all(&self.dir).expect("create the lab's directory");
        let rede = self.ns_rede();
        ip(&format!("netns add {rede}"));
        for &maquina in &self.maquinas {
            ip(&format!("netns add {}", self.ns(maquina)));
        }
        ip(&format!("-n {rede} link set lo up"));
        for &maquina in &self.maquinas {
            let (ns, porta) = (self.ns(maquina), Self::porta(maquina));
            let (roteador, host) = (self.ip_roteador(maquina), self.ip(maquina));
            ip(&format!(
                "-n {rede} link add {porta} type veth peer name eth0 netns {ns}"
            ));
            ip(&format!("-n {rede} addr add {roteador}/30 dev {porta}"));
            ip(&format!("-n {rede} link set {porta} up"));
            ip(&format!("-n {ns} link set lo up"));
            ip(&format!("-n {ns} addr add {host}/30 dev eth0"));
            ip(&format!("-n {ns} link set eth0 up"));
            ip(&format!("-n {ns} route add default via {roteador}"));
        }
        executar(
            Command::new("ip")
                .args(["netns", "exec", &rede, "sh", "-c"])
                .arg("echo 1 > /proc/sys/net/ipv4/ip_forward"),
            "turn on forwarding in the router",
        );
    }

    fn dir_pg(&self) -> PathBuf {
        self.dir.join("postgres")
    }

    /// The directory of PostgreSQL's Unix socket.
    pub fn socket_pg(&self) -> PathBuf {
        self.dir_pg().join("sock")
    }

    fn iniciar_postgres(&mut self) {
        let dir = self.dir_pg();
        std::fs::create_dir_all(dir.join("sock")).expect("create PostgreSQL's directory");
        executar(
            Command::new("chown")
                .args(["-R", "postgres:postgres"])
                .arg(&dir),
            "give PostgreSQL's directory to the postgres user",
        );
        let dados = dir.join("data");
        executar(
            Command::new("runuser")
                .args(["-u", "postgres", "--"])
                .arg(self.bin_pg.join("initdb"))
                .arg("-D")
                .arg(&dados)
                .args("-U postgres -A trust --no-sync -E UTF8 --locale=C".split(' ')),
            "initdb the lab's PostgreSQL",
        );
        let mut hba = std::fs::OpenOptions::new()
            .append(true)
            .open(dados.join("pg_hba.conf"))
            .expect("open pg_hba.conf");
        std::io::Write::write_all(
            &mut hba,
            format!("host all all 10.231.{}.0/24 trust\n", self.sub_rede).as_bytes(),
        )
        .expect("write pg_hba.conf");
        let opcoes = format!(
            "-c listen_addresses={} -c port={PORTA_PG} -c unix_socket_directories={} \
             -c fsync=off -c synchronous_commit=off -c full_page_writes=off \
             -c max_connections=200",
            self.ip(Maquina::Banco),
            dir.join("sock").display()
        );
        self.postgres = true;
        executar(
            Command::new("ip")
                .args(["netns", "exec", &self.ns(Maquina::Banco)])
                .args(["runuser", "-u", "postgres", "--"])
                .arg(self.bin_pg.join("pg_ctl"))
                .arg("-D")
                .arg(&dados)
                .arg("-l")
                .arg(dir.join("postgres.log"))
                .args(["-w", "-t", "60", "-o", &opcoes, "start"]),
            "start the lab's PostgreSQL",
        );
    }

    /// The URL through which a host of the lab reaches PostgreSQL (over the lab's links).
    pub fn url_pg(&self) -> String {
        format!(
            "postgres://postgres@{}:{PORTA_PG}/postgres",
            self.ip(Maquina::Banco)
        )
    }

    /// A pool on the lab's PostgreSQL through its Unix socket: outside every fault.
    pub async fn pool_de_controle(&self, conexoes: u32) -> PgPool {
        pool_por_socket(&self.socket_pg(), conexoes).await
    }

    /// The receptor's base URL, as the relays reach it.
    pub fn url_receptor(&self) -> String {
        format!("http://{}:{PORTA_RECEPTOR}", self.ip(Maquina::Receptor))
    }

    /// Starts `binario papel` inside `maquina`'s namespace with `ambiente`, its stderr into
    /// `<lab>/<nome>.log`; waits (up to 60 s) for its first line, `pronto`.
    pub async fn iniciar(
        &self,
        maquina: Maquina,
        nome: &str,
        binario: &str,
        papel: &str,
        ambiente: &[(&str, String)],
    ) -> Processo {
        self.iniciar_em(&self.ns(maquina), nome, binario, &[papel], ambiente)
            .await
    }

    async fn iniciar_em(
        &self,
        ns: &str,
        nome: &str,
        programa: &str,
        argumentos: &[&str],
        ambiente: &[(&str, String)],
    ) -> Processo {
        let log = self.dir.join(format!("{nome}.log"));
        let arquivo = std::fs::File::create(&log).expect("create a process log");
        let mut filho = Command::new("ip")
            .args(["netns", "exec", ns, programa])
            .args(argumentos)
            .envs(ambiente.iter().map(|(k, v)| (*k, v.as_str())))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(arquivo)
            .spawn()
            .unwrap_or_else(|erro| panic!("start {programa} in {ns}: {erro}"));
        let saida = filho.stdout.take().expect("the child's stdout");
        let (envio, linhas) = mpsc::channel();
        std::thread::spawn(move || {
            use std::io::BufRead;
            for linha in std::io::BufReader::new(saida).lines() {
                let Ok(linha) = linha else { break };
                if envio.send(linha).is_err() {
                    break;
                }
            }
        });
        let mut processo = Processo {
            entrada: filho.stdin.take(),
            filho,
            nome: nome.to_owned(),
            log,
            linhas,
        };
        let primeira = processo.linha(Duration::from_secs(60)).await;
        assert_eq!(
            primeira.as_deref(),
            Some("pronto"),
            "{nome} did not start; its log:\n{}",
            std::fs::read_to_string(&processo.log).unwrap_or_default()
        );
        processo
    }

    /// Degrades every path between two hosts: each packet is lost with probability `perda`,
    /// or delayed by normal(`atraso`, `desvio`) clipped at 0, which reorders packets whose
    /// delays cross. This kernel has no netem, so the router sends the packets through a TUN
    /// device read by a small program of the lab's (`rede/fio.py`, needs `python3`); the
    /// returned process is that program (`contar` gives its counts). Undone by
    /// [`normalizar`](Self::normalizar).
    pub async fn degradar(
        &self,
        perda: f64,
        atraso: Duration,
        desvio: Duration,
        semente: u64,
    ) -> Result<Processo, Pulo> {
        let python = Command::new("python3")
            .arg("--version")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
        if !python.is_ok_and(|s| s.success()) {
            return Err(Pulo("no python3 for the lab's lossy wire".into()));
        }
        let script = self.dir.join("fio.py");
        std::fs::write(&script, include_str!("rede/fio.py")).expect("write the wire's program");
        let rede = self.ns_rede();
        let fio = self
            .iniciar_em(
                &rede,
                "fio",
                "python3",
                &[
                    &script.display().to_string(),
                    DISPOSITIVO_FIO,
                    &perda.to_string(),
                    &atraso.as_millis().to_string(),
                    &desvio.as_millis().to_string(),
                    &semente.to_string(),
                ],
                &[],
            )
            .await;
        ip(&format!("-n {rede} link set {DISPOSITIVO_FIO} up"));
        ip(&format!(
            "-n {rede} route add default dev {DISPOSITIVO_FIO} table {TABELA_FIO}"
        ));
        // Packets coming back from the wire arrive on it with the hosts' source addresses.
        executar(
            Command::new("ip")
                .args(["netns", "exec", &rede, "sh", "-c"])
                .arg("for f in /proc/sys/net/ipv4/conf/*/rp_filter; do echo 0 > $f; done"),
            "turn off reverse-path filtering in the router",
        );
        for &maquina in &self.maquinas {
            let pref = (PREFERENCIA_FIO + u32::from(maquina.indice())).to_string();
            let porta = Self::porta(maquina);
            ip(&format!(
                "-n {rede} rule add iif {porta} lookup {TABELA_FIO} pref {pref}"
            ));
        }
        Ok(fio)
    }

    /// Sends the packets straight through the router again.
    pub fn normalizar(&self) {
        for &maquina in &self.maquinas {
            let pref = (PREFERENCIA_FIO + u32::from(maquina.indice())).to_string();
            ip(&format!("-n {} rule del pref {pref}", self.ns_rede()));
        }
    }

    /// Drops every packet from `de` to `para`, in the router: a one-way partition.
    pub fn cortar(&self, de: Maquina, para: Maquina) {
        let mut regras = self.regras.lock().unwrap();
        let preferencia = 100 + regras.len() as u32;
        ip(&format!(
            "-n {} rule add from {} to {} blackhole pref {preferencia}",
            self.ns_rede(),
            self.ip(de),
            self.ip(para)
        ));
        regras.push(preferencia);
    }

    /// Partitions `a` and `b` both ways.
    pub fn separar(&self, a: Maquina, b: Maquina) {
        self.cortar(a, b);
        self.cortar(b, a);
    }

    /// Removes every partition.
    pub fn curar(&self) {
        let mut regras = self.regras.lock().unwrap();
        for preferencia in regras.drain(..) {
            ip(&format!(
                "-n {} rule del pref {preferencia}",
                self.ns_rede()
            ));
        }
    }

    /// Sets the router's end of `maquina`'s link down: the host loses its carrier.
    pub fn derrubar(&self, maquina: Maquina) {
        ip(&format!(
            "-n {} link set {} down",
            self.ns_rede(),
            Self::porta(maquina)
        ));
    }

    /// Sets the router's end of `maquina`'s link up again.
    pub fn levantar(&self, maquina: Maquina) {
        ip(&format!(
            "-n {} link set {} up",
            self.ns_rede(),
            Self::porta(maquina)
        ));
    }

    /// A port on 127.0.0.1 of the test's own network through which `porta` on `maquina`'s
    /// loopback is reached: a thread of this process moves into the host's namespace and
    /// forwards every connection accepted on a listener bound before it moved. Like the
    /// PostgreSQL control socket, a path outside every fault: a partition cuts the lab's
    /// links, never a bridge. Closed with the lab.
    pub fn ponte(&self, maquina: Maquina, porta: u16) -> u16 {
        let ouvinte = std::net::TcpListener::bind("127.0.0.1:0").expect("a free port for a bridge");
        ouvinte
            .set_nonblocking(true)
            .expect("a non-blocking listener");
        let local = ouvinte.local_addr().expect("the bridge's port").port();
        let caminho = Path::new("/var/run/netns").join(self.ns(maquina));
        let ns = std::fs::File::open(&caminho)
            .unwrap_or_else(|erro| panic!("open {}: {erro}", caminho.display()));
        let destino = std::net::SocketAddr::from((Ipv4Addr::LOCALHOST, porta));
        let (parar, sinal) = tokio::sync::oneshot::channel::<()>();
        let fio = std::thread::Builder::new()
            .name(format!("ponte-{}", maquina.nome()))
            .spawn(move || {
                use std::os::fd::AsFd as _;
                // Only this thread moves: the listener stays where it was bound, every
                // connection it dials is the host's.
                rustix::thread::move_into_link_name_space(
                    ns.as_fd(),
                    Some(rustix::thread::LinkNameSpaceType::Network),
                )
                .expect("move the bridge's thread into the host's namespace");
                let tempo = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .expect("the bridge's runtime");
                tempo.block_on(encaminhar(ouvinte, destino, sinal));
            })
            .expect("start the bridge's thread");
        self.pontes.lock().unwrap().push(Ponte {
            parar: Some(parar),
            fio: Some(fio),
        });
        local
    }

    fn namespaces(&self) -> Vec<String> {
        let mut todos: Vec<String> = self.maquinas.iter().map(|&m| self.ns(m)).collect();
        todos.push(self.ns_rede());
        todos
    }
}

impl Drop for Lab {
    fn drop(&mut self) {
        for ponte in self.pontes.get_mut().unwrap().drain(..) {
            ponte.fechar();
        }
        if self.postgres {
            parar_postgres(&self.bin_pg, &self.dir_pg().join("data"));
        }
        for ns in self.namespaces() {
            desmontar_namespace(&ns);
        }
        // MENSAGERIA_REDE_MANTER keeps the lab's directory (the processes' logs) for a look.
        if std::env::var_os("MENSAGERIA_REDE_MANTER").is_none() {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

/// A [`Lab::ponte`]: its thread, and the signal that stops it.
struct Ponte {
    parar: Option<tokio::sync::oneshot::Sender<()>>,
    fio: Option<std::thread::JoinHandle<()>>,
}

impl Ponte {
    fn fechar(mut self) {
        if let Some(parar) = self.parar.take() {
            let _ = parar.send(());
        }
        if let Some(fio) = self.fio.take() {
            let _ = fio.join();
        }
    }
}

/// Accepts on `ouvinte` and joins each connection to one dialed to `destino`, until `parar`.
async fn encaminhar(
    ouvinte: std::net::TcpListener,
    destino: std::net::SocketAddr,
    parar: tokio::sync::oneshot::Receiver<()>,
) {
    let ouvinte = tokio::net::TcpListener::from_std(ouvinte).expect("the bridge's listener");
    let aceitar = async {
        loop {
            let Ok((mut entrada, _)) = ouvinte.accept().await else {
                continue;
            };
            tokio::spawn(async move {
                if let Ok(mut saida) = tokio::net::TcpStream::connect(destino).await {
                    let _ = tokio::io::copy_bidirectional(&mut entrada, &mut saida).await;
                }
            });
        }
    };
    tokio::select! {
        () = aceitar => {}
        _ = parar => {}
    }
}

/// A process of the lab (a relay, the receiving app), killed with SIGKILL when dropped.
pub struct Processo {
    filho: Child,
    entrada: Option<ChildStdin>,
    nome: String,
    log: PathBuf,
    linhas: mpsc::Receiver<String>,
}

impl Processo {
    /// Its name in the lab.
    pub fn nome(&self) -> &str {
        &self.nome
    }

    /// Its log (its stderr).
    pub fn log(&self) -> &Path {
        &self.log
    }

    /// Its process id (`ip netns exec` execs the program: the same process).
    pub fn pid(&self) -> u32 {
        self.filho.id()
    }

    /// The next line it writes on stdout, waiting up to `limite`.
    pub async fn linha(&mut self, limite: Duration) -> Option<String> {
        let fim = tokio::time::Instant::now() + limite;
        loop {
            match self.linhas.try_recv() {
                Ok(linha) => return Some(linha),
                Err(mpsc::TryRecvError::Disconnected) => return None,
                Err(mpsc::TryRecvError::Empty) if tokio::time::Instant::now() >= fim => {
                    return None;
                }
                Err(mpsc::TryRecvError::Empty) => {
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
            }
        }
    }

    /// Writes `comando` as one line on its stdin and returns the line it answers (up to
    /// `limite`).
    pub async fn pedir(&mut self, comando: &str, limite: Duration) -> String {
        use std::io::Write as _;
        let entrada = self.entrada.as_mut().expect("the child's stdin");
        writeln!(entrada, "{comando}").expect("write to the child's stdin");
        entrada.flush().expect("flush the child's stdin");
        self.linha(limite).await.unwrap_or_else(|| {
            panic!(
                "{} did not answer `{comando}` within {limite:?}; its log:\n{}",
                self.nome,
                std::fs::read_to_string(&self.log).unwrap_or_default()
            )
        })
    }

    /// SIGKILL.
    pub fn matar(&mut self) {
        let _ = self.filho.kill();
        let _ = self.filho.wait();
    }

    /// What it logged so far at WARN and above, and the INFO lines whose message contains one of
    /// `info_relevante`.
    pub fn resumo_do_log(&self, info_relevante: &[&str]) -> ResumoDeLog {
        ResumoDeLog::ler(&self.nome, &self.log, info_relevante)
    }
}

impl Drop for Processo {
    fn drop(&mut self) {
        self.matar();
    }
}

/// The lines a process logged, by level and message.
#[derive(Debug, Clone, Default)]
pub struct ResumoDeLog {
    /// The process's name.
    pub nome: String,
    /// `(level, message, count)`, in order of first appearance.
    pub mensagens: Vec<(String, String, u64)>,
}

impl ResumoDeLog {
    /// Reads `log` (the `tracing_subscriber::fmt` format, no colours): every WARN and ERROR
    /// line, and the INFO lines containing one of `info_relevante`.
    pub fn ler(nome: &str, log: &Path, info_relevante: &[&str]) -> Self {
        let texto = std::fs::read_to_string(log).unwrap_or_default();
        let mut resumo = ResumoDeLog {
            nome: nome.to_owned(),
            mensagens: Vec::new(),
        };
        for linha in texto.lines() {
            let mut partes = linha.split_whitespace();
            let (Some(_hora), Some(nivel)) = (partes.next(), partes.next()) else {
                continue;
            };
            let mensagem = mensagem_do_log(linha);
            let conta = match nivel {
                "WARN" | "ERROR" => true,
                "INFO" => info_relevante.iter().any(|m| linha.contains(m)),
                _ => false,
            };
            if !conta {
                continue;
            }
            match resumo
                .mensagens
                .iter_mut()
                .find(|(n, m, _)| n == nivel && *m == mensagem)
            {
                Some((_, _, quantas)) => *quantas += 1,
                None => resumo.mensagens.push((nivel.to_owned(), mensagem, 1)),
            }
        }
        resumo
    }

    /// Lines at WARN or ERROR.
    pub fn avisos(&self) -> u64 {
        self.mensagens
            .iter()
            .filter(|(nivel, _, _)| nivel != "INFO")
            .map(|(_, _, n)| n)
            .sum()
    }

    /// Lines at WARN or ERROR of mensageria's own (not of its dependencies, such as sqlx's
    /// slow-statement warnings).
    pub fn avisos_da_biblioteca(&self) -> u64 {
        self.mensagens
            .iter()
            .filter(|(nivel, m, _)| nivel != "INFO" && m.starts_with("mensageria "))
            .map(|(_, _, n)| n)
            .sum()
    }

    /// Lines whose message contains `trecho`.
    pub fn contar(&self, trecho: &str) -> u64 {
        self.mensagens
            .iter()
            .filter(|(_, m, _)| m.contains(trecho))
            .map(|(_, _, n)| n)
            .sum()
    }

    /// `relay1: 3 lines (2× WARN the destination …; 1× ERROR …)`.
    pub fn texto(&self) -> String {
        let total: u64 = self.mensagens.iter().map(|(_, _, n)| n).sum();
        let mut texto = format!("{}: {total} lines", self.nome);
        if !self.mensagens.is_empty() {
            texto.push_str(" (");
            for (i, (nivel, mensagem, n)) in self.mensagens.iter().enumerate() {
                if i > 0 {
                    texto.push_str("; ");
                }
                let _ = write!(texto, "{n}× {nivel} \"{mensagem}\"");
            }
            texto.push(')');
        }
        texto
    }
}

/// The message of a `tracing_subscriber::fmt` line (`<time> <LEVEL> <spans>: <target>:
/// <message> <fields>`), up to its first `;`, `(` or field: the same kind of event gives the
/// same text whatever its fields.
fn mensagem_do_log(linha: &str) -> String {
    // The target is the first word before a `: ` made only of a Rust path's characters (a span
    // has braces or dots).
    let mut inicio = 0;
    let mut busca = 0;
    while let Some(i) = linha[busca..].find(": ").map(|i| i + busca) {
        let palavra = linha[..i].rsplit(' ').next().unwrap_or_default();
        if !palavra.is_empty()
            && palavra
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':')
        {
            inicio = i + 2;
            break;
        }
        busca = i + 2;
    }
    let resto = &linha[inicio..];
    let fim = resto.find([';', '(']).unwrap_or(resto.len());
    let mut mensagem = String::new();
    for palavra in resto[..fim].split_whitespace() {
        if palavra.contains('=') {
            break;
        }
        if !mensagem.is_empty() {
            mensagem.push(' ');
        }
        mensagem.push_str(palavra);
    }
    mensagem
}

/// A pool on the PostgreSQL whose Unix socket is in `dir`.
pub async fn pool_por_socket(dir: &Path, conexoes: u32) -> PgPool {
    let opcoes = PgConnectOptions::new()
        .socket(dir)
        .port(PORTA_PG)
        .username("postgres")
        .database("postgres");
    PgPoolOptions::new()
        .max_connections(conexoes)
        .connect_with(opcoes)
        .await
        .expect("connect to the lab's PostgreSQL through its Unix socket")
}

/// Root, `ip netns` working, PostgreSQL's server binaries, `runuser` and the `postgres` user;
/// returns the directory of PostgreSQL's binaries.
fn precondicoes() -> Result<PathBuf, Pulo> {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let uid_efetivo = status
        .lines()
        .find_map(|l| l.strip_prefix("Uid:"))
        .and_then(|l| l.split_whitespace().nth(1).map(str::to_owned));
    if uid_efetivo.as_deref() != Some("0") {
        return Err(Pulo(
            "not root (network namespaces, veth pairs and routes need root)".into(),
        ));
    }
    let ip_netns = Command::new("ip")
        .args(["netns", "list"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
    if !ip_netns.is_ok_and(|s| s.success()) {
        return Err(Pulo(
            "`ip netns` is missing or does not work (install iproute2)".into(),
        ));
    }
    let bin_pg = std::fs::read_dir("/usr/lib/postgresql")
        .ok()
        .into_iter()
        .flatten()
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter_map(|v| v.parse::<u32>().ok())
        .max()
        .map(|v| PathBuf::from(format!("/usr/lib/postgresql/{v}/bin")))
        .filter(|dir| dir.join("initdb").exists() && dir.join("pg_ctl").exists());
    let Some(bin_pg) = bin_pg else {
        return Err(Pulo(
            "no PostgreSQL server binaries under /usr/lib/postgresql/<version>/bin (initdb, pg_ctl)"
                .into(),
        ));
    };
    let usuario = Command::new("id")
        .args(["-u", "postgres"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
    if !usuario.is_ok_and(|s| s.success()) || !Path::new("/usr/sbin/runuser").exists() {
        return Err(Pulo(
            "no `postgres` user or no runuser to run the lab's PostgreSQL as".into(),
        ));
    }
    Ok(bin_pg)
}

/// Removes the namespaces and directories of labs whose process is gone (a run killed before
/// its labs were dropped).
fn limpar_restos() {
    // A lab's name is `mrede-<pid>-…`; anything else is not ours and stays.
    let vivo = |nome: &str| -> bool {
        let pid = nome
            .strip_prefix(PREFIXO)
            .and_then(|resto| resto.split('-').next())
            .and_then(|pid| pid.parse::<u32>().ok());
        pid.is_none_or(|pid| Path::new("/proc").join(pid.to_string()).exists())
    };
    if let Ok(dirs) = std::fs::read_dir("/tmp") {
        for dir in dirs.filter_map(Result::ok) {
            let nome = dir.file_name().to_string_lossy().into_owned();
            if nome.starts_with(PREFIXO) && !vivo(&nome) {
                if let Ok(bin_pg) = precondicoes() {
                    parar_postgres(&bin_pg, &dir.path().join("postgres/data"));
                }
                let _ = std::fs::remove_dir_all(dir.path());
            }
        }
    }
    let lista = Command::new("ip").args(["netns", "list"]).output();
    let lista = lista.map(|s| String::from_utf8_lossy(&s.stdout).into_owned());
    for linha in lista.unwrap_or_default().lines() {
        let nome = linha.split_whitespace().next().unwrap_or_default();
        if nome.starts_with(PREFIXO) && !vivo(nome) {
            desmontar_namespace(nome);
        }
    }
}

fn parar_postgres(bin_pg: &Path, dados: &Path) {
    if !dados.join("postmaster.pid").exists() {
        return;
    }
    let _ = Command::new("runuser")
        .args(["-u", "postgres", "--"])
        .arg(bin_pg.join("pg_ctl"))
        .arg("-D")
        .arg(dados)
        .args(["-m", "immediate", "-w", "stop"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
}

/// Kills what still runs inside `ns` (by pid: the lab's processes) and deletes it.
fn desmontar_namespace(ns: &str) {
    let pids = Command::new("ip").args(["netns", "pids", ns]).output();
    let pids = pids.map(|s| String::from_utf8_lossy(&s.stdout).into_owned());
    for pid in pids.unwrap_or_default().split_whitespace() {
        let _ = Command::new("kill")
            .args(["-KILL", pid])
            .stderr(Stdio::null())
            .status();
    }
    let _ = Command::new("ip")
        .args(["netns", "del", ns])
        .stderr(Stdio::null())
        .status();
}

/// Runs `ip <argumentos>` (words separated by spaces), failing the test if it fails.
fn ip(argumentos: &str) {
    executar(
        Command::new("ip").args(argumentos.split_whitespace()),
        &format!("ip {argumentos}"),
    );
}

fn executar(comando: &mut Command, para_que: &str) {
    let saida = comando
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|erro| panic!("{para_que}: {erro}"));
    assert!(
        saida.status.success(),
        "{para_que}: {}\n{}{}",
        saida.status,
        String::from_utf8_lossy(&saida.stdout),
        String::from_utf8_lossy(&saida.stderr)
    );
}

#[cfg(test)]
mod testes {
    use super::mensagem_do_log;

    #[test]
    fn mensagem_de_uma_linha_do_fmt() {
        let linha = "2026-01-01T00:00:00.000001Z  WARN mensageria.entrega{id_mensagem=1 tipo=rede.evento}: \
                     mensageria_core::relay::entrega: mensageria relay: temporary failure; will retry \
                     error=timeout retry_in_ms=200";
        assert_eq!(
            mensagem_do_log(linha),
            "mensageria relay: temporary failure"
        );
        let linha = "2026-01-01T00:00:00.000001Z  INFO mensageria_core::relay::motor: mensageria relay: \
                     the database is back app=app-rede falhas_seguidas=3";
        assert_eq!(
            mensagem_do_log(linha),
            "mensageria relay: the database is back"
        );
        let linha = "2026-01-01T00:00:00.000001Z  WARN sqlx::query: slow statement: execution time \
                     exceeded alert threshold summary=\"SELECT\"";
        assert_eq!(
            mensagem_do_log(linha),
            "slow statement: execution time exceeded alert threshold"
        );
    }
}
