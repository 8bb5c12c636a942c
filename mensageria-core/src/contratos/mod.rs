//! Contracts: what each tipo's messages look like on the wire, one file per tipo, and the check
//! that refuses a change an old receiver cannot read, or a new receiver cannot read from an old
//! sender, before it ships.
//!
//! A contract holds the tipo, the JSON Schema of the payload each side of the app uses (the
//! enviador's, the receptor's; from the type's `utoipa::ToSchema`), the keys that matter on the
//! wire (the natural key, the ordering key, the version), and the tipo's compatibility mode, as
//! schema registries name them:
//!
//! | mode | the new contract must | so that |
//! |---|---|---|
//! | `BACKWARD` | read every message the old one allows | messages still in a saída or a stream, and senders not yet upgraded, are read by upgraded receivers |
//! | `FORWARD` | write only messages the old one reads | receivers not yet upgraded read what upgraded senders write |
//! | `FULL` (the default) | both | either side may deploy first, and messages in flight across a deploy are read |
//! | `NONE` | nothing | (a tipo nobody else reads yet) |
//!
//! `mensageria_axum::contratos` writes an app's contracts and checks them inside `cargo test`;
//! `mensageria contratos verificar <old> <new>` compares two directories of them.
//!
//! ```
//! use mensageria_core::contratos::{Contrato, Lado, comparar};
//! use serde_json::json;
//!
//! let contrato = |esquema| Contrato {
//!     tipo: "pedido.criado".into(),
//!     compatibilidade: Default::default(),
//!     envio: Some(Lado { tipo_rust: "PedidoCriado".into(), esquema: Some(esquema), ..Default::default() }),
//!     recepcao: None,
//! };
//! let antigo = contrato(json!({"type": "object", "properties": {"id": {"type": "integer"}}, "required": ["id"]}));
//! let novo = contrato(json!({"type": "object", "properties": {"id": {"type": "string"}}, "required": ["id"]}));
//! let problemas = comparar(&[antigo], &[novo]);
//! assert_eq!(problemas.len(), 2); // BACKWARD and FORWARD: an integer and a string read neither way
//! assert!(problemas[0].to_string().contains("pedido.criado (sent): $.id: type-changed"));
//! ```

pub mod asyncapi;
mod leitura;

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::Value;

pub use leitura::{Falha, Regra};

/// A tipo's compatibility mode (see the [module](self)'s table).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum Modo {
    /// The new contract reads every message of the old one.
    Backward,
    /// The old contract reads every message of the new one.
    Forward,
    /// Both (the default).
    #[default]
    Full,
    /// No check.
    None,
}

/// One tipo's contract in an app.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Contrato {
    /// The tipo.
    pub tipo: String,
    /// Its compatibility mode: `FULL` unless the committed file says otherwise (a team edits it
    /// there; writing the contracts again keeps it).
    #[serde(default)]
    pub compatibilidade: Modo,
    /// The sending side (`#[enviador]`), when the app sends it.
    #[serde(default, skip_serializing_if = "Option::is_none", rename = "envia")]
    pub envio: Option<Lado>,
    /// The receiving side (`#[receptor]`), when the app receives it.
    #[serde(default, skip_serializing_if = "Option::is_none", rename = "recebe")]
    pub recepcao: Option<Lado>,
}

/// One side of a contract: the payload type and its schema.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Lado {
    /// The payload's Rust type, as written in the source.
    pub tipo_rust: String,
    /// The natural key's expression (`#[receptor(chave_natural = ...)]`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chave_natural: Option<String>,
    /// The version's expression of a convergent receptor (`versao = ...`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub versao: Option<String>,
    /// The ordering key's expression (`#[enviador(ordem = ...)]`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chave_de_ordem: Option<String>,
    /// The payload's JSON Schema (its `$defs` inside); `None` when the type does not derive
    /// `utoipa::ToSchema`: the contract then says nothing about its messages, and the check
    /// reports it.
    pub esquema: Option<Value>,
}

/// Which side of a contract a problem is on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Papel {
    /// What the app sends.
    Envio,
    /// What the app receives.
    Recepcao,
}

