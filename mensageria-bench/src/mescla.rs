//! A partial run (`--so`) merged into the full run's `BENCHMARKS.md`: the table a reader sees
//! first must hold the latest figure of every target, and a partial run must not lose the other
//! sections' figures.
//!
//! Each row of the partial report replaces the row of the same name in the full one (a target by
//! its wording, or its former wording when it was renamed; a CPU row by its path, a measurement
//! by its section and name); a row the full
//! report lacks goes at the end of its table. A replaced target says so in its measured cell.
//! A note replaces the note with the same label (the words before its first colon) and is
//! added otherwise. The header gains a line naming the re-run: when, the command, its
//! parameters and, when it is not the full run's, the machine; it replaces the line of an
//! earlier re-run of the same command. Everything else of the full report is kept as it was.

use crate::relatorio::{INTRODUCAO_DOS_CUSTOS, SEM_BASE};

/// The tables of a report, by their heading.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Tabela {
    Metas,
    Custos,
    Medidas,
}

impl Tabela {
    fn de(titulo: &str) -> Option<Self> {
        match titulo {
            "## Targets" => Some(Tabela::Metas),
            "## CPU per delivered event" => Some(Tabela::Custos),
            "## Measurements" => Some(Tabela::Medidas),
            _ => None,
        }
    }

    /// What names a row: the measurements' section and name, the others' first cell.
    fn chave(self, linha: &str) -> String {
        let celulas = celulas(linha);
        match self {
            Tabela::Medidas => celulas
                .iter()
                .take(2)
                .copied()
                .collect::<Vec<_>>()
                .join(" | "),
            Tabela::Metas => METAS_RENOMEADAS
                .iter()
                .find(|(antiga, _)| *antiga == celulas[0])
                .map_or(celulas[0], |(_, nova)| *nova)
                .to_owned(),
            Tabela::Custos => celulas[0].to_owned(),
        }
    }
}

/// Targets whose wording changed, `(before, now)`: a partial run's row in the new wording
/// takes the place of the old one, which would otherwise stay until the next full run.
const METAS_RENOMEADAS: &[(&str, &str)] = &[(
    "burn-down ≥ 50k rows/s on one connection (200k is the long-term goal)",
    crate::queima::META_QUEIMA,
)];

/// How the header's line of a re-run begins.
const REEXECUCAO: &str = "- **Re-run:**";

/// One line of a report, as the merge sees it.
#[derive(Debug, PartialEq)]
enum Linha<'a> {
    /// A data row of a table.
    Fileira(Tabela, &'a str),
    /// A note (`- ` under `## Notes`).
    Nota(&'a str),
    /// Anything else (headings, the header, a table's column names and rule, blank lines).
    Outra(&'a str),
}

fn ler(md: &str) -> Vec<Linha<'_>> {
    let linhas: Vec<&str> = md.lines().collect();
    let mut tabela = None;
    let mut notas = false;
    let mut lidas = Vec::with_capacity(linhas.len());
    for (i, linha) in linhas.iter().enumerate() {
        if linha.starts_with("## ") {
            tabela = Tabela::de(linha);
            notas = *linha == "## Notes";
        }
        let cabecalho = linhas.get(i + 1).is_some_and(|l| l.starts_with("|---"));
        lidas.push(match tabela {
            Some(t) if linha.starts_with("| ") && !cabecalho => Linha::Fileira(t, linha),
            _ if notas && linha.starts_with("- ") => Linha::Nota(linha),
            _ => Linha::Outra(linha),
        });
    }
    lidas
}

/// The label of a note: the words before its first colon (short ones only), else all of it.
fn rotulo(nota: &str) -> &str {
    match nota.find(": ") {
        Some(fim) if fim < 80 => &nota[..fim],
        _ => nota,
    }
}

/// The cells of a table row.
fn celulas(linha: &str) -> Vec<&str> {
    linha
        .trim_matches('|')
        .split(" | ")
        .map(str::trim)
        .collect()
}

/// The target rows' mark of a re-run.
fn marcar(linha: &str, quando: &str) -> String {
    match celulas(linha).as_slice() {
        [alvo, medido, veredito] => {
            format!("| {alvo} | {medido} (re-run {quando}) | {veredito} |")
        }
        _ => linha.to_owned(),
    }
}

/// What a partial report brings: its rows (table, key, the line to write), its notes, and its
/// CPU table's introduction when it measured a baseline.
struct Parcial<'a> {
    fileiras: Vec<(Tabela, String, String)>,
    notas: Vec<&'a str>,
    introducao: Option<&'a str>,
}

