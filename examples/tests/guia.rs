//! The guide (`docs/guide/`, an mdBook) and the README hold together, checked without mdBook
//! (installing it would cost CI minutes of compiling): what `mdbook build` would trip on, and
//! the links a reader follows on GitHub.
//!
//! - `SUMMARY.md` lists every chapter file once, every file it lists exists, and no chapter is
//!   left out of it (an orphan mdBook would never render);
//! - every chapter is one of this crate's doctest modules (`src/lib.rs`, module `guia`), so its
//!   Rust blocks are compiled;
//! - every relative link of `README.md` and of the chapters points to an existing file or
//!   directory, and every `#anchor` to a heading of its target, by the slug rules GitHub and
//!   mdBook share (lowercase; spaces become `-`; punctuation other than `-` and `_` is dropped;
//!   a repeated heading gets `-1`, `-2`...);
//! - a chapter's link that leaves the book never names a `.md` file: mdBook rewrites `.md` links
//!   to `.html`, which exists only for the book's own chapters.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Component, Path, PathBuf};

/// The repository's root.
fn raiz() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("examples/ is inside the repository")
        .to_path_buf()
}

/// The guide's sources.
fn fontes() -> PathBuf {
    raiz().join("docs/guide/src")
}

fn ler(caminho: &Path) -> String {
    std::fs::read_to_string(caminho).unwrap_or_else(|e| panic!("{}: {e}", caminho.display()))
}

/// The text of `markdown` outside fenced code blocks, with inline code spans blanked (their
/// brackets are not links), newlines kept so that a link can be found across lines.
fn prosa(markdown: &str) -> String {
    let mut fora = String::new();
    let mut cerca: Option<String> = None;
    for linha in markdown.lines() {
        let aparada = linha.trim_start();
        let marcador: String = aparada
            .chars()
            .take_while(|c| *c == '`' || *c == '~')
            .collect();
        match &cerca {
            Some(aberta) if marcador.starts_with(aberta.as_str()) && aparada.trim() == marcador => {
                cerca = None;
                fora.push('\n');
                continue;
            }
            Some(_) => {
                fora.push('\n');
                continue;
            }
            None if marcador.len() >= 3
                && marcador
                    .chars()
                    .all(|c| c == marcador.chars().next().unwrap()) =>
            {
                cerca = Some(marcador);
                fora.push('\n');
                continue;
            }
            None => {}
        }
        fora.push_str(linha);
        fora.push('\n');
    }
    sem_codigo(&fora)
}

/// `texto` with every inline code span (a run of backticks up to the next run of the same
/// length) replaced by nothing.
fn sem_codigo(texto: &str) -> String {
    let chars: Vec<char> = texto.chars().collect();
    let mut saida = String::new();
    let mut i = 0;
    while i < chars.len() {
        if chars[i] != '`' {
            saida.push(chars[i]);
            i += 1;
            continue;
        }
        let inicio = i;
        while i < chars.len() && chars[i] == '`' {
            i += 1;
        }
        let tamanho = i - inicio;
        // The closing run: exactly `tamanho` backticks.
        let mut j = i;
        let mut fim = None;
        while j < chars.len() {
            if chars[j] == '`' {
                let k = j;
                while j < chars.len() && chars[j] == '`' {
                    j += 1;
                }
                if j - k == tamanho {
                    fim = Some(j);
                    break;
                }
            } else {
                j += 1;
            }
        }
        match fim {
            Some(f) => i = f,
            // No closing run: the backticks are literal.
            None => saida.extend(&chars[inicio..i]),
        }
    }
    saida
}

/// The targets of the inline links (`[text](target)`, images too) and reference definitions
/// (`[name]: target`) of `markdown`, outside code.
fn links(markdown: &str) -> Vec<String> {
    let texto = prosa(markdown);
    let mut alvos = Vec::new();
    let mut resto = texto.as_str();
    while let Some(p) = resto.find("](") {
        let depois = &resto[p + 2..];
        let fim = depois
            .find(')')
            .unwrap_or_else(|| panic!("a link without its `)`: {}", &resto[p..]));
        // `[text](target "title")`: the target is the first word.
        let alvo = depois[..fim].split_whitespace().next().unwrap_or("");
        alvos.push(alvo.trim_matches(['<', '>']).to_owned());
        resto = &depois[fim..];
    }
    for linha in texto.lines() {
        let linha = linha.trim_start();
        if linha.starts_with('[')
            && let Some(p) = linha.find("]: ")
            && !linha[..p].contains("](")
        {
            alvos.push(linha[p + 3..].trim().to_owned());
        }
    }
    alvos
}

