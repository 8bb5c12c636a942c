//! 5. End-to-end through NATS JetStream, beside the HTTP path in the same repetitions: producers
//!    enqueue in business transactions, the relay publishes through `mensageria_nats::Publicador`
//!    to a stream of the run's own, and receiving apps consume it through
//!    `mensageria_nats::Consumidor`, each applying a one-INSERT effect in a schema of its own;
//!    counted until every effect is committed. One receiving app, then two (fan-out: each
//!    applies every event, none twice, checked here). Library defaults throughout.
//!
//! Needs nats-server with JetStream at `NATS_URL` (default `nats://127.0.0.1:4222`;
//! `scripts/test` starts it when it is down).

use std::time::{Duration, Instant};

use mensageria_axum::{Rejeicao, receptor};
use mensageria_core::relay::{Config as ConfigRelay, Relay, RelayHandle};
use mensageria_core::{ContextoEnvio, FalhaEnvio, enfileirar, enviador};
use mensageria_nats::async_nats::jetstream;
use mensageria_nats::{ConfigConsumidor, Consumidor, Fluxo, Publicador};
use serde::{Deserialize, Serialize};
use sqlx::{PgPool, Postgres, Transaction};

use crate::Parametros;
use crate::ambiente::{Cpu, Pg};
use crate::carga::{EventoBench, Passo, abrir_negocio, contar, esperar, evento, reservar, vazao};
use crate::ponta_a_ponta::{self, PRODUTORES, Perfil};
use crate::relatorio::{Relatorio, fmt};

/// The bench's event under a tipo of its own, whose enviador publishes to JetStream (the same
/// JSON as the HTTP path's).
#[derive(Debug, Serialize, Deserialize)]
#[serde(transparent)]
pub(crate) struct EventoNats(EventoBench);

const TIPO: &str = "bench.nats";

#[enviador(tipo = "bench.nats")]
async fn publicar_evento(evento: EventoNats, ctx: &ContextoEnvio) -> Result<(), FalhaEnvio> {
    ctx.exigir::<Publicador>()?.publicar(&evento, ctx).await
}

/// The effect: one INSERT, as the HTTP path's receptor. No unique constraint on `n`, so an
/// event applied twice would show as two rows.
#[receptor(tipo = "bench.nats", chave_natural = evento.0.n)]
async fn receber_evento_nats(
    tx: &mut Transaction<'_, Postgres>,
    evento: EventoNats,
) -> Result<(), Rejeicao> {
    sqlx::query("INSERT INTO efeito_nats (n) VALUES ($1)")
        .bind(evento.0.n)
        .execute(&mut **tx)
        .await?;
    Ok(())
}

/// Connections to PostgreSQL of each receiving app (its consumer applies one batch at a time).
const CONEXOES_POR_APP: u32 = 4;

fn nats_url() -> String {
    std::env::var("NATS_URL").unwrap_or_else(|_| "nats://127.0.0.1:4222".to_owned())
}

/// A connection of its own to the servers of `url` (a comma-separated list), as a separate
/// process would have.
async fn conectar(url: &str, nome: &str) -> jetstream::Context {
    mensageria_nats::conectar(url, nome)
        .await
        .unwrap_or_else(|erro| {
            panic!("nats-server with JetStream at {url} (scripts/test starts it): {erro}")
        })
}

/// A receiving app: its schema, its pool and its NATS connection.
struct App {
    nome: String,
    pg: Pg,
    pool: PgPool,
    js: jetstream::Context,
}

impl App {
    async fn nova(nome: &str, url: &str) -> Self {
        let pg = Pg::novo().await;
        let pool = pg.pool(CONEXOES_POR_APP).await;
        for sql in [
            "CREATE TABLE efeito_nats (n BIGINT NOT NULL, recebido_em TIMESTAMPTZ NOT NULL DEFAULT now())",
            "CREATE INDEX efeito_nats_n ON efeito_nats (n)",
        ] {
            sqlx::query(sql).execute(&pool).await.expect("effect table");
        }
        Self {
            nome: nome.to_owned(),
            pg,
            pool,
            js: conectar(url, nome).await,
        }
    }

