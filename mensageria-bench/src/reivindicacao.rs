//! 5. Claim scaling: claim latency with no history vs with deleted (delivered) rows that vacuum
//!    has not cleared ahead of the queue, with and without the relay's keyset floor (the
//!    burn-down of a large backlog is `queima.rs`).

use std::time::Instant;

use mensageria_core::teste::reivindicacao::{self, Pedido};
use sqlx::PgPool;

use crate::Parametros;
use crate::ambiente::Pg;
use crate::relatorio::{Relatorio, fmt};

const LOTE: i64 = 64;
const CLAIMS: usize = 100;

/// Inserts `quantas` due rows of `bench.nada`, due `atras` ago (spread by a microsecond each).
pub(crate) async fn semear(pool: &PgPool, quantas: i64, atras: &str) {
    sqlx::query(sqlx::AssertSqlSafe(format!(
        "INSERT INTO mensageria_saida (id_mensagem, tipo, payload, proxima_tentativa_em) \
         SELECT gen_random_uuid(), 'bench.nada', '{{\"n\":1}}'::json, \
                now() - interval '{atras}' + g * interval '1 microsecond' \
         FROM generate_series(1, $1) AS g"
    )))
    .bind(quantas)
    .execute(pool)
    .await
    .expect("seed the saída");
}

/// One claim of `LOTE` rows from `piso_ms`; returns its duration and the head it saw. The
/// claimed rows are then deleted (as delivered), outside the timing.
async fn reivindicar(pool: &PgPool, piso_ms: i64) -> (f64, i64) {
    let tipos = ["bench.nada"];
    let pisos = [piso_ms];
    let inicio = Instant::now();
    let linhas = reivindicacao::reivindicar(
        pool,
        Pedido {
            tipos: &tipos,
            pisos_ms: &pisos,
            lote: LOTE,
            lease_ms: 60_000,
            dono: "bench",
            token: 7,
            bloquear_apos_morta: true,
        },
    )
    .await
    .expect("claim");
    let ms = inicio.elapsed().as_secs_f64() * 1000.0;
    assert_eq!(linhas.len() as i64, LOTE, "the bench seeds enough rows");
    let cabeca = linhas.iter().map(|l| l.devida_em_ms).min().unwrap_or(0);
    let ids: Vec<i64> = linhas.iter().map(|l| l.id).collect();
    sqlx::query("DELETE FROM mensageria_saida WHERE id = ANY($1)")
        .bind(&ids)
        .execute(pool)
        .await
        .expect("delete as delivered");
    (ms, cabeca)
}

/// Median claim time over `CLAIMS` claims, without (`piso = false`) or with the keyset floor
/// the relay uses (10 s below the head it last saw).
async fn medir_claims(pool: &PgPool, piso: bool) -> f64 {
    let mut tempos = Vec::with_capacity(CLAIMS);
    let mut cabeca = 0;
    for _ in 0..CLAIMS {
        let piso_ms = if piso && cabeca > 0 {
            cabeca - 10_000
        } else {
            0
        };
        let (ms, vista) = reivindicar(pool, piso_ms).await;
        tempos.push(ms);
        cabeca = vista;
    }
    crate::estatistica::mediana(&tempos)
}

pub(crate) async fn medir(rel: &mut Relatorio, p: &Parametros) {
    println!("5. claim scaling");
    let mut medianas = Vec::new();
    for historico in [0, p.historico] {
        let pg = Pg::novo().await;
        let pool = pg.pool(2).await;
        sqlx::query("ALTER TABLE mensageria_saida SET (autovacuum_enabled = false)")
            .execute(&pool)
            .await
            .expect("no autovacuum");
        if historico > 0 {
            // Delivered long ago, deleted, not vacuumed: dead entries at the head of the index.
            semear(&pool, historico, "2 hours").await;
            sqlx::query("DELETE FROM mensageria_saida")
                .execute(&pool)
                .await
                .expect("delete");
        }
        semear(
            &pool,
            (CLAIMS as i64 * LOTE + LOTE) * 2 * p.repeticoes as i64,
            "1 minute",
        )
        .await;
        sqlx::query("ANALYZE mensageria_saida")
            .execute(&pool)
            .await
            .expect("analyze");
        let (mut sem_piso, mut com_piso) = (Vec::new(), Vec::new());
        for _ in 0..p.repeticoes {
            sem_piso.push(medir_claims(&pool, false).await);
            com_piso.push(medir_claims(&pool, true).await);
        }
        let nome = if historico == 0 {
            "no history".to_owned()
        } else {
            format!("{historico} deleted, unvacuumed rows ahead")
        };
        rel.medir(
            "claim",
            format!("claim of {LOTE}, {nome}, no floor"),
            sem_piso,
            "ms",
        );
        medianas.push(rel.medir(
            "claim",
            format!("claim of {LOTE}, {nome}, keyset floor (the relay's)"),
            com_piso,
            "ms",
        ));
        pool.close().await;
        pg.descartar().await;
    }
    rel.meta(
        format!(
            "claim latency with {} history rows ≤ 1.5 × with none",
            p.historico
        ),
        format!(
            "{:.2}× ({} vs {} ms)",
            medianas[1] / medianas[0],
            fmt(medianas[1]),
            fmt(medianas[0])
        ),
        medianas[1] <= 1.5 * medianas[0],
    );
}

