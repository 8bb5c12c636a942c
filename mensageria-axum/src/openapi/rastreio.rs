//! The schema of a payload that does not derive `utoipa::ToSchema`, traced from its
//! `Deserialize`: the payload is deserialized from a recording deserializer (as
//! `serde-reflection` does), which learns each struct's fields and their shapes, integer
//! bounds, options, sequences, tuples, maps with string keys and externally tagged enum variants
//! (one run per variant). Then, one run per field, that field is left out (required when that
//! fails) and an unknown key is added (`additionalProperties: false` when that fails). Aliases
//! are found (fed after their field they are a duplicate) and left out of the document.
//!
//! What needs `deserialize_any` (untagged or internally tagged enums, `flatten`,
//! `serde_json::Value`), bytes, 128-bit integers, a custom `Deserialize` refusing the neutral
//! probe values (`""`, `0`, `false`), or a recursive type is not traced: [`rastrear`] gives
//! `None`.

use std::cell::{Cell, RefCell};
use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use serde::de::{
    self, DeserializeOwned, DeserializeSeed, Deserializer, EnumAccess, IntoDeserializer, MapAccess,
    SeqAccess, VariantAccess, Visitor,
};
use utoipa::openapi::schema::{AdditionalProperties, ArrayItems, SchemaType};
use utoipa::openapi::{ArrayBuilder, ObjectBuilder, OneOfBuilder, RefOr, Schema, Type};

/// Deeper than this, the type is taken to be recursive.
const PROFUNDIDADE_MAXIMA: usize = 32;
/// Deserializations one trace may run (one per field and enum variant, roughly).
const EXECUCOES_MAXIMAS: usize = 512;
/// The key added to learn whether a struct refuses unknown fields.
const CHAVE_ESTRANHA: &str = "\u{0}mensageria-sonda";

/// The schema of `T`, or `None` when it cannot be traced.
pub(super) fn rastrear<T: DeserializeOwned>() -> Option<Schema> {
    let ctx = Contexto::default();
    let plano = Plano::default();
    let mut forma = executar::<T>(&ctx, &plano).ok()?;
    completar::<T>(&ctx, &plano, &mut forma).ok()?;
    let esquema = esquema(&forma, false)?;
    Some(match esquema {
        Schema::Object(mut objeto) => {
            objeto.description = Some(DESCRICAO.to_owned());
            Schema::Object(objeto)
        }
        Schema::Array(mut lista) => {
            lista.description = Some(DESCRICAO.to_owned());
            Schema::Array(lista)
        }
        Schema::OneOf(mut escolha) => {
            escolha.description = Some(DESCRICAO.to_owned());
            Schema::OneOf(escolha)
        }
        outro => outro,
    })
}

const DESCRICAO: &str = "traced from the payload type's `Deserialize` (it does not derive \
                         `utoipa::ToSchema`): shapes, bounds and required fields, no \
                         documentation";

/// The shape a deserialization asked for.
#[derive(Debug)]
enum Forma {
    Booleano,
    Inteiro { minimo: i64, maximo: u64 },
    Numero,
    Texto,
    Caractere,
    Nulo,
    Opcional(Box<Forma>),
    Lista(Box<Forma>),
    Tupla(Vec<Forma>),
    Mapa(Box<Forma>),
    Objeto(Objeto),
    Escolha(Escolha),
}

#[derive(Debug)]
struct Objeto {
    caminho: String,
    nome: &'static str,
    campos: Vec<(&'static str, Forma)>,
    obrigatorios: Vec<&'static str>,
    fechado: bool,
}

#[derive(Debug)]
struct Escolha {
    caminho: String,
    nomes: &'static [&'static str],
    variantes: Vec<Option<Variante>>,
}

#[derive(Debug)]
enum Variante {
    Unidade,
    Valor(Forma),
}

