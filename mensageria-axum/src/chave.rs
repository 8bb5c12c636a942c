//! The natural key: a domain identity, encoded canonically, injectively and exactly.
//!
//! A key is a list of parts; its encoding is the JSON array of the parts, so parts
//! `("a|b", "c")` and `("a", "b|c")` can never collide (`["a|b","c"]` vs `["a","b|c"]`), quotes
//! and NULs are escaped, and the text is readable in the `mensageria_recebidas` table.
//!
//! A part must be encoded **exactly**: two different events must never share a key. So a part
//! is a [`ParteChave`]: text, integers of any size (their exact decimal text), `bool`, `char`,
//! `Uuid`, exact JSON text ([`RawValue`]) and `Option`s, slices and `Vec`s of those. Floats and
//! `serde_json::Value` (whose numbers are floats once they pass `u64`) are not, and using one is
//! a compile error that says what to use instead:
//!
//! ```compile_fail
//! # use mensageria_axum::ChaveNatural;
//! // 0.30000000000000004 and 0.30000000000000005 are one f64: they would be one key.
//! let chave = ChaveNatural::de_partes([0.1_f64 + 0.2]);
//! ```
//!
//! Keys are compared **byte for byte**: `"é"` composed (NFC) and decomposed (NFD) are two keys,
//! and so are `" a"` and `"a"`. Normalize in the sender if your domain says they are one.

use std::borrow::Cow;
use std::fmt::Write as _;
use std::sync::Arc;

use serde_json::value::RawValue;

/// The longest encoded key accepted, in bytes. Longer keys are refused (422): a key is an
/// identity, not a payload, and index entries have a size limit.
pub const TAMANHO_MAXIMO_CHAVE: usize = 1024;

/// A natural key in its canonical encoding.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[doc(alias("natural key", "idempotency key"))]
pub struct ChaveNatural(String);

/// Why a key could not be built.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ErroChave {
    /// The key is too long.
    #[error(
        "the natural key is {0} bytes, over the limit of {TAMANHO_MAXIMO_CHAVE}; key the event by a shorter identity"
    )]
    Longa(usize),
}

/// A value that can be part of a natural key because its encoding is exact: two different
/// values never encode alike. Implemented for text, integers of any size, `bool`, `char`,
/// `Uuid`, exact JSON text ([`RawValue`]), and `Option`s, slices and `Vec`s of those.
///
/// Implement it for a newtype of yours by delegating to the inner value:
///
/// ```
/// use mensageria_axum::{ChaveNatural, ParteChave};
///
/// struct Cnpj(String);
/// impl ParteChave for Cnpj {
///     fn escrever(&self, saida: &mut String) {
///         self.0.escrever(saida)
///     }
/// }
/// let chave = ChaveNatural::de_partes([Cnpj("12345678000190".into())]).unwrap();
/// assert_eq!(chave.como_texto(), r#"["12345678000190"]"#);
/// ```
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot be part of a natural key: it is not encoded exactly",
    label = "not an exact key part",
    note = "two different events must never share a key, and floats (and `serde_json::Value`, whose big numbers become floats) round: 9007199254740993 and 9007199254740992 are one f64, and so are 0.30000000000000004 and 0.30000000000000005: they would be one key",
    note = "use text, an integer of any size, a bool, a `Uuid`, or exact JSON text (`Box<serde_json::value::RawValue>`); key an amount by its text or by integer cents; for a type of yours, implement `mensageria_axum::ParteChave`"
)]
#[doc(alias = "key part")]
pub trait ParteChave {
    /// Appends this part's canonical JSON text to `saida`.
    fn escrever(&self, saida: &mut String);
}

fn escrever_texto(texto: &str, saida: &mut String) {
    // A `str` always serializes; the encoding is serde_json's, so keys stored by earlier
    // versions (which went through `serde_json::Value`) stay byte for byte the same.
    saida.push_str(&serde_json::to_string(texto).expect("a string always serializes to JSON"));
}

impl ParteChave for str {
    fn escrever(&self, saida: &mut String) {
        escrever_texto(self, saida);
    }
}

