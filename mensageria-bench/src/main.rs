//! The mensageria benchmark: each figure is the median of repeated runs, next to a baseline
//! measured in the same run, and every target of the performance issue is checked against it.
//!
//! ```text
//! cargo run --release -p mensageria-bench -- --rapido     # ~16 min (14 min 41 s on 2026-12-06, before
//!                                                         # section 1's floors), smaller sizes
//!                                                         # (the report's Parameters line says how long)
//! cargo run --release -p mensageria-bench                 # full sizes (1M-row history and backlog):
//!                                                         # ~45 min (43 min 55 s and 46 min 03 s
//!                                                         # on two machines, 2026-12-06)
//! ```
//!
//! Needs PostgreSQL at `DATABASE_URL` (default `postgres://postgres@127.0.0.1:5432/postgres`);
//! each section works in a schema of its own, dropped at the end (a run killed before that
//! leaves it behind; the next run drops every `bench_` schema created more than a day before
//! it, and says so). The JetStream section
//! (`--so nats`) also needs nats-server with JetStream at `NATS_URL` (default
//! `nats://127.0.0.1:4222`) and uses a stream of each run's own, deleted at its end. A full
//! run writes `BENCHMARKS.md`; a partial run (`--so a,b`) writes `target/benchmarks/a,b.md` and
//! merges its rows into `BENCHMARKS.md`: each replaces the row of the same name, a replaced
//! target says "re-run", the header names the re-run (a later re-run of the same command
//! replaces that line), the other rows are kept (`--saida`
//! writes the report there instead and leaves `BENCHMARKS.md` alone).

mod ambiente;
mod carga;
mod contratos;
mod enfileirar;
mod estatistica;
mod gravador;
mod horizonte;
mod jetstream;
mod jetstream_cluster;
mod memoria;
mod mescla;
mod ordenada;
mod ponta_a_ponta;
mod ponta_a_ponta_sqlite;
mod queima;
mod rastreamento;
mod receptor;
mod reivindicacao;
mod relatorio;

use std::time::Duration;

use clap::{Parser, ValueEnum};

/// Benchmark mensageria against baselines measured in the same run.
#[derive(Parser, Debug)]
#[command(version)]
struct Args {
    /// Smaller sizes and shorter runs (history and backlog 200k rows, 2 s per run).
    #[arg(long)]
    rapido: bool,
    /// Repetitions of each measurement (the report gives their median).
    #[arg(long)]
    repeticoes: Option<usize>,
    /// Seconds per timed run.
    #[arg(long)]
    segundos: Option<f64>,
    /// Rows of history (deleted, unvacuumed) for the claim-scaling section.
    #[arg(long)]
    historico: Option<i64>,
    /// Rows of backlog for the burn-down section.
    #[arg(long)]
    backlog: Option<i64>,
    /// Run only these sections (default: all).
    #[arg(long, value_enum, value_delimiter = ',')]
    so: Vec<Secao>,
    /// Where to write the report (and nowhere else). Default: `BENCHMARKS.md` for a full run;
    /// a partial run (`--so`) writes `target/benchmarks/<sections>.md` and merges its rows into
    /// `BENCHMARKS.md`.
    #[arg(long)]
    saida: Option<std::path::PathBuf>,
    /// Internal: run one part of the memory section (`memoria.rs`) as a process of its own.
    #[arg(long, value_enum, hide = true)]
    papel: Option<memoria::Papel>,
    /// Internal, with `--papel`: the schema to work in.
    #[arg(long, hide = true, requires = "papel")]
    esquema: Option<String>,
    /// Internal, with `--papel relay`: the receptor's base URL.
    #[arg(long, hide = true, requires = "papel")]
    url: Option<String>,
}