/// What every run of one trace shares.
#[derive(Default)]
struct Contexto {
    /// Runs so far.
    execucoes: Cell<usize>,
    /// Keys not to feed, by struct path: aliases (`#[serde(alias)]` lists them among the
    /// fields; fed after their field, they are a duplicate).
    apelidos: RefCell<BTreeSet<(String, &'static str)>>,
}

/// What one run does differently from the plain trace.
#[derive(Clone, Default)]
struct Plano {
    /// At the struct at this path, leave this field out.
    omitir: Option<(String, &'static str)>,
    /// At the struct at this path, add an unknown key.
    estranha: Option<String>,
    /// At the enum at each path, take this variant (the first otherwise).
    escolhas: BTreeMap<String, usize>,
}

#[derive(Debug)]
enum Falha {
    FaltaCampo,
    CampoDesconhecido,
    CampoDuplicado,
    /// An alias was found and recorded: run again.
    Repetir,
    Orcamento,
    Outra(String),
}

impl fmt::Display for Falha {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::FaltaCampo => f.write_str("missing field"),
            Self::CampoDesconhecido => f.write_str("unknown field"),
            Self::CampoDuplicado => f.write_str("duplicate field"),
            Self::Repetir => f.write_str("run again"),
            Self::Orcamento => f.write_str("too many runs"),
            Self::Outra(texto) => f.write_str(texto),
        }
    }
}

impl std::error::Error for Falha {}

impl de::Error for Falha {
    fn custom<M: fmt::Display>(mensagem: M) -> Self {
        Self::Outra(mensagem.to_string())
    }

    fn missing_field(_campo: &'static str) -> Self {
        Self::FaltaCampo
    }

    fn unknown_field(_campo: &str, _esperados: &'static [&'static str]) -> Self {
        Self::CampoDesconhecido
    }

    fn duplicate_field(_campo: &'static str) -> Self {
        Self::CampoDuplicado
    }
}

fn nao_rastreavel(o_que: &str) -> Falha {
    Falha::Outra(format!("{o_que} is not traced"))
}

/// One deserialization of `T` under `plano`: the shape it asked for.
fn executar<T: DeserializeOwned>(ctx: &Contexto, plano: &Plano) -> Result<Forma, Falha> {
    loop {
        if ctx.execucoes.get() >= EXECUCOES_MAXIMAS {
            return Err(Falha::Orcamento);
        }
        ctx.execucoes.set(ctx.execucoes.get() + 1);
        let mut saida = None;
        let rastreador = Rastreador {
            ctx,
            plano,
            caminho: String::new(),
            profundidade: 0,
            saida: &mut saida,
        };
        // A custom `Deserialize` could panic on the probe values: not traced, then.
        let resultado =
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| T::deserialize(rastreador)));
        return match resultado {
            Ok(Ok(valor)) => {
                drop(valor);
                saida.ok_or_else(|| nao_rastreavel("a payload that reads nothing"))
            }
            Ok(Err(Falha::Repetir)) => continue,
            Ok(Err(falha)) => Err(falha),
            Err(_) => Err(nao_rastreavel("a payload whose Deserialize panics")),
        };
    }
}

