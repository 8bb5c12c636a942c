//! Two crates of one binary register the same tipo: no compiler can see it, the start-up check
//! does, and names both.

use mensageria_core::{Enviador, Erro, Registro};

#[test]
fn validar_nomeia_os_dois_tipos_rust_e_modulos() {
    // Reference both crates so both are linked, as a real binary that uses them would.
    assert_eq!(
        <enviadores_fiscais::NotaAutorizada as Enviador<_>>::TIPO,
        "fiscal.nota"
    );
    assert_eq!(
        <enviadores_repetidos::NotaDeOutroTime as Enviador<_>>::TIPO,
        "fiscal.nota"
    );

    let erro = Registro::global().validar().unwrap_err();
    assert!(
        matches!(
            erro,
            Erro::TipoDuplicado {
                tipo: "fiscal.nota",
                ..
            }
        ),
        "{erro:?}"
    );
    let mensagem = erro.to_string();
    assert!(
        mensagem.contains("enviadores_fiscais::enviar_nota(NotaAutorizada)"),
        "{mensagem}"
    );
    assert!(
        mensagem.contains("enviadores_repetidos::enviar_nota_de_outro_time(NotaDeOutroTime)"),
        "{mensagem}"
    );
}
