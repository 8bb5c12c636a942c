//! 8. A pinned xmin horizon (issue 29, item 3): section 2's end-to-end run with library defaults
//!    (8 producers, the relay posting batches over HTTP to a receptor on the same PostgreSQL),
//!    as it is and with a transaction held open on another connection to the same database for
//!    the whole run — what an analytics query or a stuck session does — in the same
//!    repetitions, the order alternating. The transaction is `REPEATABLE READ` with an xid
//!    assigned (`txid_current()`), taken before the relay starts and ended only after the dead
//!    tuples are read, so no row version deleted or updated during the run can be removed:
//!    neither by vacuum nor by page pruning, and no index entry of one can be marked dead.
//!
//! Each run gets a schema of its own, so the dead tuples it reports are its own. Measured: the
//! relay's claim time (its `mensageria_claim_seconds`, every claim of the run, empty ones
//! included), the delivered rate (every message produced, until the saída is empty) and
//! `n_dead_tup` of the saída and the dedup table (`mensageria_recebidas`), read at the end of
//! the run after every connection that wrote has closed (a backend's statistics reach the view
//! when it exits or, idle, up to seconds later).

use std::time::{Duration, Instant};

use mensageria_core::Destino;
use mensageria_core::relay::{Config, Relay};
use sqlx::{Connection as _, Executor as _, PgConnection, PgPool};

use crate::Parametros;
use crate::ambiente::{Pg, database_url};
use crate::carga::{TOKEN, contar, esperar_saida_vazia, negocio_pg, servir, vazao};
use crate::estatistica::percentil;
use crate::gravador;
use crate::ponta_a_ponta::PRODUTORES;
use crate::relatorio::{Relatorio, fmt};

const SECAO: &str = "xmin horizon";

/// A transaction held open on a connection of its own: the horizon stays where it began.
struct Fixacao {
    conexao: PgConnection,
}

impl Fixacao {
    async fn abrir() -> Self {
        let mut conexao = PgConnection::connect(&database_url())
            .await
            .expect("PostgreSQL at DATABASE_URL");
        conexao
            .execute("BEGIN ISOLATION LEVEL REPEATABLE READ")
            .await
            .expect("begin the pinning transaction");
        // An xid and a snapshot, both held until `soltar`.
        let _: i64 = sqlx::query_scalar("SELECT txid_current()")
            .fetch_one(&mut conexao)
            .await
            .expect("take an xid");
        Self { conexao }
    }

    async fn soltar(mut self) {
        self.conexao
            .execute("ROLLBACK")
            .await
            .expect("end the pinning transaction");
        let _ = self.conexao.close().await;
    }
}

/// What one run saw.
struct Rodada {
    produzidas: f64,
    entregues: f64,
    backlog: f64,
    /// The relay's claims of the run: median and p99, in ms, and how many.
    reivindicacao_p50: f64,
    reivindicacao_p99: f64,
    reivindicacoes: f64,
    /// `n_dead_tup` at the end of the run.
    mortas_saida: f64,
    mortas_recebidas: f64,
    /// `n_dead_tup` after a `VACUUM` of both tables at the end of the run, the horizon still
    /// where it was: the dead tuples vacuum cannot remove.
    restantes_saida: f64,
    restantes_recebidas: f64,
    /// The saída's size, heap and indexes, at the end of the run (before that VACUUM), in KiB.
    tamanho_saida_kib: f64,
    /// Age, in xids, of the oldest snapshot on the database at the end of the run (the pinning
    /// transaction's, when there is one; anyone's, else).
    idade_horizonte: f64,
}

