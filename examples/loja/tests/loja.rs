//! The two services as separate processes on one PostgreSQL schema (`PgIsolado`): every order
//! is reserved exactly once, and the stock went down by one per order.

use std::time::Duration;

#[tokio::test]
async fn cada_pedido_reservado_uma_vez() {
    let resultado = loja::rodar(
        env!("CARGO_BIN_EXE_pedidos"),
        env!("CARGO_BIN_EXE_estoque"),
        20,
        Duration::from_secs(60),
    )
    .await
    .unwrap();
    // What `cargo run -p loja --bin demo` prints: a table, not a Rust Debug struct.
    let tabela = resultado.to_string();
    println!("{tabela}");
    assert!(tabela.contains("reserved twice") && !tabela.contains('{'), "{tabela}");
    assert!(resultado.certo(20));
    assert_eq!(
        resultado,
        loja::Resultado {
            pedidos: 20,
            reservados_uma_vez: 20,
            reservados_mais_de_uma_vez: 0,
            unidades_baixadas: 20,
        }
    );
}