/// Where a run writes its report: `--saida`, else `BENCHMARKS.md` for a full run and
/// `target/benchmarks/<sections>.md` for a partial one (a partial run that replaced the whole
/// file lost every other section's figures).
fn destino(args: &Args) -> std::path::PathBuf {
    if let Some(saida) = &args.saida {
        return saida.clone();
    }
    if args.so.is_empty() {
        return "BENCHMARKS.md".into();
    }
    let nomes: Vec<String> = args
        .so
        .iter()
        .filter_map(|secao| secao.to_possible_value().map(|v| v.get_name().to_owned()))
        .collect();
    std::path::PathBuf::from("target/benchmarks").join(format!("{}.md", nomes.join(",")))
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Secao {
    Enfileirar,
    PontaAPonta,
    Receptor,
    Reivindicacao,
    /// A large backlog drained by the relay beside a primary-key DELETE loop (in `queima.rs`).
    Queima,
    /// The ordered claim next to the unordered one (in `reivindicacao.rs`).
    Ordem,
    /// End-to-end through NATS JetStream, 1 and 2 receiving apps, beside the HTTP path in the
    /// same repetitions (in `jetstream.rs`; needs nats-server at `NATS_URL`).
    Nats,
    /// The enqueue with W3C trace context capture: no span, a span without OpenTelemetry, a
    /// sampled OpenTelemetry trace (in `rastreamento.rs`; the last needs the `otel` feature,
    /// on by default).
    Rastreamento,
    /// Section 2's end-to-end run with a transaction holding the xmin horizon for the whole run
    /// beside one without, in the same repetitions (in `horizonte.rs`).
    Horizonte,
    /// Section 2's end-to-end run on SQLite files beside the PostgreSQL one, in the same
    /// repetitions (in `ponta_a_ponta_sqlite.rs`).
    PontaAPontaSqlite,
    /// Ordered delivery end to end, keys × steps per second over HTTP and JetStream, beside a
    /// poll-paced relay (in `ordenada.rs`; needs nats-server at `NATS_URL`).
    OrdemPontaAPonta,
    /// JetStream on a three-node cluster started here: R1 vs R3, and scale-out 2 × 3 × 2 (in
    /// `jetstream_cluster.rs`; needs nats-server on PATH).
    NatsCluster,
    /// The contracts check of 200 tipos beside reading their files (in `contratos.rs`).
    Contratos,
    /// A receiving app and a relay, each a process of its own, over `--backlog` events: their
    /// memory after the first tenth and at the end (in `memoria.rs`).
    Memoria,
}

/// What limits the targets this machine misses, measured or reasoned from the figures (kept
/// here so that every report carries it).
const LIMITES: &[&str] = &[
    "Limit, enqueue overhead: the business transaction is the smallest there is (BEGIN, one INSERT, COMMIT), and any enqueue in the caller's transaction adds a statement to it. The same repetitions run two floors beside `enfileirar` (the rows above): a `SELECT 1` (one more round trip, nothing written) and an INSERT of one integer into a table without an index (the round trip and the smallest row). One more statement already costs most of the 25% (`--rapido`, 2026-12-06: +23–30%, +9–10% and +15–24% at 1, 4 and 16 clients), so the target holds only where the round trip is cheap (4 clients). What `enfileirar` pays above the integer's row is PostgreSQL's: its row (id, message id, tipo, the ~100-byte payload, two timestamps) and three index entries (the primary key, the claim's `(tipo, due, id)`, the unique message id). Server side, without round trips (20,000 inserts in one DO loop), that is about 10 µs against 1.5 for the integer: the heap row 5, its indexes 5 (the unique message id 1.5 of them); pgbench (a C client, so none of it is the Rust client's) shows the same gap under 16 clients (14% between the integer's row and the saída's). A profile of this process over the section found 76% of its samples in the kernel (sockets, scheduling) and no function of mensageria's above 1%. Dropping the unique message id would save about 1.5 µs of a 200 µs transaction and lose the check that a row cannot be enqueued twice, so it stays; a business transaction of n statements pays about 1/(n+2) for the enqueue.",
    "Limit, end-to-end: the producers set the ceiling. Each message is the producer's own transaction (BEGIN, business INSERT, `enfileirar`'s INSERT, COMMIT: four round trips against one for the raw-INSERT baseline); section 2 runs them alone (no relay) in the same repetitions: they reach about 0.56× the raw rate at about 2× its CPU per transaction, the most the path could deliver if delivering were free. On two shared cores the rate follows the CPU per event: at the producers' 268 µs plus the delivery path's own cost when it drains a backlog alone (about 120 µs, the cheapest it runs: batches of about 45), the ceiling is about 0.56 × 268 / 388 ≈ 0.39×; 0.45× needs delivery at about 60 µs per event in all, half of what the draining path costs, whose PostgreSQL share is already the claim's row lock and new version, the delete, the dedup record and the effect's INSERT per event (the effect is the application's statement). With producers the delivery costs more than draining (about 190 against 120 µs per event): batches are smaller (about 30 events) and each claim takes the few rows committed since the last one, so the relay's PostgreSQL backends spend about 58 µs per event against 30 when draining. Counted during a `--so ponta-a-ponta --rapido` run (2026-12-06, index scans of the claim's index in `pg_stat_user_indexes`): about 850 claims a second of about 4 rows each with producers, about 215 of 21 when draining. A claim is parsed and planned each time (sent unprepared, against the generic-plan trap of `tests/relay.rs`): in pgbench its backend spends 570–710 µs of CPU on a claim sent that way against 256–286 µs prepared. Tried and not kept (same day, `--rapido` pairs): one claim per batch request, a batch that lingered for a busy route asking for a claim just before it leaves while the relay holds its claims meanwhile. It gave 41 events per receiving transaction instead of 28, the relay's backends 51–55 µs per event instead of 69–71 and 5–8% less CPU per event, but commit → effect p50 at half of the peak went to 6.8–10.4 ms (4.1–5.4 without): each batch waits for a claim's round trip. Asking only while a relay was held kept the p50 within the noise (5.5 against 7.3 ms) and shrank the gains into it (36 against 32 events; 460 against 454 µs per event). A profile of the defaults' run (perf, whole machine, while producing): PostgreSQL about 55% of the CPU, this process about 30% (most of it the kernel's TCP and scheduling: round trips, not our code), about 10% idle. Twice the batch and the deliveries in flight (tuned) do not deliver more.",
    "Limit, burn-down: a relay set up to drain (batch 4096, 4096 in flight, a no-op enviador) claims 4096 rows per UPDATE … RETURNING and acks them in group commits on its one connection, so that connection's PostgreSQL backend, one core, is the limit (about 14 µs of its CPU per row against 1.4 µs for the primary-key DELETE loop, and 5 µs in the relay). The claim writes no index entry (migrations 0006–0007: a HOT update when the page has room; about two thirds of them with this bench's tiny payloads, whose claimed version is 1.7 times the inserted one), but each row still costs a row lock and a new version (two WAL records), then a delete. With 256-row claims the claim round trips were the limit (10–25k rows/s); four connections drain about 10% faster. 200k rows/s would need a claim without a per-row lock and version.",
    "Limit, duplicate cost: a duplicate runs BEGIN and the dedup INSERT … ON CONFLICT (no commit: its transaction is dropped and the rollback leaves with the connection's release) plus the HTTP exchange, against BEGIN, dedup, effect and COMMIT for a first delivery. In batches of 64 a round of duplicates is one dedup statement, but every event is still read, decoded, keyed and answered, and the load generator builds its JSON on the same two cores; a first batch adds 64 effect INSERTs and a commit, hence about 4× and not 5×. A pre-check outside the transaction would make duplicates cheaper but every first delivery dearer, and duplicates are the rare case.",
    "Limit, JetStream end-to-end: with producers running, the producers set the ceiling on both paths and JetStream keeps up (when they stop, about 20 rows are left in the saída and about 20 events not yet applied; about 24 events per receiving transaction against about 15 over HTTP), but nats-server shares the two cores: about 48 µs of its CPU per event (publish, file store, PubAck, delivery, ack) on top of about 540 µs per event for the whole HTTP path, and the producers lose about that share (0.90×). Draining a backlog, with no producers on the cores, JetStream delivers 1.19× the HTTP path's rate (127 events per receiving transaction against 17; PostgreSQL 104 against 148 µs per event). None of the consumer's or the publisher's settings is the limit: a fetch returns as soon as the pending messages are taken (its 1 s wait is paid only when idle), acks are queued without a round trip, and the relay awaits up to 128 PubAcks at once. A probe with another client at saturation put nats-server at about 10 µs per message to publish with these headers (8.5 with none) and 10 µs to deliver and ack (6 without acks); at the bench's trickle it pays about twice that in wake-ups (41% of its samples in the kernel's scheduler). What would close the gap is nats-server on a host of its own; in mensageria-nats, acking once per batch (AckPolicy::All) would save about 4 µs per event but would settle a nak'd message along with the later ones, so it is not worth it.",
    "JetStream R3 vs R1 (section `nats-cluster`): the three nats-server nodes share the machine's two cores with the producers, PostgreSQL and the consumers, so the rate follows the machine time per event: replicating each message to two followers costs nats-server about 100 µs of CPU per event more than R1 (195 vs 94 µs; R1 was 60 µs while every client sat on the first-listed node, 0.80×), and the ratio lands near the CPU ratio (585 vs 714 µs per event in all: 0.82; measured 0.83–0.88). On three hosts that work runs beside the app; the app's and PostgreSQL's own CPU per event give about 0.95.",
    "Limit, receptor p99: with 16 concurrent clients on 2 cores, the receptor's extra statement (the dedup INSERT), its authentication and its spans put its p99 a few milliseconds over the bare handler's; the medians differ by about one round trip.",
];

/// The sizes of one run.
pub(crate) struct Parametros {
    pub(crate) repeticoes: usize,
    pub(crate) duracao: Duration,
    pub(crate) historico: i64,
    pub(crate) backlog: i64,
}

fn main() {
    let args = Args::parse();
    if let Some(papel) = args.papel {
        let runtime = tokio::runtime::Runtime::new().expect("tokio runtime");
        let esquema = args.esquema.expect("--esquema with --papel");
        return runtime.block_on(memoria::rodar_papel(papel, esquema, args.url));
    }
    let p = Parametros {
        repeticoes: args
            .repeticoes
            .unwrap_or(if args.rapido { 3 } else { 5 })
            .max(1),
        duracao: Duration::from_secs_f64(args.segundos.unwrap_or(if args.rapido {
            2.0
        } else {
            5.0
        })),
        historico: args
            .historico
            .unwrap_or(if args.rapido { 200_000 } else { 1_000_000 }),
        backlog: args
            .backlog
            .unwrap_or(if args.rapido { 200_000 } else { 1_000_000 }),
    };
    let secoes = if args.so.is_empty() {
        vec![
            Secao::Enfileirar,
            Secao::PontaAPonta,
            Secao::Receptor,
            Secao::Reivindicacao,
            Secao::Queima,
            Secao::Ordem,
            Secao::Nats,
            Secao::Rastreamento,
            Secao::Horizonte,
            Secao::PontaAPontaSqlite,
            Secao::OrdemPontaAPonta,
            Secao::NatsCluster,
            Secao::Contratos,
            Secao::Memoria,
        ]
    } else {
        args.so.clone()
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("tokio runtime");
    runtime.block_on(async {
        let maquina = ambiente::maquina().await;
        println!("{maquina}");
        let abandonados = ambiente::varrer_abandonados(std::time::SystemTime::now()).await;
        if !abandonados.is_empty() {
            println!(
                "dropped {} bench schemas that killed runs had left behind: {}",
                abandonados.len(),
                abandonados.join(", ")
            );
        }
        let mut rel = relatorio::Relatorio::default();
        let comando = std::env::args().collect::<Vec<_>>().join(" ");
        let comando = format!("cargo run --release -p mensageria-bench --{}", comando.split_once(' ').map_or(String::new(), |(_, resto)| format!(" {resto}")));
        let parametros = format!(
            "{} repetitions, {:.1} s per timed run, {} history rows, {} backlog rows",
            p.repeticoes,
            p.duracao.as_secs_f64(),
            p.historico,
            p.backlog
        );
        let inicio = std::time::Instant::now();
        for (feitas, secao) in secoes.iter().enumerate() {
            rodar_secao(*secao, &mut rel, &p).await;
            // What a run cut short had measured so far (the report is written only at its end).
            let andamento = std::path::Path::new("target/benchmarks/em-andamento.md");
            let _ = std::fs::create_dir_all("target/benchmarks");
            let _ = std::fs::write(
                andamento,
                rel.markdown(&maquina, &comando, &format!("{parametros}; in progress: {} of {} sections after {:.0} s", feitas + 1, secoes.len(), inicio.elapsed().as_secs_f64())),
            );
        }
        let duracao = inicio.elapsed().as_secs_f64();
        rel.nota("Everything runs on one machine: PostgreSQL, the producers, the relay, the receptor and the load generator share its cores, so absolute rates are lower than on separate hosts; the ratios are what the targets check.");
        rel.nota("Enqueue overhead: TRUNCATE between repetitions keeps the saída from growing across runs; the relay is not running in that section.");
        rel.nota("End-to-end: one relay (pool of 8; library defaults: batch 128, 128 deliveries in flight; tuned: twice that) posts over HTTP/1.1 to a receptor (pool of 16) on the same PostgreSQL, the deliveries of one claim together in batch requests; the delivered rate counts every message produced in the timed run until the saída is empty, so a relay that falls behind pays for the backlog it leaves.");
        rel.nota("Latency: 4 paced producers; the clock starts when `commit` returns to the producer and stops when the receptor has committed and answered 200.");
        rel.nota("JetStream: the sending app's producers and relay (pool of 8, library defaults, `Publicador` on a NATS connection of its own) in one schema; each receiving app in a schema of its own (pool of 4, its own NATS connection), consuming through `Consumidor` with library defaults (batch 128, fetch wait 1 s, ack wait 30 s); a file-backed stream per timed run (deleted at its end) on the machine's nats-server. The effect is one INSERT into a table without a unique constraint, so an event applied twice would be a second row: lost and twice are counted per app and asserted 0. In each repetition the HTTP path (library defaults, as in section 2) runs beside them, the order rotating, so each ratio pairs runs seconds apart. Draining starts the relay only when the producers stop: the delivery path alone. CPU per event: user + system time of this process, of every PostgreSQL process and of every nats-server over the run, divided by the events (other load on the machine counts too).");
        rel.nota("Trace context: the enqueue section's transaction (business INSERT + `enfileirar`, committed; TRUNCATE after each run) in three variants run in the same repetitions, the order rotating: (a) no span and no subscriber; (b) each message inside a request span of a `tracing` registry at INFO without OpenTelemetry (`mensageria.enfileirar`'s span is created and the check finds no trace); (c) each message inside a request span that starts a new sampled OpenTelemetry trace (`tracing-opentelemetry`, `AlwaysOn`, the SDK's batch span processor feeding an exporter that counts and drops spans: no export I/O), its context stored with the row. Each variant's dispatcher is set on every poll of every producer's step. CPU per message: user + system time of this process (the span processor's thread included) over the run, divided by the messages (PostgreSQL's is left out: on a machine shared with other tests its processes come and go). Interleaved: one client running the variants in turn, message by message (each round starting with the next variant), for each repetition's timed run; each variant's median transaction time, so a load change hits every variant alike. Checked after every run: (c) exported two spans per message and stored a traceparent with a trace id of its own on every row, (a) and (b) none. With mensageria-core's `otel` feature on, (a) still calls `em_rastro()` (a thread-local lookup finding no span); a build without it (`--no-default-features`) runs (a) and (b) only. The noise a ratio is judged against is (a)'s spread over the repetitions, (max − min) / median.");
        rel.nota("Claim: rows claimed are then deleted outside the timing, so each claim leaves dead index entries behind like real deliveries; autovacuum is off for the table to keep the dead rows in place.");
        for limite in LIMITES {
            rel.nota(*limite);
        }
        let parametros = format!(
            "{parametros}; the run took {} min {:02.0} s",
            (duracao / 60.0).floor(),
            duracao % 60.0
        );
        let md = rel.markdown(&maquina, &comando, &parametros);
        let saida = destino(&args);
        if let Some(pasta) = saida.parent().filter(|p| !p.as_os_str().is_empty()) {
            std::fs::create_dir_all(pasta).expect("create the report's directory");
        }
        std::fs::write(&saida, &md).expect("write the report");
        println!("written to {}", saida.display());
        if args.saida.is_none() && !args.so.is_empty() {
            mesclar_no_relatorio(&md, &comando, &parametros);
        }
    });
}

/// A partial run's report merged into `BENCHMARKS.md` (its rows replace the earlier ones, the
/// others are kept; see `mescla.rs`), when that file is a full run's report.
fn mesclar_no_relatorio(parcial: &str, comando: &str, parametros: &str) {
    const COMPLETO: &str = "BENCHMARKS.md";
    let quando = chrono::Utc::now().format("%Y-%m-%d %H:%M UTC").to_string();
    let mesclado = std::fs::read_to_string(COMPLETO)
        .ok()
        .and_then(|completo| mescla::mesclar(&completo, parcial, &quando, comando, parametros));
    match mesclado {
        Some(md) => {
            std::fs::write(COMPLETO, md).expect("write BENCHMARKS.md");
            println!("its rows merged into {COMPLETO} (each replaces the row of the same name)");
        }
        None => println!(
            "({COMPLETO} is missing or not a full run's report: left as it is; a full run, \
             without --so, writes it)"
        ),
    }
}

/// Runs one section, its figures into `rel`.
async fn rodar_secao(secao: Secao, rel: &mut relatorio::Relatorio, p: &Parametros) {
    match secao {
        Secao::Enfileirar => enfileirar::medir(rel, p).await,
        Secao::PontaAPonta => {
            let bancada = ponta_a_ponta::Bancada::montar().await;
            let pico = ponta_a_ponta::vazao_de_ponta_a_ponta(rel, p, &bancada).await;
            ponta_a_ponta::latencia(rel, p, &bancada, pico).await;
            bancada.descartar().await;
        }
        Secao::Receptor => receptor::medir(rel, p).await,
        Secao::Reivindicacao => reivindicacao::medir(rel, p).await,
        Secao::Queima => queima::medir(rel, p).await,
        Secao::Ordem => reivindicacao::medir_ordem(rel, p).await,
        Secao::Nats => jetstream::medir(rel, p).await,
        Secao::Rastreamento => rastreamento::medir(rel, p).await,
        Secao::Horizonte => horizonte::medir(rel, p).await,
        Secao::PontaAPontaSqlite => ponta_a_ponta_sqlite::medir(rel, p).await,
        Secao::OrdemPontaAPonta => ordenada::medir(rel, p).await,
        Secao::NatsCluster => jetstream_cluster::medir(rel, p).await,
        Secao::Contratos => contratos::medir(rel, p).await,
        Secao::Memoria => memoria::medir(rel, p).await,
    }
}

#[cfg(test)]
mod testes {
    use clap::Parser;

    use super::{Args, destino};

    #[test]
    fn uma_rodada_parcial_nao_reescreve_o_benchmarks_md() {
        let caminho = |args: &[&str]| {
            destino(&Args::parse_from(
                std::iter::once("mensageria-bench").chain(args.iter().copied()),
            ))
        };
        assert_eq!(caminho(&[]), std::path::PathBuf::from("BENCHMARKS.md"));
        assert_eq!(
            caminho(&["--rapido"]),
            std::path::PathBuf::from("BENCHMARKS.md")
        );
        assert_eq!(
            caminho(&[
                "--so",
                "queima",
                "--repeticoes",
                "3",
                "--backlog",
                "1000000"
            ]),
            std::path::PathBuf::from("target/benchmarks/queima.md")
        );
        assert_eq!(
            caminho(&["--so", "nats,ordem-ponta-a-ponta"]),
            std::path::PathBuf::from("target/benchmarks/nats,ordem-ponta-a-ponta.md")
        );
        assert_eq!(
            caminho(&["--so", "nats", "--saida", "/tmp/x.md"]),
            std::path::PathBuf::from("/tmp/x.md")
        );
    }
}
