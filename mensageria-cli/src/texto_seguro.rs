//! Text written by other parties (a receptor's error answer, a tipo, an app name, a payload),
//! made safe to print on a terminal.
//!
//! A receptor controls what ends up in `ultimo_erro`, and any app sharing the schema controls
//! `tipo`, `app`, `correlacao` and the payload. Printed raw, a control character in them is an
//! instruction to the operator's terminal: `ESC ]0;…BEL` retitles the window, `ESC [2J` clears
//! the screen, `CR` rewrites the line already shown, `CSI` (`U+009B`) starts a sequence without
//! an `ESC`. So every human-readable line the CLI prints goes through here, and every control
//! character (C0 `U+0000..U+001F`, `DEL`, C1 `U+0080..U+009F`) comes out as visible text:
//! `\t`, `\n`, `\r`, `\x1b`, `\x7f`, `\u{9b}`. Only [`escapar_exceto_quebras`], for text that is
//! shown on several lines on purpose (a payload), keeps the line feed, which cannot do more than
//! start a new line.
//!
//! The escaping is for reading, not reversible: a backslash is left as it is, so a text that
//! already spells `\x1b` prints the same as one holding the byte. `--json` output does not come
//! through here: it is left to JSON's own escaping (which covers C0; `DEL` and C1 are valid
//! unescaped in a JSON string and are printed as UTF-8). `mortas mostrar --raw` opts out for the
//! payload.

use std::borrow::Cow;
use std::fmt::Write;

/// `texto` with every control character escaped: fit for one line (a table cell, a field, an
/// error message), which it cannot break, rewrite or leave.
pub(crate) fn escapar(texto: &str) -> Cow<'_, str> {
    escapar_se(texto, char::is_control)
}

/// `texto` with every control character escaped except the line feed: for text shown on
/// several lines (a payload).
pub(crate) fn escapar_exceto_quebras(texto: &str) -> Cow<'_, str> {
    escapar_se(texto, |c| c.is_control() && c != '\n')
}

/// `texto` with the characters `perigoso` picks escaped; borrowed when there are none (the
/// usual case).
fn escapar_se(texto: &str, perigoso: impl Fn(char) -> bool) -> Cow<'_, str> {
    if !texto.chars().any(&perigoso) {
        return Cow::Borrowed(texto);
    }
    let mut seguro = String::with_capacity(texto.len() + 8);
    for c in texto.chars() {
        if !perigoso(c) {
            seguro.push(c);
            continue;
        }
        // `write!` into a String cannot fail.
        let _ = match c {
            '\t' => write!(seguro, "\\t"),
            '\n' => write!(seguro, "\\n"),
            '\r' => write!(seguro, "\\r"),
            '\0'..='\x7f' => write!(seguro, "\\x{:02x}", u32::from(c)),
            _ => write!(seguro, "\\u{{{:x}}}", u32::from(c)),
        };
    }
    Cow::Owned(seguro)
}

#[cfg(test)]
mod testes {
    use super::*;

    #[test]
    fn texto_comum_passa_sem_copia() {
        for texto in [
            "",
            "HTTP 503: indisponível",
            "mdfe.encerramento",
            "a\\x1b",
            "✓ ação",
        ] {
            assert!(matches!(escapar(texto), Cow::Borrowed(t) if t == texto));
            assert!(matches!(escapar_exceto_quebras(texto), Cow::Borrowed(t) if t == texto));
        }
    }

    #[test]
    fn escapa_c0_del_e_c1() {
        assert_eq!(escapar("\x1b]0;pwned\x07"), "\\x1b]0;pwned\\x07");
        assert_eq!(escapar("\x1b[2Jlimpo"), "\\x1b[2Jlimpo");
        assert_eq!(escapar("a\u{9b}31mb"), "a\\u{9b}31mb");
        assert_eq!(escapar("\u{80}\u{9f}\u{a0}"), "\\u{80}\\u{9f}\u{a0}");
        assert_eq!(escapar("\x7f\0\x01\x1f"), "\\x7f\\x00\\x01\\x1f");
        assert_eq!(escapar("um\ndois\r\tX"), "um\\ndois\\r\\tX");
        let todos: String = (0..=0x9f_u32)
            .filter_map(char::from_u32)
            .filter(|c| c.is_control())
            .collect();
        assert_eq!(todos.chars().count(), 32 + 1 + 32);
        assert!(!escapar(&todos).chars().any(char::is_control));
    }

    #[test]
    fn quebras_de_linha_ficam_so_no_modo_de_varias_linhas() {
        assert_eq!(
            escapar_exceto_quebras("{\n  \"a\": \"\x1b[2J\u{9b}\"\r\n}"),
            "{\n  \"a\": \"\\x1b[2J\\u{9b}\"\\r\n}"
        );
        assert_eq!(escapar("{\n}"), "{\\n}");
    }
}
