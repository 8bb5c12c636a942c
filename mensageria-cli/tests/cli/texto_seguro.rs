//! Text that other parties wrote into the database (a receptor's error answer, a tipo, an app
//! name, a correlation id, a payload) reaches the operator's terminal escaped: no escape
//! sequence, bell, carriage return or C1 control in what people read; `--json` and
//! `mortas mostrar --raw` keep the exact text.

use mensageria_testes::nos_dois_bancos;

use crate::comum::{Alvo, stderr, stdout};
use crate::comum::{plantar_app, plantar_instancia, plantar_morta, plantar_saida};

/// What a hostile receptor answers: retitles the window, clears the screen, rewrites the line.
const ERRO_HOSTIL: &str = "HTTP 500\x1b]0;pwned\x07\r\nfake line\x1b[2J";
/// How the CLI shows it.
const ERRO_ESCAPADO: &str = r"HTTP 500\x1b]0;pwned\x07\r\nfake line\x1b[2J";
/// A tipo with an 8-bit CSI (U+009B) and a DEL in it.
const TIPO_HOSTIL: &str = "x.\u{9b}31mvermelho\x7f";
const TIPO_ESCAPADO: &str = r"x.\u{9b}31mvermelho\x7f";
/// A payload that is valid JSON: C1 controls and DEL may stand unescaped in a JSON string.
const PAYLOAD_HOSTIL: &str = "{\"nota\":\"\u{9b}2J\u{90}q\x7f\"}";

/// Fails if `texto` holds a control character other than the line feed.
fn sem_controles(texto: &str, onde: &str) {
    let achados: Vec<char> = texto
        .chars()
        .filter(|c| c.is_control() && *c != '\n')
        .collect();
    assert!(
        achados.is_empty(),
        "{onde}: control characters {achados:?} in {texto:?}"
    );
}

nos_dois_bancos! {
    async fn controles_do_banco_chegam_escapados(db) {
        mensageria_core::migrar(&db.pool).await.unwrap();
        let id = uuid::Uuid::now_v7();
        let sql = format!(
            "INSERT INTO mensageria_mortas \
                 (id_mensagem, tipo, payload, criada_em, tentativas, ultimo_erro, app, correlacao) \
             VALUES ({}, $2, {}, {}, 25, $4, $5, $6)",
            db.uuid("$1"),
            db.json("$3"),
            db.ha(60_000),
        );
        sqlx::query(sqlx::AssertSqlSafe(sql))
            .bind(id.to_string())
            .bind(TIPO_HOSTIL)
            .bind(PAYLOAD_HOSTIL)
            .bind(ERRO_HOSTIL)
            .bind("app\x1b[8m")
            .bind("corr\x1bP+q\x1b\\")
            .execute(&db.pool)
            .await
            .expect("plant a hostile dead letter");
        // A stopped app that claims the hostile tipo: doctor names both in its messages.
        plantar_app(&db, "app\x1b[8m", TIPO_HOSTIL, 3_600_000).await;

        let mostrar = stdout(&db.mensageria(&["mortas", "mostrar", &id.to_string()]).assert().success());
        sem_controles(&mostrar, "mortas mostrar");
        assert!(mostrar.contains(&format!("last error   {ERRO_ESCAPADO}\n")), "{mostrar}");
        assert!(mostrar.contains(&format!("tipo         {TIPO_ESCAPADO}\n")), "{mostrar}");
        assert!(mostrar.contains("app          app\\x1b[8m\n"), "{mostrar}");
        assert!(mostrar.contains("correlation  corr\\x1bP+q\\x1b\\\n"), "{mostrar}");
        assert!(mostrar.ends_with("payload\n{\"nota\":\"\\u{9b}2J\\u{90}q\\x7f\"}\n"), "{mostrar}");

        let listar = stdout(&db.mensageria(&["mortas", "listar"]).assert().success());
        sem_controles(&listar, "mortas listar");
        assert!(listar.contains(TIPO_ESCAPADO) && listar.contains(r"HTTP 500\x1b]0;pwned\x07  fake line"), "{listar}");

        let status = stdout(&db.mensageria(&["status"]).assert().success());
        sem_controles(&status, "status");
        assert!(status.contains(TIPO_ESCAPADO) && status.contains(r"app\x1b[8m"), "{status}");

        let doctor = db.mensageria(&["doctor"]).assert().code(1);
        sem_controles(&stdout(&doctor), "doctor");
        assert!(stdout(&doctor).contains(r"app `app\x1b[8m` stopped heart-beating"), "{}", stdout(&doctor));

        let recusado = db.mensageria(&["mortas", "descartar", &id.to_string()]).write_stdin("n\n").assert().failure();
        sem_controles(&stderr(&recusado), "the confirmation prompt");
        assert!(stderr(&recusado).contains(TIPO_ESCAPADO), "{}", stderr(&recusado));

        // JSON keeps the exact text (JSON escapes C0 itself); --raw prints the payload as stored.
        let json = db.json_de(&["mortas", "mostrar", &id.to_string()]);
        assert_eq!(json["last_error"], ERRO_HOSTIL);
        assert_eq!(json["tipo"], TIPO_HOSTIL);
        let cru = db.mensageria(&["mortas", "mostrar", &id.to_string(), "--raw"]).assert().success();
        assert_eq!(cru.get_output().stdout, format!("{PAYLOAD_HOSTIL}\n").into_bytes());
        let ambos = db.mensageria(&["mortas", "mostrar", &id.to_string(), "--raw", "--json"]).assert().code(2);
        assert!(stderr(&ambos).contains("cannot be used with"), "{}", stderr(&ambos));
    }
}