/// The anchor GitHub and mdBook give a heading's text: markup dropped (code spans keep their
/// text, links their text), lowercase, whitespace to `-`, every character other than letters,
/// digits, `-` and `_` dropped.
fn ancora(titulo: &str) -> String {
    let mut texto = String::new();
    let mut resto = titulo;
    // `[text](target)` → text
    while let Some(p) = resto.find("](") {
        let abre = resto[..p].rfind('[').expect("a link's `[`");
        texto.push_str(&resto[..abre]);
        texto.push_str(&resto[abre + 1..p]);
        let fim = resto[p..].find(')').expect("a link's `)`");
        resto = &resto[p + fim + 1..];
    }
    texto.push_str(resto);
    texto
        .chars()
        .filter_map(|c| {
            if c.is_alphanumeric() || c == '-' || c == '_' {
                Some(c.to_lowercase().collect::<String>())
            } else if c.is_whitespace() {
                Some("-".to_owned())
            } else {
                None
            }
        })
        .collect()
}

/// The anchors of `markdown`'s ATX headings (outside fenced code), repeated ones numbered.
fn ancoras(markdown: &str) -> BTreeSet<String> {
    let mut vistas: BTreeMap<String, usize> = BTreeMap::new();
    let mut todas = BTreeSet::new();
    let mut cerca = false;
    for linha in markdown.lines() {
        let aparada = linha.trim_start();
        if aparada.starts_with("```") || aparada.starts_with("~~~") {
            cerca = !cerca;
            continue;
        }
        if cerca {
            continue;
        }
        let nivel = aparada.chars().take_while(|c| *c == '#').count();
        if !(1..=6).contains(&nivel) || !aparada[nivel..].starts_with(' ') {
            continue;
        }
        let titulo = aparada[nivel..].trim().trim_end_matches('#').trim();
        let base = ancora(titulo);
        let vezes = vistas.entry(base.clone()).or_insert(0);
        todas.insert(if *vezes == 0 {
            base.clone()
        } else {
            format!("{base}-{vezes}")
        });
        *vezes += 1;
    }
    todas
}

/// `caminho` with `.` and `..` resolved, without touching the file system.
fn normalizar(caminho: &Path) -> PathBuf {
    let mut partes = PathBuf::new();
    for parte in caminho.components() {
        match parte {
            Component::ParentDir => {
                partes.pop();
            }
            Component::CurDir => {}
            outra => partes.push(outra),
        }
    }
    partes
}

/// The chapter files `SUMMARY.md` links, in its order.
fn capitulos() -> Vec<String> {
    links(&ler(&fontes().join("SUMMARY.md")))
}

