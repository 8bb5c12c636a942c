//! `apps listar` and `apps remover`: each app with its tipos, instances and their state, and
//! forgetting a retired app without touching the saída or the dead letters.

use mensageria_testes::{contar, nos_dois_bancos};
use serde_json::{Value, json};

use crate::comum::{
    Alvo, plantar_app, plantar_instancia, plantar_morta, plantar_saida, stderr, stdout,
};

/// Plants one app of each state:
/// - `emissor`, alive: one live instance holding one of its two pending rows, one stopped, one
///   taken over; claims `a.um` and `b.dois`;
/// - `fiscal`, stopped gracefully five minutes ago, one row of `c.tres` left in the saída;
/// - `caiu`, dead for an hour (no graceful stop, nobody took over);
/// - `legado` and `velho`, relays that record no instances: one refreshing `mensageria_apps`,
///   one silent for two hours.
async fn plantar_frota(db: &impl Alvo) {
    plantar_app(db, "emissor", "a.um", 2_000).await;
    plantar_app(db, "emissor", "b.dois", 2_000).await;
    plantar_instancia(db, "emissor@pod-1", "emissor", 500, None, None).await;
    plantar_instancia(db, "emissor@pod-0", "emissor", 600_000, Some(600_000), None).await;
    plantar_instancia(db, "emissor@pod-9", "emissor", 900_000, None, Some(895_000)).await;
    plantar_saida(db, "a.um", 0, 1_000, false).await;
    let em_voo = plantar_saida(db, "a.um", 1, 2_000, true).await;
    db.executar(
        format!(
            "UPDATE mensageria_saida SET lease_dono = 'emissor@pod-1' WHERE id_mensagem = {}",
            db.uuid("$1")
        ),
        &[&em_voo.to_string()],
        "lease a row to emissor@pod-1",
    )
    .await;

    plantar_app(db, "fiscal", "c.tres", 300_000).await;
    plantar_instancia(db, "fiscal@pod-1", "fiscal", 300_000, Some(300_000), None).await;
    plantar_saida(db, "c.tres", 0, 400_000, false).await;

    plantar_app(db, "caiu", "d.quatro", 3_600_000).await;
    plantar_instancia(db, "caiu@pod-1", "caiu", 3_600_000, None, None).await;

    plantar_app(db, "legado", "f.seis", 1_000).await;
    plantar_app(db, "velho", "e.cinco", 7_200_000).await;
}

/// The field `campo` of every element of `lista`.
fn campos(lista: &Value, campo: &str) -> Vec<Value> {
    lista
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v[campo].clone())
        .collect()
}

nos_dois_bancos! {
    async fn apps_listar_json(db) {
        mensageria_core::migrar(&db.pool).await.unwrap();
        plantar_frota(&db).await;

        let lista = db.json_de(&["apps", "listar"]);
        let apps = &lista["apps"];
        assert_eq!(
            campos(apps, "app"),
            [json!("caiu"), json!("emissor"), json!("fiscal"), json!("legado"), json!("velho")],
            "{lista:#}"
        );
        assert_eq!(
            campos(apps, "state"),
            [json!("dead"), json!("alive"), json!("stopped"), json!("alive"), json!("silent")]
        );
        assert_eq!(campos(apps, "pending"), [json!(0), json!(2), json!(1), json!(0), json!(0)]);

        let emissor = &apps[1];
        // Its keys (and its tipos' and instances') are pinned with every command's in json.rs.
        assert!(emissor["last_heartbeat_ago_ms"].as_i64().unwrap() < 10_000, "{emissor:#}");
        assert_eq!(campos(&emissor["tipos"], "tipo"), [json!("a.um"), json!("b.dois")]);
        assert_eq!(campos(&emissor["tipos"], "pending"), [json!(2), json!(0)]);
        let instancias = &emissor["instances"];
        assert_eq!(
            campos(instancias, "instance"),
            [json!("emissor@pod-1"), json!("emissor@pod-0"), json!("emissor@pod-9")],
            "newest heartbeat first"
        );
        assert_eq!(
            campos(instancias, "state"),
            [json!("alive"), json!("stopped"), json!("taken-over")]
        );
        assert_eq!(campos(instancias, "in_flight"), [json!(1), json!(0), json!(0)]);
        assert_eq!(campos(instancias, "dead_after_ms"), [json!(3000), json!(3000), json!(3000)]);
        assert_eq!(instancias[0]["stopped_at"], Value::Null);
        assert!(instancias[1]["stopped_at"].is_string(), "{instancias:#}");
        assert!(instancias[2]["taken_over_at"].is_string(), "{instancias:#}");
        let visto = instancias[1]["last_heartbeat_ago_ms"].as_i64().unwrap();
        assert!((600_000..660_000).contains(&visto), "{visto}");

        let caiu = &apps[0];
        assert_eq!(caiu["instances"][0]["state"], "dead");
        assert_eq!(caiu["instances"][0]["replaced"], false);
        // The relays that record no instances: judged by `mensageria_apps`.
        assert_eq!(apps[4]["instances"], json!([]));
        let silencio = apps[4]["last_heartbeat_ago_ms"].as_i64().unwrap();
        assert!((7_200_000..7_300_000).contains(&silencio), "{silencio}");
    }
}

