//! The README's demo, small: 200 messages, 30% of acks lost, the relay killed once. The faults
//! really happen (redeliveries), and still nothing is lost or applied twice.

use mensageria_exemplos::demo::{self, Opcoes};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn demo_pequena_nada_perdido_nada_aplicado_duas_vezes() {
    let opcoes = Opcoes {
        mensagens: 200,
        perda: 0.3,
        semente: 7,
        postgres: None,
    };
    let relatorio = demo::executar(&opcoes).await.unwrap();
    println!("{relatorio}");
    assert_eq!(relatorio.enfileiradas, 200);
    assert_eq!(relatorio.perdidas, 0, "{relatorio}");
    assert_eq!(relatorio.aplicadas_duas_vezes, 0, "{relatorio}");
    assert_eq!(relatorio.inesperadas, 0, "{relatorio}");
    assert_eq!(relatorio.aplicadas, 200);
    assert_eq!(relatorio.quedas, 1);
    assert!(relatorio.acks_perdidos > 0, "{relatorio}");
    assert!(relatorio.reentregas > 0, "the faults happened: {relatorio}");
    assert!(relatorio.duplicatas > 0, "{relatorio}");
}

/// The README's `--postgres` variant, small: it used to dead-letter every message (its fiscal
/// mounted a receptor of another tipo, whose CloudEvents check refused every delivery).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn demo_pequena_no_postgres() {
    let url = std::env::var("DATABASE_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/postgres".to_owned());
    let opcoes = Opcoes {
        mensagens: 200,
        perda: 0.3,
        semente: 7,
        postgres: Some(url),
    };
    let relatorio = demo::executar(&opcoes).await.unwrap();
    println!("{relatorio}");
    assert_eq!(relatorio.mortas, 0, "{relatorio}");
    assert_eq!(relatorio.perdidas, 0, "{relatorio}");
    assert_eq!(relatorio.aplicadas_duas_vezes, 0, "{relatorio}");
    assert_eq!(relatorio.inesperadas, 0, "{relatorio}");
    assert_eq!(relatorio.aplicadas, 200);
    assert!(relatorio.reentregas > 0, "the faults happened: {relatorio}");
}
