//! 2. End-to-end throughput: producers enqueue in business transactions, the relay delivers
//!    over HTTP to a receptor that dedupes and applies its effect on the same PostgreSQL;
//!    against raw single-row INSERTs at the same client count. Beside it, the same relay
//!    delivering to a plain HTTP receiver that is not a mensageria receptor (a third party's
//!    webhook: [`Destino::aceitar_qualquer_2xx`], one request per event), with producers and
//!    draining a backlog.
//! 3. Latency: commit → the receptor's effect committed, at half of the peak, with the default
//!    in-process wake-up and with polling only.

use std::collections::HashMap;
use std::str::FromStr as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, LazyLock, Mutex};
use std::time::{Duration, Instant};

use axum::Json;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, StatusCode, header::AUTHORIZATION};
use axum::middleware::Next;
use axum::response::Response;
use axum::serve::ListenerExt as _;
use mensageria_core::Destino;
use mensageria_core::relay::{Config, Relay, RelayHandle};
use sqlx::PgPool;
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use uuid::Uuid;

use crate::Parametros;
use crate::ambiente::{Cpu, Pg, database_url, segundos_de_cpu, segundos_de_cpu_em};
use crate::carga::{
    EventoBench, Passo, TOKEN, contar, esperar, esperar_saida_vazia, insert_cru, negocio_pg,
    reservar, servir, vazao,
};
use crate::estatistica::percentil;
use crate::relatorio::{Relatorio, fmt};

/// Producer clients of the throughput run (the JetStream section uses as many).
pub(crate) const PRODUTORES: usize = 8;

/// When each message committed and when its effect did; the latencies seen.
#[derive(Default)]
struct Relogio {
    commits: HashMap<Uuid, Instant>,
    chegadas: HashMap<Uuid, Instant>,
    latencias_ms: Vec<f64>,
}

static RELOGIO: LazyLock<Mutex<Relogio>> = LazyLock::new(Mutex::default);

fn commitou(id: Uuid) {
    let agora = Instant::now();
    let mut r = RELOGIO.lock().expect("clock");
    match r.chegadas.remove(&id) {
        // Delivered before the producer got here: the effect was at most this late.
        Some(_) => r.latencias_ms.push(0.0),
        None => {
            r.commits.insert(id, agora);
        }
    }
}

fn chegou(id: Uuid) {
    let agora = Instant::now();
    let mut r = RELOGIO.lock().expect("clock");
    match r.commits.remove(&id) {
        Some(commit) => {
            let ms = agora.duration_since(commit).as_secs_f64() * 1000.0;
            r.latencias_ms.push(ms);
        }
        None => {
            r.chegadas.insert(id, agora);
        }
    }
}

/// Around the receptor: a 200 means its transaction committed; note when.
async fn cronometrar(pedido: Request, proximo: Next) -> Response {
    let id = pedido
        .headers()
        .get("x-request-id")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| Uuid::parse_str(v).ok());
    let resposta = proximo.run(pedido).await;
    if let Some(id) = id
        && resposta.status().is_success()
    {
        chegou(id);
    }
    resposta
}

/// How the relay is set up.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Perfil {
    /// `Config::new` and `Destino::new` as they come: what a user gets.
    Padrao,
    /// Twice the defaults: batch 256, 256 deliveries in flight, 256 idle HTTP connections; it
    /// shows whether the defaults leave throughput on the table.
    Ajustado,
    /// Library defaults against the plain receiver ([`ReceptorSimples`]):
    /// `Destino::new(url).com_token(..).aceitar_qualquer_2xx()`, one request per event.
    Simples,
    /// The same with a client that speaks cleartext HTTP/2 by prior knowledge
    /// (`Destino::construtor_de_cliente().http2_prior_knowledge()` through `com_cliente`): all
    /// deliveries on one connection.
    SimplesH2,
}

impl Perfil {
    fn nome(self) -> &'static str {
        match self {
            Perfil::Padrao => "library defaults",
            Perfil::Ajustado => "tuned: batch 256, 256 in flight",
            Perfil::Simples => "library defaults, plain receiver (aceitar_qualquer_2xx)",
            Perfil::SimplesH2 => "plain receiver, cleartext HTTP/2 (prior knowledge)",
        }
    }

    fn simples(self) -> bool {
        matches!(self, Perfil::Simples | Perfil::SimplesH2)
    }
}

/// The `application_name` of the relay's PostgreSQL connections.
const APP_RELAY: &str = "bench-relay";

/// The `application_name` of the receptor's PostgreSQL connections (full path).
const APP_RECEPTOR: &str = "bench-receptor";