/// One end-to-end run, in a schema of its own, with the horizon pinned or not.
async fn rodada(duracao: Duration, fixar: bool) -> Rodada {
    let pg = Pg::novo().await;
    let pool_receptor = pg.pool(16).await;
    let app = mensageria_axum::router(
        pool_receptor.clone(),
        mensageria_axum::Config::new("bench", [TOKEN]),
    )
    .expect("receptor router");
    let url = servir(app).await;
    let produtores = pg.pool(PRODUTORES as u32).await;
    let pool_relay = pg.pool(8).await;
    let leitura = pg.pool(2).await;
    let fixacao = if fixar {
        Some(Fixacao::abrir().await)
    } else {
        None
    };
    let _ = gravador::colher();
    let inicio = Instant::now();
    let relay = Relay::new(pool_relay.clone(), Config::new("bench"))
        .recurso(Destino::new(&url).expect("URL").com_token(TOKEN))
        .spawn()
        .expect("relay");
    let pool = produtores.clone();
    let produzidas = vazao(PRODUTORES, duracao, move || negocio_pg(pool.clone())).await;
    let backlog = contar(&leitura, "SELECT count(*) FROM mensageria_saida").await;
    let vazia = esperar_saida_vazia(&leitura, Duration::from_secs(300)).await;
    assert!(vazia, "the saída did not drain within 300 s");
    let segundos = inicio.elapsed().as_secs_f64();
    let entregues = contar(&leitura, "SELECT count(*) FROM efeito").await;
    relay.shutdown(Duration::from_secs(10)).await;
    let tempos = gravador::colher();
    let idade_horizonte: i32 = sqlx::query_scalar(
        "SELECT coalesce(max(age(backend_xmin)), 0) FROM pg_stat_activity \
         WHERE datname = current_database()",
    )
    .fetch_one(&leitura)
    .await
    .expect("the horizon's age");
    // The writers' statistics reach pg_stat_user_tables when their backends exit.
    for pool in [produtores, pool_relay, pool_receptor] {
        pool.close().await;
    }
    let (mortas_saida, mortas_recebidas) = mortas(&leitura, &pg.schema).await;
    let tamanho_saida: i64 =
        sqlx::query_scalar("SELECT pg_total_relation_size('mensageria_saida')")
            .fetch_one(&leitura)
            .await
            .expect("the saída's size");
    sqlx::query("VACUUM mensageria_saida, mensageria_recebidas")
        .execute(&leitura)
        .await
        .expect("vacuum");
    let (restantes_saida, restantes_recebidas) = mortas(&leitura, &pg.schema).await;
    if let Some(fixacao) = fixacao {
        fixacao.soltar().await;
    }
    leitura.close().await;
    pg.descartar().await;
    Rodada {
        produzidas,
        entregues: entregues as f64 / segundos,
        backlog: backlog as f64,
        reivindicacao_p50: percentil(&tempos, 50.0),
        reivindicacao_p99: percentil(&tempos, 99.0),
        reivindicacoes: tempos.len() as f64,
        mortas_saida,
        mortas_recebidas,
        restantes_saida,
        restantes_recebidas,
        tamanho_saida_kib: tamanho_saida as f64 / 1024.0,
        idade_horizonte: f64::from(idade_horizonte),
    }
}

