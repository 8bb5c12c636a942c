//! The `--json` output is an interface: every command's keys are pinned here, and each one is
//! documented in the guide's "JSON output" table (`docs/guide/src/operating.md`), so a rename
//! cannot slip through unnoticed and no key goes undocumented. Keys are English snake_case, the
//! words of the table headers; `tipo` and `app` keep the domain's names.

use std::collections::BTreeSet;

use serde_json::Value;

use crate::comum::{Alvo, plantar_app, plantar_instancia, plantar_morta, plantar_saida};
use mensageria_testes::nos_dois_bancos;

/// Every key path of `valor`: `a`, `a.b`, `lista[].c`.
fn caminhos(valor: &Value, prefixo: &str, saida: &mut BTreeSet<String>) {
    match valor {
        Value::Object(campos) => {
            for (chave, filho) in campos {
                // A dead letter's payload is the user's JSON, not ours.
                let caminho = if prefixo.is_empty() {
                    chave.clone()
                } else {
                    format!("{prefixo}.{chave}")
                };
                saida.insert(caminho.clone());
                if chave != "payload" {
                    caminhos(filho, &caminho, saida);
                }
            }
        }
        Value::Array(itens) => {
            for item in itens {
                caminhos(item, &format!("{prefixo}[]"), saida);
            }
        }
        _ => {}
    }
}

fn chaves_de(db: &impl Alvo, args: &[&str]) -> BTreeSet<String> {
    let mut saida = BTreeSet::new();
    caminhos(&db.json_de(args), "", &mut saida);
    saida
}

fn conjunto(chaves: &[&str]) -> BTreeSet<String> {
    chaves.iter().map(|c| (*c).to_owned()).collect()
}

/// The receiving apps' keys, in `status` and `apps listar`.
const RECEBEDORES: [&str; 12] = [
    "receivers",
    "receivers[].app",
    "receivers[].tipo",
    "receivers[].transport",
    "receivers[].last_seen_ago_ms",
    "receivers[].silent",
    "receivers[].pending",
    "receivers[].in_flight",
    "receivers[].redelivered",
    "receivers[].oldest_age_ms",
    "receivers[].max_age_ms",
    "receivers[].near_expiry",
];

