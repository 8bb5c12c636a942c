//! `cargo run --example demo`: nothing lost, nothing applied twice, shown in one command.
//!
//! Two apps in one process, each on its own database (SQLite files in a temporary directory by
//! default, or a fresh PostgreSQL schema each with `--postgres URL`):
//!
//! - `emissor` closes MDF-e: each producer transaction writes a business row and enqueues the
//!   `demo.encerramento` event in the saída; its relay delivers over real HTTP.
//! - `fiscal` serves a `#[receptor]` on 127.0.0.1 whose effect is a row unique by the natural
//!   key, so a second application would be visible.
//!
//! Between them a [`ProxyDeFalhas`] loses a share of the acks *after* the receptor committed,
//! and the relay is killed once mid-way (as a crash: nothing settled, nothing released) and
//! restarted. When the saída is empty the checker compares the emissor's committed rows with
//! the fiscal's effects: **lost** and **applied twice** must both be 0.

use std::future::IntoFuture as _;
mod bancos;
mod emissor;
mod fiscal;
mod relatorio;

use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use indicatif::{MultiProgress, ProgressBar, ProgressStyle};
use mensageria_core::Destino;
use mensageria_core::relay::{Config, Relay, RelayHandle};
use mensageria_core::teste::{ModoProxy, ProxyDeFalhas};
use sqlx::Pool;
use tokio::task::JoinSet;

use bancos::{BancoDemo, SchemaPg};
pub use emissor::EncerramentoMdfe;
pub use relatorio::Relatorio;

/// Any failure of the demo's own plumbing (not a fault it injects on purpose).
pub type Erro = Box<dyn std::error::Error + Send + Sync>;

/// The bearer token the fiscal accepts and the emissor sends.
const TOKEN: &str = "demo-token-0123456789";

/// Producer tasks writing concurrently to the emissor's database.
const PRODUTORES: u64 = 4;

/// What to run.
#[derive(Debug, Clone, clap::Parser)]
#[command(
    name = "demo",
    about = "Two apps over real HTTP: acks lost, the relay killed and restarted; nothing lost, nothing applied twice"
)]
pub struct Opcoes {
    /// How many MDF-e the emissor closes (one message each).
    #[arg(long, default_value_t = 2000)]
    pub mensagens: u64,
    /// Share of the receptor's answers the proxy loses after the receptor committed (0 to 1).
    #[arg(long, default_value_t = 0.2, value_parser = fracao)]
    pub perda: f64,
    /// Seed of the proxy's choices.
    #[arg(long, default_value_t = 42)]
    pub semente: u64,
    /// Run both apps on this PostgreSQL server instead (a fresh schema each, dropped at the end).
    #[arg(long, value_name = "URL")]
    pub postgres: Option<String>,
}

impl Default for Opcoes {
    fn default() -> Self {
        Self {
            mensagens: 2000,
            perda: 0.2,
            semente: 42,
            postgres: None,
        }
    }
}

fn fracao(texto: &str) -> Result<f64, String> {
    match texto.parse::<f64>() {
        Ok(valor) if (0.0..=1.0).contains(&valor) => Ok(valor),
        _ => Err(format!("`{texto}` is not a fraction between 0 and 1")),
    }
}

/// Runs the demo and returns its figures; progress bars are drawn when stderr is a terminal.
pub async fn executar(opcoes: &Opcoes) -> Result<Relatorio, Erro> {
    match &opcoes.postgres {
        None => {
            let dir = tempfile::Builder::new()
                .prefix("mensageria-demo-")
                .tempdir()?;
            let emissor =
                mensageria_core::banco::sqlite::abrir(dir.path().join("emissor.db")).await?;
            let fiscal =
                mensageria_core::banco::sqlite::abrir(dir.path().join("fiscal.db")).await?;
            let resultado = correr(opcoes, emissor.clone(), fiscal.clone()).await;
            emissor.close().await;
            fiscal.close().await;
            dir.close()?;
            resultado
        }
        Some(url) => {
            let emissor = SchemaPg::criar(url, "emissor").await?;
            let fiscal = match SchemaPg::criar(url, "fiscal").await {
                Ok(fiscal) => fiscal,
                Err(erro) => {
                    emissor.descartar().await?;
                    return Err(erro);
                }
            };
            let resultado = correr(opcoes, emissor.pool.clone(), fiscal.pool.clone()).await;
            emissor.descartar().await?;
            fiscal.descartar().await?;
            resultado
        }
    }
}

/// The emissor's relay: short lease and backoff so the demo's faults heal in seconds.
fn config_relay() -> Config {
    Config::new("emissor")
        // A killed relay's claims come back when their leases end; the lease must outlast the
        // send timeout (`Config::validar`).
        .com_lease(Duration::from_secs(2))
        .com_tempo_limite_envio(Duration::from_secs(1))
        .com_intervalo(Duration::from_millis(100))
        .com_backoff(Duration::from_millis(50), Duration::from_millis(400))
        // Lost acks are not a down destination: keep the circuit closed.
        .com_circuito_limiar(10_000)
}

