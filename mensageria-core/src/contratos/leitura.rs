//! Whether a reader's schema reads every message a writer's schema allows, as serde decodes JSON:
//! the rules of the compatibility check, each a [`Regra`].
//!
//! The schemas are the JSON Schemas `utoipa` derives (OpenAPI 3.1's dialect): `type` (one name or
//! a list with `"null"` for an `Option`), `properties` / `required` / `additionalProperties`,
//! `items`, `enum` / `const`, `oneOf` / `anyOf` / `allOf`, `format`, numeric and length bounds,
//! and `$ref` into the contract's own `$defs`.

use std::collections::BTreeSet;

use serde_json::{Map, Value};

/// A rule the check applies, named in each problem line.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum Regra {
    /// The reader requires a field the writer does not write (added, or renamed).
    CampoObrigatorioAusente,
    /// The reader requires a field the writer may leave out (`Option`, `serde(default)`).
    CampoObrigatorioOpcional,
    /// The writer writes a field the reader refuses (`serde(deny_unknown_fields)`).
    CampoDesconhecidoRecusado,
    /// The writer may write `null` where the reader takes none (an `Option` made required).
    NuloRecusado,
    /// The value's JSON type changed (a string became a number, an object an array...).
    TipoMudou,
    /// A number became an integer, or a wider integer a narrower one.
    NumeroEstreitado,
    /// A bound (minimum, maximum, length, items) the writer does not respect.
    LimiteEstreitado,
    /// A string format (uuid, date-time...) or pattern the writer does not promise.
    FormatoEstreitado,
    /// An enum value the writer may write and the reader does not know.
    ValorDeEnumAusente,
    /// No alternative of the reader's `oneOf` reads one of the writer's.
    AlternativaAusente,
    /// The writer's schema allows any value here; the reader's does not.
    EscritorSemEsquema,
    /// The tipo is gone from the new contracts.
    TipoRemovido,
}

impl Regra {
    /// The rule's stable name, as problem lines and the guide's table write it.
    pub fn nome(self) -> &'static str {
        match self {
            Self::CampoObrigatorioAusente => "required-field-missing",
            Self::CampoObrigatorioOpcional => "required-field-optional",
            Self::CampoDesconhecidoRecusado => "unknown-field-refused",
            Self::NuloRecusado => "null-refused",
            Self::TipoMudou => "type-changed",
            Self::NumeroEstreitado => "number-narrowed",
            Self::LimiteEstreitado => "bound-narrowed",
            Self::FormatoEstreitado => "format-narrowed",
            Self::ValorDeEnumAusente => "enum-value-missing",
            Self::AlternativaAusente => "variant-missing",
            Self::EscritorSemEsquema => "writer-unconstrained",
            Self::TipoRemovido => "tipo-removed",
        }
    }
}

/// One place where the reader cannot read what the writer may write.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Falha {
    /// Where, as a JSON path (`$.itens[].quantidade`).
    pub caminho: String,
    /// Which rule.
    pub regra: Regra,
    /// What differs, for a human.
    pub detalhe: String,
}

/// The check of one reader against one writer, each with its own `$defs`.
pub(crate) struct Leitura<'a> {
    defs_leitor: &'a Map<String, Value>,
    defs_escritor: &'a Map<String, Value>,
    /// `$ref` pairs under way: a recursive type is checked once.
    visitados: BTreeSet<(String, String)>,
    pub(crate) falhas: Vec<Falha>,
}

/// The `$defs` of a contract's schema (empty when it has none).
pub(crate) fn defs(esquema: &Value) -> &Map<String, Value> {
    esquema
        .get("$defs")
        .and_then(Value::as_object)
        .unwrap_or_else(|| vazio())
}

impl<'a> Leitura<'a> {
    pub(crate) fn new(
        defs_leitor: &'a Map<String, Value>,
        defs_escritor: &'a Map<String, Value>,
    ) -> Self {
        Self {
            defs_leitor,
            defs_escritor,
            visitados: BTreeSet::new(),
            falhas: Vec::new(),
        }
    }

