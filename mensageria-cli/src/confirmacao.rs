//! Asking the operator before a destructive command: the question on stderr, the answer read
//! from stdin (so `--json` output on stdout stays clean, and a script can answer through a pipe
//! or pass the command's "do not ask" flag instead).

use std::io::{BufRead, Write};

use crate::erro::ErroCli;

/// Writes `pergunta` (already escaped, ending with `[y/N]`) on stderr and reads one line from
/// stdin: `y` or `yes`, in any case, confirm; anything else (a Portuguese `s`/`sim` included, so
/// every prompt reads and answers one way), an empty line or the end of stdin do not.
pub(crate) fn confirmar(pergunta: &str) -> Result<bool, ErroCli> {
    let mut erro = std::io::stderr().lock();
    write!(erro, "{pergunta}")?;
    erro.flush()?;
    let mut resposta = String::new();
    std::io::stdin().lock().read_line(&mut resposta)?;
    Ok(matches!(
        resposta.trim().to_lowercase().as_str(),
        "y" | "yes"
    ))
}