async fn correr<DB: BancoDemo>(
    opcoes: &Opcoes,
    emissor: Pool<DB>,
    fiscal: Pool<DB>,
) -> Result<Relatorio, Erro> {
    let inicio = Instant::now();
    DB::preparar_emissor(&emissor).await?;
    DB::preparar_fiscal(&fiscal).await?;

    // The fiscal: the receptor over HTTP on 127.0.0.1, every delivery counted.
    let contagem = Arc::new(fiscal::Contagem::default());
    // Every receptor of the binary for this backend (one per tipo and backend).
    let app = mensageria_axum::router(
        fiscal.clone(),
        mensageria_axum::Config::new("fiscal", [TOKEN]),
    )?;
    let app = fiscal::contando(app, Arc::clone(&contagem));
    let ouvinte = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let endereco = ouvinte.local_addr()?;
    let servidor = tokio::spawn(mensageria_axum::servir(ouvinte, app).into_future());

    // Between the apps, a proxy that loses a share of the acks after the receptor committed.
    let proxy = ProxyDeFalhas::iniciar(endereco, opcoes.semente).await?;
    proxy.modo(ModoProxy::PerderResposta {
        fracao: opcoes.perda,
    });
    let destino = Destino::new(&proxy.url())?
        .com_token(TOKEN)
        .com_tempo_limite(Duration::from_millis(900));

    let mut app_emissor = Emissor::iniciar(emissor.clone(), destino, opcoes.mensagens)?;
    let barras = Barras::new(opcoes.mensagens);
    let resultado = acompanhar(opcoes, &mut app_emissor, &contagem, &barras).await;
    app_emissor.parar().await;
    servidor.abort();
    let quedas = resultado.inspect_err(|_| barras.abandonar())?;

    // The checker: ground truth from both databases, not from logs.
    let encerradas: HashSet<String> = DB::encerradas(&emissor).await?.into_iter().collect();
    let efeitos = DB::efeitos(&fiscal).await?;
    // The bar counted `applied` answers; a few commits lost theirs when the crash cut the
    // connection mid-request (their redelivery then answered `duplicate`).
    barras.terminar(efeitos.len() as u64);
    let aplicadas: HashSet<&str> = efeitos.iter().map(|(chave, _)| chave.as_str()).collect();
    Ok(Relatorio {
        enfileiradas: encerradas.len() as u64,
        entregas: contagem.entregas.load(Ordering::Relaxed),
        reentregas: contagem.reentregas(),
        duplicatas: contagem.duplicatas.load(Ordering::Relaxed),
        outras: contagem.entregas.load(Ordering::Relaxed).saturating_sub(
            contagem.aplicadas.load(Ordering::Relaxed)
                + contagem.duplicatas.load(Ordering::Relaxed),
        ),
        aplicadas: efeitos.len() as u64,
        acks_perdidos: proxy.contagem().respostas_perdidas,
        quedas,
        perdidas: encerradas
            .iter()
            .filter(|chave| !aplicadas.contains(chave.as_str()))
            .count() as u64,
        aplicadas_duas_vezes: efeitos.iter().filter(|(_, vezes)| *vezes > 1).count() as u64,
        inesperadas: aplicadas
            .iter()
            .filter(|chave| !encerradas.contains(**chave))
            .count() as u64,
        mortas: DB::mortas(&emissor).await? as u64,
        duracao: inicio.elapsed(),
    })
}

/// The sending app while it runs: its producers and its relay.
struct Emissor<DB: BancoDemo> {
    pool: Pool<DB>,
    destino: Destino,
    relay: Option<RelayHandle>,
    produtores: JoinSet<Result<(), Erro>>,
    enfileiradas: Arc<AtomicU64>,
}

impl<DB: BancoDemo> Emissor<DB> {
    /// Spawns the relay and the producers of `mensagens` MDF-e (business row + enqueue, one
    /// transaction each).
    fn iniciar(pool: Pool<DB>, destino: Destino, mensagens: u64) -> Result<Self, Erro> {
        let enfileiradas = Arc::new(AtomicU64::new(0));
        let mut produtores = JoinSet::new();
        for produtor in 0..PRODUTORES {
            let pool = pool.clone();
            let enfileiradas = Arc::clone(&enfileiradas);
            produtores.spawn(async move {
                for n in (produtor..mensagens).step_by(PRODUTORES as usize) {
                    DB::encerrar(&pool, &EncerramentoMdfe::numero(n)).await?;
                    enfileiradas.fetch_add(1, Ordering::Relaxed);
                }
                Ok(())
            });
        }
        let mut emissor = Self {
            pool,
            destino,
            relay: None,
            produtores,
            enfileiradas,
        };
        emissor.relay = Some(emissor.novo_relay()?);
        Ok(emissor)
    }