    fn falha(&mut self, caminho: &str, regra: Regra, detalhe: String) {
        self.falhas.push(Falha {
            caminho: caminho.to_owned(),
            regra,
            detalhe,
        });
    }

    /// Checks that `leitor` reads every value `escritor` allows, at `caminho`.
    pub(crate) fn ler(&mut self, leitor: &'a Value, escritor: &'a Value, caminho: &str) {
        let (leitor, ref_l) = resolver(leitor, self.defs_leitor);
        let (escritor, ref_e) = resolver(escritor, self.defs_escritor);
        if let (Some(l), Some(e)) = (&ref_l, &ref_e)
            && !self.visitados.insert((l.clone(), e.clone()))
        {
            return;
        }
        self.ler_resolvidos(leitor, escritor, caminho);
        if let (Some(l), Some(e)) = (ref_l, ref_e) {
            self.visitados.remove(&(l, e));
        }
    }

    fn ler_resolvidos(&mut self, leitor: &'a Value, escritor: &'a Value, caminho: &str) {
        if aceita_tudo(leitor) {
            return;
        }
        if aceita_tudo(escritor) {
            return self.falha(
                caminho,
                Regra::EscritorSemEsquema,
                "the writer's schema allows any value here; the reader's does not".to_owned(),
            );
        }
        if anulavel(escritor) && !anulavel(leitor) {
            self.falha(
                caminho,
                Regra::NuloRecusado,
                "the writer may write null or leave it out (an Option); the reader requires a value"
                    .to_owned(),
            );
        }
        // Each of the writer's alternatives must be read; then the writer's one schema by one
        // of the reader's alternatives.
        let alternativas_e = alternativas(escritor);
        if !e_ele_mesmo(&alternativas_e, escritor) {
            let varias = alternativas_e.len() > 1;
            for (i, alternativa) in alternativas_e.into_iter().enumerate() {
                let aqui = if varias {
                    format!("{caminho}<{i}>")
                } else {
                    caminho.to_owned()
                };
                self.ler(leitor, alternativa, &aqui);
            }
            return;
        }
        let alternativas_l = alternativas(leitor);
        if !e_ele_mesmo(&alternativas_l, leitor) {
            return self.ler_alguma(&alternativas_l, escritor, caminho);
        }
        for parte in partes(leitor) {
            self.ler_um(parte, escritor, caminho);
        }
    }

