//! `purgar`: removes only the dedup records older than the retention, in batches, and refuses a
//! retention a late redelivery could outlive.

use mensageria_testes::{contar, nos_dois_bancos};

use crate::comum::{Alvo, stderr, stdout};

/// Plants a dedup record of `chave` received `ms` ago.
async fn plantar_recebida(db: &impl Alvo, chave: &str, ms: i64) {
    let sql = format!(
        "INSERT INTO mensageria_recebidas (tipo, chave, recebida_em) VALUES ('r.tipo', $1, {})",
        db.ha(ms)
    );
    db.executar(sql, &[chave], "plant a dedup record").await;
}

const DIA_MS: i64 = 86_400_000;

nos_dois_bancos! {
    async fn purgar_remove_so_o_que_e_velho(db) {
        mensageria_core::migrar(&db.pool).await.unwrap();
        for chave in ["v1", "v2", "v3"] {
            plantar_recebida(&db, chave, 40 * DIA_MS).await;
        }
        plantar_recebida(&db, "n1", DIA_MS).await;
        plantar_recebida(&db, "n2", 29 * DIA_MS).await;

        // Too short a retention: refused, nothing deleted.
        let recusado = db.mensageria(&["purgar", "--retencao", "1d"]).assert().failure();
        let erro = stderr(&recusado);
        assert!(erro.starts_with("mensageria: refusing to purge"), "{erro}");
        assert_eq!(erro.lines().count(), 1, "{erro}");
        assert_eq!(contar(&db.pool, "mensageria_recebidas").await, 5);

        let purga = db.json_de(&["purgar", "--retencao", "30d", "--lote", "2"]);
        assert_eq!(purga["deleted"], 3, "{purga}");
        assert_eq!(purga["batches"], 2, "{purga}");
        let restantes: Vec<String> =
            sqlx::query_scalar("SELECT chave FROM mensageria_recebidas ORDER BY chave")
                .fetch_all(&db.pool)
                .await
                .unwrap();
        assert_eq!(restantes, ["n1", "n2"]);

        let nada = db.mensageria(&["purgar", "--retencao", "30d"]).assert().success();
        assert_eq!(stdout(&nada).trim(), "no dedup record older than 30d 00h: nothing purged");

        // A shorter retention is accepted when the senders' horizon is declared shorter.
        let curta = db
            .mensageria(&["purgar", "--retencao", "2d", "--horizonte", "1d"])
            .assert()
            .success();
        assert!(
            stdout(&curta).starts_with("purged 1 dedup record(s) older than 2d 00h"),
            "{}",
            stdout(&curta)
        );
        assert_eq!(contar(&db.pool, "mensageria_recebidas").await, 1);
    }
}