/// Fills in what one run cannot tell: required fields, closed structs, other variants.
fn completar<T: DeserializeOwned>(
    ctx: &Contexto,
    plano: &Plano,
    forma: &mut Forma,
) -> Result<(), Falha> {
    match forma {
        Forma::Opcional(dentro) | Forma::Lista(dentro) | Forma::Mapa(dentro) => {
            completar::<T>(ctx, plano, dentro)
        }
        Forma::Tupla(itens) => itens
            .iter_mut()
            .try_for_each(|item| completar::<T>(ctx, plano, item)),
        Forma::Objeto(objeto) => {
            for (_, campo) in &mut objeto.campos {
                completar::<T>(ctx, plano, campo)?;
            }
            for (nome, _) in &objeto.campos {
                let plano = Plano {
                    omitir: Some((objeto.caminho.clone(), nome)),
                    ..plano.clone()
                };
                match executar::<T>(ctx, &plano) {
                    Ok(_) => {}
                    Err(Falha::Orcamento) => return Err(Falha::Orcamento),
                    Err(_) => objeto.obrigatorios.push(nome),
                }
            }
            let plano = Plano {
                estranha: Some(objeto.caminho.clone()),
                ..plano.clone()
            };
            objeto.fechado = match executar::<T>(ctx, &plano) {
                Ok(_) => false,
                Err(Falha::Orcamento) => return Err(Falha::Orcamento),
                Err(_) => true,
            };
            Ok(())
        }
        Forma::Escolha(escolha) => {
            let atual = plano.escolhas.get(&escolha.caminho).copied().unwrap_or(0);
            if let Some(Some(Variante::Valor(dentro))) = escolha.variantes.get_mut(atual) {
                completar::<T>(ctx, plano, dentro)?;
            }
            for outra in 0..escolha.nomes.len() {
                if outra == atual {
                    continue;
                }
                let mut plano = plano.clone();
                plano.escolhas.insert(escolha.caminho.clone(), outra);
                let mut arvore = executar::<T>(ctx, &plano)?;
                let Some(Forma::Escolha(la)) = achar(&mut arvore, &escolha.caminho) else {
                    return Err(nao_rastreavel("an enum that moves"));
                };
                let mut variante = la.variantes.get_mut(outra).and_then(Option::take);
                if let Some(Variante::Valor(dentro)) = &mut variante {
                    completar::<T>(ctx, &plano, dentro)?;
                }
                escolha.variantes[outra] = variante;
            }
            Ok(())
        }
        Forma::Booleano
        | Forma::Inteiro { .. }
        | Forma::Numero
        | Forma::Texto
        | Forma::Caractere
        | Forma::Nulo => Ok(()),
    }
}

/// The struct or enum at `caminho` in `forma`.
fn achar<'f>(forma: &'f mut Forma, caminho: &str) -> Option<&'f mut Forma> {
    let aqui = match &*forma {
        Forma::Objeto(objeto) => objeto.caminho == caminho,
        Forma::Escolha(escolha) => escolha.caminho == caminho,
        _ => false,
    };
    if aqui {
        return Some(forma);
    }
    match forma {
        Forma::Opcional(dentro) | Forma::Lista(dentro) | Forma::Mapa(dentro) => {
            achar(dentro, caminho)
        }
        Forma::Tupla(itens) => itens.iter_mut().find_map(|item| achar(item, caminho)),
        Forma::Objeto(objeto) => objeto
            .campos
            .iter_mut()
            .find_map(|(_, campo)| achar(campo, caminho)),
        Forma::Escolha(escolha) => escolha.variantes.iter_mut().find_map(|v| match v {
            Some(Variante::Valor(dentro)) => achar(dentro, caminho),
            _ => None,
        }),
        _ => None,
    }
}