/// The Markdown files the test checks: the README and every `.md` file of the guide's sources.
fn documentos() -> Vec<PathBuf> {
    let mut todos = vec![raiz().join("README.md")];
    let mut do_guia: Vec<PathBuf> = std::fs::read_dir(fontes())
        .expect("docs/guide/src")
        .map(|e| e.expect("a directory entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .collect();
    do_guia.sort();
    todos.extend(do_guia);
    todos
}

#[test]
fn o_sumario_lista_cada_capitulo_uma_vez_e_nenhum_fica_de_fora() {
    let listados = capitulos();
    let mut erros = Vec::new();
    let mut vistos = BTreeSet::new();
    for capitulo in &listados {
        if capitulo.contains('#') || capitulo.contains("://") || capitulo.contains('/') {
            erros.push(format!(
                "SUMMARY.md: `{capitulo}` is not a chapter file of src/"
            ));
        } else if !fontes().join(capitulo).is_file() {
            erros.push(format!(
                "SUMMARY.md lists `{capitulo}`, which does not exist"
            ));
        }
        if !vistos.insert(capitulo.clone()) {
            erros.push(format!("SUMMARY.md lists `{capitulo}` twice"));
        }
    }
    for arquivo in documentos().iter().skip(1) {
        let nome = arquivo.file_name().unwrap().to_string_lossy().into_owned();
        if nome != "SUMMARY.md" && !vistos.contains(&nome) {
            erros.push(format!(
                "docs/guide/src/{nome} is in no line of SUMMARY.md: mdBook would not render it"
            ));
        }
    }
    assert!(listados.len() >= 10, "SUMMARY.md lists {listados:?}");
    assert!(erros.is_empty(), "{}", erros.join("\n"));
}

#[test]
fn cada_capitulo_e_compilado_como_doctest() {
    let biblioteca = ler(&raiz().join("examples/src/lib.rs"));
    let faltando: Vec<String> = capitulos()
        .into_iter()
        .filter(|c| {
            !biblioteca.contains(&format!(
                "#[doc = include_str!(\"../../docs/guide/src/{c}\")]"
            ))
        })
        .collect();
    assert!(
        faltando.is_empty(),
        "chapters whose Rust blocks no doctest compiles (add a module to `guia` in \
         examples/src/lib.rs): {faltando:?}"
    );
}

#[test]
fn cada_link_relativo_leva_a_um_arquivo_e_cada_ancora_a_um_titulo() {
    let raiz = raiz();
    let livro = normalizar(&fontes());
    let mut erros = Vec::new();
    let mut contados = 0;
    for documento in documentos() {
        let texto = ler(&documento);
        let nome = documento.strip_prefix(&raiz).unwrap().display().to_string();
        let no_livro = documento.starts_with(&livro);
        for alvo in links(&texto) {
            if alvo.is_empty() {
                erros.push(format!("{nome}: a link with an empty target"));
                continue;
            }
            if alvo.contains("://") || alvo.starts_with("mailto:") {
                continue;
            }
            contados += 1;
            let (caminho, ancora) = match alvo.split_once('#') {
                Some((c, a)) => (c, Some(a)),
                None => (alvo.as_str(), None),
            };
            let destino = if caminho.is_empty() {
                documento.clone()
            } else if caminho.starts_with('/') {
                erros.push(format!(
                    "{nome}: `{alvo}` is absolute; write it relative to the file"
                ));
                continue;
            } else {
                normalizar(&documento.parent().unwrap().join(caminho))
            };
            if !destino.exists() {
                erros.push(format!("{nome}: `{alvo}` leads to no file"));
                continue;
            }
            if no_livro
                && !destino.starts_with(&livro)
                && destino.extension().is_some_and(|e| e == "md")
            {
                erros.push(format!(
                    "{nome}: `{alvo}` leaves the book to a .md file, which mdBook would link as \
                     a missing .html: name the file in code (`{}`) or link its directory",
                    destino.strip_prefix(&raiz).unwrap_or(&destino).display()
                ));
            }
            if let Some(ancora) = ancora {
                if destino.extension().is_none_or(|e| e != "md") {
                    erros.push(format!(
                        "{nome}: `{alvo}`: an anchor into a file that is not Markdown"
                    ));
                } else if !ancoras(&ler(&destino)).contains(ancora) {
                    erros.push(format!(
                        "{nome}: `{alvo}`: no heading of {} has the anchor `#{ancora}` (it has: {:?})",
                        destino.strip_prefix(&raiz).unwrap_or(&destino).display(),
                        ancoras(&ler(&destino))
                    ));
                }
            }
        }
    }
    assert!(
        contados > 50,
        "only {contados} relative links found: is the scanner broken?"
    );
    assert!(erros.is_empty(), "{}", erros.join("\n"));
}

#[test]
fn as_ancoras_seguem_as_regras_do_github_e_do_mdbook() {
    assert_eq!(ancora("Getting started"), "getting-started");
    assert_eq!(
        ancora("The batch route: `POST /m2m/{tipo}/lote`"),
        "the-batch-route-post-m2mtipolote"
    );
    assert_eq!(
        ancora("One trace from the request to the effect"),
        "one-trace-from-the-request-to-the-effect"
    );
    assert_eq!(
        ancora("Sending: the saída and the relay"),
        "sending-the-saída-and-the-relay"
    );
    assert_eq!(
        ancora("A [linked](x.md) title_with-marks!"),
        "a-linked-title_with-marks"
    );
    let repetidos = ancoras("# A\n\n## Notes\n\n```\n# not a heading\n```\n\n## Notes\n");
    assert_eq!(
        repetidos,
        ["a", "notes", "notes-1"]
            .map(str::to_owned)
            .into_iter()
            .collect()
    );
}

#[test]
fn links_em_codigo_nao_contam_e_links_em_duas_linhas_sim() {
    let texto =
        "See [the\nguide](a.md#x), `[not](b.md)` and\n\n```sh\n[no](c.md)\n```\n\n[ref]: d.md\n";
    assert_eq!(links(texto), ["a.md#x", "d.md"]);
}