    fn novo_relay(&self) -> Result<RelayHandle, mensageria_core::Erro> {
        Relay::new(self.pool.clone(), config_relay())
            .recurso(self.destino.clone())
            .spawn()
    }

    /// A crash and its restart: the relay's task is gone mid-round (nothing settled, nothing
    /// released: what it claimed stays leased until the leases end, and what it had sent may
    /// have been applied without an ack); a new relay starts. Returns the rows left leased.
    async fn derrubar_relay(&mut self) -> Result<i64, Erro> {
        if let Some(relay) = self.relay.take() {
            relay.abort();
        }
        let (_, arrendadas) = DB::pendentes(&self.pool).await?;
        self.relay = Some(self.novo_relay()?);
        Ok(arrendadas)
    }

    /// Whether every producer is done; a producer's error ends the run.
    fn produziu(&mut self) -> Result<bool, Erro> {
        while let Some(produtor) = self.produtores.try_join_next() {
            produtor??;
        }
        Ok(self.produtores.is_empty())
    }

    async fn parar(mut self) {
        if let Some(relay) = self.relay.take() {
            relay.shutdown(Duration::from_secs(1)).await;
        }
        self.produtores.shutdown().await;
    }
}

/// Watches the run: draws progress, kills the relay once a third of the messages are applied
/// and restarts it, and returns (with the number of crashes) when the producers are done and
/// the saída is empty.
async fn acompanhar<DB: BancoDemo>(
    opcoes: &Opcoes,
    emissor: &mut Emissor<DB>,
    contagem: &fiscal::Contagem,
    barras: &Barras,
) -> Result<u64, Erro> {
    let prazo = Duration::from_secs(60) + Duration::from_millis(opcoes.mensagens * 20);
    let inicio = Instant::now();
    let mut quedas = 0;
    // Often: with batches, a third of a small run can be applied within a few milliseconds.
    let mut tique = tokio::time::interval(Duration::from_millis(2));
    loop {
        tique.tick().await;
        let produziu = emissor.produziu()?;
        barras.atualizar(&emissor.enfileiradas, contagem);
        if quedas == 0 && contagem.aplicadas.load(Ordering::Relaxed) >= opcoes.mensagens / 3 {
            let arrendadas = emissor.derrubar_relay().await?;
            quedas += 1;
            barras.avisar(format!(
                "relay killed with {arrendadas} rows leased; restarted (they come back when their leases end)"
            ));
        }
        if produziu && DB::pendentes(&emissor.pool).await?.0 == 0 {
            barras.atualizar(&emissor.enfileiradas, contagem);
            return Ok(quedas);
        }
        if inicio.elapsed() > prazo {
            return Err(format!("the saída did not drain within {prazo:?}").into());
        }
    }
}

/// The live progress: enqueued and applied.
struct Barras {
    _multi: MultiProgress,
    enfileiradas: ProgressBar,
    aplicadas: ProgressBar,
}

impl Barras {
    fn new(total: u64) -> Self {
        let multi = MultiProgress::new();
        let estilo =
            ProgressStyle::with_template("{prefix:>9} [{bar:40.cyan/blue}] {pos:>6}/{len:6} {msg}")
                .expect("a valid template")
                .progress_chars("=> ");
        let barra = |nome: &'static str| {
            multi.add(
                ProgressBar::new(total)
                    .with_style(estilo.clone())
                    .with_prefix(nome),
            )
        };
        Self {
            enfileiradas: barra("enqueued"),
            aplicadas: barra("applied"),
            _multi: multi,
        }
    }

    fn atualizar(&self, enfileiradas: &AtomicU64, contagem: &fiscal::Contagem) {
        self.enfileiradas
            .set_position(enfileiradas.load(Ordering::Relaxed));
        self.aplicadas
            .set_position(contagem.aplicadas.load(Ordering::Relaxed));
        self.aplicadas.set_message(format!(
            "{} deliveries, {} duplicates absorbed",
            contagem.entregas.load(Ordering::Relaxed),
            contagem.duplicatas.load(Ordering::Relaxed)
        ));
    }

    fn avisar(&self, aviso: String) {
        self.enfileiradas.println(aviso);
    }

    fn terminar(&self, aplicadas: u64) {
        self.enfileiradas.finish();
        self.aplicadas.set_position(aplicadas);
        self.aplicadas.finish();
    }

    fn abandonar(&self) {
        self.enfileiradas.abandon();
        self.aplicadas.abandon();
    }
}