/// The JSON Schema of a traced shape (`anulavel`: `null` is accepted too).
fn esquema(forma: &Forma, anulavel: bool) -> Option<Schema> {
    let tipo = |tipo: Type| -> SchemaType {
        if anulavel {
            SchemaType::Array(vec![tipo, Type::Null])
        } else {
            SchemaType::Type(tipo)
        }
    };
    let simples = |t: Type| Schema::Object(ObjectBuilder::new().schema_type(tipo(t)).build());
    Some(match forma {
        Forma::Booleano => simples(Type::Boolean),
        Forma::Numero => simples(Type::Number),
        Forma::Texto => simples(Type::String),
        Forma::Nulo => Schema::Object(ObjectBuilder::new().schema_type(Type::Null).build()),
        Forma::Caractere => Schema::Object(
            ObjectBuilder::new()
                .schema_type(tipo(Type::String))
                .min_length(Some(1))
                .max_length(Some(1))
                .build(),
        ),
        Forma::Inteiro { minimo, maximo } => Schema::Object(
            ObjectBuilder::new()
                .schema_type(tipo(Type::Integer))
                .minimum(Some(*minimo))
                .maximum(Some(*maximo))
                .build(),
        ),
        Forma::Opcional(dentro) => esquema(dentro, true)?,
        Forma::Lista(dentro) => Schema::Array(
            ArrayBuilder::new()
                .schema_type(tipo(Type::Array))
                .items(RefOr::T(esquema(dentro, false)?))
                .build(),
        ),
        Forma::Tupla(itens) => Schema::Array(
            ArrayBuilder::new()
                .schema_type(tipo(Type::Array))
                .prefix_items(
                    itens
                        .iter()
                        .map(|item| esquema(item, false))
                        .collect::<Option<Vec<_>>>()?,
                )
                .items(ArrayItems::False)
                .min_items(Some(itens.len()))
                .max_items(Some(itens.len()))
                .build(),
        ),
        Forma::Mapa(dentro) => Schema::Object(
            ObjectBuilder::new()
                .schema_type(tipo(Type::Object))
                .additional_properties(Some(RefOr::T(esquema(dentro, false)?)))
                .build(),
        ),
        Forma::Objeto(objeto) => {
            let mut construtor = ObjectBuilder::new()
                .schema_type(tipo(Type::Object))
                .title(Some(objeto.nome));
            for (nome, campo) in &objeto.campos {
                construtor = construtor.property(*nome, esquema(campo, false)?);
            }
            for nome in &objeto.obrigatorios {
                construtor = construtor.required(*nome);
            }
            if objeto.fechado {
                construtor =
                    construtor.additional_properties(Some(AdditionalProperties::FreeForm(false)));
            }
            Schema::Object(construtor.build())
        }
        Forma::Escolha(escolha) => {
            // Externally tagged, as serde_json reads it: `"Unit"` or `{"Variant": value}`.
            let mut unidades = Vec::new();
            let mut opcoes = Vec::new();
            for (nome, variante) in escolha.nomes.iter().zip(&escolha.variantes) {
                match variante.as_ref()? {
                    Variante::Unidade => unidades.push(*nome),
                    Variante::Valor(dentro) => opcoes.push(Schema::Object(
                        ObjectBuilder::new()
                            .schema_type(Type::Object)
                            .property(*nome, esquema(dentro, false)?)
                            .required(*nome)
                            .additional_properties(Some(AdditionalProperties::FreeForm(false)))
                            .build(),
                    )),
                }
            }
            if !unidades.is_empty() {
                let unidades = Schema::Object(
                    ObjectBuilder::new()
                        .schema_type(Type::String)
                        .enum_values(Some(unidades))
                        .build(),
                );
                if opcoes.is_empty() && !anulavel {
                    return Some(unidades);
                }
                opcoes.insert(0, unidades);
            }
            if anulavel {
                opcoes.push(Schema::Object(
                    ObjectBuilder::new().schema_type(Type::Null).build(),
                ));
            }
            let mut construtor = OneOfBuilder::new();
            for opcao in opcoes {
                construtor = construtor.item(opcao);
            }
            Schema::OneOf(construtor.build())
        }
    })
}

/// The recording deserializer: answers each request with a neutral value and records what
/// was asked in `saida`.
struct Rastreador<'a> {
    ctx: &'a Contexto,
    plano: &'a Plano,
    caminho: String,
    profundidade: usize,
    saida: &'a mut Option<Forma>,
}

