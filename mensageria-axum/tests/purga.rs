//! `purgar`: deletes this receiving app's dedup records older than the retention, in batches of
//! 1000, and keeps the younger ones and every other app's (one implementation, `mensageria_core::operacoes::purgar_recebidas`, shared
//! with the CLI's `mensageria purgar`).

use std::time::Duration;

use mensageria_axum::Config;
use mensageria_core::sqlx;

/// Plants `quantas` dedup records of app `app` and tipo `tipo`, received `dias` days ago.
async fn plantar(pool: &sqlx::SqlitePool, app: &str, tipo: &str, quantas: i64, dias: i64) {
    sqlx::query(
        "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < $2) \
         INSERT INTO mensageria_recebidas (app, tipo, chave, recebida_em) \
         SELECT $4, $1, '[' || i || ']', CAST(unixepoch('subsec') * 1000 AS INTEGER) - $3 FROM n",
    )
    .bind(tipo)
    .bind(quantas)
    .bind(dias * 86_400_000)
    .bind(app)
    .execute(pool)
    .await
    .expect("plant dedup records");
}

#[tokio::test]
async fn purgar_apaga_em_lotes_so_o_que_passou_da_retencao() {
    let dir = tempfile::tempdir().unwrap();
    let pool = mensageria_core::banco::sqlite::abrir(dir.path().join("purga.db"))
        .await
        .unwrap();
    mensageria_core::migrar(&pool).await.unwrap();
    // More than two batches of old records, and a few young ones; another receiving app's old
    // records on the same schema, which this app's purge leaves to it.
    plantar(&pool, "receptor", "purga.velha", 2_500, 40).await;
    plantar(&pool, "receptor", "purga.nova", 3, 1).await;
    plantar(&pool, "outro", "purga.alheia", 7, 40).await;

    let config = Config::new("receptor", ["token-0123456789abcdef"])
        .com_retencao(Duration::from_secs(30 * 86_400));
    assert_eq!(
        mensageria_axum::purgar(&pool, &config).await.unwrap(),
        2_500
    );
    let restantes: Vec<(String, i64)> = sqlx::query_as(
        "SELECT tipo, count(*) FROM mensageria_recebidas GROUP BY tipo ORDER BY tipo",
    )
    .fetch_all(&pool)
    .await
    .unwrap();
    assert_eq!(
        restantes,
        vec![("purga.alheia".to_owned(), 7), ("purga.nova".to_owned(), 3)]
    );
    // Nothing left to purge: one short batch.
    assert_eq!(mensageria_axum::purgar(&pool, &config).await.unwrap(), 0);
}
