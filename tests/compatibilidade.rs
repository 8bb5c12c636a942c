//! The compatibility rules of the contracts check (`mensageria_core::contratos`), each by a pair
//! of changes to a real payload type: one compatible, one not. The schemas are the ones
//! `utoipa::ToSchema` derives, serde attributes included, as an app's contracts hold them.
//!
//! Directions: BACKWARD reads the old type's messages with the new type (messages in flight, old
//! senders); FORWARD reads the new type's messages with the old one (old receivers).

use mensageria_core::contratos::{self, Contrato, Lado, Modo, Regra, esquema_de};
use serde_json::Value;

/// The rules broken in one direction, each with its path.
type Quebras = Vec<(Regra, String)>;

/// What the check says of a change from `velho` to `novo`: the rules broken BACKWARD (the new
/// type reading the old one's messages) and FORWARD (the old reading the new's), with paths.
fn mudanca(velho: Value, novo: Value) -> (Quebras, Quebras) {
    let falhas = |leitor: &Value, escritor: &Value| {
        contratos::ler(leitor, escritor)
            .into_iter()
            .map(|f| (f.regra, f.caminho))
            .collect::<Vec<_>>()
    };
    (falhas(&novo, &velho), falhas(&velho, &novo))
}

fn compativel(velho: Value, novo: Value) {
    let (backward, forward) = mudanca(velho.clone(), novo.clone());
    assert!(
        backward.is_empty() && forward.is_empty(),
        "expected compatible both ways; BACKWARD {backward:?}, FORWARD {forward:?}\nold {velho:#}\nnew {novo:#}"
    );
}

/// The change breaks `regra` at `caminho` in the direction(s) given (`true`: it must appear),
/// and nothing else.
fn incompativel(
    velho: Value,
    novo: Value,
    backward: Option<(Regra, &str)>,
    forward: Option<(Regra, &str)>,
) {
    let (b, f) = mudanca(velho.clone(), novo.clone());
    let esperado =
        |e: Option<(Regra, &str)>| e.map(|(r, c)| vec![(r, c.to_owned())]).unwrap_or_default();
    assert_eq!(
        (b, f),
        (esperado(backward), esperado(forward)),
        "(BACKWARD, FORWARD)\nold {velho:#}\nnew {novo:#}"
    );
}

/// One module per version of the payload, each deriving its schema.
macro_rules! versao {
    ($nome:ident { $($corpo:tt)* }) => {
        mod $nome {
            #![allow(dead_code, unreachable_pub)]
            use serde::{Deserialize, Serialize};
            use utoipa::ToSchema;
            $($corpo)*
        }
    };
}

versao!(base {
    #[derive(Serialize, Deserialize, ToSchema)]
    pub struct Pedido {
        pub id: i64,
        pub cliente: String,
        pub nota: Option<String>,
    }
});

versao!(com_opcional {
    #[derive(Serialize, Deserialize, ToSchema)]
    pub struct Pedido {
        pub id: i64,
        pub cliente: String,
        pub nota: Option<String>,
        pub cupom: Option<String>,
    }
});

versao!(com_obrigatorio {
    #[derive(Serialize, Deserialize, ToSchema)]
    pub struct Pedido {
        pub id: i64,
        pub cliente: String,
        pub nota: Option<String>,
        pub cupom: String,
    }
});

versao!(com_padrao {
    #[derive(Serialize, Deserialize, ToSchema)]
    pub struct Pedido {
        pub id: i64,
        pub cliente: String,
        pub nota: Option<String>,
        #[serde(default)]
        pub cupom: String,
    }
});

versao!(sem_nota {
    #[derive(Serialize, Deserialize, ToSchema)]
    pub struct Pedido {
        pub id: i64,
        pub cliente: String,
    }
});

versao!(sem_cliente {
    #[derive(Serialize, Deserialize, ToSchema)]
    pub struct Pedido {
        pub id: i64,
        pub nota: Option<String>,
    }
});