    /// `(effect rows, distinct events, transactions)` among the events numbered `n0..n1`
    /// (effects that share a transaction share its `now()`).
    async fn efeitos(&self, n0: i64, n1: i64) -> (i64, i64, i64) {
        sqlx::query_as(
            "SELECT count(*), count(DISTINCT n), count(DISTINCT recebido_em) \
             FROM efeito_nats WHERE n >= $1 AND n < $2",
        )
        .bind(n0)
        .bind(n1)
        .fetch_one(&self.pool)
        .await
        .expect("count the effects")
    }

    /// Distinct events applied among those numbered `n0..n1`.
    async fn aplicados(&self, n0: i64, n1: i64) -> i64 {
        sqlx::query_scalar("SELECT count(DISTINCT n) FROM efeito_nats WHERE n >= $1 AND n < $2")
            .bind(n0)
            .bind(n1)
            .fetch_one(&self.pool)
            .await
            .expect("count the effects")
    }
}

/// The sending app (producers and relay in a schema of their own, its NATS connection) and the
/// receiving apps.
pub(crate) struct Bancada {
    envio: Pg,
    produtores: PgPool,
    leitura: PgPool,
    js: jetstream::Context,
    apps: Vec<App>,
}

/// What one JetStream run saw.
pub(crate) struct Rodada {
    produzidas: f64,
    /// Events each receiving app applied per second, from the producers' start until every app
    /// had committed every event.
    pub(crate) entregues: f64,
    backlog: f64,
    /// The most events one app had still to apply when the producers stopped (the saída's
    /// backlog included).
    pub(crate) pendentes: f64,
    /// Events per receiving transaction, on average over the apps.
    por_transacao: f64,
    /// CPU per event, in microseconds.
    pub(crate) cpu: Cpu,
    pub(crate) eventos: i64,
    pub(crate) perdidos: i64,
    pub(crate) duas_vezes: i64,
}

/// The shape of a JetStream run: the stream's replicas, the sending app's relays, the receiving
/// apps and the consumers (replicas) of each.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Forma {
    pub(crate) replicas: usize,
    pub(crate) relays: usize,
    pub(crate) apps: usize,
    pub(crate) por_app: usize,
}

impl Forma {
    /// One relay, `apps` apps of one consumer each, a one-replica stream.
    fn simples(apps: usize) -> Self {
        Self {
            replicas: 1,
            relays: 1,
            apps,
            por_app: 1,
        }
    }
}

impl Bancada {
    async fn montar(apps: usize) -> Self {
        Self::montar_em(apps, &nats_url()).await
    }

    /// [`montar`](Self::montar) against the servers of `url`.
    pub(crate) async fn montar_em(apps: usize, url: &str) -> Self {
        let envio = Pg::novo().await;
        let produtores = envio.pool(PRODUTORES as u32).await;
        let leitura = envio.pool(1).await;
        let mut receptoras = Vec::with_capacity(apps);
        for i in 0..apps {
            receptoras.push(App::nova(&format!("bench-app-{}", i + 1), url).await);
        }
        Self {
            envio,
            produtores,
            leitura,
            js: conectar(url, "bench-relay").await,
            apps: receptoras,
        }
    }

    /// The sending app's relays (replicas `0..relays` of it), publishing to `fluxo`, library
    /// defaults.
    async fn relays(&self, fluxo: &Fluxo, relays: usize) -> Vec<RelayHandle> {
        let mut handles = Vec::with_capacity(relays);
        for i in 0..relays {
            let config = ConfigRelay::new("bench-nats").com_instancia(format!("bench-relay-{i}"));
            handles.push(
                Relay::new(self.envio.pool(8).await, config)
                    .recurso(Publicador::new(self.js.clone(), fluxo))
                    .spawn()
                    .expect("relay"),
            );
        }
        handles
    }