    /// The writer's (single) schema must be read by at least one of the reader's alternatives.
    fn ler_alguma(&mut self, alternativas_l: &[&'a Value], escritor: &'a Value, caminho: &str) {
        let mut melhor: Option<Vec<Falha>> = None;
        for alternativa in alternativas_l {
            let mut tentativa = Leitura::new(self.defs_leitor, self.defs_escritor);
            tentativa.visitados = self.visitados.clone();
            tentativa.ler(alternativa, escritor, caminho);
            if tentativa.falhas.is_empty() {
                return;
            }
            if melhor
                .as_ref()
                .is_none_or(|m| tentativa.falhas.len() < m.len())
            {
                melhor = Some(tentativa.falhas);
            }
        }
        let detalhe = match melhor.as_deref() {
            Some([primeira, ..]) => format!(
                "no alternative of the reader's reads the writer's (closest: {} at {}: {})",
                primeira.regra.nome(),
                primeira.caminho,
                primeira.detalhe
            ),
            _ => "the reader has no alternative that reads the writer's".to_owned(),
        };
        self.falha(caminho, Regra::AlternativaAusente, detalhe);
    }

    /// One reader schema (no alternatives) against one writer schema.
    fn ler_um(&mut self, leitor: &'a Value, escritor: &'a Value, caminho: &str) {
        let tipos_l = tipos_de_valor(leitor);
        let tipos_e = tipos_de_valor(escritor);
        if !tipos_l.is_empty() {
            for tipo in &tipos_e {
                let lido =
                    tipos_l.contains(tipo) || (tipo == "integer" && tipos_l.contains("number"));
                if !lido {
                    let regra = if tipo == "number" && tipos_l.contains("integer") {
                        Regra::NumeroEstreitado
                    } else {
                        Regra::TipoMudou
                    };
                    self.falha(
                        caminho,
                        regra,
                        format!(
                            "the writer writes {tipo}; the reader reads {}",
                            juntar(&tipos_l)
                        ),
                    );
                }
            }
        }
        self.ler_enum(leitor, escritor, caminho);
        self.ler_limites(leitor, escritor, caminho);
        self.ler_formato(leitor, escritor, caminho);
        if let (Some(itens_l), Some(itens_e)) = (leitor.get("items"), escritor.get("items")) {
            self.ler(itens_l, itens_e, &format!("{caminho}[]"));
        }
        if e_objeto(leitor) && e_objeto(escritor) {
            self.ler_objeto(leitor, escritor, caminho);
        }
    }

    fn ler_enum(&mut self, leitor: &Value, escritor: &Value, caminho: &str) {
        let Some(conhecidos) = valores(leitor) else {
            return;
        };
        match valores(escritor) {
            Some(escritos) => {
                let ausentes: Vec<String> = escritos
                    .iter()
                    .filter(|v| !conhecidos.contains(v))
                    .map(|v| v.to_string())
                    .collect();
                if !ausentes.is_empty() {
                    self.falha(
                        caminho,
                        Regra::ValorDeEnumAusente,
                        format!("the reader does not know {}", ausentes.join(", ")),
                    );
                }
            }
            None => self.falha(
                caminho,
                Regra::ValorDeEnumAusente,
                format!(
                    "the reader takes only {}; the writer writes any value of its type",
                    conhecidos
                        .iter()
                        .map(Value::to_string)
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            ),
        }
    }

    fn ler_limites(&mut self, leitor: &Value, escritor: &Value, caminho: &str) {
        for (chave, minimo) in [
            ("minimum", true),
            ("maximum", false),
            ("minLength", true),
            ("maxLength", false),
            ("minItems", true),
            ("maxItems", false),
            ("minProperties", true),
            ("maxProperties", false),
        ] {
            let Some(limite_l) = leitor.get(chave).and_then(Value::as_f64) else {
                continue;
            };
            let estreitou = match escritor.get(chave).and_then(Value::as_f64) {
                Some(limite_e) if minimo => limite_e < limite_l,
                Some(limite_e) => limite_e > limite_l,
                None => true,
            };
            if estreitou {
                let escrito = escritor
                    .get(chave)
                    .map_or_else(|| "none".to_owned(), Value::to_string);
                self.falha(
                    caminho,
                    Regra::LimiteEstreitado,
                    format!("the reader's {chave} is {limite_l}; the writer's is {escrito}"),
                );
            }
        }
        // An integer's width (a number written where an integer is read is a type's narrowing,
        // said once above).
        let (largura_l, largura_e) = (largura(leitor), largura(escritor));
        if let Some(l) = largura_l
            && tipos_de_valor(escritor).contains("integer")
            && largura_e.is_none_or(|e| e > l)
        {
            self.falha(
                caminho,
                Regra::NumeroEstreitado,
                format!(
                    "the reader's format is {}; the writer's is {}",
                    texto(leitor, "format"),
                    texto(escritor, "format")
                ),
            );
        }
    }

    fn ler_formato(&mut self, leitor: &Value, escritor: &Value, caminho: &str) {
        for chave in ["format", "pattern"] {
            let Some(valor_l) = leitor.get(chave).and_then(Value::as_str) else {
                continue;
            };
            if largura(leitor).is_some() || matches!(valor_l, "float" | "double") {
                continue;
            }
            if escritor.get(chave).and_then(Value::as_str) != Some(valor_l) {
                self.falha(
                    caminho,
                    Regra::FormatoEstreitado,
                    format!(
                        "the reader requires {chave} {valor_l:?}; the writer promises {}",
                        texto(escritor, chave)
                    ),
                );
            }
        }
    }

    fn ler_objeto(&mut self, leitor: &'a Value, escritor: &'a Value, caminho: &str) {
        let props_l = leitor.get("properties").and_then(Value::as_object);
        let props_e = escritor.get("properties").and_then(Value::as_object);
        let (props_l, props_e) = (
            props_l.unwrap_or_else(|| vazio()),
            props_e.unwrap_or_else(|| vazio()),
        );
        let obrigatorios_e = obrigatorios(escritor);
        // An `Option` the reader made required: `null-refused` says it, once.
        let opcao_exigida = |campo: &str| {
            props_e.get(campo).is_some_and(anulavel)
                && props_l.get(campo).is_some_and(|l| !anulavel(l))
        };
        for campo in obrigatorios(leitor) {
            let aqui = format!("{caminho}.{campo}");
            if !props_e.contains_key(campo)
                && escritor
                    .get("additionalProperties")
                    .is_none_or(|a| a == false)
            {
                self.falha(
                    &aqui,
                    Regra::CampoObrigatorioAusente,
                    "the reader requires it; the writer does not write it (a field added, or \
                     renamed: give it `#[serde(default)]` or make it an `Option`)"
                        .to_owned(),
                );
            } else if !obrigatorios_e.contains(&campo) && !opcao_exigida(campo) {
                self.falha(
                    &aqui,
                    Regra::CampoObrigatorioOpcional,
                    "the reader requires it; the writer may leave it out".to_owned(),
                );
            }
        }
        let adicionais_l = leitor.get("additionalProperties");
        for (campo, esquema_e) in props_e {
            let aqui = format!("{caminho}.{campo}");
            match (props_l.get(campo), adicionais_l) {
                (Some(esquema_l), _) => self.ler(esquema_l, esquema_e, &aqui),
                (None, Some(Value::Bool(false))) => self.falha(
                    &aqui,
                    Regra::CampoDesconhecidoRecusado,
                    "the writer writes it; the reader refuses unknown fields \
                     (`#[serde(deny_unknown_fields)]`)"
                        .to_owned(),
                ),
                (None, Some(adicional @ Value::Object(_))) => self.ler(adicional, esquema_e, &aqui),
                (None, _) => {}
            }
        }
        if let (Some(adicional_l @ Value::Object(_)), Some(adicional_e @ Value::Object(_))) =
            (adicionais_l, escritor.get("additionalProperties"))
        {
            self.ler(adicional_l, adicional_e, &format!("{caminho}.*"));
        }
    }
}

/// `esquema` with its `$ref` followed (in `defs`), and the name it referred to.
fn resolver<'a>(esquema: &'a Value, defs: &'a Map<String, Value>) -> (&'a Value, Option<String>) {
    let mut atual = esquema;
    let mut nome = None;
    // A chain of references ends, or is cut after a few steps.
    for _ in 0..16 {
        let Some(referencia) = atual.get("$ref").and_then(Value::as_str) else {
            break;
        };
        let chave = referencia.rsplit('/').next().unwrap_or(referencia);
        match defs.get(chave) {
            Some(alvo) => {
                nome = Some(chave.to_owned());
                atual = alvo;
            }
            None => break,
        }
    }
    (atual, nome)
}

/// `{}` or `true`: any value.
fn aceita_tudo(esquema: &Value) -> bool {
    match esquema {
        Value::Bool(b) => *b,
        Value::Object(mapa) => mapa.keys().all(|k| {
            matches!(
                k.as_str(),
                "description" | "title" | "default" | "examples" | "example" | "deprecated"
            )
        }),
        _ => false,
    }
}

/// Whether `null` is among the values: `type` lists it, or an alternative is `{"type": "null"}`.
fn anulavel(esquema: &Value) -> bool {
    let nulo =
        |e: &Value| tipos(e).contains("null") || e.get("nullable") == Some(&Value::Bool(true));
    nulo(esquema)
        || ["oneOf", "anyOf"].iter().any(|chave| {
            esquema
                .get(*chave)
                .and_then(Value::as_array)
                .is_some_and(|lista| lista.iter().any(nulo))
        })
}

/// The alternatives of `oneOf` / `anyOf`, without the `null` one; the schema itself otherwise.
fn alternativas(esquema: &Value) -> Vec<&Value> {
    let so_nulo = BTreeSet::from(["null".to_owned()]);
    for chave in ["oneOf", "anyOf"] {
        if let Some(lista) = esquema.get(chave).and_then(Value::as_array) {
            let sem_nulo: Vec<&Value> = lista.iter().filter(|e| tipos(e) != so_nulo).collect();
            if !sem_nulo.is_empty() {
                return sem_nulo;
            }
        }
    }
    vec![esquema]
}

/// Whether `alternativas` is just `esquema` (it has no `oneOf` / `anyOf`).
fn e_ele_mesmo(alternativas: &[&Value], esquema: &Value) -> bool {
    matches!(alternativas, [um] if std::ptr::eq(*um, esquema))
}

/// The schema and the members of its `allOf`: all must read the writer's value.
fn partes(esquema: &Value) -> Vec<&Value> {
    let mut partes = vec![esquema];
    if let Some(lista) = esquema.get("allOf").and_then(Value::as_array) {
        partes.extend(lista);
    }
    partes
}

/// The JSON types `type` names (`null` included).
fn tipos(esquema: &Value) -> BTreeSet<String> {
    match esquema.get("type") {
        Some(Value::String(tipo)) => BTreeSet::from([tipo.clone()]),
        Some(Value::Array(lista)) => lista
            .iter()
            .filter_map(Value::as_str)
            .map(str::to_owned)
            .collect(),
        _ => BTreeSet::new(),
    }
}

/// The JSON types `type` names, but `null` (nullability is checked on its own).
fn tipos_de_valor(esquema: &Value) -> BTreeSet<String> {
    let mut tipos = tipos(esquema);
    tipos.remove("null");
    tipos
}

/// The empty map: the properties of a schema that has none.
fn vazio() -> &'static Map<String, Value> {
    static VAZIO: std::sync::OnceLock<Map<String, Value>> = std::sync::OnceLock::new();
    VAZIO.get_or_init(Map::new)
}

