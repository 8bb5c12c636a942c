//! `pedidos`' committed contracts refuse an incompatible `PedidoCriado`: a deliberately broken
//! copy of the type (its id made a string, a required field added) is checked against
//! `examples/loja/contratos/pedidos/` as the binary's own test would check it, and the failure
//! names each problem; a compatible copy (an optional field) passes the check and is only asked to
//! be written and committed.

use mensageria_axum::contratos::{ErroVerificacao, verificar_contra};
use mensageria_core::contratos::{self, Contrato, esquema_de};

mod quebrado {
    #![allow(unreachable_pub)]
    use mensageria_axum::utoipa::{self, ToSchema};

    #[derive(serde::Serialize, serde::Deserialize, ToSchema)]
    pub struct PedidoCriado {
        pub id: String,
        pub item: String,
        pub cliente: String,
    }
}

mod compativel {
    #![allow(unreachable_pub)]
    use mensageria_axum::utoipa::{self, ToSchema};

    #[derive(serde::Serialize, serde::Deserialize, ToSchema)]
    pub struct PedidoCriado {
        pub id: i64,
        pub item: String,
        pub cupom: Option<String>,
    }
}

/// The committed contracts of `pedidos`, and a copy whose `pedido.criado` is sent with `esquema`.
fn com_pedido_criado(esquema: serde_json::Value) -> (Vec<Contrato>, Vec<Contrato>) {
    let commitados = contratos::ler_diretorio(&loja::dir_dos_contratos("pedidos"))
        .expect("examples/loja/contratos/pedidos is committed");
    let mut novos = commitados.clone();
    let pedido = novos
        .iter_mut()
        .find(|c| c.tipo == "pedido.criado")
        .and_then(|c| c.envio.as_mut())
        .expect("pedidos sends pedido.criado");
    pedido.esquema = Some(esquema);
    (commitados, novos)
}

#[test]
fn um_pedido_criado_incompativel_e_recusado_com_cada_motivo() {
    let dir = loja::dir_dos_contratos("pedidos");
    let (commitados, novos) = com_pedido_criado(esquema_de::<quebrado::PedidoCriado>());
    // Even when asked to write: an incompatible change is never written.
    let erro = verificar_contra(&dir, &commitados, &novos, true).unwrap_err();
    let texto = erro.to_string();
    println!("{texto}");
    let ErroVerificacao::Incompativel { problemas, .. } = erro else {
        panic!("expected incompatible: {texto}");
    };
    let linhas: Vec<String> = problemas.iter().map(ToString::to_string).collect();
    let tem = |trecho: &str| linhas.iter().any(|l| l.starts_with(trecho));
    assert!(tem("pedido.criado (sent): $.id: type-changed: "), "{texto}");
    assert!(
        tem("pedido.criado (sent): $.cliente: required-field-missing: "),
        "{texto}"
    );
    assert!(
        texto.contains("[FORWARD: a receiver on the old contract"),
        "{texto}"
    );
    assert_eq!(
        contratos::ler_diretorio(&dir).unwrap(),
        commitados,
        "nothing written"
    );
}

#[test]
fn um_pedido_criado_compativel_so_pede_para_ser_escrito() {
    let dir = loja::dir_dos_contratos("pedidos");
    let (commitados, novos) = com_pedido_criado(esquema_de::<compativel::PedidoCriado>());
    let erro = verificar_contra(&dir, &commitados, &novos, false).unwrap_err();
    assert!(
        matches!(&erro, ErroVerificacao::Desatualizado { tipos, .. } if tipos == &["pedido.criado"]),
        "{erro}"
    );
    assert!(
        erro.to_string().contains("MENSAGERIA_CONTRATOS=escrever"),
        "{erro}"
    );
}