versao!(renomeado_no_codigo {
    #[derive(Serialize, Deserialize, ToSchema)]
    pub struct Pedido {
        pub id: i64,
        #[serde(rename = "cliente")]
        pub comprador: String,
        pub nota: Option<String>,
    }
});

versao!(renomeado {
    #[derive(Serialize, Deserialize, ToSchema)]
    pub struct Pedido {
        pub id: i64,
        pub comprador: String,
        pub nota: Option<String>,
    }
});

#[test]
fn campo_opcional_novo_e_campo_obrigatorio_novo() {
    compativel(
        esquema_de::<base::Pedido>(),
        esquema_de::<com_opcional::Pedido>(),
    );
    incompativel(
        esquema_de::<base::Pedido>(),
        esquema_de::<com_obrigatorio::Pedido>(),
        Some((Regra::CampoObrigatorioAusente, "$.cupom")),
        None,
    );
}

#[test]
fn serde_default_torna_o_campo_novo_legivel() {
    compativel(
        esquema_de::<base::Pedido>(),
        esquema_de::<com_padrao::Pedido>(),
    );
    // The default taken away: the field is required again, and old messages may lack it.
    incompativel(
        esquema_de::<com_padrao::Pedido>(),
        esquema_de::<com_obrigatorio::Pedido>(),
        Some((Regra::CampoObrigatorioOpcional, "$.cupom")),
        None,
    );
}

#[test]
fn campo_removido_opcional_e_obrigatorio() {
    compativel(
        esquema_de::<base::Pedido>(),
        esquema_de::<sem_nota::Pedido>(),
    );
    incompativel(
        esquema_de::<base::Pedido>(),
        esquema_de::<sem_cliente::Pedido>(),
        None,
        Some((Regra::CampoObrigatorioAusente, "$.cliente")),
    );
}

#[test]
fn campo_renomeado_no_codigo_e_no_fio() {
    compativel(
        esquema_de::<base::Pedido>(),
        esquema_de::<renomeado_no_codigo::Pedido>(),
    );
    incompativel(
        esquema_de::<base::Pedido>(),
        esquema_de::<renomeado::Pedido>(),
        Some((Regra::CampoObrigatorioAusente, "$.comprador")),
        Some((Regra::CampoObrigatorioAusente, "$.cliente")),
    );
}

versao!(camel_um {
    #[derive(Serialize, Deserialize, ToSchema)]
    #[serde(rename_all = "camelCase")]
    pub struct Pedido {
        pub id: i64,
        pub cliente: String,
        pub nota: Option<String>,
    }
});

versao!(snake_duas {
    #[derive(Serialize, Deserialize, ToSchema)]
    pub struct Item {
        pub codigo_produto: String,
    }
});

versao!(camel_duas {
    #[derive(Serialize, Deserialize, ToSchema)]
    #[serde(rename_all = "camelCase")]
    pub struct Item {
        pub codigo_produto: String,
    }
});

#[test]
fn rename_all_que_nao_muda_o_fio_e_que_muda() {
    compativel(
        esquema_de::<base::Pedido>(),
        esquema_de::<camel_um::Pedido>(),
    );
    incompativel(
        esquema_de::<snake_duas::Item>(),
        esquema_de::<camel_duas::Item>(),
        Some((Regra::CampoObrigatorioAusente, "$.codigoProduto")),
        Some((Regra::CampoObrigatorioAusente, "$.codigo_produto")),
    );
}

versao!(nota_obrigatoria {
    #[derive(Serialize, Deserialize, ToSchema)]
    pub struct Pedido {
        pub id: i64,
        pub cliente: String,
        pub nota: String,
    }
});

#[test]
fn option_tornado_obrigatorio() {
    // Required made optional reads old messages; old receivers cannot take its null.
    incompativel(
        esquema_de::<nota_obrigatoria::Pedido>(),
        esquema_de::<base::Pedido>(),
        None,
        Some((Regra::NuloRecusado, "$.nota")),
    );
    incompativel(
        esquema_de::<base::Pedido>(),
        esquema_de::<nota_obrigatoria::Pedido>(),
        Some((Regra::NuloRecusado, "$.nota")),
        None,
    );
    compativel(esquema_de::<base::Pedido>(), esquema_de::<base::Pedido>());
}