/// How the ordered backlog is laid out in due order.
#[derive(Clone, Copy)]
enum Disposicao {
    /// No ordering key (today's rows).
    SemOrdem,
    /// Ordered; step-major: every key's step 0, then every key's step 1, … (producers that
    /// interleave keys): the heads sit at the front of the queue.
    PassoAPasso,
    /// Ordered; key-major: key 0's 20 steps, then key 1's, … (one producer per entity in
    /// bursts): to find 64 heads the claim passes over 19 waiting rows per head.
    ChaveAChave,
}

const PASSOS: i64 = 20;

/// Seeds `quantas` due rows of `bench.nada` laid out as `disposicao` says (ordered rows in keys
/// of `PASSOS` steps, their sequence in enqueue order).
async fn semear_ordenadas(pool: &PgPool, quantas: i64, disposicao: Disposicao) {
    let chaves = quantas / PASSOS;
    // g runs over the due order; (chave, passo) from it.
    let (chave, passo) = match disposicao {
        Disposicao::SemOrdem => ("NULL", "NULL"),
        Disposicao::PassoAPasso => ("((g - 1) % $2)::text", "((g - 1) / $2)"),
        Disposicao::ChaveAChave => ("((g - 1) / $3)::text", "((g - 1) % $3)"),
    };
    sqlx::query(sqlx::AssertSqlSafe(format!(
        "INSERT INTO mensageria_saida \
             (id_mensagem, tipo, payload, proxima_tentativa_em, chave_ordem, seq_ordem) \
         SELECT gen_random_uuid(), 'bench.nada', '{{\"n\":1}}'::json, \
                now() - interval '1 minute' + g * interval '1 microsecond', {chave}, {passo} \
         FROM generate_series(1, $1) AS g WHERE $2 > 0 AND $3 > 0"
    )))
    .bind(quantas)
    .bind(chaves)
    .bind(PASSOS)
    .execute(pool)
    .await
    .expect("seed the saída");
}

/// Ordered vs unordered claims on the same backlog size: median claim latency (claims of
/// `LOTE`, each delivered, i.e. deleted, before the next, so a key's next step becomes its
/// head) and the rows per second one claimer gets from it.
pub(crate) async fn medir_ordem(rel: &mut Relatorio, p: &Parametros) {
    println!("6. ordered claim");
    let quantas = (CLAIMS as i64 * LOTE + LOTE) * 2 * p.repeticoes as i64;
    let mut medianas = Vec::new();
    for (disposicao, nome) in [
        (Disposicao::SemOrdem, "unordered"),
        (
            Disposicao::PassoAPasso,
            "ordered, 20 steps per key, step-major",
        ),
        (
            Disposicao::ChaveAChave,
            "ordered, 20 steps per key, key-major",
        ),
    ] {
        let pg = Pg::novo().await;
        let pool = pg.pool(2).await;
        sqlx::query("ALTER TABLE mensageria_saida SET (autovacuum_enabled = false)")
            .execute(&pool)
            .await
            .expect("no autovacuum");
        semear_ordenadas(&pool, quantas, disposicao).await;
        sqlx::query("ANALYZE mensageria_saida")
            .execute(&pool)
            .await
            .expect("analyze");
        let mut tempos = Vec::new();
        for _ in 0..p.repeticoes {
            tempos.push(medir_claims(&pool, false).await);
        }
        let mediana = rel.medir(
            "ordered claim",
            format!("claim of {LOTE} from a {quantas}-row backlog, {nome}"),
            tempos,
            "ms",
        );
        rel.medir(
            "ordered claim",
            format!("rows/s one claimer gets, {nome}"),
            vec![LOTE as f64 / mediana * 1000.0],
            "rows/s",
        );
        medianas.push(mediana);
        pool.close().await;
        pg.descartar().await;
    }
    rel.meta(
        "ordered claim (step-major) ≤ 2 × unordered",
        format!(
            "{:.2}× ({} vs {} ms); key-major {:.2}×",
            medianas[1] / medianas[0],
            fmt(medianas[1]),
            fmt(medianas[0]),
            medianas[2] / medianas[0]
        ),
        medianas[1] <= 2.0 * medianas[0],
    );
}
