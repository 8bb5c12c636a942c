//! The natural key: a domain identity, encoded canonically and injectively.
//!
//! A key is a list of parts; its encoding is the JSON array of the parts, so parts
//! `("a|b", "c")` and `("a", "b|c")` can never collide (`["a|b","c"]` vs `["a","b|c"]`), quotes
//! and NULs are escaped, and the text is readable in the `mensageria_recebidas` table.
//!

use serde::Serialize;

/// The longest encoded key accepted, in bytes. Longer keys are refused (422): a key is an
/// identity, not a payload, and index entries have a size limit.
pub const TAMANHO_MAXIMO_CHAVE: usize = 1024;

/// A natural key in its canonical encoding.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ChaveNatural(String);

/// Why a key could not be built.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ErroChave {
    /// A part does not serialize to JSON.
    #[error("a part of the natural key does not serialize: {0}")]
    Serializacao(#[from] serde_json::Error),
    /// The key is too long.
    #[error(
        "the natural key is {0} bytes, over the limit of {TAMANHO_MAXIMO_CHAVE}; key the event by a shorter identity"
    )]
    Longa(usize),
}

impl ChaveNatural {
    /// Builds a key from already-encoded parts.
    pub fn de_valores(partes: Vec<serde_json::Value>) -> Result<Self, ErroChave> {
        let texto = serde_json::to_string(&serde_json::Value::Array(partes))?;
        if texto.len() > TAMANHO_MAXIMO_CHAVE {
            return Err(ErroChave::Longa(texto.len()));
        }
        Ok(Self(texto))
    }

    /// Builds a key from parts of one type.
    ///
    /// ```
    /// use mensageria_axum::ChaveNatural;
    /// let um = ChaveNatural::de_partes(["a|b", "c"]).unwrap();
    /// let dois = ChaveNatural::de_partes(["a", "b|c"]).unwrap();
    /// assert_ne!(um, dois);
    /// assert_eq!(um.como_texto(), r#"["a|b","c"]"#);
    /// ```
    pub fn de_partes<T: Serialize>(partes: impl IntoIterator<Item = T>) -> Result<Self, ErroChave> {
        let valores = partes
            .into_iter()
            .map(|parte| serde_json::to_value(parte))
            .collect::<Result<Vec<_>, _>>()?;
        Self::de_valores(valores)
    }

    /// The canonical text stored in `mensageria_recebidas.chave`.
    pub fn como_texto(&self) -> &str {
        &self.0
    }
}

/// One part, for generated code: `parte(&(evento.cnpj))`.
#[doc(hidden)]
pub fn parte<T: Serialize + ?Sized>(valor: &T) -> Result<serde_json::Value, ErroChave> {
    Ok(serde_json::to_value(valor)?)
}

/// The key of parts, for generated code.
#[doc(hidden)]
pub fn chave<const N: usize>(
    partes: [Result<serde_json::Value, ErroChave>; N],
) -> Result<ChaveNatural, ErroChave> {
    ChaveNatural::de_valores(partes.into_iter().collect::<Result<Vec<_>, _>>()?)
}

#[cfg(test)]
mod testes {
    use super::*;

    #[test]
    fn codificacao_e_injetiva_nos_casos_classicos() {
        let casos: Vec<ChaveNatural> = vec![
            chave([parte("a|b"), parte("c")]).unwrap(),
            chave([parte("a"), parte("b|c")]).unwrap(),
            chave([parte("a|b|c")]).unwrap(),
            chave([parte("a\",\"b"), parte("c")]).unwrap(),
            chave([parte("a"), parte("\",\"b"), parte("c")]).unwrap(),
            chave([parte(&1_i64), parte("c")]).unwrap(),
            chave([parte("1"), parte("c")]).unwrap(),
            chave([parte("nul\0"), parte("")]).unwrap(),
            chave([parte("nul"), parte("\0")]).unwrap(),
        ];
        let mut unicas = casos.clone();
        unicas.sort_by(|a, b| a.0.cmp(&b.0));
        unicas.dedup();
        assert_eq!(unicas.len(), casos.len(), "{casos:?}");
        assert!(
            !casos.iter().any(|c| c.0.contains('\0')),
            "NUL is escaped for PostgreSQL text"
        );
    }

    #[test]
    fn chave_longa_e_recusada() {
        let longa = "x".repeat(TAMANHO_MAXIMO_CHAVE);
        assert!(matches!(chave([parte(&longa)]), Err(ErroChave::Longa(_))));
    }
}