versao!(inteiros {
    #[derive(Serialize, Deserialize, ToSchema)]
    pub struct I32 {
        pub n: i32,
    }
    #[derive(Serialize, Deserialize, ToSchema)]
    pub struct I64 {
        pub n: i64,
    }
    #[derive(Serialize, Deserialize, ToSchema)]
    pub struct U64 {
        pub n: u64,
    }
    #[derive(Serialize, Deserialize, ToSchema)]
    pub struct F64 {
        pub n: f64,
    }
    #[derive(Serialize, Deserialize, ToSchema)]
    pub struct Texto {
        pub n: String,
    }
});

#[test]
fn inteiro_alargado_e_estreitado() {
    let (b, f) = mudanca(esquema_de::<inteiros::I32>(), esquema_de::<inteiros::I64>());
    assert!(b.is_empty(), "{b:?}");
    assert_eq!(f, [(Regra::NumeroEstreitado, "$.n".to_owned())]);
    incompativel(
        esquema_de::<inteiros::I64>(),
        esquema_de::<inteiros::I32>(),
        Some((Regra::NumeroEstreitado, "$.n")),
        None,
    );
}

#[test]
fn inteiro_para_numero_e_numero_para_inteiro() {
    let (b, _) = mudanca(esquema_de::<inteiros::I64>(), esquema_de::<inteiros::F64>());
    assert!(b.is_empty(), "an integer reads as a number: {b:?}");
    let (b, _) = mudanca(esquema_de::<inteiros::F64>(), esquema_de::<inteiros::I64>());
    assert!(
        b.iter()
            .any(|(r, c)| *r == Regra::NumeroEstreitado && c == "$.n"),
        "{b:?}"
    );
}

#[test]
fn sem_sinal_e_com_sinal() {
    let (b, _) = mudanca(esquema_de::<inteiros::I64>(), esquema_de::<inteiros::U64>());
    assert_eq!(b, [(Regra::LimiteEstreitado, "$.n".to_owned())]);
    let (b, _) = mudanca(esquema_de::<inteiros::U64>(), esquema_de::<inteiros::I64>());
    assert!(
        b.is_empty(),
        "an unsigned reads as a signed of its width: {b:?}"
    );
}

#[test]
fn tipo_trocado() {
    incompativel(
        esquema_de::<inteiros::I64>(),
        esquema_de::<inteiros::Texto>(),
        Some((Regra::TipoMudou, "$.n")),
        Some((Regra::TipoMudou, "$.n")),
    );
    compativel(
        esquema_de::<inteiros::Texto>(),
        esquema_de::<inteiros::Texto>(),
    );
}

versao!(estados_dois {
    #[derive(Serialize, Deserialize, ToSchema)]
    pub enum Estado {
        Aberto,
        Pago,
    }
    #[derive(Serialize, Deserialize, ToSchema)]
    pub struct Pedido {
        pub estado: Estado,
    }
});

versao!(estados_tres {
    #[derive(Serialize, Deserialize, ToSchema)]
    pub enum Estado {
        Aberto,
        Pago,
        Cancelado,
    }
    #[derive(Serialize, Deserialize, ToSchema)]
    pub struct Pedido {
        pub estado: Estado,
    }
});

versao!(estados_minusculos {
    #[derive(Serialize, Deserialize, ToSchema)]
    #[serde(rename_all = "lowercase")]
    pub enum Estado {
        Aberto,
        Pago,
    }
    #[derive(Serialize, Deserialize, ToSchema)]
    pub struct Pedido {
        pub estado: Estado,
    }
});

#[test]
fn valor_de_enum_novo_e_removido() {
    incompativel(
        esquema_de::<estados_dois::Pedido>(),
        esquema_de::<estados_tres::Pedido>(),
        None,
        Some((Regra::ValorDeEnumAusente, "$.estado")),
    );
    incompativel(
        esquema_de::<estados_tres::Pedido>(),
        esquema_de::<estados_dois::Pedido>(),
        Some((Regra::ValorDeEnumAusente, "$.estado")),
        None,
    );
    compativel(
        esquema_de::<estados_dois::Pedido>(),
        esquema_de::<estados_dois::Pedido>(),
    );
}