nos_dois_bancos! {
    /// A receiver-side dead letter: the sender wrote its tipo and payload, the receptor its
    /// reason, the consumer's app its app name.
    async fn mortas_recebidas_hostis_chegam_escapadas(db) {
        mensageria_core::migrar(&db.pool).await.unwrap();
        let payload = "{\"nota\":\"\x1b[2J\"}\r\n\u{9b}fim";
        let id = crate::comum::plantar_morta_recebida(&db, "app\x1b[8m", TIPO_HOSTIL, payload, ERRO_HOSTIL).await;

        let listar = stdout(&db.mensageria(&["mortas-recebidas", "listar"]).assert().success());
        sem_controles(&listar, "mortas-recebidas listar");
        // The reason in full (the last column), escaped on one line.
        assert!(listar.contains(TIPO_ESCAPADO) && listar.contains(r"app\x1b[8m") && listar.contains(ERRO_ESCAPADO), "{listar}");

        let mostrar = stdout(&db.mensageria(&["mortas-recebidas", "mostrar", &id.to_string()]).assert().success());
        sem_controles(&mostrar, "mortas-recebidas mostrar");
        assert!(mostrar.contains(&format!("reason       {ERRO_ESCAPADO}\n")), "{mostrar}");
        assert!(mostrar.contains(&format!("tipo         {TIPO_ESCAPADO}\n")), "{mostrar}");
        assert!(mostrar.ends_with("payload\n{\"nota\":\"\\x1b[2J\"}\\r\n\\u{9b}fim\n"), "{mostrar}");

        let status = stdout(&db.mensageria(&["status"]).assert().success());
        sem_controles(&status, "status");
        let doctor = stdout(&db.mensageria(&["doctor", "--max-dead-letters", "0"]).assert().code(1));
        sem_controles(&doctor, "doctor");
        assert!(doctor.contains(&format!("tipo `{TIPO_ESCAPADO}` kept by app `app\\x1b[8m`")), "{doctor}");

        let recusado = db.mensageria(&["mortas-recebidas", "descartar", &id.to_string()]).write_stdin("n\n").assert().code(1);
        sem_controles(&stderr(&recusado), "the confirmation prompt");
        assert!(stderr(&recusado).contains(TIPO_ESCAPADO), "{}", stderr(&recusado));

        // JSON and --raw keep the exact text.
        let json = db.json_de(&["mortas-recebidas", "mostrar", &id.to_string()]);
        assert_eq!((json["reason"].as_str(), json["tipo"].as_str(), json["payload"].as_str()), (Some(ERRO_HOSTIL), Some(TIPO_HOSTIL), Some(payload)));
        let cru = db.mensageria(&["mortas-recebidas", "mostrar", &id.to_string(), "--raw"]).assert().success();
        assert_eq!(cru.get_output().stdout, format!("{payload}\n").into_bytes());
    }
}