/// The pinned keys of each command, as `(command, keys)`.
fn fixadas() -> Vec<(&'static str, BTreeSet<String>)> {
    vec![
        ("migrar", conjunto(&["version_before", "version_after"])),
        (
            "verificar",
            conjunto(&["applied_version", "expected_version"]),
        ),
        (
            "status",
            conjunto(&[
                "tipos",
                "tipos[].tipo",
                "tipos[].pending",
                "tipos[].in_flight",
                "tipos[].blocked",
                "tipos[].held",
                "tipos[].oldest_age_ms",
                "tipos[].attempts",
                "tipos[].attempts[].range",
                "tipos[].attempts[].messages",
                "tipos[].dead",
                "tipos[].received_dead",
                "tipos[].claimed_by",
                "tipos[].claimed_by[].app",
                "tipos[].claimed_by[].last_seen_ago_ms",
                "tipos[].claimed_by[].last_seen_at",
            ])
            .union(&conjunto(&RECEBEDORES))
            .cloned()
            .collect(),
        ),
        (
            "mortas listar",
            conjunto(&[
                "total",
                "dead_letters",
                "dead_letters[].message_id",
                "dead_letters[].tipo",
                "dead_letters[].attempts",
                "dead_letters[].app",
                "dead_letters[].dead_at",
                "dead_letters[].dead_ago_ms",
                "dead_letters[].last_error",
            ]),
        ),
        (
            "mortas mostrar",
            conjunto(&[
                "message_id",
                "tipo",
                "attempts",
                "last_error",
                "app",
                "correlation_id",
                "created_at",
                "dead_at",
                "dead_ago_ms",
                "traceparent",
                "payload",
            ]),
        ),
        (
            "mortas reenfileirar",
            conjunto(&["requeued", "message_id", "tipo"]),
        ),
        ("mortas descartar", conjunto(&["discarded", "tipo"])),
        (
            "mortas-recebidas listar",
            conjunto(&[
                "total",
                "received_dead_letters",
                "received_dead_letters[].message_id",
                "received_dead_letters[].app",
                "received_dead_letters[].tipo",
                "received_dead_letters[].origin",
                "received_dead_letters[].deliveries",
                "received_dead_letters[].dead_at",
                "received_dead_letters[].reason",
            ]),
        ),
        (
            "mortas-recebidas mostrar",
            conjunto(&[
                "message_id",
                "app",
                "tipo",
                "origin",
                "deliveries",
                "reason",
                "correlation_id",
                "dead_at",
                "payload",
            ]),
        ),
        (
            "mortas-recebidas descartar",
            conjunto(&["discarded", "app", "tipo"]),
        ),
        (
            "ordem mostrar",
            conjunto(&[
                "key",
                "total",
                "head",
                "messages",
                "messages[].position",
                "messages[].sequence",
                "messages[].message_id",
                "messages[].tipo",
                "messages[].where",
                "messages[].state",
                "messages[].attempts",
                "messages[].held_by",
                "messages[].claimed_by",
                "messages[].leased_by",
                "messages[].next_attempt_in_ms",
                "messages[].age_ms",
                "messages[].last_error",
                "messages[].app",
            ]),
        ),
        (
            "purgar",
            conjunto(&["deleted", "batches", "batch_size", "retention_s", "app"]),
        ),
        (
            "recebidas listar",
            conjunto(&[
                "records",
                "records[].app",
                "records[].tipo",
                "records[].records",
                "records[].newest_ago_ms",
                "receivers",
                "receivers[].app",
                "receivers[].tipo",
                "receivers[].transport",
                "receivers[].last_seen_ago_ms",
            ]),
        ),
        ("recebidas adotar", conjunto(&["apps", "tipo", "adopted"])),
        (
            "recebidas esquecer",
            conjunto(&["app", "registrations_removed"]),
        ),
        (
            "doctor",
            conjunto(&[
                "healthy",
                "applied_version",
                "expected_version",
                "problems",
                "problems[].code",
                "problems[].tipo",
                "problems[].apps",
                "problems[].message",
                "notes",
                "apps",
                "apps[].app",
                "apps[].state",
                "apps[].last_heartbeat_ago_ms",
            ]),
        ),
        (
            "apps listar",
            conjunto(&[
                "apps",
                "apps[].app",
                "apps[].state",
                "apps[].last_heartbeat_ago_ms",
                "apps[].last_heartbeat_at",
                "apps[].pending",
                "apps[].tipos",
                "apps[].tipos[].tipo",
                "apps[].tipos[].pending",
                "apps[].tipos[].last_seen_ago_ms",
                "apps[].tipos[].last_seen_at",
                "apps[].instances",
                "apps[].instances[].instance",
                "apps[].instances[].state",
                "apps[].instances[].replaced",
                "apps[].instances[].started_at",
                "apps[].instances[].last_heartbeat_ago_ms",
                "apps[].instances[].last_heartbeat_at",
                "apps[].instances[].stopped_at",
                "apps[].instances[].taken_over_at",
                "apps[].instances[].dead_after_ms",
                "apps[].instances[].in_flight",
                "apps[].hidden_instances",
            ])
            .union(&conjunto(&RECEBEDORES))
            .cloned()
            .collect(),
        ),
        (
            "apps remover",
            conjunto(&[
                "app",
                "state",
                "instances_removed",
                "registrations_removed",
                "pending",
            ]),
        ),
    ]
}

