//! Ordering keys seen by an operator: `ordem mostrar <key>` prints a key's queue, `status`
//! counts rows held behind another tipo's head (HELD) besides those behind a dead letter
//! (BLOCKED), and `doctor` names what holds them.
//!
//! The trial's case: another app's stuck row with the same key text held our key's steps for
//! ever, and `status` showed them PENDING with BLOCKED 0.

use mensageria_testes::nos_dois_bancos;
use serde_json::Value;

use crate::comum::{Alvo, plantar_app, stdout};

/// Plants a row of ordering key `chave` at sequence `seq` in the saída (or, `morta`, in the dead
/// letters) of `tipo`, with `tentativas` attempts; returns its message id.
async fn plantar_ordenada(
    db: &impl Alvo,
    tipo: &str,
    chave: &str,
    seq: i64,
    tentativas: i32,
    morta: bool,
) -> uuid::Uuid {
    let id = uuid::Uuid::now_v7();
    let sql = if morta {
        format!(
            "INSERT INTO mensageria_mortas (id_mensagem, tipo, payload, criada_em, tentativas, \
                 ultimo_erro, app, chave_ordem, seq_ordem) \
             VALUES ({}, $2, {}, {}, {tentativas}, 'HTTP 422: refused', 'outro', $3, {seq})",
            db.uuid("$1"),
            db.json("'{}'"),
            db.ha(60_000),
        )
    } else {
        format!(
            "INSERT INTO mensageria_saida (id_mensagem, tipo, payload, tentativas, criada_em, \
                 ultimo_erro, chave_ordem, seq_ordem) \
             VALUES ({}, $2, {}, {tentativas}, {}, {}, $3, {seq})",
            db.uuid("$1"),
            db.json("'{}'"),
            db.ha(30_000),
            if tentativas > 0 { "'HTTP 503'" } else { "NULL" },
        )
    };
    db.executar(sql, &[&id.to_string(), tipo, chave], "plant an ordered row")
        .await;
    id
}

/// The key of the trial: `outro.app`'s stuck head (nobody delivers its tipo here) holds two
/// steps of ours; another key waits behind a dead letter of `outro.app`; a third key is ours
/// alone and healthy.
async fn plantar_cenario(db: &impl Alvo) -> (uuid::Uuid, uuid::Uuid, uuid::Uuid) {
    plantar_app(db, "nosso", "nosso.passo", 0).await;
    let cabeca = plantar_ordenada(db, "outro.app", "pedido:42", 1, 5, false).await;
    let segundo = plantar_ordenada(db, "nosso.passo", "pedido:42", 2, 0, false).await;
    let terceiro = plantar_ordenada(db, "nosso.passo", "pedido:42", 3, 0, false).await;
    plantar_ordenada(db, "outro.app", "pedido:7", 4, 25, true).await;
    plantar_ordenada(db, "nosso.passo", "pedido:7", 5, 0, false).await;
    plantar_ordenada(db, "nosso.passo", "pedido:9", 6, 0, false).await;
    (cabeca, segundo, terceiro)
}

nos_dois_bancos! {
    async fn status_e_doctor_contam_o_que_a_cabeca_de_outro_tipo_retem(db) {
        mensageria_core::migrar(&db.pool).await.unwrap();
        plantar_cenario(&db).await;

        let status = db.json_de(&["status"]);
        let nosso = status["tipos"].as_array().unwrap().iter().find(|t| t["tipo"] == "nosso.passo").unwrap();
        assert_eq!(nosso["pending"], 4, "{status:#}");
        assert_eq!(nosso["held"], 2, "held behind `outro.app`'s head: {status:#}");
        assert_eq!(nosso["blocked"], 1, "behind `outro.app`'s dead letter: {status:#}");
        let tabela = stdout(&db.mensageria(&["status"]).assert().success());
        assert!(tabela.lines().next().unwrap().contains("BLOCKED  HELD"), "{tabela}");

        let saida = db.mensageria(&["doctor", "--json"]).assert().code(1);
        let d: Value = serde_json::from_str(&stdout(&saida)).unwrap();
        let retidas: Vec<&Value> = d["problems"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|p| p["code"] == "held-by-other-tipo")
            .collect();
        assert_eq!(retidas.len(), 2, "{d:#}");
        for p in &retidas {
            assert_eq!(p["tipo"], "nosso.passo", "{p}");
            assert_eq!(p["apps"], serde_json::json!(["nosso"]), "{p}");
            assert!(p["message"].as_str().unwrap().contains("`outro.app`"), "{p}");
            assert!(p["message"].as_str().unwrap().contains("mensageria ordem mostrar"), "{p}");
        }
        let viva = retidas.iter().find(|p| p["message"].as_str().unwrap().contains("pedido:42")).unwrap();
        assert!(viva["message"].as_str().unwrap().starts_with("2 row(s) of tipo `nosso.passo`"), "{viva}");
        assert!(viva["message"].as_str().unwrap().contains("no live app claims"), "{viva}");
        let morta = retidas.iter().find(|p| p["message"].as_str().unwrap().contains("pedido:7")).unwrap();
        assert!(morta["message"].as_str().unwrap().contains("dead letter"), "{morta}");
    }
}