    /// One timed run with `apps` receiving apps, on a stream of its own (deleted at the end).
    /// With `drenar`, the relay starts only when the producers stop, and the clock with it.
    async fn rodada(&self, apps: usize, duracao: Duration, drenar: bool) -> Rodada {
        self.rodada_em(Forma::simples(apps), duracao, drenar).await
    }

    /// One timed run of shape `forma`.
    pub(crate) async fn rodada_em(&self, forma: Forma, duracao: Duration, drenar: bool) -> Rodada {
        let Forma {
            replicas,
            relays,
            apps,
            por_app,
        } = forma;
        let sufixo = uuid::Uuid::now_v7().simple();
        let fluxo = Fluxo::new(format!("BENCH{sufixo}"), format!("bench{sufixo}"))
            .expect("stream name")
            .com_replicas(replicas)
            .garantir(&self.js)
            .await
            .expect("create the run's stream");
        fluxo
            .exigir_janela(&ConfigRelay::new("bench-nats"))
            .expect("duplicate window");
        let apps = &self.apps[..apps];
        let mut consumidores = Vec::with_capacity(apps.len());
        for app in apps {
            for _ in 0..por_app {
                let config = ConfigConsumidor::new(&app.nome).com_tipos([TIPO]);
                let consumidor =
                    Consumidor::new(app.pool.clone(), app.js.clone(), fluxo.clone(), config);
                consumidores.push(consumidor.spawn().await.expect("start the consumer"));
            }
        }
        let mut relay = None;
        if !drenar {
            relay = Some(self.relays(&fluxo, relays).await);
        }
        let n0 = reservar(0);
        let mut cpu_antes = Cpu::agora();
        let mut inicio = Instant::now();
        let pool = self.produtores.clone();
        let produzidas = vazao(PRODUTORES, duracao, move || negocio(pool.clone())).await;
        let relay = match relay {
            Some(relay) => relay,
            None => {
                let relay = self.relays(&fluxo, relays).await;
                (cpu_antes, inicio) = (Cpu::agora(), Instant::now());
                relay
            }
        };
        // Every `n` taken was committed: each producer finished its transaction before stopping.
        let n1 = reservar(0);
        let eventos = n1 - n0;
        let backlog = contar(&self.leitura, "SELECT count(*) FROM mensageria_saida").await;
        let mut pendentes = 0;
        for app in apps {
            pendentes = pendentes.max(eventos - app.aplicados(n0, n1).await);
        }
        let todas = esperar(Duration::from_secs(120), || async {
            for app in apps {
                if app.aplicados(n0, n1).await < eventos {
                    return false;
                }
            }
            true
        })
        .await;
        let segundos = inicio.elapsed().as_secs_f64();
        let cpu = Cpu::agora().por(cpu_antes, (n1 - n0) as f64);
        assert!(todas, "JetStream: not every effect committed within 120 s");
        for relay in relay {
            relay.shutdown(Duration::from_secs(10)).await;
        }
        for consumidor in consumidores {
            consumidor.shutdown(Duration::from_secs(10)).await;
        }
        let (mut perdidos, mut duas_vezes, mut transacoes) = (0, 0, 0);
        for app in apps {
            let (linhas, distintos, de_app) = app.efeitos(n0, n1).await;
            perdidos += eventos - distintos;
            duas_vezes += linhas - distintos;
            transacoes += de_app;
        }
        self.js
            .delete_stream(fluxo.nome())
            .await
            .expect("delete the run's stream");
        Rodada {
            produzidas,
            entregues: eventos as f64 / segundos,
            backlog: backlog as f64,
            pendentes: pendentes as f64,
            por_transacao: (eventos * apps.len() as i64) as f64 / transacoes.max(1) as f64,
            cpu,
            eventos,
            perdidos,
            duas_vezes,
        }
    }

    pub(crate) async fn descartar(self) {
        self.produtores.close().await;
        self.leitura.close().await;
        self.envio.descartar().await;
        for app in self.apps {
            app.pool.close().await;
            app.pg.descartar().await;
        }
    }
}