impl<'a> Rastreador<'a> {
    fn filho<'b>(
        &'b self,
        passo: &str,
        saida: &'b mut Option<Forma>,
    ) -> Result<Rastreador<'b>, Falha> {
        if self.profundidade >= PROFUNDIDADE_MAXIMA {
            return Err(nao_rastreavel("a recursive or too deep type"));
        }
        Ok(Rastreador {
            ctx: self.ctx,
            plano: self.plano,
            caminho: format!("{}/{passo}", self.caminho),
            profundidade: self.profundidade + 1,
            saida,
        })
    }

    fn inteiro(self, minimo: i64, maximo: u64) {
        *self.saida = Some(Forma::Inteiro { minimo, maximo });
    }

    fn objeto<'de, V: Visitor<'de>>(
        self,
        nome: &'static str,
        campos: &'static [&'static str],
        visitante: V,
    ) -> Result<V::Value, Falha> {
        let mut chaves = Vec::with_capacity(campos.len() + 1);
        if self.plano.estranha.as_deref() == Some(self.caminho.as_str()) {
            chaves.push(CHAVE_ESTRANHA);
        }
        let apelidos = self.ctx.apelidos.borrow();
        for campo in campos {
            if apelidos.contains(&(self.caminho.clone(), *campo)) {
                continue;
            }
            let omitido = self
                .plano
                .omitir
                .as_ref()
                .is_some_and(|(caminho, omitir)| *caminho == self.caminho && omitir == campo);
            if !omitido {
                chaves.push(campo);
            }
        }
        drop(apelidos);
        let mut formas = Vec::with_capacity(campos.len());
        let mut ultima = None;
        let valor = match visitante.visit_map(Campos {
            pai: &self,
            chaves: chaves.into_iter(),
            atual: None,
            ultima: &mut ultima,
            formas: &mut formas,
        }) {
            Ok(valor) => valor,
            Err(Falha::CampoDuplicado) => {
                // The key just fed names a field already read: an alias. Never feed it.
                let Some(apelido) = ultima else {
                    return Err(Falha::CampoDuplicado);
                };
                self.ctx
                    .apelidos
                    .borrow_mut()
                    .insert((self.caminho.clone(), apelido));
                return Err(Falha::Repetir);
            }
            Err(falha) => return Err(falha),
        };
        // Field order as declared, whatever order the run saw them in.
        let mut ordenados = Vec::with_capacity(campos.len());
        for campo in campos {
            if let Some(posicao) = formas.iter().position(|(nome, _)| nome == campo) {
                ordenados.push(formas.swap_remove(posicao));
            }
        }
        *self.saida = Some(Forma::Objeto(Objeto {
            caminho: self.caminho.clone(),
            nome,
            campos: ordenados,
            obrigatorios: Vec::new(),
            fechado: false,
        }));
        Ok(valor)
    }

    fn tupla<'de, V: Visitor<'de>>(self, tamanho: usize, visitante: V) -> Result<V::Value, Falha> {
        let mut formas = Vec::with_capacity(tamanho);
        let valor = visitante.visit_seq(Elementos {
            pai: &self,
            restantes: tamanho,
            tupla: true,
            formas: &mut formas,
        })?;
        if formas.len() != tamanho {
            return Err(nao_rastreavel("a tuple read short"));
        }
        *self.saida = Some(Forma::Tupla(formas));
        Ok(valor)
    }
}

macro_rules! inteiros {
    ($($metodo:ident: $tipo:ty => $visitar:ident;)*) => {$(
        fn $metodo<V: Visitor<'de>>(self, visitante: V) -> Result<V::Value, Falha> {
            self.inteiro(
                i64::try_from(<$tipo>::MIN).unwrap_or(i64::MIN),
                u64::try_from(<$tipo>::MAX).unwrap_or(u64::MAX),
            );
            visitante.$visitar(0)
        }
    )*};
}