/// `n_dead_tup` of the saída and of the dedup table of `schema`, once it has stopped moving
/// (the closed backends' last statistics arrive as they exit).
async fn mortas(leitura: &PgPool, schema: &str) -> (f64, f64) {
    let ler = || async {
        sqlx::query_as::<_, (i64, i64)>(
            "SELECT \
                 coalesce(sum(n_dead_tup) FILTER (WHERE relname = 'mensageria_saida'), 0)::int8, \
                 coalesce(sum(n_dead_tup) FILTER (WHERE relname = 'mensageria_recebidas'), 0)::int8 \
             FROM pg_stat_user_tables WHERE schemaname = $1",
        )
        .bind(schema)
        .fetch_one(leitura)
        .await
        .expect("read n_dead_tup")
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    let mut anterior = ler().await;
    for _ in 0..20 {
        tokio::time::sleep(Duration::from_millis(200)).await;
        let agora = ler().await;
        if agora == anterior {
            break;
        }
        anterior = agora;
    }
    (anterior.0 as f64, anterior.1 as f64)
}

/// The series of one variant (unpinned, pinned), one value per repetition.
#[derive(Default)]
struct Serie {
    produzidas: Vec<f64>,
    entregues: Vec<f64>,
    backlog: Vec<f64>,
    reivindicacao_p50: Vec<f64>,
    reivindicacao_p99: Vec<f64>,
    reivindicacoes: Vec<f64>,
    mortas_saida: Vec<f64>,
    mortas_recebidas: Vec<f64>,
    restantes_saida: Vec<f64>,
    restantes_recebidas: Vec<f64>,
    tamanho_saida_kib: Vec<f64>,
    idade_horizonte: Vec<f64>,
}

impl Serie {
    fn somar(&mut self, r: Rodada) {
        self.produzidas.push(r.produzidas);
        self.entregues.push(r.entregues);
        self.backlog.push(r.backlog);
        self.reivindicacao_p50.push(r.reivindicacao_p50);
        self.reivindicacao_p99.push(r.reivindicacao_p99);
        self.reivindicacoes.push(r.reivindicacoes);
        self.mortas_saida.push(r.mortas_saida);
        self.mortas_recebidas.push(r.mortas_recebidas);
        self.restantes_saida.push(r.restantes_saida);
        self.restantes_recebidas.push(r.restantes_recebidas);
        self.tamanho_saida_kib.push(r.tamanho_saida_kib);
        self.idade_horizonte.push(r.idade_horizonte);
    }
}

/// Medians of one variant, for the target and the ratios.
struct Medianas {
    entregues: f64,
    reivindicacao_p50: f64,
    mortas_saida: f64,
    mortas_recebidas: f64,
    restantes_saida: f64,
}

fn relatar(rel: &mut Relatorio, nome: &str, s: Serie) -> Medianas {
    rel.medir(
        SECAO,
        format!("{nome}: producers, business tx + enfileirar, {PRODUTORES} clients"),
        s.produzidas,
        "tx/s",
    );
    let entregues = rel.medir(
        SECAO,
        format!("{nome}: delivered, effect committed at the receptor, until drained"),
        s.entregues,
        "msg/s",
    );
    rel.medir(
        SECAO,
        format!("{nome}: backlog when the producers stopped"),
        s.backlog,
        "rows",
    );
    let reivindicacao_p50 = rel.medir(
        SECAO,
        format!("{nome}: relay claim p50 (mensageria_claim_seconds)"),
        s.reivindicacao_p50,
        "ms",
    );
    rel.medir(
        SECAO,
        format!("{nome}: relay claim p99"),
        s.reivindicacao_p99,
        "ms",
    );
    rel.medir(
        SECAO,
        format!("{nome}: relay claims in the run"),
        s.reivindicacoes,
        "claims",
    );
    let mortas_saida = rel.medir(
        SECAO,
        format!("{nome}: dead tuples in mensageria_saida at the end (n_dead_tup)"),
        s.mortas_saida,
        "tuples",
    );
    let mortas_recebidas = rel.medir(
        SECAO,
        format!("{nome}: dead tuples in mensageria_recebidas at the end (n_dead_tup)"),
        s.mortas_recebidas,
        "tuples",
    );
    let restantes_saida = rel.medir(
        SECAO,
        format!("{nome}: dead tuples in mensageria_saida a VACUUM at the end cannot remove"),
        s.restantes_saida,
        "tuples",
    );
    rel.medir(
        SECAO,
        format!("{nome}: dead tuples in mensageria_recebidas a VACUUM at the end cannot remove"),
        s.restantes_recebidas,
        "tuples",
    );
    rel.medir(
        SECAO,
        format!("{nome}: mensageria_saida's size at the end, heap and indexes"),
        s.tamanho_saida_kib,
        "KiB",
    );
    rel.medir(
        SECAO,
        format!("{nome}: age of the oldest snapshot on the database at the end"),
        s.idade_horizonte,
        "xids",
    );
    Medianas {
        entregues,
        reivindicacao_p50,
        mortas_saida,
        mortas_recebidas,
        restantes_saida,
    }
}

pub(crate) async fn medir(rel: &mut Relatorio, p: &Parametros) {
    println!("8. end to end under a pinned xmin horizon ({PRODUTORES} producers)");
    gravador::instalar();
    let (mut livre, mut fixado) = (Serie::default(), Serie::default());
    let (mut razao_p50, mut razao_entregues) = (Vec::new(), Vec::new());
    for repeticao in 0..p.repeticoes {
        for passo in 0..2 {
            let fixar = (repeticao + passo) % 2 == 1;
            let r = rodada(p.duracao, fixar).await;
            println!(
                "    {}: {} msg/s, claim p50 {} ms ({} claims), dead tuples saída {} ({} after VACUUM), recebidas {}, horizon age {} xids",
                if fixar { "pinned" } else { "unpinned" },
                fmt(r.entregues),
                fmt(r.reivindicacao_p50),
                r.reivindicacoes,
                r.mortas_saida,
                r.restantes_saida,
                r.mortas_recebidas,
                r.idade_horizonte
            );
            if fixar {
                fixado.somar(r);
            } else {
                livre.somar(r);
            }
        }
        razao_p50.push(fixado.reivindicacao_p50[repeticao] / livre.reivindicacao_p50[repeticao]);
        razao_entregues.push(livre.entregues[repeticao] / fixado.entregues[repeticao]);
    }
    let l = relatar(rel, "unpinned", livre);
    let f = relatar(rel, "pinned for the whole run", fixado);
    rel.medir(
        SECAO,
        "claim p50, pinned / unpinned, per repetition",
        razao_p50,
        "×",
    );
    rel.medir(
        SECAO,
        "delivered rate, unpinned / pinned, per repetition",
        razao_entregues,
        "×",
    );
    let (p50, entregues) = (
        f.reivindicacao_p50 / l.reivindicacao_p50,
        l.entregues / f.entregues,
    );
    rel.meta(
        "pinned xmin for the whole run: claim p50 and delivered rate within 1.5× of the unpinned run",
        format!(
            "claim p50 {:.2}× ({} vs {} ms), delivered {:.2}× slower ({} vs {} msg/s); dead tuples in the saída {} vs {} ({} vs {} after a VACUUM), in the dedup table {} vs {}",
            p50,
            fmt(f.reivindicacao_p50),
            fmt(l.reivindicacao_p50),
            entregues,
            fmt(f.entregues),
            fmt(l.entregues),
            fmt(f.mortas_saida),
            fmt(l.mortas_saida),
            fmt(f.restantes_saida),
            fmt(l.restantes_saida),
            fmt(f.mortas_recebidas),
            fmt(l.mortas_recebidas)
        ),
        p50 <= 1.5 && entregues <= 1.5,
    );
    rel.nota("xmin horizon: section 2's end-to-end run (8 producers; relay and receptor with library defaults on the same PostgreSQL), in a schema of its own per run, as it is and with a transaction held open on another connection to the same database (`BEGIN ISOLATION LEVEL REPEATABLE READ; SELECT txid_current()`) from before the relay starts until the dead tuples have been read, the order alternating in each repetition. Claim time: every claim of the free tipos that the relay recorded in `mensageria_claim_seconds` during the run (a `metrics` recorder of the bench's own), empty claims included. Dead tuples: `n_dead_tup` of `mensageria_saida` and `mensageria_recebidas` once every connection that wrote has closed (so that their statistics have reached the view), then again after a `VACUUM` of both tables with the horizon still held: what vacuum cannot remove. In runs this short autovacuum (1 min naptime) does not visit, so `n_dead_tup` counts every deleted or updated version either way; the VACUUM tells them apart. Horizon age: `max(age(backend_xmin))` over the database's sessions at the end of the run (0 in the unpinned runs: no one else held the horizon).");
    rel.nota("Limit, pinned xmin horizon: no index entry of a row deleted or updated after the horizon can be marked dead or removed, so a claim visits the heap once for every entry between its keyset floor and the head: each row delivered within the floor's margin left two (its own and its lease-time version's, since the claim moves the due time to the lease's end), about 150 ns each here. Before issue 29 every claim started 10 s below the head: after 20 s of a pinned horizon its p50 was 4× the unpinned one (13.0 vs 3.2 ms at 3,400 msg/s; an EXPLAIN of one such claim over 2,000 msg/s of history read 38,055 buffers, 417 unpinned). Now the claims start half a second below the head, and one a second 10 s below it: 1.1–1.4×. Left: the claims still walk half a second of deliveries, so the ratio grows with the rate; the full scan every 30 s walks every entry since the pin began (at the measured cost, an hour's pin at 4,000 msg/s would make it seconds long); the saída's heap and indexes grow with every row delivered while the horizon is held (the dedup table is insert-only: no dead tuples either way). A claim that leaves no entry behind needs the lease outside the indexed row (item 2's schema change); a queue that rotates and truncates tables leaves none at all. The remedy in operation is to keep long transactions off the queue's database (`idle_in_transaction_session_timeout`, analytics on a replica).");
}
