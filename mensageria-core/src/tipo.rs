//! What a valid `tipo` looks like.
//!
//! A tipo names a message type and becomes part of URLs (`POST /m2m/{tipo}`), metric labels and
//! log lines, so it is kept to a small, unambiguous alphabet:
//!
//! - 1 to [`TAMANHO_MAXIMO`] characters;
//! - lowercase ASCII letters, digits, `.`, `_` and `-`;
//! - first and last character a letter or a digit.
//!
//! `mdfe.encerramento`, `xadm-push`, `nfe.v2.autorizada` are valid; `Mdfe`, `a b`, `.x`, `x/y`
//! are not.
//!
//! ```
//! use mensageria_core::tipo;
//! assert!(tipo::validar("mdfe.encerramento").is_ok());
//! assert!(tipo::validar("mdfe/encerramento").is_err());
//! ```

use crate::erro::Erro;

/// The longest tipo accepted, in bytes.
pub const TAMANHO_MAXIMO: usize = 128;

/// Checks `tipo` against the rules above.
pub fn validar(tipo: &str) -> Result<(), Erro> {
    motivo_de_rejeicao(tipo).map_or(Ok(()), |motivo| {
        Err(Erro::TipoInvalido {
            tipo: tipo.to_owned(),
            motivo,
        })
    })
}

fn motivo_de_rejeicao(tipo: &str) -> Option<&'static str> {
    let bytes = tipo.as_bytes();
    let alfanumerico = |b: &u8| b.is_ascii_lowercase() || b.is_ascii_digit();
    if bytes.is_empty() {
        Some("it is empty")
    } else if bytes.len() > TAMANHO_MAXIMO {
        Some("it is longer than 128 bytes")
    } else if !bytes
        .iter()
        .all(|b| alfanumerico(b) || matches!(b, b'.' | b'_' | b'-'))
    {
        Some("only lowercase ASCII letters, digits, '.', '_' and '-' are allowed")
    } else if !alfanumerico(&bytes[0]) || !alfanumerico(&bytes[bytes.len() - 1]) {
        Some("it must start and end with a lowercase letter or a digit")
    } else {
        None
    }
}

#[cfg(test)]
mod testes {
    use super::validar;

    #[test]
    fn aceita_os_tipos_da_casa() {
        for tipo in [
            "mdfe.encerramento",
            "xadm-push",
            "nfe.v2.autorizada",
            "a",
            "9",
            "a_b",
        ] {
            assert!(validar(tipo).is_ok(), "{tipo}");
        }
    }

    #[test]
    fn recusa_o_resto() {
        let longo = "a".repeat(129);
        for tipo in [
            "",
            "Mdfe",
            "a b",
            ".x",
            "x.",
            "x/y",
            "x\0y",
            "ç",
            "'; DROP TABLE x; --",
            &longo,
        ] {
            assert!(validar(tipo).is_err(), "{tipo:?}");
        }
    }
}
