//! Names JetStream takes: stream names, subject tokens and durable consumer names may not hold
//! `.`, `*`, `>`, whitespace or path separators.

use crate::ErroNats;

/// Checks a stream name (`MENSAGERIA`): letters, digits, `-` and `_`, at most 64.
pub(crate) fn validar_fluxo(nome: &str) -> Result<(), ErroNats> {
    validar("stream", nome, |c| {
        c.is_ascii_alphanumeric() || c == '-' || c == '_'
    })
}

/// Checks a subject prefix (`mensageria`, `loja.eventos`): tokens of letters, digits, `-` and `_`
/// separated by single dots.
pub(crate) fn validar_prefixo(prefixo: &str) -> Result<(), ErroNats> {
    validar("prefix", prefixo, |c| {
        c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '.'
    })?;
    if prefixo.starts_with('.') || prefixo.ends_with('.') || prefixo.contains("..") {
        return Err(ErroNats::NomeInvalido {
            campo: "prefix",
            valor: prefixo.to_owned(),
            motivo: "an empty token (a dot at either end, or two dots)",
        });
    }
    Ok(())
}

fn validar(campo: &'static str, valor: &str, permitido: fn(char) -> bool) -> Result<(), ErroNats> {
    let motivo = if valor.is_empty() {
        Some("it is empty")
    } else if valor.len() > 64 {
        Some("it is longer than 64 characters")
    } else if !valor.chars().all(permitido) {
        Some("use letters, digits, `-` and `_` only")
    } else {
        None
    };
    motivo.map_or(Ok(()), |motivo| {
        Err(ErroNats::NomeInvalido {
            campo,
            valor: valor.to_owned(),
            motivo,
        })
    })
}

/// The durable consumer of `app` for `tipo`: both encoded injectively into the characters a
/// durable name may hold (letters, digits and `-` kept; any other byte as `_` and two hex
/// digits), joined by `__` (no encoded name holds two underscores in a row... but `_5f` does
/// encode `_`, so the join cannot be confused with either part).
pub(crate) fn duravel(app: &str, tipo: &str) -> String {
    format!("{}__{}", codificar(app), codificar(tipo))
}

/// The durable of ordered lane `n` of `app` for a binary that receives `tipos` (sorted):
/// `{app}___ordem{n}_{hash}`. The `_` after `__` never starts an encoded tipo (a tipo starts
/// with a letter or a digit), so it never meets [`duravel`]'s names.
pub(crate) fn duravel_da_faixa(app: &str, n: u32, tipos: &[&str]) -> String {
    let hash = tipos.iter().fold(0xcbf2_9ce4_8422_2325_u64, |hash, tipo| {
        tipo.bytes()
            .chain(std::iter::once(b'\n'))
            .fold(hash, |hash, byte| {
                (hash ^ u64::from(byte)).wrapping_mul(0x0000_0100_0000_01b3)
            })
    });
    format!("{}{:08x}", prefixo_da_faixa(app, n as usize), hash as u32)
}

/// What every ordered-lane durable `n` of `app` starts with, whatever its tipo set.
pub(crate) fn prefixo_da_faixa(app: &str, n: usize) -> String {
    format!("{}___ordem{n}_", codificar(app))
}

fn codificar(texto: &str) -> String {
    let mut saida = String::with_capacity(texto.len());
    for byte in texto.bytes() {
        if byte.is_ascii_alphanumeric() || byte == b'-' {
            saida.push(char::from(byte));
        } else {
            saida.push_str(&format!("_{byte:02x}"));
        }
    }
    saida
}

#[cfg(test)]
mod testes {
    use super::*;

    #[test]
    fn duravel_e_injetivo_e_aceito_pelo_jetstream() {
        assert_eq!(
            duravel("estoque", "pedido.criado"),
            "estoque__pedido_2ecriado"
        );
        assert_ne!(duravel("a", "b.c"), duravel("a", "b_c"));
        assert_ne!(duravel("a_b", "c"), duravel("a", "b_c"));
        for nome in [duravel("ns/app:1@x", "a.b_c-d"), duravel("x", "y")] {
            assert!(!nome.contains(['.', '*', '>', ' ', '/', '\\']), "{nome}");
        }
    }

    #[test]
    fn nomes_de_fluxo_e_prefixo() {
        assert!(validar_fluxo("MENSAGERIA").is_ok());
        assert!(validar_fluxo("a.b").is_err());
        assert!(validar_fluxo("").is_err());
        assert!(validar_prefixo("loja.eventos").is_ok());
        for ruim in ["", ".a", "a.", "a..b", "a.*", "a >"] {
            assert!(validar_prefixo(ruim).is_err(), "{ruim}");
        }
    }
}