nos_dois_bancos! {
    async fn apps_listar_tabela(db) {
        // Nothing yet: said so.
        mensageria_core::migrar(&db.pool).await.unwrap();
        let vazio = db.mensageria(&["apps", "listar"]).assert().success();
        assert!(stdout(&vazio).starts_with("no app registered"), "{}", stdout(&vazio));

        plantar_frota(&db).await;
        let tabela = stdout(&db.mensageria(&["apps", "listar"]).assert().success());
        let linhas: Vec<&str> = tabela.lines().collect();
        let celulas = |i: usize| linhas[i].split("  ").map(str::trim).filter(|c| !c.is_empty()).collect::<Vec<_>>();
        assert_eq!(
            celulas(0),
            ["APP", "STATE", "PENDING", "TIPOS", "INSTANCE", "INSTANCE STATE", "LAST HEARTBEAT"],
            "{tabela}"
        );
        assert_eq!(celulas(1), ["caiu", "dead", "0", "d.quatro", "caiu@pod-1", "dead", "1h 00m ago"], "{tabela}");
        assert_eq!(&celulas(2)[..6], ["emissor", "alive", "2", "a.um, b.dois", "emissor@pod-1", "alive"], "{tabela}");
        // The app's other instances on lines of their own, the app's columns left blank.
        assert!(linhas[3].starts_with(' '), "{tabela}");
        // (Ages to the second move while the test runs: only their minutes are checked.)
        assert_eq!(celulas(3)[..2], ["emissor@pod-0", "stopped"], "{tabela}");
        assert!(celulas(3)[2].starts_with("10m "), "{tabela}");
        assert_eq!(celulas(4)[..2], ["emissor@pod-9", "taken over"], "{tabela}");
        assert_eq!(&celulas(5)[..6], ["fiscal", "stopped", "1", "c.tres", "fiscal@pod-1", "stopped"], "{tabela}");
        assert!(celulas(5)[6].starts_with("5m "), "{tabela}");
        assert_eq!(&celulas(6)[..6], ["legado", "alive", "0", "f.seis", "- (old relay)", "-"], "{tabela}");
        assert_eq!(celulas(7), ["velho", "silent", "0", "e.cinco", "- (old relay)", "-", "2h 00m ago"], "{tabela}");
        assert_eq!(linhas.len(), 8, "{tabela}");
    }
}

nos_dois_bancos! {
    async fn apps_remover_recusa_app_vivo(db) {
        mensageria_core::migrar(&db.pool).await.unwrap();
        plantar_frota(&db).await;
        let antes = (contar(&db.pool, "mensageria_apps").await, contar(&db.pool, "mensageria_instancias").await);

        // Alive through an instance: refused, even with --yes, without asking.
        let vivo = db.mensageria(&["apps", "remover", "emissor", "--yes"]).assert().code(1);
        let erro = stderr(&vivo);
        assert_eq!(erro.lines().count(), 1, "{erro}");
        assert!(
            erro.starts_with("mensageria: refusing to remove app `emissor`: it is alive (instance(s) emissor@pod-1 heart-beat "),
            "{erro}"
        );
        assert!(erro.contains("stop its relays first"), "{erro}");
        // Alive through `mensageria_apps` (a relay that records no instances): refused too.
        let legado = db.mensageria(&["apps", "remover", "legado"]).write_stdin("y\n").assert().code(1);
        assert!(stderr(&legado).contains("refusing to remove app `legado`: it is alive (its relay"), "{}", stderr(&legado));
        assert!(!stderr(&legado).contains("[y/N]"), "refused before asking");
        // An app nobody knows.
        let nada = db.mensageria(&["apps", "remover", "nada", "--yes"]).assert().code(1);
        assert!(stderr(&nada).starts_with("mensageria: no app `nada` in mensageria_apps or mensageria_instancias"), "{}", stderr(&nada));

        assert_eq!((contar(&db.pool, "mensageria_apps").await, contar(&db.pool, "mensageria_instancias").await), antes);
    }
}