nos_dois_bancos! {
    async fn apps_com_nomes_hostis_chegam_escapados(db) {
        mensageria_core::migrar(&db.pool).await.unwrap();
        // A stopped app with hostile names, whose row of a hostile tipo is left in the saída.
        plantar_app(&db, "app\x1b[8m", TIPO_HOSTIL, 300_000).await;
        plantar_instancia(&db, "app\x1b[8m@pod\r\n1", "app\x1b[8m", 300_000, Some(300_000), None).await;
        plantar_saida(&db, TIPO_HOSTIL, 0, 1_000, false).await;
        // An alive one, whose name ends up in an error message.
        plantar_instancia(&db, "vivo\x1b]0;t\x07@1", "vivo\x1b]0;t\x07", 500, None, None).await;

        let listar = stdout(&db.mensageria(&["apps", "listar"]).assert().success());
        sem_controles(&listar, "apps listar");
        assert!(listar.contains(r"app\x1b[8m@pod\r\n1") && listar.contains(TIPO_ESCAPADO), "{listar}");
        assert!(listar.contains(r"vivo\x1b]0;t\x07@1"), "{listar}");

        let doctor = stdout(&db.mensageria(&["doctor"]).assert().code(1));
        sem_controles(&doctor, "doctor");
        assert!(doctor.contains(r"note     app `app\x1b[8m` is stopped"), "{doctor}");

        let recusado = db.mensageria(&["apps", "remover", "vivo\x1b]0;t\x07", "--yes"]).assert().code(1);
        sem_controles(&stderr(&recusado), "the refusal");
        assert!(stderr(&recusado).contains(r"refusing to remove app `vivo\x1b]0;t\x07`"), "{}", stderr(&recusado));

        let pergunta = db.mensageria(&["apps", "remover", "app\x1b[8m"]).write_stdin("n\n").assert().code(1);
        sem_controles(&stderr(&pergunta), "the confirmation prompt");
        assert!(stderr(&pergunta).contains(&format!("tipos: {TIPO_ESCAPADO})")), "{}", stderr(&pergunta));

        // JSON keeps the exact names.
        let json = db.json_de(&["apps", "listar"]);
        assert_eq!(json["apps"][0]["app"], "app\x1b[8m");
        assert_eq!(json["apps"][0]["instances"][0]["instance"], "app\x1b[8m@pod\r\n1");

        let removido = stdout(&db.mensageria(&["apps", "remover", "app\x1b[8m", "--yes"]).assert().success());
        sem_controles(&removido, "apps remover");
        assert!(removido.starts_with(r"removed app `app\x1b[8m` (it was stopped)"), "{removido}");
    }
}

/// An error whose text comes from the database (here a trigger's message; as well a constraint
/// or a value PostgreSQL quotes) is printed on one line, escaped.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn erro_com_texto_do_banco_chega_escapado() {
    let db = mensageria_testes::PgIsolado::novo().await;
    mensageria_core::migrar(&db.pool).await.unwrap();
    let id = plantar_morta(&db, "y.um", "{}").await;
    for sql in [
        "CREATE FUNCTION recusar() RETURNS trigger LANGUAGE plpgsql AS \
             $$BEGIN RAISE EXCEPTION E'no\\x1b]0;pwned\\x07\\r\\nfake: line\\x1b[2J'; END$$",
        "CREATE TRIGGER recusar BEFORE DELETE ON mensageria_mortas \
             FOR EACH ROW EXECUTE FUNCTION recusar()",
    ] {
        sqlx::query(sql)
            .execute(&db.pool)
            .await
            .expect("plant the trigger");
    }
    let saida = db
        .mensageria(&["mortas", "descartar", &id.to_string(), "--yes"])
        .assert()
        .code(1);
    let erro = stderr(&saida);
    assert_eq!(erro.lines().count(), 1, "{erro}");
    sem_controles(&erro, "the error message");
    assert!(
        erro.contains(r"no\x1b]0;pwned\x07\r\nfake: line\x1b[2J"),
        "{erro}"
    );
    db.descartar().await;
}
