//! 1. Enqueue overhead: a business transaction alone vs the same transaction plus
//!    `enfileirar`, at 1, 4 and 16 clients (SQLite: 1 and 4; one writer at a time anyway).

use crate::Parametros;
use crate::ambiente::{Pg, sqlite};
use crate::carga::{negocio_pg, negocio_sqlite, vazao};
use crate::relatorio::{Relatorio, fmt};

pub(crate) async fn medir(rel: &mut Relatorio, p: &Parametros) {
    println!("1. enqueue overhead");
    let pg = Pg::novo().await;
    for clientes in [1usize, 4, 16] {
        let pool = pg.pool(clientes as u32).await;
        let (mut sem, mut com) = (Vec::new(), Vec::new());
        for _ in 0..p.repeticoes {
            let a = pool.clone();
            sem.push(vazao(clientes, p.duracao, move || negocio_pg(a.clone(), false)).await);
            let a = pool.clone();
            com.push(vazao(clientes, p.duracao, move || negocio_pg(a.clone(), true)).await);
            sqlx::query("TRUNCATE mensageria_saida, negocio")
                .execute(&pool)
                .await
                .expect("truncate");
        }
        let nome = format!("PostgreSQL, {clientes} clients");
        relatar(rel, &nome, sem, com);
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
        relatar(rel, &nome, sem, com);
        pool.close().await;
    }
}

/// Records one client count's pair of medians and checks the overhead target against them.
fn relatar(rel: &mut Relatorio, nome: &str, sem: Vec<f64>, com: Vec<f64>) {
    let s = rel.medir("enqueue", format!("{nome}: business tx alone"), sem, "tx/s");
    let c = rel.medir(
        "enqueue",
        format!("{nome}: business tx + enfileirar"),
        com,
        "tx/s",
    );
    let acrescimo = s / c - 1.0;
    rel.meta(
        format!("enqueue adds ≤ 25% to a business transaction ({nome})"),
        format!("+{:.0}% ({} vs {} tx/s)", acrescimo * 100.0, fmt(c), fmt(s)),
        acrescimo <= 0.25,
    );
}