#[test]
fn rename_all_num_enum() {
    incompativel(
        esquema_de::<estados_dois::Pedido>(),
        esquema_de::<estados_minusculos::Pedido>(),
        Some((Regra::ValorDeEnumAusente, "$.estado")),
        Some((Regra::ValorDeEnumAusente, "$.estado")),
    );
}

versao!(aninhado {
    #[derive(Serialize, Deserialize, ToSchema)]
    pub struct Cliente {
        pub nome: String,
    }
    #[derive(Serialize, Deserialize, ToSchema)]
    pub struct Pedido {
        pub cliente: Cliente,
    }
});

versao!(aninhado_opcional {
    #[derive(Serialize, Deserialize, ToSchema)]
    pub struct Cliente {
        pub nome: String,
        pub email: Option<String>,
    }
    #[derive(Serialize, Deserialize, ToSchema)]
    pub struct Pedido {
        pub cliente: Cliente,
    }
});

versao!(aninhado_obrigatorio {
    #[derive(Serialize, Deserialize, ToSchema)]
    pub struct Cliente {
        pub nome: String,
        pub documento: String,
    }
    #[derive(Serialize, Deserialize, ToSchema)]
    pub struct Pedido {
        pub cliente: Cliente,
    }
});

#[test]
fn objeto_aninhado() {
    compativel(
        esquema_de::<aninhado::Pedido>(),
        esquema_de::<aninhado_opcional::Pedido>(),
    );
    incompativel(
        esquema_de::<aninhado::Pedido>(),
        esquema_de::<aninhado_obrigatorio::Pedido>(),
        Some((Regra::CampoObrigatorioAusente, "$.cliente.documento")),
        None,
    );
}

versao!(listas {
    #[derive(Serialize, Deserialize, ToSchema)]
    pub struct Item {
        pub quantidade: i32,
    }
    #[derive(Serialize, Deserialize, ToSchema)]
    pub struct Pedido {
        pub itens: Vec<Item>,
        pub tags: Vec<i32>,
    }
});

versao!(listas_largas {
    #[derive(Serialize, Deserialize, ToSchema)]
    pub struct Item {
        pub quantidade: i64,
    }
    #[derive(Serialize, Deserialize, ToSchema)]
    pub struct Pedido {
        pub itens: Vec<Item>,
        pub tags: Vec<i64>,
    }
});

versao!(listas_de_texto {
    #[derive(Serialize, Deserialize, ToSchema)]
    pub struct Item {
        pub quantidade: i32,
    }
    #[derive(Serialize, Deserialize, ToSchema)]
    pub struct Pedido {
        pub itens: Vec<Item>,
        pub tags: Vec<String>,
    }
});

#[test]
fn listas_e_seus_itens() {
    let (b, f) = mudanca(
        esquema_de::<listas::Pedido>(),
        esquema_de::<listas_largas::Pedido>(),
    );
    assert!(b.is_empty(), "{b:?}");
    assert_eq!(
        f,
        [
            (Regra::NumeroEstreitado, "$.itens[].quantidade".to_owned()),
            (Regra::NumeroEstreitado, "$.tags[]".to_owned())
        ]
    );
    incompativel(
        esquema_de::<listas::Pedido>(),
        esquema_de::<listas_de_texto::Pedido>(),
        Some((Regra::TipoMudou, "$.tags[]")),
        Some((Regra::TipoMudou, "$.tags[]")),
    );
}

versao!(fechado {
    #[derive(Serialize, Deserialize, ToSchema)]
    #[serde(deny_unknown_fields)]
    pub struct Pedido {
        pub id: i64,
    }
});

versao!(fechado_com_extra {
    #[derive(Serialize, Deserialize, ToSchema)]
    #[serde(deny_unknown_fields)]
    pub struct Pedido {
        pub id: i64,
        pub extra: Option<String>,
    }
});

