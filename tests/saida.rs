//! The saída in the caller's transaction, on PostgreSQL and SQLite.

use mensageria_core::{
    ContextoEnvio, Erro, FalhaEnvio, Saida, enfileirar, enfileirar_json, enviador,
};
use mensageria_testes::nos_dois_bancos;
use serde::{Deserialize, Serialize};

#[derive(Debug, PartialEq, Serialize, Deserialize)]
struct Encerramento {
    cnpj: String,
    chave_mdfe: String,
}

#[enviador(tipo = "mdfe.encerramento")]
async fn enviar_encerramento(
    _evento: Encerramento,
    _ctx: &ContextoEnvio,
) -> Result<(), FalhaEnvio> {
    Ok(())
}

#[derive(Debug, PartialEq, Serialize, Deserialize)]
struct Texto {
    texto: String,
}

#[enviador(tipo = "teste.texto")]
async fn enviar_texto(_evento: Texto, _ctx: &ContextoEnvio) -> Result<(), FalhaEnvio> {
    Ok(())
}

fn encerramento() -> Encerramento {
    Encerramento {
        cnpj: "12345678000190".into(),
        chave_mdfe: "41190812345678000190580010000000011000000019".into(),
    }
}

const NEGOCIO: &str = "CREATE TABLE mdfe (chave TEXT PRIMARY KEY, situacao TEXT NOT NULL)";
const ENCERRAR: &str = "INSERT INTO mdfe (chave, situacao) VALUES ($1, 'encerrado')";
const CONTAR_SAIDA: &str = "SELECT count(*) FROM mensageria_saida";
const CONTAR_MDFE: &str = "SELECT count(*) FROM mdfe";
const LINHA: &str = "SELECT tipo, CAST(payload AS TEXT), tentativas, CAST(id_mensagem AS TEXT), correlacao \
                     FROM mensageria_saida";

nos_dois_bancos! {
    async fn commit_grava_negocio_e_mensagem_juntos(db) {
        mensageria_core::migrar(&db.pool).await.unwrap();
        sqlx::query(NEGOCIO).execute(&db.pool).await.unwrap();

        let evento = encerramento();
        let mut tx = db.pool.begin().await.unwrap();
        sqlx::query(ENCERRAR).bind(&evento.chave_mdfe).execute(&mut *tx).await.unwrap();
        let id = enfileirar(&mut *tx, &evento).await.unwrap();
        tx.commit().await.unwrap();

        let mdfe: i64 = sqlx::query_scalar(CONTAR_MDFE).fetch_one(&db.pool).await.unwrap();
        assert_eq!(mdfe, 1);
        let (tipo, payload, tentativas, id_lido, correlacao): (String, String, i32, String, Option<String>) =
            sqlx::query_as(LINHA).fetch_one(&db.pool).await.unwrap();
        assert_eq!(tipo, "mdfe.encerramento");
        assert_eq!(serde_json::from_str::<Encerramento>(&payload).unwrap(), evento);
        assert_eq!(tentativas, 0);
        assert_eq!(id_lido, id.to_string());
        assert_eq!(correlacao, None);
    }
}

nos_dois_bancos! {
    async fn rollback_nao_deixa_nem_negocio_nem_mensagem(db) {
        mensageria_core::migrar(&db.pool).await.unwrap();
        sqlx::query(NEGOCIO).execute(&db.pool).await.unwrap();

        let mut tx = db.pool.begin().await.unwrap();
        sqlx::query(ENCERRAR).bind("chave").execute(&mut *tx).await.unwrap();
        enfileirar(&mut *tx, &encerramento()).await.unwrap();
        tx.rollback().await.unwrap();

        // And a transaction dropped without commit (an early `?` return) rolls back too.
        {
            let mut tx = db.pool.begin().await.unwrap();
            sqlx::query(ENCERRAR).bind("chave").execute(&mut *tx).await.unwrap();
            enfileirar(&mut *tx, &encerramento()).await.unwrap();
        }

        let saida: i64 = sqlx::query_scalar(CONTAR_SAIDA).fetch_one(&db.pool).await.unwrap();
        let mdfe: i64 = sqlx::query_scalar(CONTAR_MDFE).fetch_one(&db.pool).await.unwrap();
        assert_eq!((saida, mdfe), (0, 0));
    }
}