impl Papel {
    fn nome(self) -> &'static str {
        match self {
            Self::Envio => "sent",
            Self::Recepcao => "received",
        }
    }
}

/// Which way a problem breaks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Direcao {
    /// The new contract does not read a message of the old one.
    Backward,
    /// The old contract does not read a message of the new one.
    Forward,
}

/// One line of the check: a tipo, a side, a place, a rule.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Problema {
    /// The tipo.
    pub tipo: String,
    /// The side.
    pub papel: Papel,
    /// Which way it breaks; `None` for a side without a schema or a tipo removed.
    pub direcao: Option<Direcao>,
    /// Where and which rule.
    pub falha: Falha,
}

impl fmt::Display for Problema {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let Falha {
            caminho,
            regra,
            detalhe,
        } = &self.falha;
        write!(
            f,
            "{} ({}): {caminho}: {}: {detalhe}",
            self.tipo,
            self.papel.nome(),
            regra.nome()
        )?;
        match self.direcao {
            Some(Direcao::Backward) => f.write_str(
                " [BACKWARD: the new contract cannot read a message written under the old one]",
            ),
            Some(Direcao::Forward) => f.write_str(
                " [FORWARD: a receiver on the old contract cannot read a message written under the new one]",
            ),
            None => Ok(()),
        }
    }
}

/// Compares the contracts an app had (`antigos`) with the ones it has now (`novos`), tipo by tipo,
/// under each tipo's mode as the new contract says it: every problem, in the order of the tipos.
/// A side without a schema is a problem (the check cannot see its messages); a tipo or side
/// removed is one (messages of it in flight, or receivers waiting for it).
pub fn comparar(antigos: &[Contrato], novos: &[Contrato]) -> Vec<Problema> {
    let novos: BTreeMap<&str, &Contrato> = novos.iter().map(|c| (c.tipo.as_str(), c)).collect();
    let mut antigos: Vec<&Contrato> = antigos.iter().collect();
    antigos.sort_by(|a, b| a.tipo.cmp(&b.tipo));
    let mut problemas = Vec::new();
    for antigo in antigos {
        let novo = novos.get(antigo.tipo.as_str()).copied();
        let modo = novo.map_or(antigo.compatibilidade, |n| n.compatibilidade);
        if modo == Modo::None {
            continue;
        }
        for papel in [Papel::Envio, Papel::Recepcao] {
            let lado_antigo = antigo.lado(papel);
            let lado_novo = novo.and_then(|n| n.lado(papel));
            let Some(lado_antigo) = lado_antigo else {
                continue;
            };
            let problema = |direcao, regra, caminho: &str, detalhe: String| Problema {
                tipo: antigo.tipo.clone(),
                papel,
                direcao,
                falha: Falha {
                    caminho: caminho.to_owned(),
                    regra,
                    detalhe,
                },
            };
            let Some(lado_novo) = lado_novo else {
                problemas.push(problema(
                    None,
                    Regra::TipoRemovido,
                    "$",
                    format!(
                        "the app no longer {} it: receivers waiting for it, or messages of it in \
                         flight, are left behind (set its mode to NONE to say that is intended)",
                        if papel == Papel::Envio {
                            "sends"
                        } else {
                            "receives"
                        }
                    ),
                ));
                continue;
            };
            let (Some(esquema_antigo), Some(esquema_novo)) =
                (&lado_antigo.esquema, &lado_novo.esquema)
            else {
                problemas.push(problema(
                    None,
                    Regra::EscritorSemEsquema,
                    "$",
                    format!(
                        "`{}` publishes no schema: derive `utoipa::ToSchema` on it so the check \
                         can see its messages",
                        lado_novo.tipo_rust
                    ),
                ));
                continue;
            };
            for (direcao, leitor, escritor) in [
                (Direcao::Backward, esquema_novo, esquema_antigo),
                (Direcao::Forward, esquema_antigo, esquema_novo),
            ] {
                let vale = match direcao {
                    Direcao::Backward => matches!(modo, Modo::Backward | Modo::Full),
                    Direcao::Forward => matches!(modo, Modo::Forward | Modo::Full),
                };
                if vale {
                    problemas.extend(ler(leitor, escritor).into_iter().map(|falha| Problema {
                        tipo: antigo.tipo.clone(),
                        papel,
                        direcao: Some(direcao),
                        falha,
                    }));
                }
            }
        }
    }
    problemas
}

