//! Writes the fault matrices of `docs/FAULTS.md` from the rows the fault suites left in
//! `target/tmp/`: the HTTP matrix (`faltas/`, from the fault and ordering suites), and the
//! JetStream and JetStream-cluster tables (`faltas-nats/`, `faltas-cluster/`). A table whose rows
//! are missing is left as it is.
//!
//! ```text
//! cargo test -p mensageria-testes --all-features --test faltas --test ordem --test nats_faltas --test nats_cluster
//! cargo run -p mensageria-testes --bin matriz-de-faltas
//! ```

use std::path::PathBuf;

fn main() {
    let raiz = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
    let tmp = std::env::args()
        .nth(1)
        .map(PathBuf::from)
        .unwrap_or_else(|| raiz.join("target/tmp"));
    let saida = raiz.join("docs/FAULTS.md");
    let mut texto = std::fs::read_to_string(&saida).unwrap_or_else(|_| "# Fault matrix\n\n".into());
    let http = mensageria_testes::faltas::matriz(&tmp.join("faltas"));
    let tabelas = [
        ("", (http.lines().count() > 2).then_some(http)),
        (
            " jetstream",
            mensageria_testes::nats::matriz(&tmp.join("faltas-nats")),
        ),
        (
            " cluster",
            mensageria_testes::nats::matriz(&tmp.join("faltas-cluster")),
        ),
    ];
    let mut escritas = 0;
    for (nome, tabela) in tabelas {
        let Some(tabela) = tabela else {
            eprintln!(
                "matriz-de-faltas:{nome} no rows in {}; table left as it is",
                tmp.display()
            );
            continue;
        };
        let (inicio, fim) = (
            format!("<!-- matriz-de-faltas{nome}: begin -->"),
            format!("<!-- matriz-de-faltas{nome}: end -->"),
        );
        match (texto.find(&inicio), texto.find(&fim)) {
            (Some(i), Some(f)) if i < f => {
                texto = format!("{}{inicio}\n{tabela}{}", &texto[..i], &texto[f..]);
                escritas += 1;
            }
            _ => eprintln!("matriz-de-faltas: no `{inicio}` … `{fim}` markers in docs/FAULTS.md"),
        }
    }
    if escritas == 0 {
        eprintln!("matriz-de-faltas: nothing to write; run the fault suites first");
        std::process::exit(1);
    }
    std::fs::write(&saida, texto).expect("write docs/FAULTS.md");
    println!("wrote {} table(s) of {}", escritas, saida.display());
}