versao!(aberto {
    #[derive(Serialize, Deserialize, ToSchema)]
    pub struct Pedido {
        pub id: i64,
    }
});

versao!(aberto_com_extra {
    #[derive(Serialize, Deserialize, ToSchema)]
    pub struct Pedido {
        pub id: i64,
        pub extra: Option<String>,
    }
});

#[test]
fn deny_unknown_fields_recusa_o_campo_novo() {
    compativel(
        esquema_de::<aberto::Pedido>(),
        esquema_de::<aberto_com_extra::Pedido>(),
    );
    incompativel(
        esquema_de::<fechado::Pedido>(),
        esquema_de::<fechado_com_extra::Pedido>(),
        None,
        Some((Regra::CampoDesconhecidoRecusado, "$.extra")),
    );
}

versao!(variantes_duas {
    #[derive(Serialize, Deserialize, ToSchema)]
    #[serde(tag = "acao")]
    pub enum Ajuste {
        Incluir { codigo: String },
        Remover { codigo: String },
    }
});

versao!(variantes_tres {
    #[derive(Serialize, Deserialize, ToSchema)]
    #[serde(tag = "acao")]
    pub enum Ajuste {
        Incluir { codigo: String },
        Remover { codigo: String },
        Trocar { codigo: String, por: String },
    }
});

#[test]
fn enum_com_dados_variante_nova_e_removida() {
    let (b, f) = mudanca(
        esquema_de::<variantes_duas::Ajuste>(),
        esquema_de::<variantes_tres::Ajuste>(),
    );
    assert!(b.is_empty(), "the new type reads both old variants: {b:?}");
    assert_eq!(f, [(Regra::AlternativaAusente, "$<2>".to_owned())]);
    let (b, f) = mudanca(
        esquema_de::<variantes_tres::Ajuste>(),
        esquema_de::<variantes_duas::Ajuste>(),
    );
    assert_eq!(b, [(Regra::AlternativaAusente, "$<2>".to_owned())]);
    assert!(f.is_empty(), "{f:?}");
}

versao!(mapas {
    #[derive(Serialize, Deserialize, ToSchema)]
    pub struct Estoque {
        pub por_loja: std::collections::HashMap<String, i32>,
    }
});

versao!(mapas_largos {
    #[derive(Serialize, Deserialize, ToSchema)]
    pub struct Estoque {
        pub por_loja: std::collections::HashMap<String, i64>,
    }
});

versao!(mapas_de_texto {
    #[derive(Serialize, Deserialize, ToSchema)]
    pub struct Estoque {
        pub por_loja: std::collections::HashMap<String, String>,
    }
});

#[test]
fn mapas_e_seus_valores() {
    let (b, _) = mudanca(
        esquema_de::<mapas::Estoque>(),
        esquema_de::<mapas_largos::Estoque>(),
    );
    assert!(b.is_empty(), "{b:?}");
    incompativel(
        esquema_de::<mapas::Estoque>(),
        esquema_de::<mapas_de_texto::Estoque>(),
        Some((Regra::TipoMudou, "$.por_loja.*")),
        Some((Regra::TipoMudou, "$.por_loja.*")),
    );
}

versao!(ids {
    #[derive(Serialize, Deserialize, ToSchema)]
    pub struct Texto {
        pub id: String,
    }
    #[derive(Serialize, Deserialize, ToSchema)]
    pub struct Uuid {
        pub id: uuid::Uuid,
    }
});

#[test]
fn formato_exigido_e_formato_largado() {
    let (b, f) = mudanca(esquema_de::<ids::Uuid>(), esquema_de::<ids::Texto>());
    assert!(b.is_empty(), "a string reads a UUID: {b:?}");
    assert_eq!(f, [(Regra::FormatoEstreitado, "$.id".to_owned())]);
}

versao!(arvore {
    #[derive(Serialize, Deserialize, ToSchema)]
    pub struct No {
        pub valor: i64,
        #[schema(no_recursion)]
        pub filhos: Vec<No>,
    }
});