/// The `application_name` of the plain receiver's PostgreSQL connections.
const APP_SIMPLES: &str = "bench-receptor-simples";

/// The name of the plain receiver's threads.
const FIOS_SIMPLES: &str = "bench-simples";

/// Connection options for `pg`'s schema, under `nome` (so that its backends' CPU can be told
/// apart in `pg_stat_activity`).
fn opcoes(pg: &Pg, nome: &str) -> PgConnectOptions {
    PgConnectOptions::from_str(&database_url())
        .expect("a valid DATABASE_URL")
        .options([("search_path", pg.schema.as_str())])
        .application_name(nome)
}

async fn pool_nomeado(pg: &Pg, conexoes: u32, nome: &str) -> PgPool {
    PgPoolOptions::new()
        .max_connections(conexoes)
        .min_connections(conexoes)
        .connect_with(opcoes(pg, nome))
        .await
        .expect("connect to the bench schema")
}

/// A receiver that is not a mensageria receptor, as a third party's webhook would be written
/// (plain `axum::serve`, which offers HTTP/1.1 and cleartext HTTP/2): it checks the bearer token,
/// decodes the JSON body and applies the effect idempotently by the event's key, one
/// autocommitted `INSERT … ON CONFLICT (n) DO NOTHING` per request on a pool of 16 connections
/// (the receptor's pool), and answers `200` with a small JSON body. It runs on a runtime of its
/// own (2 worker threads named [`FIOS_SIMPLES`]) and its connections carry the application name
/// [`APP_SIMPLES`], so its CPU, in this process and in PostgreSQL, is measured apart from the
/// relay's; and it counts the TCP connections it accepts.
pub(crate) struct ReceptorSimples {
    url: String,
    conexoes: Arc<AtomicU64>,
    parar: Mutex<Option<tokio::sync::oneshot::Sender<()>>>,
    parado: Mutex<Option<tokio::sync::oneshot::Receiver<()>>>,
}

impl ReceptorSimples {
    async fn montar(pg: &Pg) -> Self {
        let opcoes = opcoes(pg, APP_SIMPLES);
        let conexoes = Arc::new(AtomicU64::new(0));
        let contador = Arc::clone(&conexoes);
        let (pronto, url) = tokio::sync::oneshot::channel();
        let (parar, sinal) = tokio::sync::oneshot::channel::<()>();
        let (avisar_parado, parado) = tokio::sync::oneshot::channel();
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name(FIOS_SIMPLES)
            .enable_all()
            .build()
            .expect("the plain receiver's runtime");
        std::thread::spawn(move || {
            runtime.block_on(async move {
                let pool = PgPoolOptions::new()
                    .max_connections(16)
                    .min_connections(16)
                    .connect_with(opcoes)
                    .await
                    .expect("connect the plain receiver");
                let app = axum::Router::new()
                    .route("/m2m/bench.evento", axum::routing::post(receber_simples))
                    .with_state(pool.clone());
                let ouvinte = tokio::net::TcpListener::bind("127.0.0.1:0")
                    .await
                    .expect("bind 127.0.0.1:0");
                let endereco = ouvinte.local_addr().expect("local address");
                let ouvinte = ouvinte.tap_io(move |tcp| {
                    let _ = tcp.set_nodelay(true);
                    contador.fetch_add(1, Ordering::Relaxed);
                });
                let _ = pronto.send(format!("http://{endereco}"));
                let _ = axum::serve(ouvinte, app)
                    .with_graceful_shutdown(async move {
                        let _ = sinal.await;
                    })
                    .await;
                pool.close().await;
                let _ = avisar_parado.send(());
            });
        });
        Self {
            url: url.await.expect("the plain receiver started"),
            conexoes,
            parar: Mutex::new(Some(parar)),
            parado: Mutex::new(Some(parado)),
        }
    }

    /// TCP connections accepted so far.
    fn conexoes(&self) -> u64 {
        self.conexoes.load(Ordering::Relaxed)
    }

    /// CPU seconds used so far by the receiver's threads.
    fn cpu_dos_fios() -> f64 {
        let mut segundos = 0.0;
        for tarefa in std::fs::read_dir("/proc/self/task")
            .into_iter()
            .flatten()
            .flatten()
        {
            let caminho = tarefa.path();
            let nome = std::fs::read_to_string(caminho.join("comm")).unwrap_or_default();
            if nome.trim() == FIOS_SIMPLES {
                segundos += segundos_de_cpu_em(&caminho.join("stat")).unwrap_or(0.0);
            }
        }
        segundos
    }

