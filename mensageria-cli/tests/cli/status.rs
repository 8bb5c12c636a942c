//! `migrar` and `status`: the figures match the rows planted.

use mensageria_testes::nos_dois_bancos;
use serde_json::json;

use crate::comum::{Alvo, stdout, versao_esperada};
use crate::comum::{plantar_app, plantar_morta, plantar_saida};

nos_dois_bancos! {
    async fn migrar_cria_e_depois_nao_muda_nada(db) {
        // The version this build migrates to (it grows with each migration of mensageria-core).
        let versao = versao_esperada(&db.pool);
        let primeira = db.mensageria(&["migrar"]).assert().success();
        assert_eq!(
            stdout(&primeira).trim(),
            format!("created the mensageria tables (schema version {versao})")
        );
        let segunda = db.mensageria(&["migrar"]).assert().success();
        assert_eq!(
            stdout(&segunda).trim(),
            format!("schema already at version {versao}: nothing changed")
        );
        let verificado = db.json_de(&["verificar"]);
        assert_eq!(verificado, json!({"applied_version": versao, "expected_version": versao}));
    }
}

nos_dois_bancos! {
    async fn status_bate_com_as_linhas_plantadas(db) {
        mensageria_core::migrar(&db.pool).await.unwrap();
        // a.um: 4 rows, one an hour old, one leased (in flight), attempts 0, 1, 3 and 30.
        plantar_saida(&db, "a.um", 0, 3_600_000, false).await;
        plantar_saida(&db, "a.um", 1, 1_000, false).await;
        plantar_saida(&db, "a.um", 3, 1_000, true).await;
        plantar_saida(&db, "a.um", 30, 1_000, false).await;
        plantar_morta(&db, "a.um", "{}").await;
        // b.dois: nothing pending, two dead letters, claimed by an app seen 10 minutes ago.
        plantar_morta(&db, "b.dois", "{}").await;
        plantar_morta(&db, "b.dois", "{}").await;
        plantar_app(&db, "emissor", "a.um", 0).await;
        plantar_app(&db, "fiscal", "b.dois", 600_000).await;

        let status = db.json_de(&["status"]);
        let tipos = status["tipos"].as_array().unwrap();
        assert_eq!(tipos.len(), 2, "{status:#}");

        let a = &tipos[0];
        assert_eq!(a["tipo"], "a.um");
        assert_eq!(a["pending"], 3);
        assert_eq!(a["in_flight"], 1);
        let idade = a["oldest_age_ms"].as_i64().unwrap();
        assert!((3_600_000..3_700_000).contains(&idade), "oldest age {idade}");
        assert_eq!(
            a["attempts"],
            json!([
                {"range": "0", "messages": 1},
                {"range": "1", "messages": 1},
                {"range": "2-4", "messages": 1},
                {"range": "25+", "messages": 1},
            ])
        );
        assert_eq!(a["dead"], 1);
        assert_eq!(a["claimed_by"][0]["app"], "emissor");
        assert!(a["claimed_by"][0]["last_seen_ago_ms"].as_i64().unwrap() < 60_000);

        let b = &tipos[1];
        assert_eq!(b["tipo"], "b.dois");
        assert_eq!(b["pending"], 0);
        assert_eq!(b["in_flight"], 0);
        assert_eq!(b["oldest_age_ms"], serde_json::Value::Null);
        assert_eq!(b["attempts"], json!([]));
        assert_eq!(b["dead"], 2);
        assert_eq!(b["claimed_by"][0]["app"], "fiscal");
        let visto = b["claimed_by"][0]["last_seen_ago_ms"].as_i64().unwrap();
        assert!((600_000..700_000).contains(&visto), "last seen {visto}");

        // The same figures, as a table.
        let tabela = stdout(&db.mensageria(&["status"]).assert().success());
        let linha_a = tabela.lines().find(|l| l.starts_with("a.um")).unwrap();
        let celulas: Vec<&str> = linha_a.split_whitespace().collect();
        assert_eq!(&celulas[..3], ["a.um", "3", "1"], "{tabela}");
        assert!(linha_a.contains("1h 00m") && linha_a.contains("0:1 1:1 2-4:1 25+:1"), "{tabela}");
        assert!(linha_a.contains("emissor"), "{tabela}");
        assert!(tabela.lines().next().unwrap().starts_with("TIPO"), "{tabela}");
    }
}

nos_dois_bancos! {
    async fn status_conta_as_linhas_presas_atras_de_uma_morta(db) {
        mensageria_core::migrar(&db.pool).await.unwrap();
        // Key `k`: its first message died (seq 1); seq 2 and 3 wait behind it. Key `j` has no
        // dead letter, and an unordered row is never blocked.
        let morta = plantar_morta(&db, "o.rdem", "{}").await;
        ordenar(&db, "mensageria_mortas", morta, "k", 1).await;
        for (chave, seq) in [("k", 2), ("k", 3), ("j", 5)] {
            let id = plantar_saida(&db, "o.rdem", 0, 1_000, false).await;
            ordenar(&db, "mensageria_saida", id, chave, seq).await;
        }
        plantar_saida(&db, "o.rdem", 0, 1_000, false).await;

        let status = db.json_de(&["status"]);
        let linha = &status["tipos"][0];
        assert_eq!((linha["tipo"].as_str(), linha["pending"].as_i64(), linha["blocked"].as_i64()), (Some("o.rdem"), Some(4), Some(2)), "{status:#}");
        let tabela = stdout(&db.mensageria(&["status"]).assert().success());
        let celulas: Vec<&str> = tabela.lines().find(|l| l.starts_with("o.rdem")).unwrap().split_whitespace().collect();
        assert_eq!(&celulas[..4], ["o.rdem", "4", "0", "2"], "{tabela}");
    }
}

/// Gives the row `id` of `tabela` an ordering key and its place in the key's order.
async fn ordenar(db: &impl Alvo, tabela: &str, id: uuid::Uuid, chave: &str, seq: i64) {
    let sql = format!(
        "UPDATE {tabela} SET chave_ordem = $2, seq_ordem = {seq} WHERE id_mensagem = {}",
        db.uuid("$1")
    );
    db.executar(sql, &[&id.to_string(), chave], "give a row an ordering key")
        .await;
}

/// `status --help` explains every column, the attempts' `range:rows` notation included.
#[test]
fn a_ajuda_explica_as_colunas() {
    let ajuda = assert_cmd::Command::new(env!("CARGO_BIN_EXE_mensageria"))
        .args(["status", "--help"])
        .assert()
        .success();
    let texto = stdout(&ajuda);
    for coluna in [
        "PENDING",
        "IN FLIGHT",
        "BLOCKED",
        "HELD",
        "OLDEST",
        "ATTEMPTS",
        "DEAD",
        "CLAIMED BY",
        "LAST SEEN",
    ] {
        assert!(texto.contains(coluna), "{coluna} not explained: {texto}");
    }
    assert!(
        texto.contains("`2-4:1` is one message that has been tried"),
        "{texto}"
    );
}