fn juntar(tipos: &BTreeSet<String>) -> String {
    tipos.iter().cloned().collect::<Vec<_>>().join(" or ")
}

fn e_objeto(esquema: &Value) -> bool {
    tipos(esquema).contains("object") || esquema.get("properties").is_some()
}

fn obrigatorios(esquema: &Value) -> Vec<&str> {
    esquema
        .get("required")
        .and_then(Value::as_array)
        .map(|lista| lista.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default()
}

/// The allowed values (`enum`, or `const` as one), when the schema lists them.
fn valores(esquema: &Value) -> Option<Vec<Value>> {
    if let Some(lista) = esquema.get("enum").and_then(Value::as_array) {
        return Some(lista.iter().filter(|v| !v.is_null()).cloned().collect());
    }
    esquema.get("const").map(|v| vec![v.clone()])
}

/// An integer format's width in bits (`int8`…`int64`), when it names one.
fn largura(esquema: &Value) -> Option<u32> {
    match esquema.get("format").and_then(Value::as_str)? {
        "int8" | "uint8" => Some(8),
        "int16" | "uint16" => Some(16),
        "int32" | "uint32" => Some(32),
        "int64" | "uint64" => Some(64),
        "int128" | "uint128" => Some(128),
        _ => None,
    }
}

fn texto(esquema: &Value, chave: &str) -> String {
    esquema
        .get(chave)
        .map_or_else(|| "none".to_owned(), Value::to_string)
}
