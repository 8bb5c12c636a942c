//! `mortas`: list, show, replay (and the relay then delivers), discard with confirmation.

use mensageria_core::relay::{Config, Relay};
use mensageria_core::{ContextoEnvio, Destino, FalhaEnvio, enviador};
use mensageria_testes::servidor::Servidor;
use mensageria_testes::{contar, nos_dois_bancos};
use serde::{Deserialize, Serialize};

use crate::comum::plantar_morta;
use crate::comum::{Alvo, stderr, stdout};

#[derive(Serialize, Deserialize)]
struct Aviso {
    numero: u32,
}

#[enviador(tipo = "cli.replay")]
async fn enviar_aviso(evento: Aviso, ctx: &ContextoEnvio) -> Result<(), FalhaEnvio> {
    ctx.exigir::<Destino>()?.postar(&evento, ctx).await
}

nos_dois_bancos! {
    async fn reenfileirar_devolve_a_saida_e_o_relay_entrega(db) {
        mensageria_core::migrar(&db.pool).await.unwrap();
        let id = plantar_morta(&db, "cli.replay", r#"{"numero":7}"#).await;
        let outra = plantar_morta(&db, "cli.outro", "{}").await;

        let lista = db.json_de(&["mortas", "listar", "--tipo", "cli.replay"]);
        assert_eq!(lista["total"], 1);
        assert_eq!(lista["dead_letters"][0]["message_id"], id.to_string());
        assert_eq!(lista["dead_letters"][0]["attempts"], 25);
        let todas = db.json_de(&["mortas", "listar"]);
        assert_eq!(todas["total"], 2);

        let morta = db.json_de(&["mortas", "mostrar", &id.to_string()]);
        assert_eq!(morta["payload"]["numero"], 7);
        assert_eq!(morta["last_error"], "gave up after 25 attempts: HTTP 503");

        let feito = db.mensageria(&["mortas", "reenfileirar", &id.to_string()]).assert().success();
        assert!(
            stdout(&feito).starts_with(&format!("re-enqueued dead letter {id} into the saída")),
            "{}",
            stdout(&feito)
        );
        // Back in the saída, attempts reset; the other dead letter untouched.
        assert_eq!(contar(&db.pool, "mensageria_mortas").await, 1);
        assert_eq!(contar(&db.pool, "mensageria_saida WHERE tipo = 'cli.replay' AND tentativas = 0").await, 1);
        assert_eq!(db.json_de(&["mortas", "listar"])["dead_letters"][0]["message_id"], outra.to_string());

        // The relay of the app that sends the tipo delivers it, over real HTTP.
        let servidor = Servidor::iniciar().await;
        let relay = Relay::new(db.pool.clone(), Config::new("cli-teste"))
            .recurso(Destino::new(&servidor.url()).unwrap());
        let rodada = relay.drenar().await.unwrap();
        assert_eq!(rodada.entregues, 1);
        let recebidas = servidor.recebidas();
        assert_eq!(recebidas.len(), 1);
        assert_eq!(recebidas[0].tipo, "cli.replay");
        assert_eq!(recebidas[0].id, id.to_string());
        assert_eq!(recebidas[0].tentativa, "1");
        assert_eq!(serde_json::from_str::<serde_json::Value>(&recebidas[0].corpo).unwrap()["numero"], 7);
        assert_eq!(contar(&db.pool, "mensageria_saida").await, 0);

        // Gone from the dead letters: replaying it again is an error that says so.
        let de_novo = db.mensageria(&["mortas", "reenfileirar", &id.to_string()]).assert().failure();
        assert!(stderr(&de_novo).contains("no dead letter with message id"), "{}", stderr(&de_novo));
    }
}

nos_dois_bancos! {
    async fn reenfileirar_por_tipo_e_todas(db) {
        mensageria_core::migrar(&db.pool).await.unwrap();
        plantar_morta(&db, "x.um", "{}").await;
        plantar_morta(&db, "x.um", "{}").await;
        plantar_morta(&db, "y.dois", "{}").await;

        let por_tipo = db.json_de(&["mortas", "reenfileirar", "--tipo", "x.um"]);
        assert_eq!(por_tipo["requeued"], 2);
        assert_eq!(contar(&db.pool, "mensageria_saida WHERE tipo = 'x.um'").await, 2);
        assert_eq!(contar(&db.pool, "mensageria_mortas WHERE tipo = 'y.dois'").await, 1);

        let nenhuma = db.mensageria(&["mortas", "reenfileirar", "--tipo", "x.um"]).assert().success();
        assert!(stdout(&nenhuma).starts_with("nothing to re-enqueue"), "{}", stdout(&nenhuma));

        let todas = db.mensageria(&["mortas", "reenfileirar", "--todas"]).assert().success();
        assert!(stdout(&todas).starts_with("re-enqueued 1 dead letter(s)"), "{}", stdout(&todas));
        assert_eq!(contar(&db.pool, "mensageria_mortas").await, 0);
        assert_eq!(contar(&db.pool, "mensageria_saida").await, 3);
    }
}

nos_dois_bancos! {
    async fn descartar_pede_confirmacao(db) {
        mensageria_core::migrar(&db.pool).await.unwrap();
        let id = plantar_morta(&db, "z.tres", "{}").await;
        let texto = id.to_string();

        // "n" (or nothing) keeps it.
        let recusado = db.mensageria(&["mortas", "descartar", &texto]).write_stdin("n\n").assert().failure();
        assert!(stderr(&recusado).contains("[y/N]"), "{}", stderr(&recusado));
        assert!(stderr(&recusado).contains("not confirmed: nothing was changed"), "{}", stderr(&recusado));
        // The refusal names the answer the prompt offers (`y`), never another one.
        assert!(stderr(&recusado).contains("answer `y` to confirm, or pass --yes"), "{}", stderr(&recusado));
        db.mensageria(&["mortas", "descartar", &texto]).write_stdin("").assert().failure();
        assert_eq!(contar(&db.pool, "mensageria_mortas").await, 1);

        // Only an English yes confirms: "s"/"sim" (Portuguese) are refused like any other word.
        for nao_ingles in ["s\n", "sim\n"] {
            db.mensageria(&["mortas", "descartar", &texto]).write_stdin(nao_ingles).assert().failure();
        }
        assert_eq!(contar(&db.pool, "mensageria_mortas").await, 1);

        // "y" discards it, and says so.
        let feito = db.mensageria(&["mortas", "descartar", &texto]).write_stdin("y\n").assert().success();
        assert_eq!(
            stdout(&feito).trim(),
            format!("discarded dead letter {id} of tipo `z.tres`: it is gone for good")
        );
        assert_eq!(contar(&db.pool, "mensageria_mortas").await, 0);

        // --yes does not ask.
        let outra = plantar_morta(&db, "z.tres", "{}").await;
        let sem_pergunta = db.mensageria(&["mortas", "descartar", &outra.to_string(), "--yes"]).assert().success();
        assert!(!stderr(&sem_pergunta).contains("[y/N]"));

        // and neither does -y.
        let mais_uma = plantar_morta(&db, "z.tres", "{}").await;
        db.mensageria(&["mortas", "descartar", &mais_uma.to_string(), "-y"]).assert().success();
        assert_eq!(contar(&db.pool, "mensageria_mortas").await, 0);
    }
}
