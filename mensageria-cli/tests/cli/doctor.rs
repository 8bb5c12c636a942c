//! `doctor`: each planted problem is found (exit 1); a healthy schema exits 0.

use mensageria_testes::nos_dois_bancos;
use serde_json::Value;

use crate::comum::{Alvo, stdout, versao_esperada};
use crate::comum::{plantar_app, plantar_instancia, plantar_saida};

/// The `(codigo, tipo, apps)` of each problem, sorted.
fn problemas(diagnostico: &Value) -> Vec<(String, String, Vec<String>)> {
    let mut lista: Vec<_> = diagnostico["problems"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            (
                p["code"].as_str().unwrap().to_owned(),
                p["tipo"].as_str().unwrap_or("").to_owned(),
                p["apps"]
                    .as_array()
                    .map(|a| a.iter().map(|s| s.as_str().unwrap().to_owned()).collect())
                    .unwrap_or_default(),
            )
        })
        .collect();
    lista.sort();
    lista
}

/// Runs `doctor --json` expecting exit code `codigo`.
fn diagnosticar(db: &impl Alvo, args: &[&str], codigo: i32) -> Value {
    let saida = db
        .mensageria(&[&["doctor", "--json"], args].concat())
        .assert()
        .code(codigo);
    serde_json::from_str(&stdout(&saida)).unwrap()
}

fn s(texto: &str) -> String {
    texto.to_owned()
}

nos_dois_bancos! {
    async fn doctor_saudavel_sai_com_zero(db) {
        mensageria_core::migrar(&db.pool).await.unwrap();
        plantar_app(&db, "emissor", "a.um", 2_000).await;
        plantar_saida(&db, "a.um", 0, 1_000, false).await;
        let d = diagnosticar(&db, &["--retencao", "30d"], 0);
        assert_eq!(d["healthy"], true, "{d:#}");
        assert_eq!(d["problems"], serde_json::json!([]));
        let humano = db.mensageria(&["doctor", "--retencao", "30d"]).assert().success();
        assert!(stdout(&humano).ends_with("healthy: no problem found\n"), "{}", stdout(&humano));
        // Without --retencao the retention check is skipped, and said so; still healthy.
        let d = diagnosticar(&db, &[], 0);
        assert!(
            d["notes"].as_array().unwrap().iter().any(|n| n.as_str().unwrap().starts_with("dedup retention not checked")),
            "{d:#}"
        );
    }
}

nos_dois_bancos! {
    async fn doctor_acha_cada_problema_plantado(db) {
        mensageria_core::migrar(&db.pool).await.unwrap();
        // Healthy part: one live owner with pending rows.
        plantar_app(&db, "emissor", "a.um", 0).await;
        plantar_saida(&db, "a.um", 0, 1_000, false).await;
        // Orphans: rows of a tipo nobody ever claimed.
        plantar_saida(&db, "orfa.tipo", 0, 60_000, false).await;
        plantar_saida(&db, "orfa.tipo", 2, 30_000, false).await;
        // Competing consumers: two live apps claim one tipo.
        plantar_app(&db, "app1", "disputado", 0).await;
        plantar_app(&db, "app2", "disputado", 1_000).await;
        // A stopped app (2 h without heartbeat), whose pending rows are orphans too.
        plantar_app(&db, "parado", "velho", 7_200_000).await;
        plantar_saida(&db, "velho", 1, 7_200_000, false).await;

        let d = diagnosticar(&db, &["--retencao", "1d"], 1);
        assert_eq!(d["healthy"], false);
        assert_eq!(
            problemas(&d),
            vec![
                (s("app-silent"), s(""), vec![s("parado")]),
                (s("competing-consumers"), s("disputado"), vec![s("app1"), s("app2")]),
                (s("orphans"), s("orfa.tipo"), vec![]),
                (s("orphans"), s("velho"), vec![s("parado")]),
                (s("retention-too-short"), s(""), vec![]),
            ],
            "{d:#}"
        );
        let orfa = d["problems"].as_array().unwrap().iter().find(|p| p["tipo"] == "orfa.tipo").unwrap();
        assert!(orfa["message"].as_str().unwrap().starts_with("2 row(s) of tipo `orfa.tipo`"), "{orfa}");

        // A longer heartbeat tolerance makes `parado` live again: its tipo has an owner.
        let d = diagnosticar(&db, &["--retencao", "30d", "--parado-apos", "3h"], 1);
        assert_eq!(
            problemas(&d),
            vec![
                (s("competing-consumers"), s("disputado"), vec![s("app1"), s("app2")]),
                (s("orphans"), s("orfa.tipo"), vec![]),
            ],
            "{d:#}"
        );

        // The human report says the same, one PROBLEM line each.
        let humano = db.mensageria(&["doctor", "--retencao", "1d"]).assert().code(1);
        let texto = stdout(&humano);
        assert_eq!(texto.lines().filter(|l| l.starts_with("PROBLEM")).count(), 5, "{texto}");
        assert!(texto.ends_with("5 problem(s) found\n"), "{texto}");
    }
}