impl ParteChave for String {
    fn escrever(&self, saida: &mut String) {
        escrever_texto(self, saida);
    }
}

impl ParteChave for Cow<'_, str> {
    fn escrever(&self, saida: &mut String) {
        escrever_texto(self, saida);
    }
}

impl ParteChave for char {
    fn escrever(&self, saida: &mut String) {
        escrever_texto(self.encode_utf8(&mut [0; 4]), saida);
    }
}

impl ParteChave for bool {
    fn escrever(&self, saida: &mut String) {
        saida.push_str(if *self { "true" } else { "false" });
    }
}

macro_rules! inteiros {
    ($($t:ty),*) => {$(
        /// Its exact decimal text, whatever its size.
        impl ParteChave for $t {
            fn escrever(&self, saida: &mut String) {
                let _ = write!(saida, "{self}");
            }
        }
    )*};
}

inteiros!(
    i8, i16, i32, i64, i128, isize, u8, u16, u32, u64, u128, usize
);

/// As a JSON string, hyphenated (as `Uuid` serializes).
impl ParteChave for uuid::Uuid {
    fn escrever(&self, saida: &mut String) {
        let _ = write!(saida, "\"{}\"", self.hyphenated());
    }
}

/// The JSON text exactly as it came (numbers of any size keep every digit). Compared byte for
/// byte: `{"a":1}` and `{ "a": 1 }` are two keys.
impl ParteChave for RawValue {
    fn escrever(&self, saida: &mut String) {
        saida.push_str(self.get());
    }
}

/// `null`, or the value.
impl<T: ParteChave> ParteChave for Option<T> {
    fn escrever(&self, saida: &mut String) {
        match self {
            Some(valor) => valor.escrever(saida),
            None => saida.push_str("null"),
        }
    }
}

/// A JSON array of the values.
impl<T: ParteChave> ParteChave for [T] {
    fn escrever(&self, saida: &mut String) {
        saida.push('[');
        for (i, valor) in self.iter().enumerate() {
            if i > 0 {
                saida.push(',');
            }
            valor.escrever(saida);
        }
        saida.push(']');
    }
}

impl<T: ParteChave, const N: usize> ParteChave for [T; N] {
    fn escrever(&self, saida: &mut String) {
        self.as_slice().escrever(saida);
    }
}

impl<T: ParteChave> ParteChave for Vec<T> {
    fn escrever(&self, saida: &mut String) {
        self.as_slice().escrever(saida);
    }
}

impl<T: ParteChave + ?Sized> ParteChave for &T {
    fn escrever(&self, saida: &mut String) {
        (**self).escrever(saida);
    }
}

impl<T: ParteChave + ?Sized> ParteChave for Box<T> {
    fn escrever(&self, saida: &mut String) {
        (**self).escrever(saida);
    }
}

impl<T: ParteChave + ?Sized> ParteChave for Arc<T> {
    fn escrever(&self, saida: &mut String) {
        (**self).escrever(saida);
    }
}

impl ChaveNatural {
    /// Builds a key from parts of one type.
    ///
    /// ```
    /// use mensageria_axum::ChaveNatural;
    /// let um = ChaveNatural::de_partes(["a|b", "c"]).unwrap();
    /// let dois = ChaveNatural::de_partes(["a", "b|c"]).unwrap();
    /// assert_ne!(um, dois);
    /// assert_eq!(um.como_texto(), r#"["a|b","c"]"#);
    /// // Integers of any size keep every digit.
    /// let grande = ChaveNatural::de_partes([18446744073709551616_u128]).unwrap();
    /// let vizinho = ChaveNatural::de_partes([18446744073709551617_u128]).unwrap();
    /// assert_ne!(grande, vizinho);
    /// ```
    pub fn de_partes<T: ParteChave>(
        partes: impl IntoIterator<Item = T>,
    ) -> Result<Self, ErroChave> {
        let mut texto = String::from("[");
        for (i, parte) in partes.into_iter().enumerate() {
            if i > 0 {
                texto.push(',');
            }
            parte.escrever(&mut texto);
        }
        texto.push(']');
        Self::de_texto(texto)
    }

