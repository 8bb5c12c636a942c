//! The JetStream suites' harness: a stream of a test's own, a private nats-server (a child
//! process with a port and a store of its own, for the scenarios that kill and restart it), and
//! the ledger check of a scenario whose sending app and receiving apps live in schemas of their
//! own.
//!
//! The ledger: the sending app writes a `razao` row in the same transaction as each enqueue
//! ([`produzir`]); every receiving app counts its applications of each event in `efeito`
//! ([`APLICAR`]). After the scenario drains, [`contar`] compares them: committed and never
//! applied (lost), applied and never committed (unexpected), applied more than once.

mod cluster;

pub use cluster::{Cluster, Lugar, ServidorNats};

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use mensageria_nats::Fluxo;
use mensageria_nats::async_nats::{self, jetstream};
use sqlx::PgPool;
use uuid::Uuid;

/// The sending app's ledger: one row per committed event, written with its enqueue.
pub const RAZAO: &str =
    "CREATE TABLE razao (n BIGINT PRIMARY KEY, id_mensagem UUID NOT NULL, veneno BOOLEAN NOT NULL)";

/// A receiving app's effect: one row per event, counting its applications.
pub const EFEITO: &str = "CREATE TABLE efeito (n BIGINT PRIMARY KEY, aplicacoes BIGINT NOT NULL)";

/// The effect of event `$1`: a first application inserts, every later one counts.
pub const APLICAR: &str = "INSERT INTO efeito (n, aplicacoes) VALUES ($1, 1) \
     ON CONFLICT (n) DO UPDATE SET aplicacoes = efeito.aplicacoes + 1";

/// Logs what the library says (its warnings and errors, mensageria-nats down to INFO, the NATS
/// client's INFO and the cluster suite's own steps, with timestamps) on the test process's
/// stderr, which the test runner shows when the test fails: a fault scenario that does not
/// converge then says what its consumer and publisher saw (changes of server, reconnects).
/// Once per process; `RUST_LOG` replaces the filter.
pub fn registrar_no_stderr() {
    let filtro = tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| {
        tracing_subscriber::EnvFilter::new(
            "warn,mensageria_nats=info,async_nats=info,nats_cluster=info",
        )
    });
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filtro)
        .with_ansi(false)
        .with_writer(std::io::stderr)
        .try_init();
}

/// `NATS_URL`, else the local server (`scripts/test` starts it when it is down).
pub fn url_compartilhada() -> String {
    std::env::var("NATS_URL").unwrap_or_else(|_| "nats://127.0.0.1:4222".into())
}

/// A JetStream context on the server at `url` (the client reconnects by itself, forever).
pub async fn conectar(url: &str) -> jetstream::Context {
    conectar_vigiado(url).await.0
}

/// [`conectar`], and the instant its client last (re)connected to the server.
pub async fn conectar_vigiado(url: &str) -> (jetstream::Context, Arc<Mutex<Option<Instant>>>) {
    let conectou = Arc::new(Mutex::new(None));
    let registro = Arc::clone(&conectou);
    let (opcoes, servidores) = mensageria_nats::opcoes_de_conexao(url, "mensageria-testes");
    let cliente = opcoes
        .event_callback(move |evento| {
            let registro = Arc::clone(&registro);
            async move {
                if matches!(evento, async_nats::Event::Connected) {
                    *registro.lock().expect("the connection instant") = Some(Instant::now());
                }
            }
        })
        .connect(servidores)
        .await
        .unwrap_or_else(|erro| panic!("nats-server at {url} (scripts/test starts it): {erro}"));
    (jetstream::new(cliente), conectou)
}

/// A stream of the test's own (unique name and subject prefix) with this duplicate window.
pub async fn fluxo_proprio(js: &jetstream::Context, janela: Duration) -> Fluxo {
    let sufixo = Uuid::now_v7().simple().to_string();
    Fluxo::new(format!("F{sufixo}"), format!("f{sufixo}"))
        .expect("a valid stream name")
        .com_replicas(1)
        .com_janela_de_duplicatas(janela)
        .garantir(js)
        .await
        .expect("create the test's stream")
}