nos_dois_bancos! {
    async fn doctor_e_as_versoes_do_schema(db) {
        // No schema at all: a problem, and nothing else checked.
        let d = diagnosticar(&db, &[], 1);
        assert_eq!(problemas(&d), vec![(s("schema-missing"), s(""), vec![])], "{d:#}");

        // A schema newer than this build (the owner upgraded first): noted, not a problem.
        mensageria_core::migrar(&db.pool).await.unwrap();
        // One version past the newest this build knows.
        let esperada = versao_esperada(&db.pool);
        let futura = esperada + 1;
        let checksum = if mensageria_testes::e_postgres(&db.pool) { "'\\x00'::bytea" } else { "x'00'" };
        sqlx::query(sqlx::AssertSqlSafe(format!(
            "INSERT INTO _mensageria_migrations (version, description, success, checksum, execution_time) \
             VALUES ({futura}, 'from the future', true, {checksum}, 0)"
        )))
        .execute(&db.pool)
        .await
        .unwrap();
        let d = diagnosticar(&db, &[], 0);
        assert_eq!(d["applied_version"], futura);
        assert_eq!(d["expected_version"], esperada);
        assert!(d["notes"][0].as_str().unwrap().contains("newer than this CLI knows"), "{d:#}");

        // A failed migration is a problem.
        sqlx::query(sqlx::AssertSqlSafe(format!(
            "UPDATE _mensageria_migrations SET success = false WHERE version = {futura}"
        )))
        .execute(&db.pool)
        .await
        .unwrap();
        let d = diagnosticar(&db, &[], 1);
        assert_eq!(problemas(&d), vec![(s("migration-failed"), s(""), vec![])], "{d:#}");
    }
}

nos_dois_bancos! {
    async fn doctor_tipo_largado_por_app_vivo_e_orfao(db) {
        mensageria_core::migrar(&db.pool).await.unwrap();
        // `emissor` is alive (it beats for `a.um`), but it stopped sending `largado` in a
        // redeploy: that row is 2 h stale, and its pending rows will never move.
        plantar_app(&db, "emissor", "a.um", 0).await;
        plantar_app(&db, "emissor", "largado", 7_200_000).await;
        plantar_saida(&db, "largado", 0, 7_200_000, false).await;
        let d = diagnosticar(&db, &["--retencao", "30d"], 1);
        assert_eq!(
            problemas(&d),
            vec![(s("orphans"), s("largado"), vec![s("emissor")])],
            "{d:#}"
        );
    }
}

