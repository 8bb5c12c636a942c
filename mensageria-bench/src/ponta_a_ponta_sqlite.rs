//! 9. End to end on SQLite (issue 29): section 2's shape on the embedded backend, beside section
//!    2's PostgreSQL run in the same repetitions (the order alternating). 8 producers commit a
//!    business INSERT and `enfileirar` into the sending app's SQLite file; the relay, library
//!    defaults, on a pool of its own on that file, posts the deliveries of each claim in batch
//!    requests over HTTP to a receptor whose dedup record and effect go to the receiving app's
//!    own SQLite file; counted until the saída is empty. Fresh files for every run
//!    (`mensageria_core::banco::sqlite::abrir`: WAL, `synchronous = FULL`, 5 s busy timeout).
//!    Each backend's end-to-end rate is set against its own raw single-row INSERT at 8 clients,
//!    measured in the same repetition.
//!
//! SQLite has one writer per file: the producers' commits and the relay's claims, acks and
//! lease renewals take turns on the sending file's write lock (each commit an fsync of the
//! WAL); only the receptor's transactions, on the other file, run beside them.

use std::time::{Duration, Instant};

use mensageria_axum::{Rejeicao, receptor};
use mensageria_core::Destino;
use mensageria_core::relay::{Config, Relay};
use sqlx::{Sqlite, SqlitePool, Transaction};

use crate::Parametros;
use crate::ambiente::{Cpu, Pg, sqlite};
use crate::carga::{
    EventoBench, Passo, TOKEN, esperar, insert_cru, negocio_sqlite, reservar, servir, vazao,
};
use crate::estatistica::percentil;
use crate::gravador;
use crate::ponta_a_ponta::{Bancada, PRODUTORES, Perfil};
use crate::relatorio::{Relatorio, fmt};

const SECAO: &str = "end-to-end SQLite";

/// The SQLite receptor of the bench's event: the same effect as the PostgreSQL one, one INSERT
/// in the receptor's transaction. Only a router on a SQLite pool mounts it.
#[receptor(tipo = "bench.evento", chave_natural = evento.n)]
async fn receber_evento_lite(
    tx: &mut Transaction<'_, Sqlite>,
    evento: EventoBench,
) -> Result<(), Rejeicao> {
    sqlx::query("INSERT INTO efeito (n) VALUES ($1)")
        .bind(evento.n)
        .execute(&mut **tx)
        .await?;
    Ok(())
}

/// A raw single-row INSERT on SQLite: the SQLite run's baseline.
fn insert_cru_sqlite(pool: SqlitePool) -> Passo<()> {
    Box::pin(async move {
        sqlx::query("INSERT INTO negocio (valor) VALUES ($1)")
            .bind("pedido faturado")
            .execute(&pool)
            .await
            .expect("raw insert");
    })
}

async fn contar(pool: &SqlitePool, sql: &'static str) -> i64 {
    sqlx::query_scalar(sql)
        .fetch_one(pool)
        .await
        .expect("count")
}

/// What one run saw, on either backend.
struct Rodada {
    produzidas: f64,
    entregues: f64,
    backlog: f64,
    /// The relay's claims: median, in ms, and how many per message delivered.
    reivindicacao_p50: f64,
    reivindicacoes_por_mensagem: f64,
    /// CPU per delivered message, in µs: this process (SQLite runs inside it) and PostgreSQL.
    cpu_proprio: f64,
    cpu_postgres: f64,
}

/// SQLite's raw single-row INSERT rate at `PRODUTORES` clients, on a file of its own.
async fn base_sqlite(duracao: Duration) -> f64 {
    let dir = tempfile::tempdir().expect("temporary directory");
    let pool = sqlite(&dir, "cru.db").await;
    let a = pool.clone();
    let base = vazao(PRODUTORES, duracao, move || insert_cru_sqlite(a.clone())).await;
    pool.close().await;
    base
}