/// How many messages the stream stores.
pub async fn mensagens_no_fluxo(js: &jetstream::Context, fluxo: &Fluxo) -> u64 {
    let fluxo = js.get_stream(fluxo.nome()).await.expect("read the stream");
    fluxo.get_info().await.expect("stream info").state.messages
}

/// Messages of the stream not yet settled by its consumers, summed over them: `(pending, awaiting
/// an ack)`. A message delivered to a consumer that never settled it waits out the ack wait.
pub async fn pendentes_no_fluxo(js: &jetstream::Context, fluxo: &Fluxo) -> (u64, u64) {
    use futures_util::TryStreamExt as _;
    let fluxo = js.get_stream(fluxo.nome()).await.expect("read the stream");
    let consumidores: Vec<_> = fluxo
        .consumers()
        .try_collect()
        .await
        .expect("list the consumers");
    consumidores
        .iter()
        .fold((0, 0), |(pendentes, sem_ack), info| {
            (
                pendentes + info.num_pending,
                sem_ack + info.num_ack_pending as u64,
            )
        })
}

/// The server name of the stream's leader (`n0`, `n1`, `n2`), once it has one.
pub async fn lider_do_fluxo(js: &jetstream::Context, fluxo: &str, limite: Duration) -> String {
    let fim = Instant::now() + limite;
    // Asked every 50 ms with a short wait, so a request lost to a dead node costs little.
    let mut js = js.clone();
    js.set_timeout(Duration::from_millis(300));
    loop {
        if let Ok(mut stream) = js.get_stream(fluxo).await
            && let Ok(info) = stream.info().await
            && let Some(lider) = info.cluster.as_ref().and_then(|c| c.leader.clone())
        {
            return lider;
        }
        assert!(
            Instant::now() < fim,
            "stream {fluxo} has no leader after {limite:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The ledger's two schemas: the sending app's (migrated, with [`RAZAO`]) and one receiving
/// app's (migrated, with [`EFEITO`]).
pub async fn emissor_e_receptor() -> (crate::PgIsolado, crate::PgIsolado) {
    let (emissor, receptor) = (
        crate::PgIsolado::novo().await,
        crate::PgIsolado::novo().await,
    );
    for (pg, tabela) in [(&emissor, RAZAO), (&receptor, EFEITO)] {
        mensageria_core::migrar(&pg.pool)
            .await
            .expect("migrate the test schema");
        sqlx::query(tabela)
            .execute(&pg.pool)
            .await
            .expect("create the ledger's table");
    }
    (emissor, receptor)
}

/// The sender's transaction: the ledger row of event `n` and its enqueue, committed together.
/// Returns the message id.
pub async fn produzir<T: mensageria_core::Enviador<Por>, Por>(
    pool: &PgPool,
    n: i64,
    veneno: bool,
    evento: &T,
) -> Result<Uuid, mensageria_core::Erro> {
    let mut tx = pool.begin().await?;
    let id = mensageria_core::enfileirar(&mut *tx, evento).await?;
    sqlx::query("INSERT INTO razao (n, id_mensagem, veneno) VALUES ($1, $2, $3)")
        .bind(n)
        .bind(id)
        .bind(veneno)
        .execute(&mut *tx)
        .await?;
    tx.commit().await?;
    Ok(id)
}

/// The sending app's ledger as committed: event → (message id, poison?).
#[derive(Debug, Clone, Default)]
pub struct Razao(pub BTreeMap<i64, (Uuid, bool)>);

impl Razao {
    /// Reads the ledger of the sending app's schema.
    pub async fn ler(pool: &PgPool) -> Self {
        let linhas: Vec<(i64, Uuid, bool)> =
            sqlx::query_as("SELECT n, id_mensagem, veneno FROM razao")
                .fetch_all(pool)
                .await
                .expect("read the ledger");
        Self(
            linhas
                .into_iter()
                .map(|(n, id, veneno)| (n, (id, veneno)))
                .collect(),
        )
    }

    /// Committed events.
    pub fn commitadas(&self) -> u64 {
        self.0.len() as u64
    }

    /// Committed events a receptor can apply (not poison).
    pub fn aplicaveis(&self) -> u64 {
        self.0.values().filter(|(_, veneno)| !veneno).count() as u64
    }

    /// The poison events' message ids.
    pub fn veneno(&self) -> BTreeSet<Uuid> {
        self.0
            .values()
            .filter(|(_, veneno)| *veneno)
            .map(|(id, _)| *id)
            .collect()
    }
}

/// What one receiving app did with the committed events.
#[derive(Debug, Clone)]
pub struct Contas {
    /// The receiving app.
    pub app: String,
    /// Events committed by the sender (ledger rows).
    pub commitadas: u64,
    /// Of which poison.
    pub veneno: u64,
    /// Distinct events applied.
    pub aplicadas: u64,
    /// Committed, not poison, never applied.
    pub perdidas: u64,
    /// Applied, never committed.
    pub inesperadas: u64,
    /// Applied more than once.
    pub duas_vezes: u64,
    /// In the app's `mensageria_mortas_recebidas`.
    pub mortas: u64,
    /// Whether those are exactly the poison events.
    pub mortas_sao_o_veneno: bool,
}

impl Contas {
    /// Fails the test unless every committed event but the poison was applied exactly once,
    /// nothing else was, and the dead letters are exactly the poison.
    pub fn afirmar(&self) {
        assert!(self.commitadas > 0, "nothing committed: {self:#?}");
        assert_eq!(self.perdidas, 0, "lost events: {self:#?}");
        assert_eq!(self.inesperadas, 0, "unexpected effects: {self:#?}");
        assert_eq!(self.duas_vezes, 0, "events applied twice: {self:#?}");
        assert_eq!(
            self.aplicadas,
            self.commitadas - self.veneno,
            "applied: {self:#?}"
        );
        assert!(
            self.mortas_sao_o_veneno,
            "dead letters are not the poison: {self:#?}"
        );
    }
}

impl fmt::Display for Contas {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}: committed {} ({} poison), applied {}, lost {}, unexpected {}, applied twice {}, \
             dead letters {} (= poison: {})",
            self.app,
            self.commitadas,
            self.veneno,
            self.aplicadas,
            self.perdidas,
            self.inesperadas,
            self.duas_vezes,
            self.mortas,
            if self.mortas_sao_o_veneno {
                "yes"
            } else {
                "NO"
            }
        )
    }
}