    /// Stops the server and closes its pool.
    async fn parar(&self) {
        let parar = self.parar.lock().expect("stop").take();
        let parado = self.parado.lock().expect("stopped").take();
        if let (Some(parar), Some(parado)) = (parar, parado) {
            let _ = parar.send(());
            let _ = parado.await;
        }
    }
}

/// The plain receiver's one route.
async fn receber_simples(
    State(pool): State<PgPool>,
    cabecalhos: HeaderMap,
    Json(evento): Json<EventoBench>,
) -> (StatusCode, Json<serde_json::Value>) {
    let autorizado = cabecalhos
        .get(AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        == Some(TOKEN);
    if !autorizado {
        return (
            StatusCode::UNAUTHORIZED,
            Json(serde_json::json!({"error": "unauthorized"})),
        );
    }
    let aplicado = sqlx::query("INSERT INTO efeito (n) VALUES ($1) ON CONFLICT (n) DO NOTHING")
        .bind(evento.n)
        .execute(&pool)
        .await;
    match aplicado {
        Ok(_) => (StatusCode::OK, Json(serde_json::json!({"status": "ok"}))),
        Err(_) => (
            StatusCode::SERVICE_UNAVAILABLE,
            Json(serde_json::json!({"error": "database"})),
        ),
    }
}

/// CPU seconds used so far by the PostgreSQL backends of the connections named `nome`.
async fn cpu_dos_backends(leitura: &PgPool, nome: &str) -> f64 {
    let pids: Vec<i32> =
        sqlx::query_scalar("SELECT pid FROM pg_stat_activity WHERE application_name = $1")
            .bind(nome)
            .fetch_all(leitura)
            .await
            .expect("the backends of a pool");
    pids.iter()
        .filter_map(|pid| segundos_de_cpu(&pid.to_string()))
        .sum()
}

/// The CPU of the parts that can be told apart (seconds so far, or microseconds per event).
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Partes {
    /// The relay's PostgreSQL backends: claims, acks, lease renewals.
    pub(crate) relay_pg: f64,
    /// The receiving side's PostgreSQL backends (the receptor's, or the plain receiver's).
    pub(crate) receptor_pg: f64,
    /// The plain receiver's threads in this process (0 for the receptor, which shares the
    /// relay's runtime).
    pub(crate) receptor_fios: f64,
}

impl Partes {
    async fn agora(leitura: &PgPool) -> Self {
        Partes {
            relay_pg: cpu_dos_backends(leitura, APP_RELAY).await,
            receptor_pg: cpu_dos_backends(leitura, APP_RECEPTOR).await
                + cpu_dos_backends(leitura, APP_SIMPLES).await,
            receptor_fios: ReceptorSimples::cpu_dos_fios(),
        }
    }

    fn por(self, antes: Partes, unidades: f64) -> Partes {
        let us = |depois: f64, antes: f64| (depois - antes) * 1e6 / unidades.max(1.0);
        Partes {
            relay_pg: us(self.relay_pg, antes.relay_pg),
            receptor_pg: us(self.receptor_pg, antes.receptor_pg),
            receptor_fios: us(self.receptor_fios, antes.receptor_fios),
        }
    }
}

/// What one timed end-to-end run saw.
pub(crate) struct Rodada {
    /// Producer transactions per second.
    pub(crate) produzidas: f64,
    /// Effects committed per second, from the producers' start until the saída was empty.
    pub(crate) entregues: f64,
    /// Rows in the saída when the producers stopped.
    pub(crate) backlog: f64,
    /// Events per receiving transaction, on average (effects that share a transaction share
    /// its `now()`).
    pub(crate) por_transacao: f64,
    /// CPU per delivered message, in microseconds.
    pub(crate) cpu: Cpu,
    /// Of it, the parts told apart, in microseconds per delivered message.
    pub(crate) partes: Partes,
    /// TCP connections the plain receiver accepted during the run (0 for the other profiles).
    pub(crate) conexoes: f64,
}

/// The sender, the receptor and their database.
pub(crate) struct Bancada {
    pg: Pg,
    url: String,
    produtores: PgPool,
    leitura: PgPool,
    /// Started by the first run against it.
    simples: tokio::sync::OnceCell<ReceptorSimples>,
}

impl Bancada {
    pub(crate) async fn montar() -> Self {
        let pg = Pg::novo().await;
        let pool_receptor = pool_nomeado(&pg, 16, APP_RECEPTOR).await;
        let app = mensageria_axum::router(
            pool_receptor,
            mensageria_axum::Config::new("bench", [TOKEN]),
        )
        .expect("receptor router")
        .layer(axum::middleware::from_fn(cronometrar));
        let url = servir(app).await;
        let produtores = pg.pool(PRODUTORES as u32).await;
        let leitura = pg.pool(2).await;
        Self {
            pg,
            url,
            produtores,
            leitura,
            simples: tokio::sync::OnceCell::new(),
        }
    }

    async fn simples(&self) -> &ReceptorSimples {
        self.simples
            .get_or_init(|| ReceptorSimples::montar(&self.pg))
            .await
    }

    async fn relay(&self, perfil: Perfil, acordar: bool) -> RelayHandle {
        let destino = Destino::new(&self.url).expect("URL").com_token(TOKEN);
        let config = Config::new("bench").com_acordar_no_processo(acordar);
        let (destino, config) = match perfil {
            Perfil::Padrao => (destino, config),
            Perfil::Ajustado => {
                let cliente = Destino::construtor_de_cliente()
                    .pool_max_idle_per_host(256)
                    .build()
                    .expect("HTTP client");
                (
                    destino.com_cliente(cliente),
                    config.com_lote(256).com_concorrencia(256),
                )
            }
            Perfil::Simples | Perfil::SimplesH2 => {
                let url = &self.simples().await.url;
                let destino = Destino::new(url)
                    .expect("URL")
                    .com_token(TOKEN)
                    .aceitar_qualquer_2xx();
                let destino = if perfil == Perfil::SimplesH2 {
                    let cliente = Destino::construtor_de_cliente()
                        .http2_prior_knowledge()
                        .build()
                        .expect("HTTP/2 client");
                    destino.com_cliente(cliente)
                } else {
                    destino
                };
                (destino, config)
            }
        };
        Relay::new(pool_nomeado(&self.pg, 8, APP_RELAY).await, config)
            .recurso(destino)
            .spawn()
            .expect("relay")
    }

    async fn esperar_vazia(&self) {
        let vazia = esperar_saida_vazia(&self.leitura, Duration::from_secs(120)).await;
        assert!(vazia, "the saída did not drain within 120 s");
    }

    /// One timed run with the relay set up as `perfil`: `PRODUTORES` producers for `duracao`,
    /// then counted until the saída is empty (a relay that falls behind pays for the backlog it
    /// leaves). With `drenar`, the relay starts only when the producers stop, and the clock
    /// with it: the rate of the delivery path alone, on a backlog.
    pub(crate) async fn rodada(&self, perfil: Perfil, duracao: Duration, drenar: bool) -> Rodada {
        let conexoes = || self.simples.get().map_or(0, ReceptorSimples::conexoes);
        let mut relay = None;
        if !drenar {
            relay = Some(self.relay(perfil, true).await);
        }
        let antes = contar(&self.leitura, "SELECT count(*) FROM efeito").await;
        let conexoes_antes = conexoes();
        let n0 = reservar(0);
        let mut cpu_antes = (Cpu::agora(), Partes::agora(&self.leitura).await);
        let mut inicio = Instant::now();
        let pool = self.produtores.clone();
        let produzidas = vazao(PRODUTORES, duracao, move || negocio_pg(pool.clone())).await;
        let n1 = reservar(0);
        let relay = match relay {
            Some(relay) => relay,
            None => {
                let relay = self.relay(perfil, true).await;
                cpu_antes = (Cpu::agora(), Partes::agora(&self.leitura).await);
                inicio = Instant::now();
                relay
            }
        };
        let backlog = contar(&self.leitura, "SELECT count(*) FROM mensageria_saida").await;
        self.esperar_vazia().await;
        let segundos = inicio.elapsed().as_secs_f64();
        let cpu = (Cpu::agora(), Partes::agora(&self.leitura).await);
        let depois = contar(&self.leitura, "SELECT count(*) FROM efeito").await;
        relay.shutdown(Duration::from_secs(10)).await;
        let (efeitos, transacoes): (i64, i64) = sqlx::query_as(
            "SELECT count(*), count(DISTINCT recebido_em) FROM efeito WHERE n >= $1 AND n < $2",
        )
        .bind(n0)
        .bind(n1)
        .fetch_one(&self.leitura)
        .await
        .expect("count the receptor's transactions");
        let entregues = (depois - antes) as f64;
        Rodada {
            produzidas,
            entregues: entregues / segundos,
            backlog: backlog as f64,
            por_transacao: efeitos as f64 / transacoes.max(1) as f64,
            cpu: cpu.0.por(cpu_antes.0, entregues),
            partes: cpu.1.por(cpu_antes.1, entregues),
            conexoes: (conexoes() - conexoes_antes) as f64,
        }
    }

    /// The producers alone for `duracao`, with no relay running: their rate and their CPU per
    /// transaction (this process and PostgreSQL), what the end-to-end path would reach and cost
    /// if delivering were free. The saída they filled is emptied.
    async fn so_produtores(&self, duracao: Duration) -> (f64, Cpu) {
        let pool = self.produtores.clone();
        let (taxa, cpu) = vazao_e_cpu(duracao, move || negocio_pg(pool.clone())).await;
        sqlx::query("TRUNCATE mensageria_saida")
            .execute(&self.leitura)
            .await
            .expect("empty the saída");
        (taxa, cpu)
    }

    pub(crate) async fn descartar(self) {
        if let Some(simples) = self.simples.get() {
            simples.parar().await;
        }
        self.produtores.close().await;
        self.leitura.close().await;
        self.pg.descartar().await;
    }
}

/// The runs of one variant of section 2, over the repetitions.
#[derive(Default)]
struct Serie {
    produzidas: Vec<f64>,
    entregues: Vec<f64>,
    backlogs: Vec<f64>,
    cpu_proprio: Vec<f64>,
    cpu_postgres: Vec<f64>,
    relay_pg: Vec<f64>,
    receptor_pg: Vec<f64>,
    receptor_fios: Vec<f64>,
    conexoes: Vec<f64>,
    por_transacao: Vec<f64>,
}

impl Serie {
    fn somar(&mut self, r: Rodada) {
        self.produzidas.push(r.produzidas);
        self.entregues.push(r.entregues);
        self.backlogs.push(r.backlog);
        self.cpu_proprio.push(r.cpu.proprio);
        self.cpu_postgres.push(r.cpu.postgres);
        self.relay_pg.push(r.partes.relay_pg);
        self.receptor_pg.push(r.partes.receptor_pg);
        self.receptor_fios.push(r.partes.receptor_fios);
        self.conexoes.push(r.conexoes);
        self.por_transacao.push(r.por_transacao);
    }

    /// CPU per delivered event of every process (this one and PostgreSQL), repetition by
    /// repetition, as a multiple of the baseline's CPU per transaction of the same repetition.
    fn cpu_sobre_a_base(&self, base: &[f64]) -> Vec<f64> {
        self.cpu_proprio
            .iter()
            .zip(&self.cpu_postgres)
            .zip(base)
            .map(|((proprio, postgres), base)| (proprio + postgres) / base)
            .collect()
    }
}

/// `PRODUTORES` closed loops of `passo` for `duracao`: their rate and the CPU per step of this
/// process, PostgreSQL and nats-server.
async fn vazao_e_cpu<F, T>(duracao: Duration, passo: F) -> (f64, Cpu)
where
    F: Fn() -> Passo<T> + Clone + Send + 'static,
    T: 'static,
{
    let antes = Cpu::agora();
    let taxa = vazao(PRODUTORES, duracao, passo).await;
    (taxa, Cpu::agora().por(antes, taxa * duracao.as_secs_f64()))
}

/// Records the producers alone (no relay running): their rate, their CPU per transaction, and
/// both over the baseline's. Returns the median of their rate over the baseline's, repetition
/// by repetition: the most the end-to-end path could reach with delivery free.
fn producao_sozinha(
    rel: &mut Relatorio,
    sozinhos: &Serie,
    bases: &[f64],
    cpu_das_bases: &[f64],
) -> f64 {
    let nome = format!(
        "producers alone (business tx + enfileirar, no relay running), {PRODUTORES} clients"
    );
    rel.medir(
        "end-to-end",
        nome.clone(),
        sozinhos.produzidas.clone(),
        "tx/s",
    );
    let teto = rel.medir(
        "end-to-end",
        format!("{nome} / raw INSERT rate, per repetition: the ceiling of the end-to-end ratio"),
        sozinhos
            .produzidas
            .iter()
            .zip(bases)
            .map(|(s, b)| s / b)
            .collect(),
        "×",
    );
    rel.medir(
        "end-to-end",
        format!("{nome}: CPU per transaction, every process / the baseline's CPU per transaction"),
        sozinhos.cpu_sobre_a_base(cpu_das_bases),
        "×",
    );
    rel.custo_por_evento(
        "producers alone: business tx + enfileirar, nothing delivered (the floor of every PostgreSQL path)",
        &sozinhos.cpu_proprio,
        &sozinhos.cpu_postgres,
        &[],
    );
    teto
}

/// The plain receiver's rate as a multiple of the full path's, repetition by repetition.
fn razao(simples: &Serie, completo: &Serie) -> Vec<f64> {
    simples
        .entregues
        .iter()
        .zip(&completo.entregues)
        .map(|(s, c)| s / c)
        .collect()
}

/// How the plain-receiver rows are made (every report carries it).
const NOTA_SIMPLES: &str = "Plain receiver (issue 29): the same relay with library defaults (`Destino::new(url).com_token(..).aceitar_qualquer_2xx()`, one request per event) delivering to a receiver that is not a mensageria receptor, written as a third party's webhook would be: plain `axum::serve` (HTTP/1.1, and cleartext HTTP/2 for a client that opens with it) on a runtime of its own (2 threads), a bearer check, the JSON decoded, one autocommitted `INSERT … ON CONFLICT (n) DO NOTHING` into the effect table per request (idempotent by the event's key) on a pool of 16 connections (the receptor's size), and `200` with a small JSON body. CPU is told apart: the receiver's threads by name (from /proc), and the PostgreSQL backends of the relay's pool, of the receptor's and of the plain receiver's by `application_name`; draining (no producers running), the relay's share of this process is this process's less the receiver's threads. HTTP/2: the same receiver, the relay's client built with `Destino::construtor_de_cliente().http2_prior_knowledge()` through `com_cliente`. The ratios pair runs of the same repetition, seconds apart.";

/// What limits the plain-receiver path, from the run written in BENCHMARKS.md (issue 29).
const LIMITE_SIMPLES: &str = "Limit, plain receiver: CPU, and most of it the receiver's own. Draining a backlog, a delivery to the plain receiver cost about 285 µs of CPU (this process 110, of it the receiver's threads 59; PostgreSQL 174, of it the receiver's backends 88 and the relay's 62) against about 142 µs for the full path (44 + 98, of it the receptor's backends 33 and the relay's 53). The receiver's request, INSERT and commit per event (about 147 µs) cost more than the full path's whole delivery, so a relay that cost nothing would still leave the plain path at about 0.85× the full path on these two shared cores: twice the issue's rate (≥ 1.0× the full path) is out of reach for a receiver that commits each event. The relay's own share is about the same on both paths: claims of about 30 rows and ack batches of about 20 (counted), 50–60 µs of PostgreSQL per event (every claimed row is a non-HOT update and then a delete), plus about 50 µs in this process for one HTTP/1.1 exchange per event, mostly the kernel's (perf over this process's main runtime, producers then relay, against a receiver that answered without writing: 72% of its samples in the kernel, a third in context switches). Connections are reused (128 per run, one per delivery in flight, for some 20,000 requests); in a probe, 32 or 64 deliveries in flight delivered less (4.2k and 5.5–6.5k against 7.2–7.7k msg/s draining), 256 or 512 no more; HTTP/2 on one connection cost the same per event. With producers the ratio (0.74×) is the ratio of CPU per event (plain 191 + 340 µs against 120 + 246).";

/// Section 2; returns the median delivered rate (the peak).
pub(crate) async fn vazao_de_ponta_a_ponta(
    rel: &mut Relatorio,
    p: &Parametros,
    b: &Bancada,
) -> f64 {
    println!("2. end-to-end throughput ({PRODUTORES} producers)");
    // With producers running, then draining a backlog (the relay started when they stop).
    let variantes = [
        (Perfil::Padrao, false),
        (Perfil::Ajustado, false),
        (Perfil::Simples, false),
        (Perfil::SimplesH2, false),
        (Perfil::Padrao, true),
        (Perfil::Simples, true),
        (Perfil::SimplesH2, true),
    ];
    let mut bases = vec![];
    let mut cpu_das_bases = vec![];
    let mut sozinhos = Serie::default();
    let mut series: Vec<Serie> = variantes.iter().map(|_| Serie::default()).collect();
    for _ in 0..p.repeticoes {
        let pool = b.produtores.clone();
        let (base, cpu) = vazao_e_cpu(p.duracao, move || insert_cru(pool.clone())).await;
        bases.push(base);
        cpu_das_bases.push(cpu.proprio + cpu.postgres);
        let (taxa, cpu) = b.so_produtores(p.duracao).await;
        sozinhos.produzidas.push(taxa);
        sozinhos.cpu_proprio.push(cpu.proprio);
        sozinhos.cpu_postgres.push(cpu.postgres);
        for (serie, (perfil, drenar)) in series.iter_mut().zip(variantes) {
            serie.somar(b.rodada(perfil, p.duracao, drenar).await);
        }
    }
    let base = rel.medir(
        "end-to-end",
        format!("raw single-row INSERT, {PRODUTORES} clients (baseline)"),
        bases.clone(),
        "tx/s",
    );
    rel.medir(
        "end-to-end",
        format!(
            "CPU per transaction of the baseline, this process and PostgreSQL, {PRODUTORES} clients"
        ),
        cpu_das_bases.clone(),
        "µs",
    );
    rel.custo_base(&cpu_das_bases);
    let teto = producao_sozinha(rel, &sozinhos, &bases, &cpu_das_bases);
    let mut pico = 0.0;
    let mut simples = 0.0;
    // Events per receiving transaction with the defaults: with producers, draining.
    let mut enchimento = [0.0; 2];
    for (serie, (perfil, drenar)) in series.iter_mut().zip(variantes) {
        let nome = perfil.nome();
        let quando = if drenar {
            "draining a backlog"
        } else {
            "with producers"
        };
        if drenar {
            rel.medir(
                "end-to-end",
                format!(
                    "draining a backlog (relay started when the producers stopped): delivered, relay {nome}"
                ),
                serie.entregues.clone(),
                "msg/s",
            );
        } else {
            rel.medir(
                "end-to-end",
                format!("producers: business tx + enfileirar, {PRODUTORES} clients, relay {nome}"),
                std::mem::take(&mut serie.produzidas),
                "tx/s",
            );
            let entregue = rel.medir(
                "end-to-end",
                format!("delivered: effect committed at the receptor, until drained, relay {nome}"),
                serie.entregues.clone(),
                "msg/s",
            );
            rel.medir(
                "end-to-end",
                format!("backlog when the producers stopped, relay {nome}"),
                std::mem::take(&mut serie.backlogs),
                "rows",
            );
            match perfil {
                Perfil::Padrao => pico = entregue,
                Perfil::Simples => simples = entregue,
                _ => {}
            }
        }
        if !perfil.simples() {
            let cheio = rel.medir(
                "end-to-end",
                format!("events per receiving transaction, {quando}, relay {nome}"),
                std::mem::take(&mut serie.por_transacao),
                "events",
            );
            if perfil == Perfil::Padrao {
                enchimento[usize::from(drenar)] = cheio;
            }
        }
        rel.medir(
            "end-to-end",
            format!(
                "CPU per event, every process / the baseline's CPU per transaction, {quando}, relay {nome}"
            ),
            serie.cpu_sobre_a_base(&cpu_das_bases),
            "×",
        );
        rel.custo_por_evento(
            format!("HTTP, {quando}, relay {nome}"),
            &serie.cpu_proprio,
            &serie.cpu_postgres,
            &[],
        );
        if perfil == Perfil::Ajustado {
            continue;
        }
        rel.medir(
            "end-to-end",
            format!(
                "CPU per event, this process (producers, relay, receiver), {quando}, relay {nome}"
            ),
            std::mem::take(&mut serie.cpu_proprio),
            "µs",
        );
        rel.medir(
            "end-to-end",
            format!(
                "CPU per event, PostgreSQL (every backend of the machine), {quando}, relay {nome}"
            ),
            std::mem::take(&mut serie.cpu_postgres),
            "µs",
        );
        rel.medir(
            "end-to-end",
            format!("CPU per event, of it the relay's PostgreSQL backends (claims, acks, leases), {quando}, relay {nome}"),
            std::mem::take(&mut serie.relay_pg),
            "µs",
        );
        rel.medir(
            "end-to-end",
            format!("CPU per event, of it the receiving side's PostgreSQL backends, {quando}, relay {nome}"),
            std::mem::take(&mut serie.receptor_pg),
            "µs",
        );
        if perfil.simples() {
            rel.medir(
                "end-to-end",
                format!("CPU per event, of this process the plain receiver's threads (HTTP server, JSON, its PostgreSQL client), {quando}, relay {nome}"),
                std::mem::take(&mut serie.receptor_fios),
                "µs",
            );
            rel.medir(
                "end-to-end",
                format!(
                    "TCP connections the plain receiver accepted per run, {quando}, relay {nome}"
                ),
                std::mem::take(&mut serie.conexoes),
                "conn",
            );
        }
    }
    let com_produtores = rel.medir(
        "end-to-end",
        "plain receiver (library defaults) / full path, delivered, with producers, per repetition",
        razao(&series[2], &series[0]),
        "×",
    );
    rel.medir(
        "end-to-end",
        "plain receiver (library defaults) / full path, delivered, draining a backlog, per repetition",
        razao(&series[5], &series[4]),
        "×",
    );
    rel.medir(
        "end-to-end",
        "plain receiver over HTTP/2 / over HTTP/1.1 (defaults), delivered, with producers, per repetition",
        razao(&series[3], &series[2]),
        "×",
    );
    rel.medir(
        "end-to-end",
        "plain receiver over HTTP/2 / over HTTP/1.1 (defaults), delivered, draining a backlog, per repetition",
        razao(&series[6], &series[5]),
        "×",
    );
    rel.nota(NOTA_SIMPLES);
    rel.nota(LIMITE_SIMPLES);
    let entregue = pico;
    rel.meta(
        format!("end-to-end ≥ 0.45 × raw INSERT rate ({PRODUTORES} clients, library defaults)"),
        format!(
            "{:.2} × ({} vs {} /s); the producers alone, nothing delivered: {:.2} ×",
            entregue / base,
            fmt(entregue),
            fmt(base),
            teto
        ),
        entregue >= 0.45 * base,
    );
    // Issue 36 measured about 15 events per receiving transaction with producers running.
    rel.meta(
        "HTTP batches with producers running: events per receiving transaction ≥ 3 × the 15 of issue 36 (library defaults)",
        format!(
            "{} ({:.1} × 15; draining a backlog: {})",
            fmt(enchimento[0]),
            enchimento[0] / 15.0,
            fmt(enchimento[1])
        ),
        enchimento[0] >= 45.0,
    );
    // Issue 29 measured the plain receiver at 0.51× the full path; twice that rate is the full
    // path's.
    rel.meta(
        "plain HTTP receiver (aceitar_qualquer_2xx, one request per event, library defaults) ≥ 2× its issue-29 rate, i.e. ≥ 1.0 × the full path's in the same run (it was 0.51×)",
        format!(
            "{:.2} × ({} vs {} msg/s)",
            com_produtores,
            fmt(simples),
            fmt(pico)
        ),
        com_produtores >= 1.0,
    );
    entregue
}

/// Section 3.
pub(crate) async fn latencia(rel: &mut Relatorio, p: &Parametros, b: &Bancada, pico: f64) {
    let taxa = (pico * 0.5).max(50.0);
    println!("3. latency at {} msg/s", fmt(taxa));
    for (nome, acordar) in [
        ("in-process wake-up (default)", true),
        ("polling only (1 s interval)", false),
    ] {
        let relay = b.relay(Perfil::Padrao, acordar).await;
        let (mut p50s, mut p99s) = (Vec::new(), Vec::new());
        for _ in 0..p.repeticoes {
            *RELOGIO.lock().expect("clock") = Relogio::default();
            produzir_a_taxa(&b.produtores, taxa, p.duracao).await;
            b.esperar_vazia().await;
            let pendentes = || RELOGIO.lock().expect("clock").commits.len();
            let _ = esperar(Duration::from_secs(10), || async { pendentes() == 0 }).await;
            let latencias = std::mem::take(&mut RELOGIO.lock().expect("clock").latencias_ms);
            p50s.push(percentil(&latencias, 50.0));
            p99s.push(percentil(&latencias, 99.0));
        }
        relay.shutdown(Duration::from_secs(10)).await;
        let p50 = rel.medir(
            "latency",
            format!("commit → effect p50, {nome}, {} msg/s", fmt(taxa)),
            p50s,
            "ms",
        );
        let p99 = rel.medir(
            "latency",
            format!("commit → effect p99, {nome}, {} msg/s", fmt(taxa)),
            p99s,
            "ms",
        );
        if acordar {
            rel.meta(
                "commit → effect p50 < 5 ms at half of peak",
                format!("{} ms", fmt(p50)),
                p50 < 5.0,
            );
            rel.meta(
                "commit → effect p99 < 50 ms at half of peak",
                format!("{} ms", fmt(p99)),
                p99 < 50.0,
            );
        }
    }
}

/// Enqueues at `taxa` messages per second for `duracao`, from 4 paced producers.
async fn produzir_a_taxa(pool: &PgPool, taxa: f64, duracao: Duration) {
    const PRODUTORES_RITMADOS: usize = 4;
    let por_produtor = taxa / PRODUTORES_RITMADOS as f64;
    let tarefas: Vec<_> = (0..PRODUTORES_RITMADOS)
        .map(|_| {
            let pool = pool.clone();
            tokio::spawn(async move {
                let inicio = Instant::now();
                let mut enviados = 0u64;
                let mut tique = tokio::time::interval(Duration::from_millis(5));
                while inicio.elapsed() < duracao {
                    tique.tick().await;
                    let devidos = (inicio.elapsed().as_secs_f64() * por_produtor) as u64;
                    while enviados < devidos {
                        commitou(negocio_pg(pool.clone()).await);
                        enviados += 1;
                    }
                }
            })
        })
        .collect();
    for tarefa in tarefas {
        tarefa.await.expect("a producer panicked");
    }
}
