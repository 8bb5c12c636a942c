//! Shared contracts, kept ownership: the event types live in `contratos-exemplo`; the sending
//! app (`remetente-exemplo`) holds their enviadores, the receiving app (`destinatario-exemplo`)
//! their receptores. The sender's relay delivers to the receiver's router over real HTTP on
//! 127.0.0.1, both apps on one PostgreSQL schema with pools of their own: every event is applied
//! exactly once, including the ones the sender enqueued twice.
//!
//! That the receiving app's own relay claims none of these tipos is proved in its crate
//! (`tests/fixtures/destinatario-exemplo/tests/registro_vazio.rs`), in a binary that does not
//! link the sender, as the receiving app's would not.

use std::collections::HashMap;
use std::time::Duration;

use contratos_exemplo::{PedidoCancelado, PedidoCriado};
use mensageria_core::relay::{Config, Relay};
use mensageria_core::{Destino, Registro, enfileirar};
use mensageria_testes::{PgIsolado, contar, esperar_saida_vazia};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn o_relay_do_remetente_entrega_ao_router_do_destinatario_uma_vez_cada() {
    // This binary is the sender's (it links `remetente-exemplo`, whose enviadores `enfileirar`
    // below infers) and the receiver's; only the sender registered tipos.
    assert_eq!(Registro::global().tipos(), remetente_exemplo::TIPOS);

    let banco = PgIsolado::novo().await;
    let remetente = banco.outro_pool(4).await;
    let destinatario = banco.outro_pool(4).await;
    mensageria_core::migrar(&remetente).await.unwrap(); // the schema's owner
    mensageria_core::verificar_schema(&destinatario)
        .await
        .unwrap();
    destinatario_exemplo::criar_tabelas(&destinatario)
        .await
        .unwrap();

    let app = mensageria_axum::router(
        destinatario.clone(),
        mensageria_axum::Config::new("receptor", ["t0k-de-teste-1234"]),
    )
    .unwrap();
    let ouvinte = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", ouvinte.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(ouvinte, app).await });

    // The sender's write path, one transaction per order; every fifth order is enqueued twice
    // (as a sender that retries its own write would), and every seventh is cancelled.
    let mut esperados = HashMap::new();
    for pedido in 0..60 {
        let mut tx = remetente.begin().await.unwrap();
        let criado = PedidoCriado {
            pedido,
            cliente: format!("cliente {pedido}"),
        };
        enfileirar(&mut *tx, &criado).await.unwrap();
        if pedido % 5 == 0 {
            enfileirar(&mut *tx, &criado).await.unwrap();
        }
        esperados.insert(("pedido.criado".to_owned(), pedido), 1);
        if pedido % 7 == 0 {
            let cancelado = PedidoCancelado::PeloCliente { pedido };
            enfileirar(&mut *tx, &cancelado).await.unwrap();
            esperados.insert(("pedido.cancelado".to_owned(), pedido), 1);
        }
        tx.commit().await.unwrap();
    }
    assert_eq!(contar(&remetente, "mensageria_saida").await, 60 + 12 + 9);

    let relay = Relay::new(
        remetente.clone(),
        Config::new("remetente")
            .com_intervalo(Duration::from_millis(20))
            .com_backoff(Duration::from_millis(20), Duration::from_millis(200))
            .com_concorrencia(8),
    )
    .recurso(Destino::new(&url).unwrap().com_token("t0k-de-teste-1234"))
    .spawn()
    .unwrap();
    esperar_saida_vazia(&remetente, 30).await;
    relay.shutdown(Duration::from_secs(5)).await;

    let efeitos: Vec<(String, i64, i64)> =
        sqlx::query_as("SELECT tipo, pedido, count(*) FROM efeitos GROUP BY tipo, pedido")
            .fetch_all(&destinatario)
            .await
            .unwrap();
    let efeitos: HashMap<(String, i64), i64> =
        efeitos.into_iter().map(|(t, p, n)| ((t, p), n)).collect();
    assert_eq!(efeitos, esperados, "every event applied exactly once");
    assert_eq!(contar(&remetente, "mensageria_mortas").await, 0);
    assert_eq!(contar(&destinatario, "mensageria_recebidas").await, 60 + 9);

    remetente.close().await;
    destinatario.close().await;
    banco.descartar().await;
}