    fn de_texto(texto: String) -> Result<Self, ErroChave> {
        if texto.len() > TAMANHO_MAXIMO_CHAVE {
            return Err(ErroChave::Longa(texto.len()));
        }
        Ok(Self(texto))
    }

    /// The canonical text stored in `mensageria_recebidas.chave`.
    pub fn como_texto(&self) -> &str {
        &self.0
    }
}

/// One part, for generated code: `parte(&(evento.cnpj))`. Its bound is where a part that is not
/// exact is reported, at the part's span.
#[doc(hidden)]
pub fn parte<T: ParteChave + ?Sized>(valor: &T) -> String {
    let mut texto = String::new();
    valor.escrever(&mut texto);
    texto
}

/// The key of parts, for generated code.
#[doc(hidden)]
pub fn chave<const N: usize>(partes: [String; N]) -> Result<ChaveNatural, ErroChave> {
    ChaveNatural::de_texto(format!("[{}]", partes.join(",")))
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
            chave([parte(&18446744073709551616_u128)]).unwrap(),
            chave([parte(&18446744073709551617_u128)]).unwrap(),
            chave([parte(&Some(1_u8))]).unwrap(),
            chave([parte(&None::<u8>)]).unwrap(),
            chave([parte(&vec!["a", "b"])]).unwrap(),
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

    /// Keys stored before parts became `ParteChave` went through `serde_json::Value`: for every
    /// type that was exact then, the text must not change, or a redelivery after an upgrade
    /// would be applied again.
    #[test]
    fn mesma_codificacao_de_antes_para_os_tipos_exatos() {
        let antes = |v: serde_json::Value| serde_json::to_string(&vec![v]).unwrap();
        let id = uuid::Uuid::now_v7();
        let casos: Vec<(String, String)> = vec![
            (
                parte("tab\t\"aspas\" é \u{7f} \u{2028}"),
                antes("tab\t\"aspas\" é \u{7f} \u{2028}".into()),
            ),
            (parte(&-42_i64), antes((-42_i64).into())),
            (parte(&u64::MAX), antes(u64::MAX.into())),
            (parte(&true), antes(true.into())),
            (parte(&'x'), antes("x".into())),
            (parte(&id), antes(serde_json::to_value(id).unwrap())),
            (parte(&None::<String>), antes(serde_json::Value::Null)),
            (parte(&vec![1_u8, 2]), antes(serde_json::json!([1, 2]))),
        ];
        for (agora, antes) in casos {
            assert_eq!(chave([agora]).unwrap().0, antes);
        }
    }

    #[test]
    fn json_cru_guarda_cada_digito() {
        let a: Box<RawValue> = serde_json::from_str("18446744073709551616").unwrap();
        let b: Box<RawValue> = serde_json::from_str("18446744073709551617").unwrap();
        assert_ne!(chave([parte(&a)]).unwrap(), chave([parte(&b)]).unwrap());
        let c: Box<RawValue> = serde_json::from_str("0.30000000000000004").unwrap();
        let d: Box<RawValue> = serde_json::from_str("0.30000000000000005").unwrap();
        assert_ne!(chave([parte(&c)]).unwrap(), chave([parte(&d)]).unwrap());
    }

    #[test]
    fn os_exemplos_da_nota_sobre_floats_colidem_de_verdade() {
        // The compile error's note names these pairs: each is one f64.
        for (a, b) in [
            ("9007199254740993", "9007199254740992"),
            ("0.30000000000000004", "0.30000000000000005"),
        ] {
            let (a, b): (f64, f64) = (a.parse().unwrap(), b.parse().unwrap());
            assert_eq!(a.to_bits(), b.to_bits());
        }
    }

    #[test]
    fn chave_longa_e_recusada() {
        let longa = "x".repeat(TAMANHO_MAXIMO_CHAVE);
        assert!(matches!(chave([parte(&longa)]), Err(ErroChave::Longa(_))));
    }
}
