//! How results are printed: aligned tables for people (the default), JSON for scripts
//! (`--json`). What people read never carries a control character: see [`texto_seguro`].

use std::borrow::Cow;

use serde::Serialize;

use crate::texto_seguro::{self, escapar};

/// An instant in milliseconds since the epoch (as `mensageria_core::operacoes` gives times), as
/// RFC 3339 (UTC).
pub(crate) fn rfc3339(ms: i64) -> String {
    chrono::DateTime::from_timestamp_millis(ms)
        .map(|t| t.to_rfc3339_opts(chrono::SecondsFormat::Millis, true))
        .unwrap_or_default()
}

/// What a command prints: a JSON document and a text for people.
pub(crate) trait Relatorio: Serialize {
    /// The text printed without `--json`. Text from the database goes in through
    /// [`escapar`] (or a [`Tabela`], which escapes its cells), so that a line feed in it cannot
    /// forge a line of the report.
    fn humano(&self) -> String;
}

/// Prints `relatorio` on stdout as JSON or as text. The text is escaped once more as a whole
/// (line feeds kept), so a field a report forgot to escape still reaches the terminal inert.
pub(crate) fn imprimir<R: Relatorio>(relatorio: &R, json: bool) {
    if json {
        // Serializing plain structs of strings and numbers cannot fail.
        let texto = serde_json::to_string_pretty(relatorio)
            .unwrap_or_else(|e| format!("{{\"erro\":\"could not serialize the report: {e}\"}}"));
        println!("{texto}");
    } else {
        let texto = relatorio.humano();
        println!("{}", texto_seguro::escapar_exceto_quebras(texto.trim_end()));
    }
}

/// A table of text: a header and rows, printed with aligned columns.
pub(crate) struct Tabela {
    cabecalho: Vec<&'static str>,
    linhas: Vec<Vec<String>>,
}

impl Tabela {
    /// An empty table with these column names.
    pub(crate) fn new(cabecalho: impl IntoIterator<Item = &'static str>) -> Self {
        Self {
            cabecalho: cabecalho.into_iter().collect(),
            linhas: Vec::new(),
        }
    }

    /// Adds a row (as many cells as columns), each cell escaped: a control character in it can
    /// neither reach the terminal nor break the row.
    pub(crate) fn linha(&mut self, celulas: impl IntoIterator<Item = String>) {
        self.linhas.push(
            celulas
                .into_iter()
                .map(|celula| match escapar(&celula) {
                    Cow::Borrowed(_) => celula,
                    Cow::Owned(escapada) => escapada,
                })
                .collect(),
        );
    }

    /// The table as text, columns separated by two spaces, one line per row.
    pub(crate) fn texto(&self) -> String {
        let colunas = self.cabecalho.len();
        let mut larguras: Vec<usize> = self.cabecalho.iter().map(|c| c.chars().count()).collect();
        for linha in &self.linhas {
            for (i, celula) in linha.iter().enumerate().take(colunas) {
                larguras[i] = larguras[i].max(celula.chars().count());
            }
        }
        let mut texto = String::new();
        let cabecalho: Vec<String> = self.cabecalho.iter().map(|c| c.to_uppercase()).collect();
        for linha in std::iter::once(&cabecalho).chain(&self.linhas) {
            let mut celulas = Vec::with_capacity(colunas);
            for (i, largura) in larguras.iter().enumerate() {
                let celula = linha.get(i).map(String::as_str).unwrap_or("");
                let falta = largura.saturating_sub(celula.chars().count());
                celulas.push(format!("{celula}{}", " ".repeat(falta)));
            }
            texto.push_str(celulas.join("  ").trim_end());
            texto.push('\n');
        }
        texto
    }
}

/// One line of free text, cut to `maximo` characters with an ellipsis: for error messages inside
/// a table. Line breaks and tabs become spaces (an HTTP body's layout is noise there); any other
/// control character is escaped.
pub(crate) fn resumo(texto: &str, maximo: usize) -> String {
    let espacado = texto.replace(['\n', '\r', '\t'], " ");
    let limpo = escapar(&espacado);
    if limpo.chars().count() <= maximo {
        limpo.into_owned()
    } else {
        let mut curto: String = limpo.chars().take(maximo.saturating_sub(1)).collect();
        curto.push('…');
        curto
    }
}

/// A listing's text: `vazio` when nothing matched (`total` 0), else the table and, when
/// `--limite` cut it, a line saying how many of how many are shown (both dead-letter listings).
pub(crate) fn listagem(tabela: &Tabela, mostradas: usize, total: i64, vazio: &str) -> String {
    if total == 0 {
        return vazio.to_owned();
    }
    let mut texto = tabela.texto();
    if (mostradas as i64) < total {
        texto.push_str(&format!(
            "({mostradas} of {total} shown; use --limite to see more)\n"
        ));
    }
    texto
}

/// `mostrar --raw` (both dead-letter kinds): the payload alone, byte for byte as kept, then a
/// line feed; nothing escaped (for `> file` or `| jq`).
pub(crate) fn imprimir_cru(payload: &str) -> std::io::Result<()> {
    use std::io::Write;
    let mut saida = std::io::stdout().lock();
    saida.write_all(payload.as_bytes())?;
    saida.write_all(b"\n")?;
    saida.flush()
}

#[cfg(test)]
mod testes {
    use super::*;

    #[test]
    fn alinha_as_colunas() {
        let mut t = Tabela::new(["tipo", "n"]);
        t.linha(["a.b".to_owned(), "10".to_owned()]);
        t.linha(["mdfe.encerramento".to_owned(), "2".to_owned()]);
        assert_eq!(
            t.texto(),
            "TIPO               N\na.b                10\nmdfe.encerramento  2\n"
        );
    }

    #[test]
    fn resume_texto_longo() {
        assert_eq!(resumo("abc\ndef", 10), "abc def");
        assert_eq!(resumo("abcdefghij", 5), "abcd…");
        assert_eq!(resumo("a\r\n\tb\x1b[2J", 20), "a   b\\x1b[2J");
    }

    #[test]
    fn celulas_sao_escapadas() {
        let mut t = Tabela::new(["tipo", "app"]);
        t.linha(["a\x1b]0;x\x07".to_owned(), "um\ndois\u{9b}".to_owned()]);
        assert_eq!(
            t.texto(),
            "TIPO           APP\na\\x1b]0;x\\x07  um\\ndois\\u{9b}\n"
        );
    }
}