nos_dois_bancos! {
    async fn tipo_dinamico_nao_registrado_falha_antes_de_gravar(db) {
        mensageria_core::migrar(&db.pool).await.unwrap();
        let payload = serde_json::json!({"x": 1});
        for tipo in ["nfe.autorizada", "", "'; DROP TABLE mensageria_saida; --", "mdfe.encerramento\0"] {
            let mut tx = db.pool.begin().await.unwrap();
            let erro = enfileirar_json(&mut *tx, tipo, &payload).await.unwrap_err();
            tx.commit().await.unwrap();
            match &erro {
                Erro::TipoNaoRegistrado { tipo: pedido, registrados } => {
                    assert_eq!(pedido, tipo);
                    assert!(registrados.contains(&"mdfe.encerramento"), "{registrados:?}");
                }
                outro => panic!("expected TipoNaoRegistrado, got {outro:?}"),
            }
            assert!(erro.to_string().contains("#[enviador(tipo ="), "{erro}");
        }
        let saida: i64 = sqlx::query_scalar(CONTAR_SAIDA).fetch_one(&db.pool).await.unwrap();
        assert_eq!(saida, 0);

        // A registered tipo goes through, on a bare pool too.
        let valor = serde_json::to_value(encerramento()).unwrap();
        enfileirar_json(&db.pool, "mdfe.encerramento", &valor).await.unwrap();
        let saida: i64 = sqlx::query_scalar(CONTAR_SAIDA).fetch_one(&db.pool).await.unwrap();
        assert_eq!(saida, 1);
    }
}

nos_dois_bancos! {
    async fn textos_hostis_sao_guardados_como_vieram(db) {
        mensageria_core::migrar(&db.pool).await.unwrap();
        let hostis = [
            "'; DROP TABLE mensageria_saida; --".to_owned(),
            "\" OR 1=1 --".to_owned(),
            "nul\0no meio".to_owned(),
            "\\u0000 literal, \\ barra, $1 ?1 :x".to_owned(),
            "ação 🚚 \u{202e}invertido".to_owned(),
            "x".repeat(1000),
        ];
        for texto in &hostis {
            let mut conexao = db.pool.acquire().await.unwrap();
            enfileirar(&mut *conexao, &Texto { texto: texto.clone() }).await.unwrap();
        }
        let lidos: Vec<String> = sqlx::query_scalar(
            "SELECT CAST(payload AS TEXT) FROM mensageria_saida ORDER BY id",
        )
        .fetch_all(&db.pool)
        .await
        .unwrap();
        let lidos: Vec<String> = lidos
            .iter()
            .map(|json| serde_json::from_str::<Texto>(json).unwrap().texto)
            .collect();
        assert_eq!(lidos, hostis);
    }
}

nos_dois_bancos! {
    async fn payload_acima_do_limite_e_recusado_sem_linha(db) {
        mensageria_core::migrar(&db.pool).await.unwrap();
        // {"texto":"..."} is 12 bytes around the text.
        let no_limite = Texto { texto: "a".repeat(mensageria_core::LIMITE_PAYLOAD_PADRAO - 12) };
        let acima = Texto { texto: "a".repeat(mensageria_core::LIMITE_PAYLOAD_PADRAO - 11) };
        enfileirar(&db.pool, &no_limite).await.unwrap();
        match enfileirar(&db.pool, &acima).await.unwrap_err() {
            Erro::PayloadGrande { tamanho, limite, .. } => {
                assert_eq!((tamanho, limite), (limite + 1, mensageria_core::LIMITE_PAYLOAD_PADRAO));
            }
            outro => panic!("expected PayloadGrande, got {outro:?}"),
        }
        let pequena = Saida::new().com_limite_payload(20);
        assert!(pequena.enfileirar(&db.pool, &Texto { texto: "curto".into() }).await.is_ok());
        assert!(pequena.enfileirar(&db.pool, &Texto { texto: "longo demais".into() }).await.is_err());
        let dinamico = pequena
            .enfileirar_json(&db.pool, "teste.texto", &serde_json::json!({"texto": "longo demais"}))
            .await;
        assert!(matches!(dinamico, Err(Erro::PayloadGrande { .. })));

        let saida: i64 = sqlx::query_scalar(CONTAR_SAIDA).fetch_one(&db.pool).await.unwrap();
        assert_eq!(saida, 2);
    }
}

nos_dois_bancos! {
    async fn correlacao_em_vigor_e_gravada(db) {
        mensageria_core::migrar(&db.pool).await.unwrap();
        let pool = db.pool.clone();
        mensageria_core::correlacao::com("req-7f3a", async move {
            enfileirar(&pool, &encerramento()).await.unwrap();
        })
        .await;
        let correlacao: Option<String> = sqlx::query_scalar("SELECT correlacao FROM mensageria_saida")
            .fetch_one(&db.pool)
            .await
            .unwrap();
        assert_eq!(correlacao.as_deref(), Some("req-7f3a"));
    }
}

nos_dois_bancos! {
    async fn ids_de_mensagem_sao_unicos_e_crescentes(db) {
        mensageria_core::migrar(&db.pool).await.unwrap();
        let mut ids = Vec::new();
        for _ in 0..50 {
            ids.push(enfileirar(&db.pool, &encerramento()).await.unwrap());
        }
        let mut ordenados = ids.clone();
        ordenados.sort();
        ordenados.dedup();
        assert_eq!(ordenados, ids, "UUIDv7 ids are unique and time-ordered");
    }
}