/// Compares the ledger with the effects and dead letters of the receiving app `app` (its
/// schema or file is `pool`).
pub async fn contar<DB>(razao: &Razao, app: &str, pool: &sqlx::Pool<DB>) -> Contas
where
    DB: mensageria_core::Banco + crate::Sql,
    for<'c> &'c mut DB::Connection: sqlx::Executor<'c, Database = DB>,
    (i64, i64): for<'r> sqlx::FromRow<'r, DB::Row>,
{
    let efeitos: BTreeMap<i64, i64> = sqlx::query_as("SELECT n, aplicacoes FROM efeito")
        .fetch_all(pool)
        .await
        .expect("read the effects")
        .into_iter()
        .collect();
    let mortas: BTreeSet<Uuid> =
        mensageria_core::operacoes::mortas_recebidas(pool, Some(app), 1_000_000)
            .await
            .expect("read the dead letters")
            .into_iter()
            .map(|morta| morta.id_mensagem)
            .collect();
    let veneno = razao.veneno();
    Contas {
        app: app.to_owned(),
        commitadas: razao.commitadas(),
        veneno: veneno.len() as u64,
        aplicadas: efeitos.len() as u64,
        perdidas: razao
            .0
            .iter()
            .filter(|(n, (_, e_veneno))| !e_veneno && !efeitos.contains_key(n))
            .count() as u64,
        inesperadas: efeitos.keys().filter(|n| !razao.0.contains_key(n)).count() as u64,
        duas_vezes: efeitos.values().filter(|&&vezes| vezes > 1).count() as u64,
        mortas: mortas.len() as u64,
        mortas_sao_o_veneno: mortas == veneno,
    }
}

