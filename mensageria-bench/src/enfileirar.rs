//! 1. Enqueue overhead: a business transaction alone vs the same transaction plus
//!    `enfileirar`, at 1, 4 and 16 clients (SQLite: 1 and 4; one writer at a time anyway).
//!
//! On PostgreSQL the same repetitions also run the business transaction plus one statement
//! that is not an enqueue: a `SELECT 1` (one more round trip, nothing written) and an INSERT of
//! one integer into a table without an index (the round trip and the smallest row write). Those
//! are the floor any enqueue in the caller's transaction pays; the difference from them is
//! `enfileirar`'s own work (its row, its indexes, the JSON check).

use sqlx::PgPool;

use crate::Parametros;
use crate::ambiente::{Pg, sqlite};
use crate::carga::{Passo, abrir_negocio, evento, negocio_sqlite, vazao};
use crate::relatorio::{Relatorio, fmt};

/// What the business transaction carries besides its own INSERT.
#[derive(Clone, Copy)]
enum Extra {
    Nada,
    IdaEVolta,
    LinhaMinima,
    Enfileirar,
}

impl Extra {
    const TODOS: [Extra; 4] = [
        Extra::Nada,
        Extra::IdaEVolta,
        Extra::LinhaMinima,
        Extra::Enfileirar,
    ];

    fn nome(self) -> &'static str {
        match self {
            Extra::Nada => "business tx alone",
            Extra::IdaEVolta => "business tx + SELECT 1 (one more round trip)",
            Extra::LinhaMinima => "business tx + INSERT of one integer, no index",
            Extra::Enfileirar => "business tx + enfileirar",
        }
    }
}

/// BEGIN, the business INSERT, `extra`, COMMIT.
fn negocio(pool: PgPool, extra: Extra) -> Passo<()> {
    Box::pin(async move {
        let mut tx = abrir_negocio(&pool).await;
        match extra {
            Extra::Nada => {}
            Extra::IdaEVolta => {
                sqlx::query("SELECT 1")
                    .execute(&mut *tx)
                    .await
                    .expect("one more round trip");
            }
            Extra::LinhaMinima => {
                sqlx::query("INSERT INTO linha_minima (n) VALUES ($1)")
                    .bind(1_i64)
                    .execute(&mut *tx)
                    .await
                    .expect("the smallest row");
            }
            Extra::Enfileirar => {
                mensageria_core::enfileirar(&mut *tx, &evento())
                    .await
                    .expect("enqueue");
            }
        }
        tx.commit().await.expect("commit");
    })
}

pub(crate) async fn medir(rel: &mut Relatorio, p: &Parametros) {
    println!("1. enqueue overhead");
    let pg = Pg::novo().await;
    for clientes in [1usize, 4, 16] {
        let pool = pg.pool(clientes as u32).await;
        sqlx::query("CREATE TABLE IF NOT EXISTS linha_minima (n BIGINT NOT NULL)")
            .execute(&pool)
            .await
            .expect("the smallest row's table");
        let mut taxas: Vec<Vec<f64>> = Extra::TODOS.iter().map(|_| Vec::new()).collect();
        for repeticao in 0..p.repeticoes {
            // The variants in turn, each repetition starting with the next one: a change of the
            // machine's load does not always hit the same variant first.
            for k in 0..Extra::TODOS.len() {
                let i = (repeticao + k) % Extra::TODOS.len();
                let (extra, a) = (Extra::TODOS[i], pool.clone());
                taxas[i].push(vazao(clientes, p.duracao, move || negocio(a.clone(), extra)).await);
            }
            sqlx::query("TRUNCATE mensageria_saida, negocio, linha_minima")
                .execute(&pool)
                .await
                .expect("truncate");
        }
        let nome = format!("PostgreSQL, {clientes} clients");
        let medianas: Vec<f64> = Extra::TODOS
            .into_iter()
            .zip(taxas)
            .map(|(extra, taxas)| {
                rel.medir(
                    "enqueue",
                    format!("{nome}: {}", extra.nome()),
                    taxas,
                    "tx/s",
                )
            })
            .collect();
        let [sem, ida_e_volta, linha, com] = medianas[..] else {
            unreachable!("one median per variant")
        };
        let piso = format!(
            "; one more round trip alone +{:.0}%, with the smallest row +{:.0}%",
            (sem / ida_e_volta - 1.0) * 100.0,
            (sem / linha - 1.0) * 100.0
        );
        meta(rel, &nome, sem, com, &piso);
        pool.close().await;
    }
    pg.descartar().await;

    let dir = tempfile::tempdir().expect("temporary directory");
    for clientes in [1usize, 4] {
        let pool = sqlite(&dir, &format!("enfileirar-{clientes}.db")).await;
        let (mut sem, mut com) = (Vec::new(), Vec::new());
        for _ in 0..p.repeticoes {
            let a = pool.clone();
            sem.push(
                vazao(clientes, p.duracao, move || {
                    negocio_sqlite(a.clone(), false)
                })
                .await,
            );
            let a = pool.clone();
            com.push(vazao(clientes, p.duracao, move || negocio_sqlite(a.clone(), true)).await);
        }
        let nome = format!("SQLite, {clientes} clients");
        let s = rel.medir("enqueue", format!("{nome}: business tx alone"), sem, "tx/s");
        let c = rel.medir(
            "enqueue",
            format!("{nome}: business tx + enfileirar"),
            com,
            "tx/s",
        );
        meta(rel, &nome, s, c, "");
        pool.close().await;
    }
}

/// Checks the overhead target against one client count's medians (`sem`: the business
/// transaction alone, `com`: with `enfileirar`); `piso` adds what the floor variants measured.
fn meta(rel: &mut Relatorio, nome: &str, sem: f64, com: f64, piso: &str) {
    let acrescimo = sem / com - 1.0;
    rel.meta(
        format!("enqueue adds ≤ 25% to a business transaction ({nome})"),
        format!(
            "+{:.0}% ({} vs {} tx/s){piso}",
            acrescimo * 100.0,
            fmt(com),
            fmt(sem)
        ),
        acrescimo <= 0.25,
    );
}