/// Where `leitor` (a schema) cannot read a value `escritor` allows; empty when it reads them all.
///
/// ```
/// use mensageria_core::contratos::{Regra, ler};
/// use serde_json::json;
///
/// let leitor = json!({"type": "object", "properties": {"n": {"type": "number"}}, "required": ["n"]});
/// let escritor = json!({"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]});
/// assert!(ler(&leitor, &escritor).is_empty()); // an integer widens to a number
/// assert_eq!(ler(&escritor, &leitor)[0].regra, Regra::NumeroEstreitado);
/// ```
pub fn ler(leitor: &Value, escritor: &Value) -> Vec<Falha> {
    let mut leitura = leitura::Leitura::new(leitura::defs(leitor), leitura::defs(escritor));
    leitura.ler(leitor, escritor, "$");
    leitura.falhas
}

impl Contrato {
    fn lado(&self, papel: Papel) -> Option<&Lado> {
        match papel {
            Papel::Envio => self.envio.as_ref(),
            Papel::Recepcao => self.recepcao.as_ref(),
        }
    }

    /// The contract's file name in a directory of contracts: `{tipo}.json`.
    pub fn arquivo(&self) -> String {
        format!("{}.json", self.tipo)
    }
}

/// What reading or writing a directory of contracts met.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ErroContrato {
    /// A file or the directory could not be read or written.
    #[error("{}: {fonte}", caminho.display())]
    Arquivo {
        /// The path.
        caminho: PathBuf,
        /// The I/O error.
        fonte: std::io::Error,
    },
    /// A file is not a contract.
    #[error(
        "{}: not a mensageria contract ({fonte}); write the contracts again with \
         mensageria_axum::contratos::escrever",
        caminho.display()
    )]
    Formato {
        /// The path.
        caminho: PathBuf,
        /// What serde said.
        fonte: serde_json::Error,
    },
}

/// The contracts of a directory (every `*.json` file), in the order of their tipos.
pub fn ler_diretorio(dir: &Path) -> Result<Vec<Contrato>, ErroContrato> {
    let erro = |caminho: &Path| {
        let caminho = caminho.to_owned();
        move |fonte| ErroContrato::Arquivo { caminho, fonte }
    };
    let mut contratos = Vec::new();
    for entrada in std::fs::read_dir(dir).map_err(erro(dir))? {
        let caminho = entrada.map_err(erro(dir))?.path();
        if caminho.extension().is_none_or(|e| e != "json") {
            continue;
        }
        let texto = std::fs::read_to_string(&caminho).map_err(erro(&caminho))?;
        let contrato = serde_json::from_str(&texto)
            .map_err(|fonte| ErroContrato::Formato { caminho, fonte })?;
        contratos.push(contrato);
    }
    contratos.sort_by(|a: &Contrato, b| a.tipo.cmp(&b.tipo));
    Ok(contratos)
}

/// Writes `contratos` to `dir` (created if missing), one stable, diff-friendly file per tipo
/// (keys sorted, two-space indent, a final newline), keeping each tipo's mode from the file
/// already there, and removes the files of tipos no longer in `contratos`.
pub fn escrever_diretorio(dir: &Path, contratos: &[Contrato]) -> Result<(), ErroContrato> {
    let erro = |caminho: &Path| {
        let caminho = caminho.to_owned();
        move |fonte| ErroContrato::Arquivo { caminho, fonte }
    };
    std::fs::create_dir_all(dir).map_err(erro(dir))?;
    let existentes = ler_diretorio(dir)?;
    for antigo in &existentes {
        if !contratos.iter().any(|c| c.tipo == antigo.tipo) {
            let caminho = dir.join(antigo.arquivo());
            std::fs::remove_file(&caminho).map_err(erro(&caminho))?;
        }
    }
    for contrato in contratos {
        let mut contrato = contrato.clone();
        if let Some(antigo) = existentes.iter().find(|a| a.tipo == contrato.tipo) {
            contrato.compatibilidade = antigo.compatibilidade;
        }
        let caminho = dir.join(contrato.arquivo());
        std::fs::write(&caminho, texto(&contrato)).map_err(erro(&caminho))?;
    }
    Ok(())
}