impl<'a> Parcial<'a> {
    fn de(linhas: &[Linha<'a>], quando: &str) -> Self {
        let mut parcial = Parcial {
            fileiras: Vec::new(),
            notas: Vec::new(),
            introducao: None,
        };
        for linha in linhas {
            match *linha {
                Linha::Fileira(t, texto) => {
                    let escrita = match t {
                        Tabela::Metas => marcar(texto, quando),
                        _ => texto.to_owned(),
                    };
                    parcial.fileiras.push((t, t.chave(texto), escrita));
                }
                Linha::Nota(nota) => parcial.notas.push(nota),
                // The CPU table's introduction names the baseline its last column divides by.
                Linha::Outra(t)
                    if t.starts_with(INTRODUCAO_DOS_CUSTOS) && !t.contains(SEM_BASE) =>
                {
                    parcial.introducao = Some(t);
                }
                Linha::Outra(_) => {}
            }
        }
        parcial
    }
}

/// `completo` with `parcial`'s rows and notes in, and a header line for the re-run
/// (`quando`, `comando`, `parametros`); `None` when `completo` is not a full report (no targets
/// or no measurements table): the partial report is then all there is.
pub(crate) fn mesclar(
    completo: &str,
    parcial: &str,
    quando: &str,
    comando: &str,
    parametros: &str,
) -> Option<String> {
    let antigas = ler(completo);
    let tem = |t: Tabela| {
        antigas
            .iter()
            .any(|l| matches!(l, Linha::Fileira(x, _) if *x == t))
    };
    if !tem(Tabela::Metas) || !tem(Tabela::Medidas) {
        return None;
    }
    // Figures of another machine must say so: the header's Machine line is the full run's.
    let maquina = |md: &str| {
        md.lines()
            .find_map(|l| l.strip_prefix("- **Machine:** "))
            .map(str::to_owned)
    };
    let outra_maquina = maquina(parcial).filter(|m| maquina(completo).as_ref() != Some(m));
    let novas = ler(parcial);
    let Parcial {
        mut fileiras,
        mut notas,
        introducao,
    } = Parcial::de(&novas, quando);
    // An earlier re-run's line of the same command: this one's rows replaced all of its.
    let mesmo_comando = format!(": `{comando}` (");
    let mut saida: Vec<String> = Vec::with_capacity(antigas.len() + fileiras.len());
    for (i, linha) in antigas.iter().enumerate() {
        match linha {
            Linha::Fileira(t, antiga) => {
                let chave = t.chave(antiga);
                match fileiras.iter().position(|(x, k, _)| x == t && *k == chave) {
                    Some(p) => saida.push(fileiras.remove(p).2),
                    None => saida.push((*antiga).to_owned()),
                }
                // The table's last row: the partial run's new rows of it follow.
                if !matches!(antigas.get(i + 1), Some(Linha::Fileira(x, _)) if x == t) {
                    let (dela, resto) = fileiras.into_iter().partition(|(x, _, _)| x == t);
                    fileiras = resto;
                    saida.extend(dela.into_iter().map(|(_, _, l)| l));
                }
            }
            Linha::Nota(antiga) => {
                match notas.iter().position(|n| rotulo(n) == rotulo(antiga)) {
                    Some(p) => saida.push(notas.remove(p).to_owned()),
                    None => saida.push((*antiga).to_owned()),
                }
                if !matches!(antigas.get(i + 1), Some(Linha::Nota(_))) {
                    saida.extend(notas.drain(..).map(str::to_owned));
                }
            }
            Linha::Outra(texto) => {
                let reexecucao = texto.starts_with(REEXECUCAO);
                let superada = reexecucao && texto.contains(&mesmo_comando);
                match introducao {
                    Some(nova) if texto.starts_with(INTRODUCAO_DOS_CUSTOS) => {
                        saida.push(nova.to_owned());
                    }
                    _ if superada => {}
                    _ => saida.push((*texto).to_owned()),
                }
                let fim_do_cabecalho = texto.starts_with("- **Parameters:**") || reexecucao;
                let seguinte = antigas.get(i + 1);
                if fim_do_cabecalho
                    && !matches!(seguinte, Some(Linha::Outra(s)) if s.starts_with(REEXECUCAO))
                {
                    let onde = outra_maquina
                        .as_ref()
                        .map_or(String::new(), |m| format!(" on another machine ({m})"));
                    saida.push(format!(
                        "{REEXECUCAO} {quando}: `{comando}` ({parametros}){onde}; its rows replace the earlier ones, its targets say \"re-run\""
                    ));
                }
            }
        }
    }
    // A CPU table the full report lacks: the partial run's rows would have nowhere to go.
    if fileiras.iter().any(|(t, _, _)| *t == Tabela::Custos) {
        return None;
    }
    Some(saida.join("\n") + "\n")
}

#[cfg(test)]
mod testes {
    use super::mesclar;