impl<'de> Deserializer<'de> for Rastreador<'_> {
    type Error = Falha;

    inteiros! {
        deserialize_i8: i8 => visit_i8;
        deserialize_i16: i16 => visit_i16;
        deserialize_i32: i32 => visit_i32;
        deserialize_i64: i64 => visit_i64;
        deserialize_u8: u8 => visit_u8;
        deserialize_u16: u16 => visit_u16;
        deserialize_u32: u32 => visit_u32;
        deserialize_u64: u64 => visit_u64;
    }

    fn deserialize_any<V: Visitor<'de>>(self, _: V) -> Result<V::Value, Falha> {
        Err(nao_rastreavel(
            "a self-describing payload (deserialize_any)",
        ))
    }

    fn deserialize_i128<V: Visitor<'de>>(self, _: V) -> Result<V::Value, Falha> {
        Err(nao_rastreavel("a 128-bit integer"))
    }

    fn deserialize_u128<V: Visitor<'de>>(self, _: V) -> Result<V::Value, Falha> {
        Err(nao_rastreavel("a 128-bit integer"))
    }

    fn deserialize_bool<V: Visitor<'de>>(self, visitante: V) -> Result<V::Value, Falha> {
        *self.saida = Some(Forma::Booleano);
        visitante.visit_bool(false)
    }

    fn deserialize_f32<V: Visitor<'de>>(self, visitante: V) -> Result<V::Value, Falha> {
        *self.saida = Some(Forma::Numero);
        visitante.visit_f32(0.0)
    }

    fn deserialize_f64<V: Visitor<'de>>(self, visitante: V) -> Result<V::Value, Falha> {
        *self.saida = Some(Forma::Numero);
        visitante.visit_f64(0.0)
    }

    fn deserialize_char<V: Visitor<'de>>(self, visitante: V) -> Result<V::Value, Falha> {
        *self.saida = Some(Forma::Caractere);
        visitante.visit_char('a')
    }

    fn deserialize_str<V: Visitor<'de>>(self, visitante: V) -> Result<V::Value, Falha> {
        *self.saida = Some(Forma::Texto);
        visitante.visit_str("")
    }

    fn deserialize_string<V: Visitor<'de>>(self, visitante: V) -> Result<V::Value, Falha> {
        *self.saida = Some(Forma::Texto);
        visitante.visit_string(String::new())
    }

    fn deserialize_bytes<V: Visitor<'de>>(self, _: V) -> Result<V::Value, Falha> {
        Err(nao_rastreavel("bytes"))
    }

    fn deserialize_byte_buf<V: Visitor<'de>>(self, _: V) -> Result<V::Value, Falha> {
        Err(nao_rastreavel("bytes"))
    }

    fn deserialize_option<V: Visitor<'de>>(self, visitante: V) -> Result<V::Value, Falha> {
        let mut dentro = None;
        let valor = visitante.visit_some(self.filho("?", &mut dentro)?)?;
        let dentro = dentro.ok_or_else(|| nao_rastreavel("an option read empty"))?;
        *self.saida = Some(Forma::Opcional(Box::new(dentro)));
        Ok(valor)
    }

    fn deserialize_unit<V: Visitor<'de>>(self, visitante: V) -> Result<V::Value, Falha> {
        *self.saida = Some(Forma::Nulo);
        visitante.visit_unit()
    }

    fn deserialize_unit_struct<V: Visitor<'de>>(
        self,
        _: &'static str,
        visitante: V,
    ) -> Result<V::Value, Falha> {
        self.deserialize_unit(visitante)
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        nome: &'static str,
        visitante: V,
    ) -> Result<V::Value, Falha> {
        if nome.starts_with("$serde_json::") {
            return Err(nao_rastreavel("a serde_json special type"));
        }
        visitante.visit_newtype_struct(self)
    }

    fn deserialize_seq<V: Visitor<'de>>(self, visitante: V) -> Result<V::Value, Falha> {
        let mut formas = Vec::with_capacity(1);
        let valor = visitante.visit_seq(Elementos {
            pai: &self,
            restantes: 1,
            tupla: false,
            formas: &mut formas,
        })?;
        let elemento = formas
            .pop()
            .ok_or_else(|| nao_rastreavel("a sequence read empty"))?;
        *self.saida = Some(Forma::Lista(Box::new(elemento)));
        Ok(valor)
    }

    fn deserialize_tuple<V: Visitor<'de>>(
        self,
        tamanho: usize,
        visitante: V,
    ) -> Result<V::Value, Falha> {
        self.tupla(tamanho, visitante)
    }

    fn deserialize_tuple_struct<V: Visitor<'de>>(
        self,
        _: &'static str,
        tamanho: usize,
        visitante: V,
    ) -> Result<V::Value, Falha> {
        self.tupla(tamanho, visitante)
    }

    fn deserialize_map<V: Visitor<'de>>(self, visitante: V) -> Result<V::Value, Falha> {
        let mut chave = None;
        let mut valor_forma = None;
        let valor = visitante.visit_map(UmPar {
            pai: &self,
            estado: 0,
            chave: &mut chave,
            valor: &mut valor_forma,
        })?;
        match (chave, valor_forma) {
            (Some(Forma::Texto), Some(dentro)) => {
                *self.saida = Some(Forma::Mapa(Box::new(dentro)));
                Ok(valor)
            }
            _ => Err(nao_rastreavel("a map without string keys")),
        }
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        nome: &'static str,
        campos: &'static [&'static str],
        visitante: V,
    ) -> Result<V::Value, Falha> {
        self.objeto(nome, campos, visitante)
    }

    fn deserialize_enum<V: Visitor<'de>>(
        self,
        _: &'static str,
        nomes: &'static [&'static str],
        visitante: V,
    ) -> Result<V::Value, Falha> {
        let indice = self.plano.escolhas.get(&self.caminho).copied().unwrap_or(0);
        let Some(nome) = nomes.get(indice) else {
            return Err(nao_rastreavel("an enum without variants"));
        };
        let mut variante = None;
        let valor = visitante.visit_enum(UmaVariante {
            pai: &self,
            nome,
            variante: &mut variante,
        })?;
        let mut variantes: Vec<Option<Variante>> = nomes.iter().map(|_| None).collect();
        variantes[indice] =
            Some(variante.ok_or_else(|| nao_rastreavel("an enum read without a variant"))?);
        *self.saida = Some(Forma::Escolha(Escolha {
            caminho: self.caminho.clone(),
            nomes,
            variantes,
        }));
        Ok(valor)
    }

    fn deserialize_identifier<V: Visitor<'de>>(self, _: V) -> Result<V::Value, Falha> {
        Err(nao_rastreavel("an identifier as a value"))
    }

    fn deserialize_ignored_any<V: Visitor<'de>>(self, visitante: V) -> Result<V::Value, Falha> {
        visitante.visit_unit()
    }
}

