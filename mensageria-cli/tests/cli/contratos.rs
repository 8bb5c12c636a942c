//! `mensageria contratos verificar OLD NEW`: two directories of contracts, no database.

use assert_cmd::Command;
use mensageria_core::contratos::{self, Contrato, Lado};
use serde_json::json;

use crate::comum::{stderr, stdout};

/// A directory holding one contract: tipo `pedido.criado`, sent, with `esquema`.
fn diretorio(esquema: serde_json::Value) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let contrato = Contrato {
        tipo: "pedido.criado".into(),
        compatibilidade: Default::default(),
        envio: Some(Lado {
            tipo_rust: "PedidoCriado".into(),
            esquema: Some(esquema),
            ..Lado::default()
        }),
        recepcao: None,
    };
    contratos::escrever_diretorio(dir.path(), &[contrato]).unwrap();
    dir
}

fn verificar(
    antigo: &std::path::Path,
    novo: &std::path::Path,
    json: bool,
) -> assert_cmd::assert::Assert {
    let mut comando = Command::new(env!("CARGO_BIN_EXE_mensageria"));
    comando
        .env_remove("DATABASE_URL")
        .args(["contratos", "verificar"]);
    comando.arg(antigo).arg(novo);
    if json {
        comando.arg("--json");
    }
    comando.assert()
}

#[test]
fn compativel_sai_0_e_incompativel_sai_1_com_uma_linha_por_problema() {
    let id = |tipo: &str| json!({"type": "object", "properties": {"id": {"type": tipo}}, "required": ["id"]});
    let antigo = diretorio(id("integer"));
    let mesmo = diretorio(id("integer"));
    let saida = verificar(antigo.path(), mesmo.path(), false).success();
    assert_eq!(stdout(&saida).trim(), "compatible: 1 tipo(s) checked");

    let quebrado = diretorio(id("string"));
    let saida = verificar(antigo.path(), quebrado.path(), false).code(1);
    let texto = stdout(&saida);
    let linhas: Vec<&str> = texto.lines().collect();
    assert_eq!(linhas.len(), 3, "{texto}");
    assert!(
        linhas[0].starts_with("pedido.criado (sent): $.id: type-changed: the writer writes integer; the reader reads string [BACKWARD"),
        "{texto}"
    );
    assert!(linhas[1].contains("[FORWARD"), "{texto}");
    assert_eq!(linhas[2], "incompatible: 2 problem(s) in 1 tipo(s) checked");

    let saida = verificar(antigo.path(), quebrado.path(), true).code(1);
    let documento: serde_json::Value = serde_json::from_str(&stdout(&saida)).unwrap();
    assert_eq!(documento["compativel"], false);
    assert_eq!(documento["problemas"][0]["regra"], "type-changed");
    assert_eq!(documento["problemas"][0]["caminho"], "$.id");
    assert_eq!(documento["problemas"][1]["direcao"], "FORWARD");
}

#[test]
fn diretorio_ausente_ou_arquivo_estranho_diz_qual() {
    let antigo = diretorio(json!({"type": "object"}));
    let saida = verificar(antigo.path(), std::path::Path::new("/nao/existe"), false).code(1);
    assert!(stderr(&saida).contains("/nao/existe"), "{}", stderr(&saida));
    let estranho = tempfile::tempdir().unwrap();
    std::fs::write(estranho.path().join("x.json"), "{\"nada\": 1}").unwrap();
    let saida = verificar(antigo.path(), estranho.path(), false).code(1);
    assert!(
        stderr(&saida).contains("not a mensageria contract"),
        "{}",
        stderr(&saida)
    );
}