/// The producer's step: the business write and the JetStream-bound event, committed.
fn negocio(pool: PgPool) -> Passo<()> {
    Box::pin(async move {
        let mut tx = abrir_negocio(&pool).await;
        enfileirar(&mut *tx, &EventoNats(evento()))
            .await
            .expect("enqueue");
        tx.commit().await.expect("commit");
    })
}

/// What the repetitions of one variant saw.
#[derive(Default)]
struct Serie {
    produzidas: Vec<f64>,
    entregues: Vec<f64>,
    backlogs: Vec<f64>,
    pendentes: Vec<f64>,
    por_transacao: Vec<f64>,
    cpu: Vec<Cpu>,
    eventos: i64,
    perdidos: i64,
    duas_vezes: i64,
}

impl Serie {
    fn somar(&mut self, r: Rodada) {
        self.produzidas.push(r.produzidas);
        self.entregues.push(r.entregues);
        self.backlogs.push(r.backlog);
        self.pendentes.push(r.pendentes);
        self.por_transacao.push(r.por_transacao);
        self.cpu.push(r.cpu);
        self.eventos += r.eventos;
        self.perdidos += r.perdidos;
        self.duas_vezes += r.duas_vezes;
    }

    fn somar_http(&mut self, r: ponta_a_ponta::Rodada) {
        self.produzidas.push(r.produzidas);
        self.entregues.push(r.entregues);
        self.backlogs.push(r.backlog);
        self.por_transacao.push(r.por_transacao);
        self.cpu.push(r.cpu);
    }
}

/// One kind of timed run: over HTTP (0 receiving apps here: the receptor shares the sending
/// app's schema, as in section 2) or through JetStream to `apps` apps; with producers running,
/// or draining the backlog they left.
#[derive(Clone, Copy)]
struct Variante {
    apps: usize,
    drenar: bool,
}

impl Variante {
    const TODAS: [Variante; 5] = [
        Variante {
            apps: 0,
            drenar: false,
        },
        Variante {
            apps: 1,
            drenar: false,
        },
        Variante {
            apps: 2,
            drenar: false,
        },
        Variante {
            apps: 0,
            drenar: true,
        },
        Variante {
            apps: 1,
            drenar: true,
        },
    ];

    fn nome(self) -> String {
        let caminho = match self.apps {
            0 => "HTTP path (paired run)".to_owned(),
            1 => "JetStream, 1 receiving app".to_owned(),
            apps => format!("JetStream, fan-out to {apps} receiving apps"),
        };
        if self.drenar {
            format!("{caminho}, draining the backlog (relay started when the producers stopped)")
        } else {
            caminho
        }
    }
}

/// Section 5: the HTTP path (library defaults), JetStream to one app and JetStream to two, then
/// the HTTP path and JetStream to one app draining a backlog, in turn within each repetition
/// (the order rotating), so that every ratio compares runs taken seconds apart on the same
/// noisy machine.
pub(crate) async fn medir(rel: &mut Relatorio, p: &Parametros) {
    println!("5. end-to-end through NATS JetStream vs HTTP ({PRODUTORES} producers)");
    let http = ponta_a_ponta::Bancada::montar().await;
    let b = Bancada::montar(2).await;
    let mut series: [Serie; 5] = Default::default();
    let (mut razoes, mut razoes_drenagem) = (Vec::new(), Vec::new());
    for repeticao in 0..p.repeticoes {
        for passo in 0..Variante::TODAS.len() {
            let n = (repeticao + passo) % Variante::TODAS.len();
            let v = Variante::TODAS[n];
            if v.apps == 0 {
                series[n].somar_http(http.rodada(Perfil::Padrao, p.duracao, v.drenar).await);
                continue;
            }
            let rodada = b.rodada(v.apps, p.duracao, v.drenar).await;
            println!(
                "    {}: {} events, {} msg/s, lost {}, twice {}",
                v.nome(),
                rodada.eventos,
                fmt(rodada.entregues),
                rodada.perdidos,
                rodada.duas_vezes
            );
            series[n].somar(rodada);
        }
        let razao = |nats: usize, http: usize| {
            series[nats].entregues[repeticao] / series[http].entregues[repeticao]
        };
        razoes.push(razao(1, 0));
        razoes_drenagem.push(razao(4, 3));
    }
    http.descartar().await;
    b.descartar().await;
    let mut entregues = [0.0; 5];
    for (n, serie) in series.into_iter().enumerate() {
        entregues[n] = relatar_serie(rel, Variante::TODAS[n], serie);
    }
    rel.medir(
        SECAO,
        "JetStream (1 app) / HTTP path, delivered, per repetition",
        razoes,
        "×",
    );
    rel.medir(
        SECAO,
        "JetStream (1 app) / HTTP path, draining a backlog, per repetition",
        razoes_drenagem,
        "×",
    );
    let [http, um, dois, http_drenagem, um_drenagem] = entregues;
    rel.meta(
        "end-to-end through JetStream ≥ the HTTP path's rate (library defaults, same run)",
        format!(
            "{:.2}× ({} vs {} msg/s; fan-out to 2 apps: {:.2}×, {} msg/s each; draining a backlog: {:.2}×, {} vs {} msg/s)",
            um / http,
            fmt(um),
            fmt(http),
            dois / http,
            fmt(dois),
            um_drenagem / http_drenagem,
            fmt(um_drenagem),
            fmt(http_drenagem)
        ),
        um >= http,
    );
}

