//! The three services as separate processes on one PostgreSQL schema (`PgIsolado`),
//! `pedido.criado` fanned out to `estoque` and `analise` (two receiving apps of one tipo on that
//! schema, each with its own dedup records) through a JetStream stream of this run's own. Every order is reserved exactly
//! once and analysed exactly once, and the stock went down by one per order.

use std::time::Duration;

#[tokio::test]
async fn cada_pedido_reservado_e_analisado_uma_vez() {
    let resultado = loja::rodar(
        loja::Executaveis {
            pedidos: env!("CARGO_BIN_EXE_pedidos"),
            estoque: env!("CARGO_BIN_EXE_estoque"),
            analise: env!("CARGO_BIN_EXE_analise"),
        },
        20,
        Duration::from_secs(60),
    )
    .await
    .unwrap();
    // What `cargo run -p loja --bin demo` prints: a table, not a Rust Debug struct.
    let tabela = resultado.to_string();
    println!("{tabela}");
    assert!(
        tabela.contains("reserved twice")
            && tabela.contains("analysed twice")
            && !tabela.contains('{'),
        "{tabela}"
    );
    assert!(resultado.certo(20));
    assert_eq!(
        resultado,
        loja::Resultado {
            pedidos: 20,
            reservados_uma_vez: 20,
            reservados_mais_de_uma_vez: 0,
            unidades_baixadas: 20,
            analisados_uma_vez: 20,
            analisados_mais_de_uma_vez: 0,
        }
    );
}

/// A service that dies fails the run at once, naming it, instead of a count short after the
/// whole deadline (`false` stands in for an `analise` that exits at start).
#[tokio::test]
async fn um_servico_que_cai_falha_a_rodada_na_hora() {
    let inicio = std::time::Instant::now();
    let erro = loja::rodar(
        loja::Executaveis {
            pedidos: env!("CARGO_BIN_EXE_pedidos"),
            estoque: env!("CARGO_BIN_EXE_estoque"),
            analise: "false",
        },
        3,
        Duration::from_secs(60),
    )
    .await
    .unwrap_err()
    .to_string();
    assert!(erro.contains("analise exited early"), "{erro}");
    assert!(
        inicio.elapsed() < Duration::from_secs(30),
        "{:?}",
        inicio.elapsed()
    );
}