/// A struct's fields, fed in order.
struct Campos<'p, 'a> {
    pai: &'p Rastreador<'a>,
    chaves: std::vec::IntoIter<&'static str>,
    atual: Option<&'static str>,
    ultima: &'p mut Option<&'static str>,
    formas: &'p mut Vec<(&'static str, Forma)>,
}

impl<'de> MapAccess<'de> for Campos<'_, '_> {
    type Error = Falha;

    fn next_key_seed<K: DeserializeSeed<'de>>(
        &mut self,
        semente: K,
    ) -> Result<Option<K::Value>, Falha> {
        let Some(chave) = self.chaves.next() else {
            return Ok(None);
        };
        self.atual = Some(chave);
        *self.ultima = Some(chave);
        semente.deserialize(chave.into_deserializer()).map(Some)
    }

    fn next_value_seed<S: DeserializeSeed<'de>>(&mut self, semente: S) -> Result<S::Value, Falha> {
        let chave = self
            .atual
            .take()
            .ok_or_else(|| nao_rastreavel("a value before its key"))?;
        let mut forma = None;
        let valor = semente.deserialize(self.pai.filho(chave, &mut forma)?)?;
        if chave != CHAVE_ESTRANHA {
            let forma = forma.ok_or_else(|| nao_rastreavel("a field read as nothing"))?;
            self.formas.push((chave, forma));
        }
        Ok(valor)
    }

    fn size_hint(&self) -> Option<usize> {
        Some(self.chaves.len())
    }
}

/// One pair of a map with keys that are not fields.
struct UmPar<'p, 'a> {
    pai: &'p Rastreador<'a>,
    estado: u8,
    chave: &'p mut Option<Forma>,
    valor: &'p mut Option<Forma>,
}

impl<'de> MapAccess<'de> for UmPar<'_, '_> {
    type Error = Falha;