const SECAO: &str = "JetStream";

/// The rows of one variant; returns its median delivered rate. Asserts that no event was lost
/// or applied twice.
fn relatar_serie(rel: &mut Relatorio, v: Variante, serie: Serie) -> f64 {
    let nome = v.nome();
    if !v.drenar {
        rel.medir(
            SECAO,
            format!("{nome}: producers, business tx + enfileirar, {PRODUTORES} clients"),
            serie.produzidas,
            "tx/s",
        );
    }
    let entregue = rel.medir(
        SECAO,
        format!("{nome}: delivered, every effect committed (in each app), library defaults"),
        serie.entregues,
        "msg/s",
    );
    if !v.drenar {
        rel.medir(
            SECAO,
            format!("{nome}: saída backlog when the producers stopped"),
            serie.backlogs,
            "rows",
        );
    }
    if v.apps > 0 && !v.drenar {
        rel.medir(
            SECAO,
            format!("{nome}: events not yet applied when the producers stopped (most of one app)"),
            serie.pendentes,
            "events",
        );
    }
    rel.medir(
        SECAO,
        format!("{nome}: events per receiving transaction (mean)"),
        serie.por_transacao,
        "events",
    );
    let cpu = |f: fn(&Cpu) -> f64| serie.cpu.iter().map(f).collect::<Vec<_>>();
    rel.custo_por_evento(
        format!("{nome} (JetStream section)"),
        &cpu(|c| c.proprio),
        &cpu(|c| c.postgres),
        &cpu(|c| c.nats),
    );
    for (parte, valores) in [
        (
            "this process (producers, relay, receiver)",
            cpu(|c| c.proprio),
        ),
        ("PostgreSQL", cpu(|c| c.postgres)),
        ("nats-server", cpu(|c| c.nats)),
    ] {
        rel.medir(
            SECAO,
            format!("{nome}: CPU per event, {parte}"),
            valores,
            "µs",
        );
    }
    if v.apps > 0 {
        println!(
            "  {nome}: {} events, {} applications expected: lost {}, applied twice {}",
            serie.eventos,
            serie.eventos * v.apps as i64,
            serie.perdidos,
            serie.duas_vezes
        );
        assert_eq!(
            (serie.perdidos, serie.duas_vezes),
            (0, 0),
            "{nome}: every app must apply every event exactly once"
        );
    }
    if v.apps == 2 {
        rel.meta(
            "fan-out through JetStream to 2 apps: each applies every event, lost 0, twice 0",
            format!("lost 0, twice 0 ({} events × 2 apps)", serie.eventos),
            true,
        );
    }
    entregue
}
