//! Replies: a receptor enqueues its answer event in its own transaction, with the same
//! `enfileirar(&mut *tx, &evento)` as everywhere else; the reply commits with the effect and the
//! dedup record, or rolls back with them.

use mensageria_axum::{Config, Rejeicao, receptor};
use mensageria_core::sqlx::{Encode, Executor, Postgres, Sqlite, Transaction, Type};
use mensageria_core::{Banco, ContextoEnvio, FalhaEnvio, enfileirar, enviador};
use mensageria_testes::{Sql, contar, e_postgres, nos_dois_bancos};
use serde::{Deserialize, Serialize};

#[derive(Deserialize)]
struct Pedido {
    id: i64,
}

/// The reply: this binary sends it, so it has the enviador.
#[derive(Serialize, Deserialize)]
struct Reserva {
    pedido: i64,
}

#[enviador(tipo = "teste.reserva")]
async fn enviar_reserva(_evento: Reserva, _ctx: &ContextoEnvio) -> Result<(), FalhaEnvio> {
    Ok(())
}

/// PostgreSQL: the guide's replying receptor (docs/guide/src/receiving.md, "Replying from a
/// receptor"), written against a concrete backend.
#[receptor(tipo = "teste.pedido", chave_natural = (evento.id))]
async fn reservar_pg(tx: &mut Transaction<'_, Postgres>, evento: Pedido) -> Result<(), Rejeicao> {
    sqlx::query("INSERT INTO reserva (pedido) VALUES ($1)")
        .bind(evento.id)
        .execute(&mut **tx)
        .await?;
    enfileirar(&mut *tx, &Reserva { pedido: evento.id }).await?;
    if evento.id < 0 {
        return Err(Rejeicao::permanente("negative order"));
    }
    Ok(())
}

/// SQLite: the same through a helper generic over the backend.
#[receptor(tipo = "teste.pedido-lite", chave_natural = (evento.id))]
async fn reservar_lite(tx: &mut Transaction<'_, Sqlite>, evento: Pedido) -> Result<(), Rejeicao> {
    reservar(tx, evento.id).await
}

async fn reservar<DB: Sql + Banco>(
    tx: &mut Transaction<'_, DB>,
    pedido: i64,
) -> Result<(), Rejeicao>
where
    for<'c> &'c mut DB::Connection: Executor<'c, Database = DB>,
    i64: for<'q> Encode<'q, DB> + Type<DB>,
{
    sqlx::query("INSERT INTO reserva (pedido) VALUES ($1)")
        .bind(pedido)
        .execute(&mut **tx)
        .await?;
    enfileirar(&mut *tx, &Reserva { pedido }).await?;
    if pedido < 0 {
        return Err(Rejeicao::permanente("negative order"));
    }
    Ok(())
}

nos_dois_bancos! {
    async fn resposta_enfileirada_no_receptor_commita_ou_volta_com_o_efeito(db) {
        mensageria_core::migrar(&db.pool).await.unwrap();
        sqlx::query("CREATE TABLE reserva (pedido BIGINT NOT NULL)").execute(&db.pool).await.unwrap();
        let tipo = if e_postgres(&db.pool) { "teste.pedido" } else { "teste.pedido-lite" };
        let app = mensageria_axum::router(db.pool.clone(), Config::new("receptor", ["t0k-de-teste-1234"])).unwrap();
        let ouvinte = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/m2m/{tipo}", ouvinte.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(ouvinte, app).await });
        let cliente = reqwest::Client::new();
        let postar = |corpo: &'static str| {
            cliente.post(&url).bearer_auth("t0k-de-teste-1234").header("content-type", "application/json").body(corpo).send()
        };

        let aplicada = postar(r#"{"id":7}"#).await.unwrap();
        assert_eq!(aplicada.status(), 200);
        assert!(aplicada.text().await.unwrap().contains("\"applied\""));
        let respostas: Vec<(String, String)> =
            sqlx::query_as("SELECT tipo, CAST(payload AS TEXT) FROM mensageria_saida")
                .fetch_all(&db.pool)
                .await
                .unwrap();
        assert_eq!(respostas.len(), 1, "{respostas:?}");
        assert_eq!(respostas[0].0, "teste.reserva");
        let payload: serde_json::Value = serde_json::from_str(&respostas[0].1).unwrap();
        assert_eq!(payload, serde_json::json!({"pedido": 7}));

        // A duplicate applies nothing, so it enqueues no second reply.
        let repetida = postar(r#"{"id":7}"#).await.unwrap();
        assert!(repetida.text().await.unwrap().contains("\"duplicate\""));

        // Refused after enqueuing: the reply rolls back with the effect and the dedup record.
        assert_eq!(postar(r#"{"id":-1}"#).await.unwrap().status(), 422);
        assert_eq!(contar(&db.pool, "mensageria_saida").await, 1, "only the first reply");
        assert_eq!(contar(&db.pool, "reserva").await, 1, "only the first effect");
        assert_eq!(contar(&db.pool, "mensageria_recebidas").await, 1);
    }
}