nos_dois_bancos! {
    async fn ordem_mostrar_lista_a_fila_da_chave(db) {
        mensageria_core::migrar(&db.pool).await.unwrap();
        let (cabeca, segundo, terceiro) = plantar_cenario(&db).await;

        let fila = db.json_de(&["ordem", "mostrar", "pedido:42"]);
        assert_eq!(fila["key"], "pedido:42", "{fila:#}");
        assert_eq!(fila["total"], 3, "{fila:#}");
        assert_eq!(fila["head"], cabeca.to_string(), "{fila:#}");
        let mensagens = fila["messages"].as_array().unwrap();
        let ids: Vec<&str> = mensagens.iter().map(|m| m["message_id"].as_str().unwrap()).collect();
        assert_eq!(ids, [cabeca.to_string(), segundo.to_string(), terceiro.to_string()]);
        assert_eq!(mensagens[0]["tipo"], "outro.app");
        assert_eq!(mensagens[0]["attempts"], 5);
        assert_eq!(mensagens[0]["state"], "due");
        assert_eq!(mensagens[0]["claimed_by"], serde_json::json!([]));
        assert_eq!(mensagens[0]["held_by"], Value::Null);
        assert_eq!(mensagens[0]["last_error"], "HTTP 503");
        assert_eq!(mensagens[1]["tipo"], "nosso.passo");
        assert_eq!(mensagens[1]["state"], "waiting");
        assert_eq!(mensagens[1]["held_by"], cabeca.to_string());
        assert_eq!(mensagens[1]["claimed_by"], serde_json::json!(["nosso"]));
        assert_eq!(mensagens[1]["where"], "saida");

        // A key behind a dead letter: the letter is the head.
        let sete = db.json_de(&["ordem", "mostrar", "pedido:7"]);
        let mensagens = sete["messages"].as_array().unwrap();
        assert_eq!(mensagens[0]["where"], "dead_letters", "{sete:#}");
        assert_eq!(mensagens[0]["state"], "dead");
        assert_eq!(mensagens[0]["app"], "outro");
        assert_eq!(mensagens[1]["state"], "waiting");

        // The human report names the head and who holds it.
        let texto = stdout(&db.mensageria(&["ordem", "mostrar", "pedido:42"]).assert().success());
        assert!(
            texto.starts_with(&format!(
                "ordering key `pedido:42`: 3 message(s); head: message {cabeca} of tipo `outro.app` (due, 5 attempt(s)), claimed by no live app"
            )),
            "{texto}"
        );
        assert!(texto.contains("waiting"), "{texto}");

        // A key with nothing: said so, exit 0.
        let nada = db.mensageria(&["ordem", "mostrar", "pedido:0"]).assert().success();
        assert_eq!(stdout(&nada).trim(), "no message with ordering key `pedido:0` in the saída or the dead letters");
        // A key's control characters are escaped in the report.
        let esc = db.mensageria(&["ordem", "mostrar", "a\x1b[31m"]).assert().success();
        assert!(!stdout(&esc).contains('\x1b'), "{}", stdout(&esc));
    }
}
