//! `teste::ServidorDeTeste` over real HTTP, serving a receptor on a `PgIsolado` schema of the
//! real PostgreSQL: it counts every request, and `parar` stops it gracefully.

use mensageria_axum::teste::ServidorDeTeste;
use mensageria_axum::{Config, Rejeicao, receptor};
use mensageria_core::sqlx::{self, Postgres, Transaction};
use mensageria_core::teste::PgIsolado;
use serde::Deserialize;

#[derive(Deserialize)]
struct Aviso {
    chave: String,
}

#[receptor(tipo = "servidor_de_teste.aviso", chave_natural = evento.chave)]
async fn receber(tx: &mut Transaction<'_, Postgres>, evento: Aviso) -> Result<(), Rejeicao> {
    sqlx::query("INSERT INTO efeito (chave) VALUES ($1)")
        .bind(&evento.chave)
        .execute(&mut **tx)
        .await?;
    Ok(())
}

#[tokio::test]
async fn conta_os_pedidos_e_para_com_graca() {
    let db = PgIsolado::novo().await.unwrap();
    sqlx::query("CREATE TABLE efeito (chave TEXT NOT NULL)")
        .execute(db.pool())
        .await
        .unwrap();
    let app = mensageria_axum::router(
        db.pool().clone(),
        Config::new("receptor", ["t0k-de-teste-1234"]),
    )
    .unwrap();
    let servidor = ServidorDeTeste::iniciar(app).await.unwrap();
    assert!(servidor.base().starts_with("http://127.0.0.1:"));
    assert_eq!(servidor.url("/m2m"), format!("{}/m2m", servidor.base()));
    assert_eq!(servidor.pedidos(), 0);

    let cliente = reqwest::Client::new();
    let rota = servidor.url("/m2m/servidor_de_teste.aviso");
    let mut resultados = Vec::new();
    for _ in 0..2 {
        let resposta = cliente
            .post(&rota)
            .bearer_auth("t0k-de-teste-1234")
            .header("content-type", "application/json")
            .body(r#"{"chave":"k-1"}"#)
            .send()
            .await
            .unwrap();
        assert_eq!(resposta.status(), 200);
        let corpo: serde_json::Value =
            serde_json::from_str(&resposta.text().await.unwrap()).unwrap();
        resultados.push(corpo["resultado"].as_str().unwrap().to_owned());
    }
    assert_eq!(resultados, ["applied", "duplicate"]);
    // A refused request counts too: every request that reached the router.
    let recusada = cliente.post(&rota).body("{}").send().await.unwrap();
    assert_eq!(recusada.status(), 401);
    assert_eq!(servidor.pedidos(), 3);
    let efeitos: i64 = sqlx::query_scalar("SELECT count(*) FROM efeito")
        .fetch_one(db.pool())
        .await
        .unwrap();
    assert_eq!(efeitos, 1);

    let base = servidor.base();
    servidor.parar().await.unwrap();
    let depois = reqwest::Client::new()
        .post(format!("{base}/m2m/servidor_de_teste.aviso"))
        .send()
        .await;
    assert!(depois.is_err(), "stopped: nothing listens any more");
    db.fechar().await.unwrap();
}