/// The `state` doctor gives each app in its JSON.
fn estados(diagnostico: &Value) -> Vec<(String, String)> {
    diagnostico["apps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| {
            (
                a["app"].as_str().unwrap().to_owned(),
                a["state"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

nos_dois_bancos! {
    async fn doctor_app_parado_graciosamente_nao_e_problema(db) {
        mensageria_core::migrar(&db.pool).await.unwrap();
        // A live app delivering its rows.
        plantar_app(&db, "emissor", "a.um", 2_000).await;
        plantar_instancia(&db, "emissor@pod-1", "emissor", 500, None, None).await;
        plantar_saida(&db, "a.um", 0, 1_000, false).await;
        // `fiscal` was shut down gracefully five minutes ago (both replicas), with nothing left
        // in the saída: the deploy case, which used to fail doctor a minute later.
        plantar_app(&db, "fiscal", "c.tres", 300_000).await;
        plantar_instancia(&db, "fiscal@pod-1", "fiscal", 300_000, Some(300_000), None).await;
        plantar_instancia(&db, "fiscal@pod-2", "fiscal", 301_000, Some(300_500), None).await;

        let d = diagnosticar(&db, &["--retencao", "30d"], 0);
        assert_eq!(d["healthy"], true, "{d:#}");
        assert_eq!(d["problems"], serde_json::json!([]));
        assert_eq!(estados(&d), vec![(s("emissor"), s("alive")), (s("fiscal"), s("stopped"))]);
        let notas: Vec<&str> = d["notes"].as_array().unwrap().iter().map(|n| n.as_str().unwrap()).collect();
        assert!(
            notas.iter().any(|n| n.starts_with("app `fiscal` is stopped: its relay instances shut down gracefully")),
            "{d:#}"
        );

        let humano = db.mensageria(&["doctor", "--retencao", "30d"]).assert().success();
        let texto = stdout(&humano);
        assert!(texto.contains("note     app `fiscal` is stopped"), "{texto}");
        assert!(texto.contains("`mensageria apps remover fiscal` forgets it"), "{texto}");
        assert!(texto.ends_with("healthy: no problem found\n"), "{texto}");
    }
}

nos_dois_bancos! {
    async fn doctor_app_morto_e_problema(db) {
        mensageria_core::migrar(&db.pool).await.unwrap();
        // `emissor` is alive: one replica heart-beats; a sibling that died was taken over.
        plantar_app(&db, "emissor", "a.um", 2_000).await;
        plantar_instancia(&db, "emissor@pod-1", "emissor", 500, None, None).await;
        plantar_instancia(&db, "emissor@pod-0", "emissor", 600_000, None, Some(595_000)).await;
        // `caiu` was killed an hour ago: no graceful stop, nobody took over.
        plantar_app(&db, "caiu", "b.dois", 3_600_000).await;
        plantar_instancia(&db, "caiu@pod-1", "caiu", 3_600_000, None, None).await;
        // `recente` was killed 30 s ago: its `mensageria_apps` row still looks fresh (it is
        // refreshed every 15 s) but its instance says dead, and its row waits for nobody.
        plantar_app(&db, "recente", "c.tres", 20_000).await;
        plantar_instancia(&db, "recente@pod-1", "recente", 30_000, None, None).await;
        plantar_saida(&db, "c.tres", 0, 40_000, false).await;

        let d = diagnosticar(&db, &["--retencao", "30d"], 1);
        assert_eq!(d["healthy"], false);
        assert_eq!(
            problemas(&d),
            vec![
                (s("app-dead"), s(""), vec![s("caiu")]),
                (s("app-dead"), s(""), vec![s("recente")]),
                (s("orphans"), s("c.tres"), vec![s("recente")]),
            ],
            "{d:#}"
        );
        assert_eq!(
            estados(&d),
            vec![(s("caiu"), s("dead")), (s("emissor"), s("alive")), (s("recente"), s("dead"))]
        );
        let caiu = d["problems"].as_array().unwrap().iter().find(|p| p["apps"][0] == "caiu").unwrap();
        let mensagem = caiu["message"].as_str().unwrap();
        assert!(mensagem.starts_with("app `caiu` is dead: none of its relay instances is alive"), "{mensagem}");
        assert!(mensagem.contains("last heartbeat 1h 00m ago; dead: caiu@pod-1"), "{mensagem}");

        let humano = db.mensageria(&["doctor", "--retencao", "30d"]).assert().code(1);
        let texto = stdout(&humano);
        assert!(texto.contains("PROBLEM  app `caiu` is dead"), "{texto}");
        assert!(texto.contains("claim it: `recente` (dead))"), "{texto}");
        assert!(texto.ends_with("3 problem(s) found\n"), "{texto}");
    }
}

nos_dois_bancos! {
    async fn doctor_app_parado_com_linhas_orfas_e_problema(db) {
        mensageria_core::migrar(&db.pool).await.unwrap();
        // `fiscal` stopped gracefully but left two rows of its tipo: nobody will deliver them.
        plantar_app(&db, "fiscal", "c.tres", 300_000).await;
        plantar_instancia(&db, "fiscal@pod-1", "fiscal", 300_000, Some(300_000), None).await;
        plantar_saida(&db, "c.tres", 0, 600_000, false).await;
        plantar_saida(&db, "c.tres", 3, 400_000, false).await;

        let d = diagnosticar(&db, &["--retencao", "30d"], 1);
        assert_eq!(problemas(&d), vec![(s("orphans"), s("c.tres"), vec![s("fiscal")])], "{d:#}");
        assert_eq!(estados(&d), vec![(s("fiscal"), s("stopped"))]);
        let orfa = d["problems"][0]["message"].as_str().unwrap();
        assert!(orfa.starts_with("2 row(s) of tipo `c.tres` wait in the saída (oldest 10m "), "{orfa}");
        assert!(
            orfa.contains(
                "and no live app claims the tipo (only apps that do not deliver it now claim it: \
                 `fiscal` (stopped))"
            ),
            "{orfa}"
        );

        let humano = db.mensageria(&["doctor", "--retencao", "30d"]).assert().code(1);
        let texto = stdout(&humano);
        assert!(texto.contains("note     app `fiscal` is stopped"), "{texto}");
        assert!(texto.ends_with("1 problem(s) found\n"), "{texto}");
    }
}

nos_dois_bancos! {
    /// The trial's mis-pointed destination: a dead letter and a message retried for 25 s, on a
    /// schema whose apps are all fine. Without thresholds doctor stays healthy but says what it
    /// saw; with them (what a deploy pipeline passes) each breach is a problem and exit 1.
    async fn doctor_com_limites_de_mortas_idade_e_tentativas(db) {
        mensageria_core::migrar(&db.pool).await.unwrap();
        plantar_app(&db, "emissor", "a.um", 0).await;
        plantar_saida(&db, "a.um", 3, 25_000, false).await;
        plantar_saida(&db, "a.um", 0, 1_000, false).await;
        crate::comum::plantar_morta(&db, "a.um", "{}").await;

        let d = diagnosticar(&db, &["--retencao", "30d"], 0);
        let notas: Vec<&str> = d["notes"].as_array().unwrap().iter().map(|n| n.as_str().unwrap()).collect();
        assert!(notas.iter().any(|n| n.starts_with("1 dead letter(s)") && n.contains("--max-dead-letters")), "{d:#}");
        assert!(notas.iter().any(|n| n.starts_with("oldest message in the saída") && n.contains("--max-pending-age")), "{d:#}");
        assert!(notas.iter().any(|n| n.starts_with("most attempts of a message in the saída: 3") && n.contains("--max-attempts")), "{d:#}");

        let d = diagnosticar(
            &db,
            &["--retencao", "30d", "--max-dead-letters", "0", "--max-pending-age", "20s", "--max-attempts", "2"],
            1,
        );
        assert_eq!(
            problemas(&d),
            vec![
                (s("dead-letters"), s("a.um"), vec![]),
                (s("pending-too-old"), s("a.um"), vec![s("emissor")]),
                (s("too-many-attempts"), s("a.um"), vec![s("emissor")]),
            ],
            "{d:#}"
        );
        let velha = d["problems"].as_array().unwrap().iter().find(|p| p["code"] == "pending-too-old").unwrap();
        assert!(velha["message"].as_str().unwrap().contains("over the limit of 20s"), "{velha}");

        // Thresholds that are not breached: healthy.
        diagnosticar(
            &db,
            &["--retencao", "30d", "--max-dead-letters", "1", "--max-pending-age", "1m", "--max-attempts", "3"],
            0,
        );
        // The human report has one PROBLEM line per breach.
        let humano = db.mensageria(&["doctor", "--max-dead-letters", "0"]).assert().code(1);
        assert!(stdout(&humano).lines().any(|l| l.starts_with("PROBLEM  1 dead letter(s) of tipo `a.um`")), "{}", stdout(&humano));
    }
}

nos_dois_bancos! {
    /// Receiving apps as their registrations show them: a JetStream consumer silent for two
    /// minutes with messages waiting, one whose oldest unsettled message passed half the
    /// stream's max_age, and a healthy HTTP receiver; then unowned dedup records of a tipo two
    /// receiving apps receive. Each is a problem of its own code; `status` shows the lag and
    /// flags both; `recebidas esquecer` retires the silent one.
    async fn doctor_ve_os_apps_que_recebem(db) {
        mensageria_core::migrar(&db.pool).await.unwrap();
        let plantar = |app: &str, tipo: &str, transporte: &str, ha_ms: i64, lag: Option<(i64, i64, i64)>| {
            let (pendentes, antiga, max_age) = lag.map_or(("NULL".to_owned(), "NULL".to_owned(), "NULL".to_owned()), |(p, a, m)| (p.to_string(), a.to_string(), m.to_string()));
            format!(
                "INSERT INTO mensageria_receptores (app, tipo, transporte, visto_em, pendentes, em_voo, reentregues, mais_antiga_ms, max_age_ms) \
                 VALUES ('{app}', '{tipo}', '{transporte}', {}, {pendentes}, 0, 2, {antiga}, {max_age})",
                db.ha(ha_ms)
            )
        };
        let dia = 86_400_000;
        for sql in [
            plantar("estoque", "pedido.criado", "nats", 120_000, Some((20, 45_000, 7 * dia))),
            plantar("analise", "pedido.criado", "nats", 1_000, Some((3, 4 * dia, 7 * dia))),
            plantar("fiscal", "nota.emitida", "http", 2_000, None),
        ] {
            db.executar(sql, &[], "a receiving app's registration").await;
        }
        let d = diagnosticar(&db, &["--retencao", "30d"], 1);
        assert_eq!(
            problemas(&d),
            vec![
                (s("consumer-near-expiry"), s("pedido.criado"), vec![s("analise")]),
                (s("receiver-silent"), s("pedido.criado"), vec![s("estoque")]),
            ],
            "{d:#}"
        );
        let silencio = d["problems"].as_array().unwrap().iter().find(|p| p["code"] == "receiver-silent").unwrap();
        assert!(silencio["message"].as_str().unwrap().contains("20 waiting"), "{silencio}");
        // The retention must outlive the streams the consumers read (7 days here): a durable
        // created anew replays that much.
        let d = diagnosticar(&db, &["--retencao", "5d", "--horizonte", "1d"], 1);
        assert!(problemas(&d).contains(&(s("retention-too-short"), s(""), vec![s("analise")])) || problemas(&d).contains(&(s("retention-too-short"), s(""), vec![s("estoque")])), "{d:#}");
        let recusa = db.mensageria(&["purgar", "--retencao", "5d", "--horizonte", "1d"]).assert().failure();
        assert!(crate::comum::stderr(&recusa).contains("max_age"), "{}", crate::comum::stderr(&recusa));
        db.mensageria(&["purgar", "--retencao", "5d", "--horizonte", "1d", "--app", "fiscal"]).assert().success();
        // With --max-pending-age, the consumers' oldest messages are judged too.
        let d = diagnosticar(&db, &["--retencao", "30d", "--max-pending-age", "30s"], 1);
        assert!(problemas(&d).contains(&(s("pending-too-old"), s("pedido.criado"), vec![s("estoque")])), "{d:#}");

        let status = db.json_de(&["status"]);
        let recebedores = status["receivers"].as_array().unwrap();
        let estoque = recebedores.iter().find(|r| r["app"] == "estoque").unwrap();
        assert_eq!((estoque["silent"].as_bool(), estoque["pending"].as_i64(), estoque["near_expiry"].as_bool()), (Some(true), Some(20), Some(false)), "{estoque}");
        let analise = recebedores.iter().find(|r| r["app"] == "analise").unwrap();
        assert_eq!((analise["silent"].as_bool(), analise["near_expiry"].as_bool()), (Some(false), Some(true)), "{analise}");
        let fiscal = recebedores.iter().find(|r| r["app"] == "fiscal").unwrap();
        assert!(fiscal["pending"].is_null(), "{fiscal}");
        let tabela = stdout(&db.mensageria(&["status"]).assert().success());
        assert!(tabela.contains("RECEIVING APP") && tabela.contains("2m 00s ago !") && tabela.contains("4d 00h !"), "{tabela}");

        // Unowned dedup records of a tipo two receiving apps receive: who owns them is a problem.
        db.executar("INSERT INTO mensageria_recebidas (app, tipo, chave) VALUES ('', 'pedido.criado', '[1]')".to_owned(), &[], "an unowned record").await;
        db.mensageria(&["recebidas", "esquecer", "--app", "estoque", "--yes"]).assert().success();
        let d = diagnosticar(&db, &["--retencao", "30d"], 1);
        let sem_dono = d["problems"].as_array().unwrap().iter().find(|p| p["code"] == "unowned-dedup-records");
        assert!(sem_dono.is_none(), "one receiving app left: a note, not a problem: {d:#}");
        assert!(d["notes"].as_array().unwrap().iter().any(|n| n.as_str().unwrap().contains("recebidas adotar --app analise --tipo pedido.criado")), "{d:#}");
        plantar_e_reexecutar(&db).await;
    }
}

/// A second receiving app of the tipo comes back: the unowned records are ambiguous again.
async fn plantar_e_reexecutar(db: &impl Alvo) {
    let sql = format!(
        "INSERT INTO mensageria_receptores (app, tipo, transporte, visto_em) VALUES ('estoque', 'pedido.criado', 'nats', {})",
        db.ha(0)
    );
    db.executar(sql, &[], "estoque back").await;
    let d = diagnosticar(db, &["--retencao", "30d"], 1);
    let sem_dono = problemas(&d)
        .into_iter()
        .find(|p| p.0 == "unowned-dedup-records");
    assert_eq!(
        sem_dono,
        Some((
            s("unowned-dedup-records"),
            s("pedido.criado"),
            vec![s("analise"), s("estoque")]
        )),
        "{d:#}"
    );
    // Giving them to one of the two is refused (the other would apply old keys again), unless
    // said on purpose; to both, it goes through.
    let recusa = db
        .mensageria(&["recebidas", "adotar", "--app", "analise", "--yes"])
        .assert()
        .failure();
    let texto = crate::comum::stderr(&recusa);
    assert!(
        texto.contains("also received by estoque") && texto.contains("--so-estes"),
        "{texto}"
    );
    db.mensageria(&[
        "recebidas",
        "adotar",
        "--app",
        "analise",
        "--app",
        "estoque",
        "--yes",
    ])
    .assert()
    .success();
    let d = diagnosticar(db, &["--retencao", "30d"], 1);
    assert!(
        problemas(&d).iter().all(|p| p.0 != "unowned-dedup-records"),
        "{d:#}"
    );
}

nos_dois_bancos! {
    /// `doctor --fluxo`: a stream's tipos and ordered lanes with messages no durable consumes,
    /// and a stream an operator made that has no topology record yet, are problems; a single
    /// replica is a note.
    async fn doctor_ve_o_que_o_fluxo_guarda_sem_consumidor(db) {
        use mensageria_nats::async_nats::jetstream::{consumer::pull, stream};
        use mensageria_testes::nats as bancada;
        mensageria_core::migrar(&db.pool).await.unwrap();
        let url = bancada::url_compartilhada();
        let js = bancada::conectar(&url).await;
        let fluxo = bancada::fluxo_proprio(&js, std::time::Duration::from_secs(120)).await;
        let saudavel = diagnosticar(&db, &["--fluxo", fluxo.nome(), "--nats", &url], 0);
        let notas = saudavel["notes"].to_string();
        assert!(notas.contains("has one replica") && notas.contains("every lane and tipo with messages is consumed"), "{notas}");

        let prefixo = fluxo.prefixo().to_owned();
        js.get_stream(fluxo.nome())
            .await
            .unwrap()
            .create_consumer(pull::Config {
                durable_name: Some("estoque__pedido".into()),
                filter_subject: format!("{prefixo}.pedido.criado"),
                ..Default::default()
            })
            .await
            .unwrap();
        for assunto in [
            format!("{prefixo}.pedido.criado"),
            format!("{prefixo}.ninguem.recebe"),
            fluxo.assunto_ordenado("pedido.criado", "pedido:7"),
        ] {
            js.publish(assunto, "{}".into()).await.unwrap().await.unwrap();
        }
        let d = diagnosticar(&db, &["--fluxo", fluxo.nome(), "--nats", &url], 1);
        let codigos: Vec<String> = problemas(&d).into_iter().map(|(codigo, _, _)| codigo).collect();
        assert_eq!(codigos, [s("lane-unconsumed"), s("tipo-unconsumed")], "{d:#}");
        let texto = d["problems"].to_string();
        assert!(texto.contains("tipo `ninguem.recebe`") && texto.contains("_ordem."), "{texto}");
        js.delete_stream(fluxo.nome()).await.unwrap();

        // Made by hand, never seen by an app: no record.
        let nome = format!("SEMREG{}", uuid::Uuid::now_v7().simple());
        js.create_stream(stream::Config {
            name: nome.clone(),
            subjects: vec![format!("{}.>", nome.to_lowercase())],
            ..Default::default()
        })
        .await
        .unwrap();
        let d = diagnosticar(&db, &["--fluxo", &nome, "--nats", &url], 1);
        assert_eq!(problemas(&d)[0].0, "stream-topology", "{d:#}");
        assert!(d["problems"].to_string().contains("no topology record"), "{d:#}");
        js.delete_stream(&nome).await.unwrap();
        let ausente = diagnosticar(&db, &["--fluxo", &nome, "--nats", &url], 1);
        assert!(ausente["problems"].to_string().contains("does not exist"), "{ausente:#}");
    }
}