/// A contract as its file holds it: keys sorted at every level, two-space indent, a newline.
pub fn texto(contrato: &Contrato) -> String {
    let valor = serde_json::to_value(contrato).expect("a contract is JSON");
    let mut texto = serde_json::to_string_pretty(&ordenado(valor)).expect("JSON writes");
    texto.push('\n');
    texto
}

/// `valor` with every object's keys in order (whatever map the JSON crate was built with).
fn ordenado(valor: Value) -> Value {
    match valor {
        Value::Object(mapa) => {
            let ordem: BTreeMap<String, Value> =
                mapa.into_iter().map(|(k, v)| (k, ordenado(v))).collect();
            Value::Object(ordem.into_iter().collect())
        }
        Value::Array(lista) => Value::Array(lista.into_iter().map(ordenado).collect()),
        outro => outro,
    }
}

/// The JSON Schema of a payload type from its `utoipa::ToSchema`: the type's own schema, with the
/// schemas it refers to under `$defs` (`$ref`s rewritten to `#/$defs/...`).
pub fn esquema_de<T: utoipa::ToSchema>() -> Value {
    let mut componentes = Vec::new();
    T::schemas(&mut componentes);
    let nome = T::name();
    if nome.is_empty() {
        return esquema_json(&T::schema(), &componentes);
    }
    // A reference to its own named schema: `esquema_json` inlines it, and keeps it under
    // `$defs` only for a recursive type.
    componentes.push((nome.to_string(), T::schema()));
    esquema_json(
        &utoipa::openapi::RefOr::Ref(utoipa::openapi::Ref::from_schema_name(nome)),
        &componentes,
    )
}

/// [`esquema_de`] from the pieces utoipa gives: a root schema and the named schemas it refers to.
pub fn esquema_json(
    raiz: &utoipa::openapi::RefOr<utoipa::openapi::schema::Schema>,
    componentes: &[(
        String,
        utoipa::openapi::RefOr<utoipa::openapi::schema::Schema>,
    )],
) -> Value {
    let mut esquema = refs_locais(serde_json::to_value(raiz).expect("a schema is JSON"));
    let defs: serde_json::Map<String, Value> = componentes
        .iter()
        .map(|(nome, esquema)| {
            let valor = serde_json::to_value(esquema).expect("a schema is JSON");
            (nome.clone(), refs_locais(valor))
        })
        .collect();
    let mut defs = defs;
    // A root that only refers to a named schema becomes that schema, which stays under `$defs`
    // only if something still refers to it (a recursive type): one form for every payload.
    let alvo = esquema
        .as_object()
        .filter(|mapa| mapa.len() == 1)
        .and_then(|mapa| mapa.get("$ref"))
        .and_then(Value::as_str)
        .and_then(|r| r.strip_prefix("#/$defs/"))
        .map(str::to_owned);
    if let Some(nome) = alvo
        && let Some(proprio) = defs.get(&nome).cloned()
    {
        esquema = proprio;
        let referencia = format!("\"#/$defs/{nome}\"");
        let referido = serde_json::to_string(&(&esquema, &defs))
            .is_ok_and(|texto| texto.contains(&referencia));
        if !referido {
            defs.remove(&nome);
        }
    }
    if let (Value::Object(mapa), false) = (&mut esquema, defs.is_empty()) {
        mapa.insert("$defs".to_owned(), Value::Object(defs));
    }
    ordenado(esquema)
}

/// `#/components/schemas/X` → `#/$defs/X`, everywhere in `valor`.
fn refs_locais(valor: Value) -> Value {
    match valor {
        Value::Object(mapa) => Value::Object(
            mapa.into_iter()
                .map(|(k, v)| match (k.as_str(), v) {
                    ("$ref", Value::String(r)) => (
                        k,
                        Value::String(r.replace("#/components/schemas/", "#/$defs/")),
                    ),
                    (_, v) => (k, refs_locais(v)),
                })
                .collect(),
        ),
        Value::Array(lista) => Value::Array(lista.into_iter().map(refs_locais).collect()),
        outro => outro,
    }
}