    const COMPLETO: &str = "# Benchmarks

- **Date:** 2026-12-06 07:30 UTC
- **Parameters:** 5 repetitions; the run took 42 min 24 s
- **Reading it:** medians.

## Targets

| target | measured | |
|---|---|---|
| enqueue adds ≤ 25% (1 clients) | +23% (1569 vs 1923 tx/s) | met |
| end-to-end ≥ 0.45 × raw INSERT | 0.37 × | **missed** |

## CPU per delivered event

Intro.

| path | this process | PostgreSQL | nats-server | all | / baseline tx |
|---|---:|---:|---:|---:|---:|
| HTTP, with producers | 155 µs | 292 µs | – | 447 µs | 3.05× |

## Measurements

| section | measurement | median | min | max | unit | n |
|---|---|---:|---:|---:|---|---:|
| enqueue | PostgreSQL, 1 clients: business tx alone | 1923 | 1800 | 2000 | tx/s | 5 |
| end-to-end | delivered | 3823 | 3700 | 3900 | msg/s | 5 |

## Notes

- Enqueue overhead: old words.
- Limit, burn-down: kept.
";

    const PARCIAL: &str = "# Benchmarks

- **Date:** 2026-12-06 10:10 UTC
- **Parameters:** 5 repetitions

## Targets

| target | measured | |
|---|---|---|
| enqueue adds ≤ 25% (1 clients) | +20% (1600 vs 1920 tx/s) | met |
| enqueue adds ≤ 25% (64 clients) | +30% | **missed** |

## Measurements

| section | measurement | median | min | max | unit | n |
|---|---|---:|---:|---:|---|---:|
| enqueue | PostgreSQL, 1 clients: business tx alone | 1920 | 1900 | 1950 | tx/s | 5 |
| enqueue | PostgreSQL, 1 clients: business tx + SELECT 1 | 1700 | 1650 | 1750 | tx/s | 5 |

## Notes

- Enqueue overhead: new words.
- Limit, enqueue: a new note.
";

    #[test]
    fn uma_rodada_parcial_troca_as_suas_fileiras_e_guarda_as_outras() {
        let md = mesclar(
            COMPLETO,
            PARCIAL,
            "2026-12-06 10:10 UTC",
            "cargo run --release -p mensageria-bench -- --so enfileirar",
            "5 repetitions",
        )
        .expect("a full report to merge into");
        let esperado = COMPLETO
            .replace(
                "- **Reading it:**",
                "- **Re-run:** 2026-12-06 10:10 UTC: `cargo run --release -p mensageria-bench -- --so enfileirar` (5 repetitions); its rows replace the earlier ones, its targets say \"re-run\"\n- **Reading it:**",
            )
            .replace(
                "| enqueue adds ≤ 25% (1 clients) | +23% (1569 vs 1923 tx/s) | met |",
                "| enqueue adds ≤ 25% (1 clients) | +20% (1600 vs 1920 tx/s) (re-run 2026-12-06 10:10 UTC) | met |",
            )
            .replace(
                "| end-to-end ≥ 0.45 × raw INSERT | 0.37 × | **missed** |",
                "| end-to-end ≥ 0.45 × raw INSERT | 0.37 × | **missed** |\n| enqueue adds ≤ 25% (64 clients) | +30% (re-run 2026-12-06 10:10 UTC) | **missed** |",
            )
            .replace(
                "| enqueue | PostgreSQL, 1 clients: business tx alone | 1923 | 1800 | 2000 | tx/s | 5 |",
                "| enqueue | PostgreSQL, 1 clients: business tx alone | 1920 | 1900 | 1950 | tx/s | 5 |",
            )
            .replace(
                "| end-to-end | delivered | 3823 | 3700 | 3900 | msg/s | 5 |",
                "| end-to-end | delivered | 3823 | 3700 | 3900 | msg/s | 5 |\n| enqueue | PostgreSQL, 1 clients: business tx + SELECT 1 | 1700 | 1650 | 1750 | tx/s | 5 |",
            )
            .replace(
                "- Enqueue overhead: old words.\n- Limit, burn-down: kept.",
                "- Enqueue overhead: new words.\n- Limit, burn-down: kept.\n- Limit, enqueue: a new note.",
            );
        assert_eq!(md, esperado);
    }