    fn next_key_seed<K: DeserializeSeed<'de>>(
        &mut self,
        semente: K,
    ) -> Result<Option<K::Value>, Falha> {
        if self.estado != 0 {
            return Ok(None);
        }
        self.estado = 1;
        semente
            .deserialize(self.pai.filho("{key}", self.chave)?)
            .map(Some)
    }

    fn next_value_seed<S: DeserializeSeed<'de>>(&mut self, semente: S) -> Result<S::Value, Falha> {
        self.estado = 2;
        semente.deserialize(self.pai.filho("{}", self.valor)?)
    }

    fn size_hint(&self) -> Option<usize> {
        Some(usize::from(self.estado == 0))
    }
}

/// The elements of a sequence (one) or of a tuple (each).
struct Elementos<'p, 'a> {
    pai: &'p Rastreador<'a>,
    restantes: usize,
    tupla: bool,
    formas: &'p mut Vec<Forma>,
}

impl<'de> SeqAccess<'de> for Elementos<'_, '_> {
    type Error = Falha;

    fn next_element_seed<S: DeserializeSeed<'de>>(
        &mut self,
        semente: S,
    ) -> Result<Option<S::Value>, Falha> {
        if self.restantes == 0 {
            return Ok(None);
        }
        self.restantes -= 1;
        let passo = if self.tupla {
            self.formas.len().to_string()
        } else {
            "[]".to_owned()
        };
        let mut forma = None;
        let valor = semente.deserialize(self.pai.filho(&passo, &mut forma)?)?;
        self.formas
            .push(forma.ok_or_else(|| nao_rastreavel("an element read as nothing"))?);
        Ok(Some(valor))
    }

    fn size_hint(&self) -> Option<usize> {
        Some(self.restantes)
    }
}

/// The variant a run takes.
struct UmaVariante<'p, 'a> {
    pai: &'p Rastreador<'a>,
    nome: &'static str,
    variante: &'p mut Option<Variante>,
}

impl<'de, 'p, 'a> EnumAccess<'de> for UmaVariante<'p, 'a> {
    type Error = Falha;
    type Variant = Self;

    fn variant_seed<S: DeserializeSeed<'de>>(self, semente: S) -> Result<(S::Value, Self), Falha> {
        let nome = semente.deserialize(self.nome.into_deserializer())?;
        Ok((nome, self))
    }
}

impl<'de> VariantAccess<'de> for UmaVariante<'_, '_> {
    type Error = Falha;

    fn unit_variant(self) -> Result<(), Falha> {
        *self.variante = Some(Variante::Unidade);
        Ok(())
    }

    fn newtype_variant_seed<S: DeserializeSeed<'de>>(self, semente: S) -> Result<S::Value, Falha> {
        let mut forma = None;
        let valor = semente.deserialize(self.pai.filho(self.nome, &mut forma)?)?;
        let forma = forma.ok_or_else(|| nao_rastreavel("a variant read as nothing"))?;
        *self.variante = Some(Variante::Valor(forma));
        Ok(valor)
    }

    fn tuple_variant<V: Visitor<'de>>(
        self,
        tamanho: usize,
        visitante: V,
    ) -> Result<V::Value, Falha> {
        let mut forma = None;
        let valor = self
            .pai
            .filho(self.nome, &mut forma)?
            .tupla(tamanho, visitante)?;
        let forma = forma.ok_or_else(|| nao_rastreavel("a variant read as nothing"))?;
        *self.variante = Some(Variante::Valor(forma));
        Ok(valor)
    }

    fn struct_variant<V: Visitor<'de>>(
        self,
        campos: &'static [&'static str],
        visitante: V,
    ) -> Result<V::Value, Falha> {
        let mut forma = None;
        let valor = self
            .pai
            .filho(self.nome, &mut forma)?
            .objeto(self.nome, campos, visitante)?;
        let forma = forma.ok_or_else(|| nao_rastreavel("a variant read as nothing"))?;
        *self.variante = Some(Variante::Valor(forma));
        Ok(valor)
    }
}