#[test]
fn registro_deste_binario_tem_os_dois_tipos_e_e_valido() {
    let registro = mensageria_core::Registro::global();
    assert!(registro.tipos().contains(&"mdfe.encerramento"));
    assert!(registro.tipos().contains(&"teste.texto"));
    let enviador = registro.enviador("mdfe.encerramento").unwrap();
    assert_eq!(enviador.tipo_rust, "Encerramento");
    assert_eq!(enviador.funcao, "enviar_encerramento");
    assert_eq!(enviador.modulo, "saida");
    registro.validar().unwrap();
}

#[tokio::test]
async fn despacho_decodifica_e_chama_a_funcao() {
    let registro = mensageria_core::Registro::global();
    let ctx = ContextoEnvio::new(uuid::Uuid::now_v7(), "teste.texto");
    let enviador = registro.enviador("teste.texto").unwrap();
    assert!(enviador.despachar(r#"{"texto":"oi"}"#, &ctx).await.is_ok());
    let falha = enviador
        .despachar(r#"{"outro":1}"#, &ctx)
        .await
        .unwrap_err();
    assert!(matches!(falha, FalhaEnvio::Permanente { .. }), "{falha}");
}

nos_dois_bancos! {
    // Compiling is half of this test: `tokio::spawn` and Axum handlers require `Send` futures,
    // and a future that awaits `enfileirar(&mut *tx, ..)` must be `Send` for every lifetime of
    // the borrow (it was not while the store's insert returned an opaque future).
    async fn enfileirar_dentro_de_tarefa_e_de_handler_axum(db) {
        mensageria_core::migrar(&db.pool).await.unwrap();
        let pool = db.pool.clone();
        let id = tokio::spawn(async move {
            let mut tx = pool.begin().await.unwrap();
            let id = enfileirar(&mut *tx, &encerramento()).await.unwrap();
            tx.commit().await.unwrap();
            id
        })
        .await
        .unwrap();

        let pool = db.pool.clone();
        let app = axum::Router::new().route(
            "/encerrar",
            axum::routing::post(move || async move {
                let mut tx = pool.begin().await.unwrap();
                let id = enfileirar(&mut *tx, &encerramento()).await.unwrap();
                tx.commit().await.unwrap();
                id.to_string()
            }),
        );
        let ouvinte = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let endereco = ouvinte.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(ouvinte, app).await });
        let resposta = reqwest::Client::new()
            .post(format!("http://{endereco}/encerrar"))
            .send()
            .await
            .unwrap();
        assert!(resposta.status().is_success());
        let id_do_handler = resposta.text().await.unwrap();

        let mut ids: Vec<String> = sqlx::query_scalar("SELECT CAST(id_mensagem AS TEXT) FROM mensageria_saida")
            .fetch_all(&db.pool)
            .await
            .unwrap();
        ids.sort();
        let mut esperados = vec![id.to_string(), id_do_handler];
        esperados.sort();
        assert_eq!(ids, esperados);
    }
}

/// A helper handed someone else's transaction, as a receptor is.
async fn enfileirar_na_transacao_de_outro<DB: mensageria_core::Banco>(
    tx: &mut sqlx::Transaction<'_, DB>,
) -> Result<uuid::Uuid, Erro> {
    enfileirar(&mut *tx, &encerramento()).await
}

nos_dois_bancos! {
    /// Every way of holding a transaction, a connection or the pool is accepted by the same
    /// call, and what goes through a transaction commits or rolls back with it.
    async fn enfileirar_aceita_transacao_conexao_e_pool(db) {
        mensageria_core::migrar(&db.pool).await.unwrap();
        let mut tx = db.pool.begin().await.unwrap();
        enfileirar(&mut *tx, &encerramento()).await.unwrap(); // tx: Transaction
        enfileirar(&mut tx, &encerramento()).await.unwrap();
        enfileirar_na_transacao_de_outro(&mut tx).await.unwrap(); // tx: &mut Transaction
        enfileirar_json(&mut tx, "teste.texto", &serde_json::json!({"texto": "t"})).await.unwrap();
        tx.rollback().await.unwrap();
        assert_eq!(mensageria_testes::contar(&db.pool, "mensageria_saida").await, 0, "rolled back with the transaction");

        let mut tx = db.pool.begin().await.unwrap();
        enfileirar(&mut *tx, &encerramento()).await.unwrap();
        enfileirar_na_transacao_de_outro(&mut tx).await.unwrap();
        tx.commit().await.unwrap();
        let mut conexao = db.pool.acquire().await.unwrap();
        enfileirar(&mut *conexao, &encerramento()).await.unwrap();
        enfileirar(&mut conexao, &encerramento()).await.unwrap();
        drop(conexao);
        enfileirar(&db.pool, &encerramento()).await.unwrap();
        assert_eq!(mensageria_testes::contar(&db.pool, "mensageria_saida").await, 5);
    }
}