/// One end-to-end run on SQLite, on fresh files.
async fn rodada_sqlite(duracao: Duration) -> Rodada {
    let dir = tempfile::tempdir().expect("temporary directory");
    let produtores = sqlite(&dir, "remetente.db").await;
    let pool_relay = mensageria_core::banco::sqlite::abrir(dir.path().join("remetente.db"))
        .await
        .expect("open the sender's file");
    let receptor = sqlite(&dir, "destinatario.db").await;
    sqlx::query("CREATE TABLE efeito (n INTEGER PRIMARY KEY)")
        .execute(&receptor)
        .await
        .expect("effect table");
    let app = mensageria_axum::router(
        receptor.clone(),
        mensageria_axum::Config::new("bench", [TOKEN]),
    )
    .expect("receptor router");
    let url = servir(app).await;
    let _ = gravador::colher();
    let cpu_antes = Cpu::agora();
    let inicio = Instant::now();
    let relay = Relay::new(pool_relay.clone(), Config::new("bench"))
        .recurso(Destino::new(&url).expect("URL").com_token(TOKEN))
        .spawn()
        .expect("relay");
    let n0 = reservar(0);
    let pool = produtores.clone();
    let produzidas = vazao(PRODUTORES, duracao, move || {
        negocio_sqlite(pool.clone(), true)
    })
    .await;
    let n1 = reservar(0);
    let backlog = contar(&produtores, "SELECT count(*) FROM mensageria_saida").await;
    let vazia = esperar(Duration::from_secs(120), || {
        let produtores = produtores.clone();
        async move { contar(&produtores, "SELECT count(*) FROM mensageria_saida").await == 0 }
    })
    .await;
    assert!(vazia, "the SQLite saída did not drain within 120 s");
    let segundos = inicio.elapsed().as_secs_f64();
    let cpu = Cpu::agora();
    relay.shutdown(Duration::from_secs(10)).await;
    let tempos = gravador::colher();
    let entregues = contar(&receptor, "SELECT count(*) FROM efeito").await;
    assert_eq!(
        entregues,
        n1 - n0,
        "every message produced was applied once at the SQLite receptor"
    );
    for pool in [produtores, pool_relay, receptor] {
        pool.close().await;
    }
    let cpu = cpu.por(cpu_antes, entregues as f64);
    Rodada {
        produzidas,
        entregues: entregues as f64 / segundos,
        backlog: backlog as f64,
        reivindicacao_p50: percentil(&tempos, 50.0),
        reivindicacoes_por_mensagem: tempos.len() as f64 / entregues.max(1) as f64,
        cpu_proprio: cpu.proprio,
        cpu_postgres: cpu.postgres,
    }
}

/// One end-to-end run on PostgreSQL: section 2's, library defaults.
async fn rodada_pg(bancada: &Bancada, duracao: Duration) -> Rodada {
    let _ = gravador::colher();
    let r = bancada.rodada(Perfil::Padrao, duracao, false).await;
    let tempos = gravador::colher();
    // Every message produced was delivered (the run waits for an empty saída).
    let mensagens = r.produzidas * duracao.as_secs_f64();
    Rodada {
        produzidas: r.produzidas,
        entregues: r.entregues,
        backlog: r.backlog,
        reivindicacao_p50: percentil(&tempos, 50.0),
        reivindicacoes_por_mensagem: tempos.len() as f64 / mensagens.max(1.0),
        cpu_proprio: r.cpu.proprio,
        cpu_postgres: r.cpu.postgres,
    }
}

#[derive(Default)]
struct Serie {
    base: Vec<f64>,
    produzidas: Vec<f64>,
    entregues: Vec<f64>,
    backlog: Vec<f64>,
    reivindicacao_p50: Vec<f64>,
    reivindicacoes_por_mensagem: Vec<f64>,
    cpu_proprio: Vec<f64>,
    cpu_postgres: Vec<f64>,
}

impl Serie {
    fn somar(&mut self, base: f64, r: Rodada) {
        self.base.push(base);
        self.produzidas.push(r.produzidas);
        self.entregues.push(r.entregues);
        self.backlog.push(r.backlog);
        self.reivindicacao_p50.push(r.reivindicacao_p50);
        self.reivindicacoes_por_mensagem
            .push(r.reivindicacoes_por_mensagem);
        self.cpu_proprio.push(r.cpu_proprio);
        self.cpu_postgres.push(r.cpu_postgres);
    }
}

/// Records one backend's series; returns the medians `(baseline, delivered)`.
fn relatar(rel: &mut Relatorio, banco: &str, s: Serie) -> (f64, f64) {
    let base = rel.medir(
        SECAO,
        format!("{banco}: raw single-row INSERT, {PRODUTORES} clients (baseline)"),
        s.base,
        "tx/s",
    );
    rel.medir(
        SECAO,
        format!("{banco}: producers, business tx + enfileirar, {PRODUTORES} clients"),
        s.produzidas,
        "tx/s",
    );
    let entregues = rel.medir(
        SECAO,
        format!(
            "{banco}: delivered, effect committed at the receptor, until drained, library defaults"
        ),
        s.entregues,
        "msg/s",
    );
    rel.medir(
        SECAO,
        format!("{banco}: backlog when the producers stopped"),
        s.backlog,
        "rows",
    );
    rel.medir(
        SECAO,
        format!("{banco}: relay claim p50 (mensageria_claim_seconds)"),
        s.reivindicacao_p50,
        "ms",
    );
    rel.medir(
        SECAO,
        format!("{banco}: relay claims per message delivered"),
        s.reivindicacoes_por_mensagem,
        "claims",
    );
    rel.custo_por_evento(
        format!("{banco} end to end, with producers (SQLite section)"),
        &s.cpu_proprio,
        &s.cpu_postgres,
        &[],
    );
    rel.medir(
        SECAO,
        format!(
            "{banco}: CPU per message, this process (producers, relay, receptor; SQLite runs in it)"
        ),
        s.cpu_proprio,
        "µs",
    );
    rel.medir(
        SECAO,
        format!("{banco}: CPU per message, PostgreSQL"),
        s.cpu_postgres,
        "µs",
    );
    (base, entregues)
}