/// Waits (at most `limite`) until a receiving app has applied `total` distinct events.
pub async fn esperar_aplicadas<DB: crate::Sql>(pool: &sqlx::Pool<DB>, total: u64, limite: Duration)
where
    for<'c> &'c mut DB::Connection: sqlx::Executor<'c, Database = DB>,
    (i64,): for<'r> sqlx::FromRow<'r, DB::Row>,
{
    crate::esperar_valor(
        "every event applied",
        limite,
        Duration::from_millis(20),
        || crate::contar(pool, "efeito"),
        |&aplicadas| aplicadas as u64 >= total,
    )
    .await;
}

/// One row of the JetStream fault tables of `docs/FAULTS.md` ("JetStream", "JetStream cluster"):
/// what a ledger-checked test did and saw. Each test prints it and writes it as JSON under
/// `target/tmp/faltas-nats/` or `faltas-cluster/`, from which `matriz-de-faltas` writes the
/// tables (the figures of the latest run, not copied by hand).
#[derive(Debug, serde::Serialize, serde::Deserialize)]
pub struct Relato {
    /// The test.
    pub teste: String,
    /// The fault it injects.
    pub falha: String,
    /// Events committed (with the poison among them, if any).
    pub commitadas: String,
    /// Committed, not poison, never applied (or what the row reports instead).
    pub perdidas: String,
    /// Applied more than once.
    pub duas_vezes: String,
    /// What it measured.
    pub evidencia: String,
}

impl Relato {
    /// A row from the ledger's account.
    pub fn de_contas(teste: &str, falha: &str, contas: &Contas, evidencia: String) -> Self {
        let commitadas = if contas.veneno > 0 {
            format!("{} ({} poison)", contas.commitadas, contas.veneno)
        } else {
            contas.commitadas.to_string()
        };
        Self {
            teste: teste.to_owned(),
            falha: falha.to_owned(),
            commitadas,
            perdidas: contas.perdidas.to_string(),
            duas_vezes: contas.duas_vezes.to_string(),
            evidencia,
        }
    }

    /// Prints it and writes it into `dir` (one file per test).
    pub fn gravar(&self, dir: &std::path::Path) {
        println!(
            "{}: committed {}, lost {}, twice {}; {}",
            self.teste, self.commitadas, self.perdidas, self.duas_vezes, self.evidencia
        );
        std::fs::create_dir_all(dir).expect("create the matrix directory");
        std::fs::write(
            dir.join(format!("{}.json", self.teste)),
            serde_json::to_vec_pretty(self).expect("serialize a matrix row"),
        )
        .expect("write a matrix row");
    }
}

/// The table of the rows in `dir`, sorted by test; `None` when there are none.
pub fn matriz(dir: &std::path::Path) -> Option<String> {
    let mut relatos: Vec<Relato> = std::fs::read_dir(dir)
        .ok()?
        .filter_map(Result::ok)
        .filter(|e| e.path().extension().is_some_and(|x| x == "json"))
        .filter_map(|e| serde_json::from_slice(&std::fs::read(e.path()).ok()?).ok())
        .collect();
    if relatos.is_empty() {
        return None;
    }
    relatos.sort_by(|a, b| a.teste.cmp(&b.teste));
    let mut md = String::from(
        "| test | fault | committed | lost | twice | evidence / time |\n|---|---|---:|---:|---:|---|\n",
    );
    for r in relatos {
        md.push_str(&format!(
            "| `{}` | {} | {} | **{}** | **{}** | {} |\n",
            r.teste, r.falha, r.commitadas, r.perdidas, r.duas_vezes, r.evidencia
        ));
    }
    Some(md)
}