nos_dois_bancos! {
    async fn as_chaves_json_sao_fixas(db) {
        let mut vistas = Vec::new();
        vistas.push(("migrar", chaves_de(&db, &["migrar"])));
        vistas.push(("verificar", chaves_de(&db, &["verificar"])));
        plantar_saida(&db, "a.um", 3, 60_000, false).await;
        // A row no app claims: doctor has a problem to report.
        plantar_saida(&db, "orfa.x", 0, 60_000, false).await;
        plantar_app(&db, "emissor", "a.um", 0).await;
        plantar_instancia(&db, "emissor@1", "emissor", 0, None, None).await;
        plantar_app(&db, "antigo", "b.dois", 3_600_000).await;
        plantar_instancia(&db, "antigo@1", "antigo", 3_600_000, Some(3_600_000), None).await;
        let morta = plantar_morta(&db, "a.um", r#"{"n": 1}"#).await.to_string();
        let outra = plantar_morta(&db, "a.um", "{}").await.to_string();
        let registro = "INSERT INTO mensageria_receptores (app, tipo, transporte, pendentes, em_voo, \
             reentregues, mais_antiga_ms, max_age_ms) VALUES ('estoque', 'a.um', 'nats', 3, 1, 0, 1500, 604800000)";
        db.executar(registro.to_owned(), &[], "a receiving app's registration").await;
        vistas.push(("status", chaves_de(&db, &["status"])));
        vistas.push(("mortas listar", chaves_de(&db, &["mortas", "listar"])));
        vistas.push(("mortas mostrar", chaves_de(&db, &["mortas", "mostrar", &morta])));
        vistas.push(("mortas reenfileirar", chaves_de(&db, &["mortas", "reenfileirar", &morta])));
        vistas.push(("mortas descartar", chaves_de(&db, &["mortas", "descartar", &outra, "--yes"])));
        let recebida = crate::comum::plantar_morta_recebida(&db, "estoque", "a.um", "{}", "refused").await.to_string();
        vistas.push(("mortas-recebidas listar", chaves_de(&db, &["mortas-recebidas", "listar"])));
        vistas.push(("mortas-recebidas mostrar", chaves_de(&db, &["mortas-recebidas", "mostrar", &recebida])));
        vistas.push(("mortas-recebidas descartar", chaves_de(&db, &["mortas-recebidas", "descartar", &recebida, "--yes"])));
        let ordenada = plantar_saida(&db, "a.um", 0, 1_000, false).await;
        let sql = format!(
            "UPDATE mensageria_saida SET chave_ordem = 'k:1', seq_ordem = 1 WHERE id_mensagem = {}",
            db.uuid("$1")
        );
        db.executar(sql, &[&ordenada.to_string()], "order a row").await;
        vistas.push(("ordem mostrar", chaves_de(&db, &["ordem", "mostrar", "k:1"])));
        vistas.push(("purgar", chaves_de(&db, &["purgar"])));
        let sem_dono = "INSERT INTO mensageria_recebidas (app, tipo, chave) VALUES ('', 'a.um', '[1]')";
        db.executar(sem_dono.to_owned(), &[], "an unowned dedup record").await;
        vistas.push(("recebidas listar", chaves_de(&db, &["recebidas", "listar"])));
        vistas.push(("recebidas adotar", chaves_de(&db, &["recebidas", "adotar", "--app", "estoque", "--yes"])));
        vistas.push(("recebidas esquecer", chaves_de(&db, &["recebidas", "esquecer", "--app", "estoque", "--yes"])));
        vistas.push(("doctor", {
            let saida = db.mensageria(&["doctor", "--json"]).output().unwrap();
            let mut chaves = BTreeSet::new();
            caminhos(&serde_json::from_slice(&saida.stdout).unwrap(), "", &mut chaves);
            chaves
        }));
        let outro = "INSERT INTO mensageria_receptores (app, tipo, transporte, pendentes, em_voo, \
             reentregues, mais_antiga_ms, max_age_ms) VALUES ('analise', 'a.um', 'nats', 0, 0, 0, 0, 604800000)";
        db.executar(outro.to_owned(), &[], "another receiving app").await;
        vistas.push(("apps listar", chaves_de(&db, &["apps", "listar"])));
        vistas.push(("apps remover", chaves_de(&db, &["apps", "remover", "antigo", "--yes"])));

        let guia = concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/guide/src/operating.md");
        let leia_me = std::fs::read_to_string(guia).unwrap();
        let tabela = leia_me
            .split("<!-- json-keys -->")
            .nth(1)
            .expect("the guide's JSON output table (operating.md), between <!-- json-keys --> markers");
        assert_eq!(vistas.len(), fixadas().len(), "every pinned command is run, and only those");
        for ((comando, vistas), (fixado, esperadas)) in vistas.into_iter().zip(fixadas()) {
            assert_eq!(comando, fixado);
            assert_eq!(vistas, esperadas, "`mensageria {comando} --json`: keys changed");
            for chave in &esperadas {
                assert!(
                    tabela.contains(&format!("`{chave}`")),
                    "`{chave}` of `mensageria {comando} --json` is not in the guide's table (operating.md)"
                );
            }
        }
    }
}
