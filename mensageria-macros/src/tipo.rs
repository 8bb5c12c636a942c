//! The tipo rules, checked at compile time (the runtime twin is `mensageria_core::tipo`).

use syn::LitStr;
use syn::meta::ParseNestedMeta;

/// Reads the string literal of a `tipo = "..."` argument into `lido`: a second `tipo` is
/// `repetido`, a value that is not a string literal says how to write one (`exemplo`).
pub(crate) fn ler_literal(
    meta: &ParseNestedMeta<'_>,
    lido: &mut Option<LitStr>,
    repetido: syn::Error,
    exemplo: &str,
) -> syn::Result<()> {
    if lido.is_some() {
        return Err(repetido);
    }
    let lit = meta.value()?.parse().map_err(|erro: syn::Error| {
        syn::Error::new(
            erro.span(),
            format!("`tipo` takes a string literal, {exemplo}"),
        )
    })?;
    *lido = Some(lit);
    Ok(())
}

/// A tipo written in an attribute (`tipo = "..."`), valid: its value, and its literal for the
/// spans of errors about it. Both macros keep their optional tipo this way.
pub(crate) struct TipoEscrito {
    pub(crate) valor: String,
    pub(crate) lit: LitStr,
}

impl TipoEscrito {
    /// The tipo of the literal an attribute gave, checked ([`validar`]); `None` without one.
    pub(crate) fn de(lido: Option<LitStr>) -> syn::Result<Option<Self>> {
        lido.map(|lit| {
            Ok(Self {
                valor: validar(&lit)?,
                lit,
            })
        })
        .transpose()
    }
}

/// How an attribute's `tipo` is written, for the error on a value that is not a literal.
pub(crate) const EXEMPLO_TIPO: &str = "e.g. `tipo = \"mdfe.encerramento\"`";

/// Checks a tipo literal; the error points at it and says which rule it breaks.
pub(crate) fn validar(lit: &LitStr) -> syn::Result<String> {
    let tipo = lit.value();
    let alnum = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit();
    let erro = if tipo.is_empty() {
        Some("the tipo is empty")
    } else if tipo.len() > 128 {
        Some("the tipo is longer than 128 bytes")
    } else if !tipo
        .chars()
        .all(|c| alnum(c) || matches!(c, '.' | '_' | '-'))
    {
        Some("a tipo uses only lowercase ASCII letters, digits, '.', '_' and '-'")
    } else if !tipo.starts_with(alnum) || !tipo.ends_with(alnum) {
        Some("a tipo starts and ends with a lowercase letter or a digit")
    } else {
        None
    };
    match erro {
        Some(regra) => Err(syn::Error::new_spanned(
            lit,
            format!("invalid tipo {tipo:?}: {regra}, e.g. \"mdfe.encerramento\""),
        )),
        None => Ok(tipo),
    }
}

/// An identifier fragment that is distinct for distinct texts (a tipo, a type as written):
/// ASCII letters and digits stay, `_` always starts an escape (so `a::b_c` and `a_b::c` stay
/// apart), the characters of tipos and type paths have short escapes, anything else its code.
pub(crate) fn identificador(texto: &str) -> String {
    texto
        .chars()
        .map(|c| match c {
            c if c.is_ascii_alphanumeric() => c.to_string(),
            '_' => "_u".to_owned(),
            '.' => "_p".to_owned(),
            '-' => "_h".to_owned(),
            ':' => "_c".to_owned(),
            '<' => "_l".to_owned(),
            '>' => "_g".to_owned(),
            ',' => "_v".to_owned(),
            c => format!("_x{:x}_", u32::from(c)),
        })
        .collect()
}

#[cfg(test)]
mod testes {
    use super::*;

    #[test]
    fn identificador_e_injetivo() {
        let textos = [
            "a.b",
            "a-b",
            "a_b",
            "a_pb",
            "a_p.b",
            "ab",
            "a::b_c",
            "a_b::c",
            "Vec<u8>",
            "Vec_lu8_g",
            "(A,B)",
            "AB",
        ];
        let mut vistos: Vec<String> = textos.iter().map(|t| identificador(t)).collect();
        vistos.sort();
        vistos.dedup();
        assert_eq!(vistos.len(), textos.len());
    }

    #[test]
    fn recusa_tipo_com_maiuscula_apontando_o_literal() {
        let lit: LitStr = syn::parse_quote!("Mdfe.Encerramento");
        let erro = validar(&lit).unwrap_err().to_string();
        assert!(erro.contains("lowercase"), "{erro}");
    }
}
