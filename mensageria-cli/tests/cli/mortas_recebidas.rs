//! `mortas-recebidas`: the receiving side's dead letters (events a broker consumer's receptor
//! refused for good, kept in `mensageria_mortas_recebidas`): list, show, discard with
//! confirmation; `status` counts them and `doctor` notes them (a problem past
//! `--max-dead-letters`).

use mensageria_testes::{contar, nos_dois_bancos};
use serde_json::Value;

use crate::comum::{Alvo, stderr, stdout};
use crate::comum::{plantar_morta, plantar_morta_recebida, plantar_morta_recebida_com_id};

const MOTIVO: &str = "permanent rejection: unknown stock item 7";

nos_dois_bancos! {
    async fn listar_e_mostrar_as_mortas_recebidas(db) {
        mensageria_core::migrar(&db.pool).await.unwrap();
        let primeira = plantar_morta_recebida(&db, "estoque", "pedido.criado", r#"{"pedido":7}"#, MOTIVO).await;
        let segunda = plantar_morta_recebida(&db, "estoque", "pedido.pago", "{}", "undecodable payload").await;
        // Bytes that were not JSON are kept as text.
        let nao_json = plantar_morta_recebida(&db, "faturamento", "pedido.criado", "not json {", "undecodable payload").await;
        // A sender-side dead letter is not one of them.
        plantar_morta(&db, "pedido.criado", "{}").await;

        let lista = db.json_de(&["mortas-recebidas", "listar"]);
        assert_eq!(lista["total"], 3, "{lista:#}");
        let ids: Vec<&str> = lista["received_dead_letters"].as_array().unwrap().iter().map(|m| m["message_id"].as_str().unwrap()).collect();
        let mut esperados = vec![primeira.to_string(), segunda.to_string(), nao_json.to_string()];
        esperados.sort();
        let mut vistos: Vec<String> = ids.iter().map(|s| (*s).to_owned()).collect();
        vistos.sort();
        assert_eq!(vistos, esperados, "{lista:#}");
        let item = lista["received_dead_letters"].as_array().unwrap().iter().find(|m| m["message_id"] == primeira.to_string()).unwrap();
        assert_eq!(item["app"], "estoque");
        assert_eq!(item["tipo"], "pedido.criado");
        assert_eq!(item["reason"], MOTIVO);
        assert_eq!(item["deliveries"], 3);
        assert_eq!(item["origin"], "nats:MENSAGERIA:mensageria.pedido.criado");
        assert!(item["dead_at"].as_str().unwrap().ends_with('Z'), "{item}");

        // --app filters, --limite cuts (and says how many there are).
        let estoque = db.json_de(&["mortas-recebidas", "listar", "--app", "estoque"]);
        assert_eq!(estoque["total"], 2, "{estoque:#}");
        assert_eq!(estoque["received_dead_letters"].as_array().unwrap().len(), 2);
        let uma = db.json_de(&["mortas-recebidas", "listar", "--limite", "1"]);
        assert_eq!((uma["total"].as_i64(), uma["received_dead_letters"].as_array().unwrap().len()), (Some(3), 1));
        let tabela = stdout(&db.mensageria(&["mortas-recebidas", "listar", "--limite", "1"]).assert().success());
        assert!(tabela.starts_with("MESSAGE ID"), "{tabela}");
        assert!(tabela.ends_with("(1 of 3 shown; use --limite to see more)\n"), "{tabela}");
        let tabela = stdout(&db.mensageria(&["mortas-recebidas", "listar", "--app", "estoque"]).assert().success());
        let linha = tabela.lines().find(|l| l.starts_with(&primeira.to_string())).unwrap_or_else(|| panic!("{tabela}"));
        assert!(linha.contains("estoque") && linha.contains("pedido.criado") && linha.contains(MOTIVO), "{tabela}");
        let vazia = stdout(&db.mensageria(&["mortas-recebidas", "listar", "--app", "ninguem"]).assert().success());
        assert_eq!(vazia, "no receiver-side dead letters\n");

        // mostrar: every field, the payload as received.
        let morta = db.json_de(&["mortas-recebidas", "mostrar", &primeira.to_string()]);
        assert_eq!(morta["payload"], r#"{"pedido":7}"#, "{morta:#}");
        assert_eq!(morta["correlation_id"], "corr-1");
        assert_eq!(morta["reason"], MOTIVO);
        let humano = stdout(&db.mensageria(&["mortas-recebidas", "mostrar", &primeira.to_string()]).assert().success());
        assert!(humano.contains("app          estoque\n"), "{humano}");
        assert!(humano.contains(&format!("reason       {MOTIVO}\n")), "{humano}");
        assert!(humano.ends_with("payload\n{\"pedido\":7}\n"), "{humano}");
        let cru = db.mensageria(&["mortas-recebidas", "mostrar", &nao_json.to_string(), "--raw"]).assert().success();
        assert_eq!(cru.get_output().stdout, b"not json {\n");

        // An id no app keeps: an error that says where to look.
        let nenhuma = db.mensageria(&["mortas-recebidas", "mostrar", &uuid::Uuid::now_v7().to_string()]).assert().code(1);
        assert!(stderr(&nenhuma).contains("no receiver-side dead letter with message id"), "{}", stderr(&nenhuma));
        assert!(stderr(&nenhuma).contains("`mensageria mortas-recebidas listar`"), "{}", stderr(&nenhuma));
        let de_outro = db.mensageria(&["mortas-recebidas", "mostrar", &primeira.to_string(), "--app", "faturamento"]).assert().code(1);
        assert!(stderr(&de_outro).contains("of app `faturamento`"), "{}", stderr(&de_outro));
    }
}

nos_dois_bancos! {
    /// Fan-out: two receiving apps refused the same event, so one message id names two rows.
    async fn um_id_de_dois_apps_pede_o_app(db) {
        mensageria_core::migrar(&db.pool).await.unwrap();
        let id = uuid::Uuid::now_v7();
        plantar_morta_recebida_com_id(&db, id, "estoque", "pedido.criado", "{}", MOTIVO).await;
        plantar_morta_recebida_com_id(&db, id, "faturamento", "pedido.criado", "{}", "no customer").await;
        let texto = id.to_string();

        let ambigua = db.mensageria(&["mortas-recebidas", "mostrar", &texto]).assert().code(1);
        assert!(stderr(&ambigua).contains("kept by 2 apps (estoque, faturamento)"), "{}", stderr(&ambigua));
        assert!(stderr(&ambigua).contains("pass --app"), "{}", stderr(&ambigua));
        let faturamento = db.json_de(&["mortas-recebidas", "mostrar", &texto, "--app", "faturamento"]);
        assert_eq!((faturamento["app"].as_str(), faturamento["reason"].as_str()), (Some("faturamento"), Some("no customer")));

        // Discarding without --app is refused before asking; nothing goes.
        db.mensageria(&["mortas-recebidas", "descartar", &texto, "--yes"]).assert().code(1);
        assert_eq!(contar(&db.pool, "mensageria_mortas_recebidas").await, 2);
        // With it, only that app's row goes.
        let feito = db.json_de(&["mortas-recebidas", "descartar", &texto, "--app", "estoque", "--yes"]);
        assert_eq!(faturamento["message_id"], texto);
        assert_eq!((feito["discarded"].as_str(), feito["app"].as_str(), feito["tipo"].as_str()), (Some(texto.as_str()), Some("estoque"), Some("pedido.criado")));
        assert_eq!(contar(&db.pool, "mensageria_mortas_recebidas WHERE app = 'faturamento'").await, 1);
        assert_eq!(contar(&db.pool, "mensageria_mortas_recebidas").await, 1);
        // Now one app keeps it: no --app needed.
        db.json_de(&["mortas-recebidas", "mostrar", &texto]);
    }
}

nos_dois_bancos! {
    async fn descartar_pede_confirmacao(db) {
        mensageria_core::migrar(&db.pool).await.unwrap();
        let id = plantar_morta_recebida(&db, "estoque", "pedido.criado", "{}", MOTIVO).await;
        let texto = id.to_string();

        let recusado = db.mensageria(&["mortas-recebidas", "descartar", &texto]).write_stdin("n\n").assert().code(1);
        assert!(stderr(&recusado).contains("[y/N]"), "{}", stderr(&recusado));
        assert!(stderr(&recusado).contains(&format!("discard receiver-side dead letter {id} of app `estoque`, tipo `pedido.criado` (reason: {MOTIVO})?")), "{}", stderr(&recusado));
        assert!(stderr(&recusado).contains("not confirmed: nothing was changed (answer `y` to confirm, or pass --yes)"), "{}", stderr(&recusado));
        for resposta in ["", "s\n", "sim\n"] {
            db.mensageria(&["mortas-recebidas", "descartar", &texto]).write_stdin(resposta).assert().code(1);
        }
        assert_eq!(contar(&db.pool, "mensageria_mortas_recebidas").await, 1);

        let feito = db.mensageria(&["mortas-recebidas", "descartar", &texto]).write_stdin("y\n").assert().success();
        assert_eq!(
            stdout(&feito).trim(),
            format!("discarded receiver-side dead letter {id} of app `estoque`, tipo `pedido.criado`: it is gone for good")
        );
        assert_eq!(contar(&db.pool, "mensageria_mortas_recebidas").await, 0);
        let de_novo = db.mensageria(&["mortas-recebidas", "descartar", &texto, "--yes"]).assert().code(1);
        assert!(stderr(&de_novo).contains("no receiver-side dead letter with message id"), "{}", stderr(&de_novo));

        for opcao in ["--yes", "-y"] {
            let outra = plantar_morta_recebida(&db, "estoque", "pedido.criado", "{}", MOTIVO).await;
            let sem_pergunta = db.mensageria(&["mortas-recebidas", "descartar", &outra.to_string(), opcao]).assert().success();
            assert!(!stderr(&sem_pergunta).contains("[y/N]"), "{}", stderr(&sem_pergunta));
        }
        assert_eq!(contar(&db.pool, "mensageria_mortas_recebidas").await, 0);
    }
}

nos_dois_bancos! {
    async fn status_conta_as_mortas_recebidas(db) {
        mensageria_core::migrar(&db.pool).await.unwrap();
        plantar_morta(&db, "pedido.criado", "{}").await;
        // One tipo dead in two receiving apps; another only on the receiving side.
        plantar_morta_recebida(&db, "estoque", "pedido.criado", "{}", MOTIVO).await;
        plantar_morta_recebida(&db, "faturamento", "pedido.criado", "{}", MOTIVO).await;
        plantar_morta_recebida(&db, "estoque", "pedido.pago", "{}", MOTIVO).await;

        let status = db.json_de(&["status"]);
        let tipos = status["tipos"].as_array().unwrap();
        let linha = |tipo: &str| tipos.iter().find(|t| t["tipo"] == tipo).unwrap_or_else(|| panic!("{tipo}: {status:#}")).clone();
        let criado: Value = linha("pedido.criado");
        assert_eq!((criado["dead"].as_i64(), criado["received_dead"].as_i64()), (Some(1), Some(2)), "{status:#}");
        let pago = linha("pedido.pago");
        assert_eq!((pago["dead"].as_i64(), pago["received_dead"].as_i64()), (Some(0), Some(1)), "{status:#}");

        let tabela = stdout(&db.mensageria(&["status"]).assert().success());
        let cabecalho: Vec<&str> = tabela.lines().next().unwrap().split("  ").map(str::trim).filter(|c| !c.is_empty()).collect();
        let coluna = cabecalho.iter().position(|c| *c == "RECEIVED DEAD").unwrap_or_else(|| panic!("{tabela}"));
        assert_eq!(cabecalho[coluna - 1], "DEAD", "{tabela}");
        let pago = tabela.lines().find(|l| l.starts_with("pedido.pago")).unwrap();
        let celulas: Vec<&str> = pago.split_whitespace().collect();
        // tipo, pending, in flight, blocked, held, oldest (-), attempts (-), dead, received dead.
        assert_eq!(&celulas[..9], ["pedido.pago", "0", "0", "0", "0", "-", "-", "0", "1"], "{tabela}");
    }
}

/// `doctor` with `--json`, expecting exit code `codigo`.
fn diagnosticar(db: &impl Alvo, args: &[&str], codigo: i32) -> Value {
    let saida = db
        .mensageria(&[&["doctor", "--json", "--retencao", "30d"], args].concat())
        .assert()
        .code(codigo);
    serde_json::from_str(&stdout(&saida)).unwrap()
}

nos_dois_bancos! {
    /// A pure receiver on NATS: no relay, no sender-side dead letters, two events its receptor
    /// refused. Without a limit doctor notes them; `--max-dead-letters` counts them per
    /// receiving app and tipo, under their own code.
    async fn doctor_nota_e_limita_as_mortas_recebidas(db) {
        mensageria_core::migrar(&db.pool).await.unwrap();
        plantar_morta_recebida(&db, "estoque", "pedido.criado", "{}", MOTIVO).await;
        plantar_morta_recebida(&db, "estoque", "pedido.criado", "{}", MOTIVO).await;

        let d = diagnosticar(&db, &[], 0);
        let notas: Vec<&str> = d["notes"].as_array().unwrap().iter().map(|n| n.as_str().unwrap()).collect();
        let nota = notas.iter().find(|n| n.starts_with("2 receiver-side dead letter(s)")).unwrap_or_else(|| panic!("{d:#}"));
        assert!(nota.contains("app `estoque`, tipo `pedido.criado`: 2"), "{nota}");
        assert!(nota.contains("`mensageria mortas-recebidas listar`") && nota.contains("--max-dead-letters"), "{nota}");

        let d = diagnosticar(&db, &["--max-dead-letters", "1"], 1);
        let problemas = d["problems"].as_array().unwrap();
        assert_eq!(problemas.len(), 1, "{d:#}");
        assert_eq!(problemas[0]["code"], "received-dead-letters");
        assert_eq!(problemas[0]["tipo"], "pedido.criado");
        assert_eq!(problemas[0]["apps"], serde_json::json!(["estoque"]));
        let mensagem = problemas[0]["message"].as_str().unwrap();
        assert!(mensagem.starts_with("2 receiver-side dead letter(s) of tipo `pedido.criado` kept by app `estoque`, over the limit of 1"), "{mensagem}");
        diagnosticar(&db, &["--max-dead-letters", "2"], 0);
        let humano = db.mensageria(&["doctor", "--max-dead-letters", "0"]).assert().code(1);
        assert!(stdout(&humano).lines().any(|l| l.starts_with("PROBLEM  2 receiver-side dead letter(s)")), "{}", stdout(&humano));
    }
}

nos_dois_bancos! {
    /// `reenviar` publishes a receiving-side dead letter again to the subject it came from, with
    /// a new message id (outside the stream's duplicate window), then forgets it; a record of
    /// messages the stream deleted cannot be replayed; `mortas reenfileirar` of such an id says
    /// where it lives.
    async fn reenviar_publica_de_novo_com_outro_id(db) {
        use mensageria_testes::nats as bancada;
        mensageria_core::migrar(&db.pool).await.unwrap();
        let url = bancada::url_compartilhada();
        let js = bancada::conectar(&url).await;
        let fluxo = bancada::fluxo_proprio(&js, std::time::Duration::from_secs(120)).await;
        let assunto = fluxo.assunto("pedido.criado");
        let morta = |id, motivo: &str| mensageria_core::operacoes::MortaRecebida {
            app: "estoque".to_owned(),
            id_mensagem: id,
            tipo: "pedido.criado".to_owned(),
            origem: format!("nats:{}:{assunto}", fluxo.nome()),
            payload: r#"{"pedido":7}"#.to_owned(),
            correlacao: Some("corr-7".to_owned()),
            motivo: motivo.to_owned(),
            entregas: 3,
            morta_em_ms: 0,
            traceparent: None,
            tracestate: None,
            sequencia: Some(1),
            chave_ordem: None,
        };
        let id = uuid::Uuid::now_v7();
        db.registrar_morta_recebida(&morta(id, MOTIVO)).await;
        let feito = db.json_de(&["mortas-recebidas", "reenviar", &id.to_string(), "--nats", &url]);
        assert_eq!(feito["replayed"], id.to_string(), "{feito:#}");
        assert_eq!(feito["app"], "estoque");
        assert_eq!(feito["subject"], assunto.as_str());
        assert_ne!(feito["new_message_id"], id.to_string());
        assert_eq!(contar(&db.pool, "mensageria_mortas_recebidas").await, 0, "forgotten here");
        // In the stream: the payload as kept, a new id, the dead letter's id and correlation.
        let stream = js.get_stream(fluxo.nome()).await.unwrap();
        let publicada = stream.get_raw_message(feito["stream_sequence"].as_u64().unwrap()).await.unwrap();
        assert_eq!(&publicada.payload[..], br#"{"pedido":7}"#);
        let cabecalho = |nome: &str| publicada.headers.get(nome).map(|v| v.as_str().to_owned());
        assert_eq!(cabecalho("Nats-Msg-Id").as_deref(), feito["new_message_id"].as_str());
        assert_eq!(cabecalho("Mensageria-Reenvio-De"), Some(id.to_string()));
        assert_eq!(cabecalho("x-correlation-id").as_deref(), Some("corr-7"));
        assert_eq!(cabecalho("ce-type").as_deref(), Some("pedido.criado"));

        // A record of what the stream deleted: refused, kept.
        let lacuna = uuid::Uuid::now_v7();
        db.registrar_morta_recebida(&morta(lacuna, "possibly_expired: while this app was away ...")).await;
        let recusa = db.mensageria(&["mortas-recebidas", "reenviar", &lacuna.to_string(), "--nats", &url]).assert().failure();
        assert!(stderr(&recusa).contains("replay those events from their source"), "{}", stderr(&recusa));
        assert_eq!(contar(&db.pool, "mensageria_mortas_recebidas").await, 1);
        // The sender's command, given this id, says where it lives.
        let errado = db.mensageria(&["mortas", "reenfileirar", &lacuna.to_string()]).assert().failure();
        let texto = stderr(&errado);
        assert!(texto.contains("receiver-side dead letter of app(s) estoque") && texto.contains("mortas-recebidas reenviar"), "{texto}");
        js.delete_stream(fluxo.nome()).await.unwrap();
    }
}

/// The help says how a receiver-side dead letter is replayed: published again from here, or by
/// the receiving app in process.
#[test]
fn a_ajuda_diz_quem_reaplica() {
    let ajuda = assert_cmd::Command::new(env!("CARGO_BIN_EXE_mensageria"))
        .args(["mortas-recebidas", "--help"])
        .assert()
        .success();
    let texto = stdout(&ajuda);
    assert!(
        texto.contains("listar") && texto.contains("mostrar") && texto.contains("descartar"),
        "{texto}"
    );
    assert!(
        texto.contains("reenviar") && texto.contains("reaplicar_mortas_recebidas"),
        "{texto}"
    );
}

/// `--help` names the environment variables without their values (a URL may hold a password):
/// `[env: NATS_URL]`, never `[env: NATS_URL=nats://user:secret@…]`, nor a stray `=` for one set
/// empty.
#[test]
fn a_ajuda_nao_mostra_valores_do_ambiente() {
    let ajuda = assert_cmd::Command::new(env!("CARGO_BIN_EXE_mensageria"))
        .args(["mortas-recebidas", "reenviar", "--help"])
        .env(
            "NATS_URL",
            "nats://operador:senha-secreta@nats.interno:4222",
        )
        .env("MENSAGERIA_SCHEMA", "")
        .env("DATABASE_URL", "postgres://app:outra-senha@db/app")
        .assert()
        .success();
    let texto = stdout(&ajuda);
    assert!(texto.contains("[env: NATS_URL]"), "{texto}");
    assert!(texto.contains("[env: MENSAGERIA_SCHEMA]"), "{texto}");
    assert!(!texto.contains("senha") && !texto.contains("=]"), "{texto}");
}

nos_dois_bancos! {
    /// `reenviar` of a dead letter of an ordered lane publishes every dead letter of its key
    /// again, in the key's order (whichever of them is named), each with its key and place; the
    /// receiving app forgets each as it applies it, so none is deleted here.
    async fn reenviar_de_uma_chave_vai_em_ordem(db) {
        use mensageria_testes::nats as bancada;
        mensageria_core::migrar(&db.pool).await.unwrap();
        let url = bancada::url_compartilhada();
        let js = bancada::conectar(&url).await;
        let fluxo = bancada::fluxo_proprio(&js, std::time::Duration::from_secs(120)).await;
        let assunto = fluxo.assunto_ordenado("pedido.criado", "pedido:7");
        let ids: Vec<uuid::Uuid> = (0..3).map(|_| uuid::Uuid::now_v7()).collect();
        // Recorded out of order: the key's order is their place (`sequencia`), not the record's.
        for (id, sequencia, motivo) in [(ids[2], 9, "held: behind"), (ids[0], 5, "rejected: no"), (ids[1], 7, "held: behind")] {
            db.registrar_morta_recebida(&mensageria_core::operacoes::MortaRecebida {
                app: "estoque".to_owned(),
                id_mensagem: id,
                tipo: "pedido.criado".to_owned(),
                origem: format!("nats:{}:{assunto}", fluxo.nome()),
                payload: format!(r#"{{"passo":{sequencia}}}"#),
                correlacao: None,
                motivo: motivo.to_owned(),
                entregas: 1,
                morta_em_ms: 0,
                traceparent: None,
                tracestate: None,
                sequencia: Some(sequencia),
                chave_ordem: Some("pedido:7".to_owned()),
            })
            .await;
        }
        let feito = db.json_de(&["mortas-recebidas", "reenviar", &ids[1].to_string(), "--nats", &url]);
        assert_eq!(feito["ordering_key"], "pedido:7", "{feito:#}");
        let da_chave = feito["key_replayed"].as_array().unwrap();
        let reenviadas: Vec<&str> = da_chave.iter().map(|r| r["replayed"].as_str().unwrap()).collect();
        assert_eq!(reenviadas, ids.iter().map(|id| id.to_string()).collect::<Vec<_>>().iter().map(String::as_str).collect::<Vec<_>>(), "in the key's order");
        assert_eq!(contar(&db.pool, "mensageria_mortas_recebidas").await, 3, "forgotten by the app as applied, not here");
        let stream = js.get_stream(fluxo.nome()).await.unwrap();
        let mut anterior = 0;
        for (r, sequencia_original) in da_chave.iter().zip([5, 7, 9]) {
            let sequencia = r["stream_sequence"].as_u64().unwrap();
            assert!(sequencia > anterior, "published in order");
            anterior = sequencia;
            let publicada = stream.get_raw_message(sequencia).await.unwrap();
            assert_eq!(publicada.subject.as_str(), assunto);
            let cabecalho = |nome: &str| publicada.headers.get(nome).map(|v| v.as_str().to_owned());
            assert_eq!(cabecalho("ce-partitionkey").as_deref(), Some("pedido:7"));
            assert_eq!(cabecalho("Mensageria-Sequencia-Original"), Some(sequencia_original.to_string()));
            assert_eq!(cabecalho("Mensageria-Reenvio-De").as_deref(), r["replayed"].as_str());
        }
        let humano = db.mensageria(&["mortas-recebidas", "reenviar", &ids[0].to_string(), "--nats", &url]).assert().success();
        assert!(stdout(&humano).contains("3 receiver-side dead letter(s) of ordering key `pedido:7`"), "{}", stdout(&humano));
        js.delete_stream(fluxo.nome()).await.unwrap();
    }
}
