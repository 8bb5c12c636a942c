//! Writes the fault matrix (`docs/FAULTS.md`) from the rows the fault suite (and the ordering
//! suite) left in `target/tmp/faltas/`.
//!
//! ```text
//! cargo test -p mensageria-testes --test faltas --test ordem && cargo run -p mensageria-testes --bin matriz-de-faltas
//! ```

use std::path::PathBuf;

fn main() {
    let raiz = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
    let dir = std::env::args()
        .nth(1)
        .map(PathBuf::from)
        .unwrap_or_else(|| raiz.join("target/tmp/faltas"));
    let saida = raiz.join("docs/FAULTS.md");
    let tabela = mensageria_testes::faltas::matriz(&dir);
    if tabela.lines().count() <= 2 {
        eprintln!(
            "matriz-de-faltas: no rows in {}; run `cargo test -p mensageria-testes --test faltas` first",
            dir.display()
        );
        std::process::exit(1);
    }
    let texto = std::fs::read_to_string(&saida).unwrap_or_default();
    let (antes, depois) = match (texto.find(INICIO), texto.find(FIM)) {
        (Some(i), Some(f)) => (texto[..i].to_owned(), texto[f + FIM.len()..].to_owned()),
        _ => (String::from("# Fault matrix\n\n"), String::new()),
    };
    std::fs::create_dir_all(saida.parent().expect("docs/")).expect("create docs/");
    std::fs::write(&saida, format!("{antes}{INICIO}\n{tabela}{FIM}{depois}"))
        .expect("write docs/FAULTS.md");
    println!("wrote {}", saida.display());
}

const INICIO: &str = "<!-- matriz-de-faltas: begin -->";
const FIM: &str = "<!-- matriz-de-faltas: end -->";
