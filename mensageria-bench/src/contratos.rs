//! Section `contratos`: the contracts check (`mensageria contratos verificar OLD NEW`) of 200
//! tipos, each a payload of twelve fields with a nested object, an array and an enum, ten of them
//! changed incompatibly; beside reading and parsing the same files as plain JSON (the floor).

use std::time::Instant;

use mensageria_core::contratos::{self, Contrato, Lado};
use serde_json::{Value, json};

use crate::Parametros;
use crate::relatorio::{Relatorio, fmt};

const TIPOS: usize = 200;
const QUEBRADOS: usize = 10;

/// Tipo `i`'s payload schema; `quebrado`: its `quantidade` made a string.
fn esquema(i: usize, quebrado: bool) -> Value {
    let mut campos = serde_json::Map::new();
    for c in 0..8 {
        campos.insert(
            format!("campo_{c}"),
            json!({"type": "string", "description": format!("field {c} of tipo {i}")}),
        );
    }
    campos.insert("id".into(), json!({"type": "integer", "format": "int64"}));
    campos.insert("estado".into(), json!({"$ref": "#/$defs/Estado"}));
    campos.insert("cliente".into(), json!({"$ref": "#/$defs/Cliente"}));
    campos.insert(
        "itens".into(),
        json!({"type": "array", "items": {"$ref": "#/$defs/Item"}}),
    );
    let quantidade = if quebrado {
        json!({"type": "string"})
    } else {
        json!({"type": "integer", "format": "int32"})
    };
    json!({
        "type": "object",
        "properties": campos,
        "required": ["id", "estado", "cliente", "itens", "campo_0", "campo_1"],
        "$defs": {
            "Estado": {"type": "string", "enum": ["Aberto", "Pago", "Cancelado"]},
            "Cliente": {
                "type": "object",
                "properties": {"nome": {"type": "string"}, "email": {"type": ["string", "null"]}},
                "required": ["nome"]
            },
            "Item": {
                "type": "object",
                "properties": {"codigo": {"type": "string"}, "quantidade": quantidade},
                "required": ["codigo", "quantidade"]
            }
        }
    })
}

fn diretorio(quebrar: bool) -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("a directory for the contracts");
    let contratos: Vec<Contrato> = (0..TIPOS)
        .map(|i| Contrato {
            tipo: format!("bench.tipo{i:03}"),
            compatibilidade: Default::default(),
            envio: Some(Lado {
                tipo_rust: format!("Tipo{i}"),
                esquema: Some(esquema(i, quebrar && i < QUEBRADOS)),
                ..Lado::default()
            }),
            recepcao: Some(Lado {
                tipo_rust: format!("Tipo{i}"),
                chave_natural: Some("evento.id".into()),
                esquema: Some(esquema(i, false)),
                ..Lado::default()
            }),
        })
        .collect();
    contratos::escrever_diretorio(dir.path(), &contratos).expect("write the contracts");
    dir
}

pub(crate) async fn medir(rel: &mut Relatorio, p: &Parametros) {
    println!("contratos: the check of {TIPOS} tipos");
    let (antigo, novo) = (diretorio(false), diretorio(true));
    let (mut verificacao, mut comparacao, mut base) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..p.repeticoes.max(5) {
        let inicio = Instant::now();
        for dir in [&antigo, &novo] {
            for arquivo in std::fs::read_dir(dir.path()).expect("the directory") {
                let texto =
                    std::fs::read_to_string(arquivo.expect("a file").path()).expect("a file");
                let _: Value = serde_json::from_str(&texto).expect("JSON");
            }
        }
        base.push(inicio.elapsed().as_secs_f64() * 1e3);

        let inicio = Instant::now();
        let velhos = contratos::ler_diretorio(antigo.path()).expect("read");
        let novos = contratos::ler_diretorio(novo.path()).expect("read");
        let meio = Instant::now();
        let problemas = contratos::comparar(&velhos, &novos);
        let fim = Instant::now();
        assert_eq!(
            problemas.len(),
            2 * QUEBRADOS,
            "each broken tipo, both ways"
        );
        verificacao.push((fim - inicio).as_secs_f64() * 1e3);
        comparacao.push((fim - meio).as_secs_f64() * 1e3);
    }
    let b = rel.medir(
        "contratos",
        format!("baseline: read and parse 2 × {TIPOS} files as JSON"),
        base,
        "ms",
    );
    rel.medir(
        "contratos",
        format!("compare {TIPOS} tipos (both sides, FULL)"),
        comparacao,
        "ms",
    );
    let v = rel.medir(
        "contratos",
        format!("check {TIPOS} tipos: read 2 × {TIPOS} files + compare"),
        verificacao,
        "ms",
    );
    rel.meta(
        format!("contracts check of {TIPOS} tipos < 1 s"),
        format!(
            "{} ms ({}× reading and parsing the same files)",
            fmt(v),
            fmt(v / b)
        ),
        v < 1000.0,
    );
}