    /// The header's re-run lines.
    fn reexecucoes(md: &str) -> Vec<&str> {
        md.lines()
            .filter(|l| l.starts_with(super::REEXECUCAO))
            .collect()
    }

    #[test]
    fn uma_segunda_rodada_parcial_acrescenta_a_sua_linha_ao_cabecalho() {
        let uma = mesclar(COMPLETO, PARCIAL, "10:10", "a", "p").unwrap();
        let duas = mesclar(&uma, PARCIAL, "10:20", "b", "p").unwrap();
        let cabecalho = reexecucoes(&duas);
        assert_eq!(cabecalho.len(), 2, "{duas}");
        assert!(cabecalho[0].contains("10:10") && cabecalho[1].contains("10:20"));
        assert!(duas.contains("+20% (1600 vs 1920 tx/s) (re-run 10:20) | met |"));
        assert!(!duas.contains("(re-run 10:10) (re-run"));
    }

    #[test]
    fn uma_nova_rodada_do_mesmo_comando_substitui_a_linha_da_anterior() {
        let uma = mesclar(COMPLETO, PARCIAL, "10:10", "a", "p").unwrap();
        let outra = mesclar(&uma, PARCIAL, "10:15", "b", "p").unwrap();
        let tres = mesclar(&outra, PARCIAL, "10:20", "a", "p").unwrap();
        let cabecalho = reexecucoes(&tres);
        assert_eq!(cabecalho.len(), 2, "{tres}");
        assert!(cabecalho[0].contains("10:15: `b`"), "{tres}");
        assert!(cabecalho[1].contains("10:20: `a`"), "{tres}");
        assert!(
            tres.contains("\n- **Reading it:**"),
            "the header goes on: {tres}"
        );
    }

    #[test]
    fn uma_rodada_em_outra_maquina_diz_qual() {
        let com_maquina = |md: &str, m: &str| {
            md.replacen(
                "- **Parameters:**",
                &format!("- **Machine:** {m}\n- **Parameters:**"),
                1,
            )
        };
        let completo = com_maquina(COMPLETO, "2 cores (Intel Xeon)");
        let mesma = mesclar(
            &completo,
            &com_maquina(PARCIAL, "2 cores (Intel Xeon)"),
            "q",
            "c",
            "p",
        )
        .unwrap();
        assert!(
            mesma.contains("- **Re-run:** q: `c` (p); its rows"),
            "{mesma}"
        );
        let outra = mesclar(
            &completo,
            &com_maquina(PARCIAL, "2 cores (AMD EPYC)"),
            "q",
            "c",
            "p",
        )
        .unwrap();
        assert!(
            outra.contains(
                "- **Re-run:** q: `c` (p) on another machine (2 cores (AMD EPYC)); its rows"
            ),
            "{outra}"
        );
        assert!(
            outra.contains("- **Machine:** 2 cores (Intel Xeon)"),
            "{outra}"
        );
    }

    #[test]
    fn uma_meta_renomeada_toma_o_lugar_da_antiga() {
        let (antiga, nova) = super::METAS_RENOMEADAS[0];
        let completo = COMPLETO.replace(
            "| end-to-end ≥ 0.45 × raw INSERT | 0.37 × | **missed** |",
            &format!("| {antiga} | 35975 rows/s | **missed** |\n| end-to-end ≥ 0.45 × raw INSERT | 0.37 × | **missed** |"),
        );
        let parcial = PARCIAL.replace(
            "| enqueue adds ≤ 25% (64 clients) | +30% | **missed** |",
            &format!("| {nova} | 0.081× | **missed** |"),
        );
        let md = mesclar(&completo, &parcial, "q", "c", "p").unwrap();
        assert!(!md.contains(antiga), "{md}");
        let metas: Vec<&str> = md
            .lines()
            .skip_while(|l| *l != "## Targets")
            .filter(|l| l.starts_with("| ") && !l.starts_with("| target"))
            .take_while(|l| !l.starts_with("| path"))
            .collect();
        assert_eq!(metas.len(), 3, "{md}");
        assert!(
            metas[1].starts_with(&format!("| {nova} | 0.081× (re-run q)")),
            "in the old one's place: {md}"
        );
    }

    #[test]
    fn sem_relatorio_completo_nada_se_mescla() {
        assert_eq!(mesclar("", PARCIAL, "q", "c", "p"), None);
        assert_eq!(
            mesclar(
                PARCIAL.split("## Measurements").next().unwrap(),
                PARCIAL,
                "q",
                "c",
                "p"
            ),
            None
        );
    }
}