nos_dois_bancos! {
    async fn apps_remover_parado_e_morto(db) {
        mensageria_core::migrar(&db.pool).await.unwrap();
        plantar_frota(&db).await;
        plantar_morta(&db, "c.tres", "{}").await;

        // Stopped, --yes: gone from both tables; its row in the saída and its dead letter stay.
        let feito = db.mensageria(&["apps", "remover", "fiscal", "--yes"]).assert().success();
        let texto = stdout(&feito);
        assert!(!stderr(&feito).contains("[y/N]"), "--yes does not ask");
        assert!(
            texto.starts_with(
                "removed app `fiscal` (it was stopped): deleted 1 instance row(s) from \
                 mensageria_instancias and 1 tipo registration(s) from mensageria_apps; the saída \
                 and the dead letters were not touched\n"
            ),
            "{texto}"
        );
        assert!(texto.contains("1 row(s) of its tipos still wait in the saída"), "{texto}");
        assert_eq!(contar(&db.pool, "mensageria_apps WHERE app = 'fiscal'").await, 0);
        assert_eq!(contar(&db.pool, "mensageria_instancias WHERE app = 'fiscal'").await, 0);
        assert_eq!(contar(&db.pool, "mensageria_saida WHERE tipo = 'c.tres'").await, 1);
        assert_eq!(contar(&db.pool, "mensageria_mortas").await, 1);

        // Dead: asks; "n" (or nothing) changes nothing.
        let recusado = db.mensageria(&["apps", "remover", "caiu"]).write_stdin("n\n").assert().code(1);
        let erro = stderr(&recusado);
        assert!(
            erro.starts_with("remove app `caiu` (dead; 1 instance row(s); tipos: d.quatro) from mensageria_apps and mensageria_instancias? The saída and the dead letters are not touched. [y/N] "),
            "{erro}"
        );
        assert!(erro.contains("not confirmed: nothing was changed (answer `y` to confirm, or pass --yes)"), "{erro}");
        db.mensageria(&["apps", "remover", "caiu"]).write_stdin("").assert().code(1);
        assert_eq!(contar(&db.pool, "mensageria_instancias WHERE app = 'caiu'").await, 1);
        assert_eq!(contar(&db.pool, "mensageria_apps WHERE app = 'caiu'").await, 1);

        // "y" removes it; --json says what was removed.
        let removido = db.mensageria(&["apps", "remover", "caiu", "--json"]).write_stdin("y\n").assert().success();
        let removido: Value = serde_json::from_str(&stdout(&removido)).unwrap();
        assert_eq!(
            removido,
            json!({"app": "caiu", "state": "dead", "instances_removed": 1, "registrations_removed": 1, "pending": 0})
        );
        assert_eq!(contar(&db.pool, "mensageria_instancias WHERE app = 'caiu'").await, 0);

        // A silent relay that records no instances, with -y.
        db.mensageria(&["apps", "remover", "velho", "-y"]).assert().success();
        assert_eq!(contar(&db.pool, "mensageria_apps WHERE app = 'velho'").await, 0);

        // The others are untouched, and the listing no longer shows the removed ones.
        let restantes = db.json_de(&["apps", "listar"]);
        assert_eq!(campos(&restantes["apps"], "app"), [json!("emissor"), json!("legado")]);
        assert_eq!(contar(&db.pool, "mensageria_instancias").await, 3);
        assert_eq!(contar(&db.pool, "mensageria_saida").await, 3);
    }
}

nos_dois_bancos! {
    /// Every instance ever started stays in `mensageria_instancias` (a deploy a day, a crash
    /// loop): `apps listar` hides those that ended (stopped, taken over, or dead and replaced)
    /// over a day ago, says how many it hid, and shows them with --all. The app's state is still
    /// judged on every instance.
    async fn apps_listar_esconde_instancias_encerradas_ha_mais_de_um_dia(db) {
        mensageria_core::migrar(&db.pool).await.unwrap();
        plantar_app(&db, "diario", "d.um", 1_000).await;
        plantar_instancia(&db, "diario@hoje", "diario", 500, None, None).await;
        plantar_instancia(&db, "diario@ontem", "diario", 3_600_000, Some(3_600_000), None).await;
        for dias in 2..=6 {
            let ha = dias * 86_400_000;
            plantar_instancia(&db, &format!("diario@d{dias}"), "diario", ha, Some(ha), None).await;
        }
        plantar_instancia(&db, "diario@caiu", "diario", 3 * 86_400_000, None, Some(3 * 86_400_000 - 5_000)).await;
        // An app whose every instance ended long ago is still listed, as stopped.
        plantar_instancia(&db, "aposentado@1", "aposentado", 9 * 86_400_000, Some(9 * 86_400_000), None).await;

        let lista = db.json_de(&["apps", "listar"]);
        let diario = lista["apps"].as_array().unwrap().iter().find(|a| a["app"] == "diario").unwrap();
        assert_eq!(campos(&diario["instances"], "instance"), [json!("diario@hoje"), json!("diario@ontem")], "{lista:#}");
        assert_eq!(diario["hidden_instances"], 6);
        assert_eq!(diario["state"], "alive");
        let aposentado = lista["apps"].as_array().unwrap().iter().find(|a| a["app"] == "aposentado").unwrap();
        assert_eq!(aposentado["state"], "stopped");
        assert_eq!(aposentado["instances"], json!([]));
        assert_eq!(aposentado["hidden_instances"], 1);

        let todas = db.json_de(&["apps", "listar", "--all"]);
        let diario = todas["apps"].as_array().unwrap().iter().find(|a| a["app"] == "diario").unwrap();
        assert_eq!(diario["instances"].as_array().unwrap().len(), 8);
        assert_eq!(diario["hidden_instances"], 0);

        let texto = stdout(&db.mensageria(&["apps", "listar"]).assert().success());
        assert!(!texto.contains("diario@d2"), "{texto}");
        assert!(texto.contains("7 instance(s) that ended over a day ago hidden; --all shows them"), "{texto}");
    }
}