pub(crate) async fn medir(rel: &mut Relatorio, p: &Parametros) {
    println!("9. end to end on SQLite beside PostgreSQL ({PRODUTORES} producers)");
    gravador::instalar();
    let bancada = Bancada::montar().await;
    let base_pg = Pg::novo().await;
    let pool_base_pg = base_pg.pool(PRODUTORES as u32).await;
    let (mut lite, mut pg) = (Serie::default(), Serie::default());
    let mut razoes = Vec::new();
    for repeticao in 0..p.repeticoes {
        for passo in 0..2 {
            if (repeticao + passo) % 2 == 0 {
                let a = pool_base_pg.clone();
                let base = vazao(PRODUTORES, p.duracao, move || insert_cru(a.clone())).await;
                let r = rodada_pg(&bancada, p.duracao).await;
                println!(
                    "    PostgreSQL: raw {} tx/s, delivered {} msg/s, claim p50 {} ms",
                    fmt(base),
                    fmt(r.entregues),
                    fmt(r.reivindicacao_p50)
                );
                pg.somar(base, r);
            } else {
                let base = base_sqlite(p.duracao).await;
                let r = rodada_sqlite(p.duracao).await;
                println!(
                    "    SQLite: raw {} tx/s, delivered {} msg/s, claim p50 {} ms",
                    fmt(base),
                    fmt(r.entregues),
                    fmt(r.reivindicacao_p50)
                );
                lite.somar(base, r);
            }
        }
        razoes.push(lite.entregues[repeticao] / pg.entregues[repeticao]);
    }
    pool_base_pg.close().await;
    base_pg.descartar().await;
    bancada.descartar().await;
    let (base_pg, entregues_pg) = relatar(rel, "PostgreSQL", pg);
    let (base_lite, entregues_lite) = relatar(rel, "SQLite", lite);
    rel.medir(
        SECAO,
        "delivered, SQLite / PostgreSQL, per repetition",
        razoes,
        "×",
    );
    rel.meta(
        "SQLite end to end measured beside PostgreSQL (library defaults, same repetitions)",
        format!(
            "SQLite {} msg/s ({:.2} × its raw INSERT, {} /s) vs PostgreSQL {} msg/s ({:.2} × its raw INSERT, {} /s): {:.2}×",
            fmt(entregues_lite),
            entregues_lite / base_lite,
            fmt(base_lite),
            fmt(entregues_pg),
            entregues_pg / base_pg,
            fmt(base_pg),
            entregues_lite / entregues_pg
        ),
        entregues_lite > 0.0,
    );
    rel.nota("End-to-end on SQLite: section 2's shape on the embedded backend. 8 producers (business INSERT + `enfileirar`, committed) on a pool of their own on the sending app's file (`mensageria_core::banco::sqlite::abrir`: WAL, `synchronous = FULL`, 5 s busy timeout, 8 connections); the relay (library defaults) on a second pool on that file posts each claim's deliveries in batch requests over HTTP to a receptor whose dedup record and effect (one INSERT) go to the receiving app's own file; counted until the saída is empty, and every message produced checked applied once. New files for every run. In each repetition section 2's PostgreSQL run (library defaults) and this one, the order alternating, each after its backend's raw single-row INSERT at 8 clients. CPU per message: user + system time of this process (SQLite runs inside it) and of every PostgreSQL process, over the run.");
    rel.nota("Limit, SQLite end to end: one writer per file, and no group commit. Every commit holds the file's write lock through its WAL fsync, so the sending file takes a bounded number of write transactions a second whoever sends them (the raw INSERT baseline: about 6,000/s against PostgreSQL's 14,000, which commits many transactions per fsync). The producers' commits and the relay's claims and acks take turns on that lock, and SQLite's busy handler is not a queue: a waiting claim or ack sleeps and retries while 8 producers, each starting its next transaction as soon as the last one committed, take the lock in between. So while the producers run the relay gets a small share (about two thirds of the 4 s of production were still in the saída when they stopped) and drains it once they stop; the receptor's transactions, on the other file, run beside them. The cores are not the limit: the whole SQLite path costs less CPU per message than the PostgreSQL one (this process alone, against this process plus PostgreSQL) and uses less than one of the two cores. Against its own raw INSERT, SQLite keeps a larger share than PostgreSQL, since that baseline is bounded by the same lock.");
}