versao!(arvore_de_texto {
    #[derive(Serialize, Deserialize, ToSchema)]
    pub struct No {
        pub valor: String,
        #[schema(no_recursion)]
        pub filhos: Vec<No>,
    }
});

#[test]
fn tipo_recursivo_termina() {
    compativel(esquema_de::<arvore::No>(), esquema_de::<arvore::No>());
    let (b, _) = mudanca(
        esquema_de::<arvore::No>(),
        esquema_de::<arvore_de_texto::No>(),
    );
    assert!(
        b.iter()
            .any(|(r, c)| *r == Regra::TipoMudou && c == "$.valor"),
        "{b:?}"
    );
}

versao!(cliente_opcional {
    #[derive(Serialize, Deserialize, ToSchema)]
    pub struct Cliente {
        pub nome: String,
    }
    #[derive(Serialize, Deserialize, ToSchema)]
    pub struct Pedido {
        pub cliente: Option<Cliente>,
    }
});

#[test]
fn objeto_opcional_tornado_obrigatorio() {
    incompativel(
        esquema_de::<cliente_opcional::Pedido>(),
        esquema_de::<aninhado::Pedido>(),
        Some((Regra::NuloRecusado, "$.cliente")),
        None,
    );
    let (b, _) = mudanca(
        esquema_de::<aninhado::Pedido>(),
        esquema_de::<cliente_opcional::Pedido>(),
    );
    assert!(b.is_empty(), "{b:?}");
}

/// A contract of tipo `pedido.criado` sent with `esquema`, under `modo`.
fn contrato(esquema: Option<Value>, modo: Modo) -> Contrato {
    Contrato {
        tipo: "pedido.criado".into(),
        compatibilidade: modo,
        envio: Some(Lado {
            tipo_rust: "Pedido".into(),
            esquema,
            ..Lado::default()
        }),
        recepcao: None,
    }
}

#[test]
fn o_modo_escolhe_as_direcoes() {
    let velho = Some(esquema_de::<base::Pedido>());
    let novo = Some(esquema_de::<com_obrigatorio::Pedido>());
    for (modo, esperados) in [
        (Modo::Full, 1),
        (Modo::Backward, 1),
        (Modo::Forward, 0),
        (Modo::None, 0),
    ] {
        let problemas = contratos::comparar(
            &[contrato(velho.clone(), Modo::Full)],
            &[contrato(novo.clone(), modo)],
        );
        assert_eq!(problemas.len(), esperados, "{modo:?}: {problemas:?}");
    }
}

#[test]
fn tipo_removido_e_tipo_sem_esquema() {
    let velho = contrato(Some(esquema_de::<base::Pedido>()), Modo::Full);
    let problemas = contratos::comparar(std::slice::from_ref(&velho), &[]);
    assert_eq!(problemas.len(), 1);
    assert_eq!(problemas[0].falha.regra, Regra::TipoRemovido);
    let problemas =
        contratos::comparar(std::slice::from_ref(&velho), &[contrato(None, Modo::Full)]);
    assert_eq!(problemas[0].falha.regra, Regra::EscritorSemEsquema);
    assert!(
        problemas[0]
            .to_string()
            .contains("derive `utoipa::ToSchema`"),
        "{}",
        problemas[0]
    );
    // Compatible counterparts: the same schema, and a new tipo (added, not removed).
    let mut outro = velho.clone();
    outro.tipo = "pedido.criado.v2".into();
    assert!(contratos::comparar(std::slice::from_ref(&velho), &[velho.clone(), outro]).is_empty());
}

#[test]
fn a_linha_nomeia_tipo_caminho_regra_e_direcao() {
    let problemas = contratos::comparar(
        &[contrato(Some(esquema_de::<base::Pedido>()), Modo::Full)],
        &[contrato(
            Some(esquema_de::<com_obrigatorio::Pedido>()),
            Modo::Full,
        )],
    );
    let linha = problemas[0].to_string();
    assert!(
        linha.starts_with("pedido.criado (sent): $.cupom: required-field-missing: "),
        "{linha}"
    );
    assert!(linha.contains("[BACKWARD:"), "{linha}");
}
