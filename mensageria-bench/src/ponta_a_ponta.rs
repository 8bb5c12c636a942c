//! 2. End-to-end throughput: producers enqueue in business transactions, the relay delivers
//!    over HTTP to a receptor that dedupes and applies its effect on the same PostgreSQL;
//!    against raw single-row INSERTs at the same client count.
//! 3. Latency: commit → the receptor's effect committed, at half of the peak, with the default
//!    in-process wake-up and with polling only.

use std::collections::HashMap;
use std::sync::{LazyLock, Mutex};
use std::time::{Duration, Instant};

use axum::extract::Request;
use axum::middleware::Next;
use axum::response::Response;
use mensageria_core::Destino;
use mensageria_core::relay::{Config, Relay, RelayHandle};
use sqlx::PgPool;
use uuid::Uuid;

use crate::Parametros;
use crate::ambiente::{Cpu, Pg};
use crate::carga::{TOKEN, contar, esperar, insert_cru, negocio_pg, reservar, servir, vazao};
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
}

impl Perfil {
    fn nome(self) -> &'static str {
        match self {
            Perfil::Padrao => "library defaults",
            Perfil::Ajustado => "tuned: batch 256, 256 in flight",
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
}

/// The sender, the receptor and their database.
pub(crate) struct Bancada {
    pg: Pg,
    url: String,
    produtores: PgPool,
    leitura: PgPool,
}

impl Bancada {
    pub(crate) async fn montar() -> Self {
        let pg = Pg::novo().await;
        let pool_receptor = pg.pool(16).await;
        let app = mensageria_axum::router(pool_receptor, mensageria_axum::Config::new([TOKEN]))
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
        }
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
        };
        Relay::new(self.pg.pool(8).await, config)
            .recurso(destino)
            .spawn()
            .expect("relay")
    }

    async fn esperar_vazia(&self) {
        let leitura = self.leitura.clone();
        let vazia = esperar(Duration::from_secs(120), || {
            let leitura = leitura.clone();
            async move { contar(&leitura, "SELECT count(*) FROM mensageria_saida").await == 0 }
        })
        .await;
        assert!(vazia, "the saída did not drain within 120 s");
    }

    /// One timed run with the relay set up as `perfil`: `PRODUTORES` producers for `duracao`,
    /// then counted until the saída is empty (a relay that falls behind pays for the backlog it
    /// leaves). With `drenar`, the relay starts only when the producers stop, and the clock
    /// with it: the rate of the delivery path alone, on a backlog.
    pub(crate) async fn rodada(&self, perfil: Perfil, duracao: Duration, drenar: bool) -> Rodada {
        let mut relay = None;
        if !drenar {
            relay = Some(self.relay(perfil, true).await);
        }
        let antes = contar(&self.leitura, "SELECT count(*) FROM efeito").await;
        let n0 = reservar(0);
        let mut cpu_antes = Cpu::agora();
        let mut inicio = Instant::now();
        let pool = self.produtores.clone();
        let produzidas = vazao(PRODUTORES, duracao, move || negocio_pg(pool.clone(), true)).await;
        let n1 = reservar(0);
        let relay = match relay {
            Some(relay) => relay,
            None => {
                let relay = self.relay(perfil, true).await;
                (cpu_antes, inicio) = (Cpu::agora(), Instant::now());
                relay
            }
        };
        let backlog = contar(&self.leitura, "SELECT count(*) FROM mensageria_saida").await;
        self.esperar_vazia().await;
        let segundos = inicio.elapsed().as_secs_f64();
        let cpu = Cpu::agora();
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
        let entregues = depois - antes;
        Rodada {
            produzidas,
            entregues: entregues as f64 / segundos,
            backlog: backlog as f64,
            por_transacao: efeitos as f64 / transacoes.max(1) as f64,
            cpu: cpu.por(cpu_antes, entregues as f64),
        }
    }

    pub(crate) async fn descartar(self) {
        self.produtores.close().await;
        self.leitura.close().await;
        self.pg.descartar().await;
    }
}

/// Section 2; returns the median delivered rate (the peak).
pub(crate) async fn vazao_de_ponta_a_ponta(
    rel: &mut Relatorio,
    p: &Parametros,
    b: &Bancada,
) -> f64 {
    println!("2. end-to-end throughput ({PRODUTORES} producers)");
    let perfis = [Perfil::Padrao, Perfil::Ajustado];
    let mut bases = vec![];
    let mut produzidas: Vec<Vec<f64>> = vec![vec![]; perfis.len()];
    let mut entregues: Vec<Vec<f64>> = vec![vec![]; perfis.len()];
    let mut backlogs: Vec<Vec<f64>> = vec![vec![]; perfis.len()];
    for _ in 0..p.repeticoes {
        let pool = b.produtores.clone();
        bases.push(vazao(PRODUTORES, p.duracao, move || insert_cru(pool.clone())).await);
        for (n, perfil) in perfis.into_iter().enumerate() {
            let rodada = b.rodada(perfil, p.duracao, false).await;
            produzidas[n].push(rodada.produzidas);
            entregues[n].push(rodada.entregues);
            backlogs[n].push(rodada.backlog);
        }
    }
    let base = rel.medir(
        "end-to-end",
        format!("raw single-row INSERT, {PRODUTORES} clients (baseline)"),
        bases,
        "tx/s",
    );
    let mut pico = 0.0;
    for (n, perfil) in perfis.into_iter().enumerate() {
        let nome = perfil.nome();
        rel.medir(
            "end-to-end",
            format!("producers: business tx + enfileirar, {PRODUTORES} clients, relay {nome}"),
            std::mem::take(&mut produzidas[n]),
            "tx/s",
        );
        let entregue = rel.medir(
            "end-to-end",
            format!("delivered: effect committed at the receptor, until drained, relay {nome}"),
            std::mem::take(&mut entregues[n]),
            "msg/s",
        );
        rel.medir(
            "end-to-end",
            format!("backlog when the producers stopped, relay {nome}"),
            std::mem::take(&mut backlogs[n]),
            "rows",
        );
        if perfil == Perfil::Padrao {
            pico = entregue;
        }
    }
    let entregue = pico;
    rel.meta(
        format!("end-to-end ≥ 0.45 × raw INSERT rate ({PRODUTORES} clients, library defaults)"),
        format!(
            "{:.2} × ({} vs {} /s)",
            entregue / base,
            fmt(entregue),
            fmt(base)
        ),
        entregue >= 0.45 * base,
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
                        if let Some(id) = negocio_pg(pool.clone(), true).await {
                            commitou(id);
                        }
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
