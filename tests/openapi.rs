//! The OpenAPI document a router serves, over real HTTP: one `POST` per receptor with its
//! payload's schema (the one its `utoipa::ToSchema` derives, or "not published" and no schema at
//! all) and every answer the handler can give, with their headers. `scripts/schemathesis` checks a server against
//! such a document from the outside. Snapshot in `snapshots/`; review a
//! change with `cargo insta review` (or `INSTA_UPDATE=always`, then read the diff).

use mensageria_axum::{Config, Rejeicao, receptor};
use mensageria_core::sqlx::{Sqlite, Transaction};
use mensageria_testes::SqliteIsolado;
use serde::Deserialize;

/// The closing of a transport manifest.
#[derive(Deserialize, utoipa::ToSchema)]
#[allow(dead_code)]
struct EncerramentoMdfe {
    /// The issuer.
    cnpj: String,
    /// The manifest's 44-digit key.
    chave_mdfe: String,
    municipio: Municipio,
}

#[derive(Deserialize, utoipa::ToSchema)]
#[allow(dead_code)]
struct Municipio {
    codigo_ibge: u32,
    uf: String,
}

/// A poke without `ToSchema`: its schema is not published, and its body gets no schema rather
/// than one that calls any JSON value valid (`{}` is refused).
#[derive(Deserialize)]
struct CadastroMudou {
    entidade: u64,
    revisao: u32,
}

// An internally tagged enum: its `ToSchema` follows serde's tag (one object per variant, with
// `acao` naming it).
/// A change to the table: a code included or removed.
#[derive(Deserialize, utoipa::ToSchema)]
#[serde(tag = "acao")]
enum Ajuste {
    Incluir { codigo: String },
    Remover { codigo: String },
}

impl Ajuste {
    fn codigo(&self) -> &str {
        match self {
            Self::Incluir { codigo } | Self::Remover { codigo } => codigo,
        }
    }
}

#[receptor(tipo = "mdfe.encerramento", chave_natural = (evento.cnpj, evento.chave_mdfe))]
async fn encerrar(
    _tx: &mut Transaction<'_, Sqlite>,
    evento: EncerramentoMdfe,
) -> Result<(), Rejeicao> {
    let _ = evento.municipio;
    Ok(())
}

#[receptor(tipo = "cadastro.mudou", chave_natural = evento.entidade, versao = evento.revisao)]
async fn cadastro_mudou(
    _tx: &mut Transaction<'_, Sqlite>,
    evento: CadastroMudou,
) -> Result<(), Rejeicao> {
    let _ = evento.entidade;
    Ok(())
}

#[receptor(tipo = "tabela.ajuste", chave_natural = evento.codigo())]
async fn ajustar(_tx: &mut Transaction<'_, Sqlite>, evento: Ajuste) -> Result<(), Rejeicao> {
    let _ = evento.codigo();
    Ok(())
}

#[tokio::test]
async fn documento_descreve_cada_receptor_e_cada_resposta() {
    let db = SqliteIsolado::novo().await;
    mensageria_core::migrar(&db.pool).await.unwrap();
    let app = mensageria_axum::router(
        db.pool.clone(),
        Config::new("receptor", ["t0k-de-teste-1234"]),
    )
    .unwrap();
    let ouvinte = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let endereco = ouvinte.local_addr().unwrap();
    tokio::spawn(async move {
        let _ = axum::serve(ouvinte, app).await;
    });
    let resposta = reqwest::get(format!("http://{endereco}/m2m/openapi.json"))
        .await
        .unwrap();
    assert_eq!(resposta.status(), 200);
    assert!(
        resposta.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("application/json")
    );
    let documento: serde_json::Value = resposta.json().await.unwrap();
    let corpo =
        |tipo: &str| documento["paths"][format!("/m2m/{tipo}")]["post"]["requestBody"].clone();
    assert_eq!(
        corpo("cadastro.mudou")["content"]["application/json"],
        serde_json::json!({}),
        "a payload without ToSchema: no schema, not even `{{}}`"
    );
    assert!(
        corpo("cadastro.mudou")["description"]
            .as_str()
            .unwrap()
            .contains("Schema not published")
    );
    assert_eq!(
        corpo("tabela.ajuste")["content"]["application/json"]["schema"]["$ref"],
        "#/components/schemas/Ajuste"
    );
    insta::assert_json_snapshot!(documento);
    db.descartar().await;
}
