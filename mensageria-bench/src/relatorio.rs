//! The report: every measurement with its median, min and max over the repetitions, every
//! target met or not, printed as a table and written as `BENCHMARKS.md`.

use std::fmt::Write as _;

use crate::estatistica::{maximo, mediana, minimo};

/// How the CPU table's introduction begins, and what it says when the run had no baseline
/// (`mescla.rs` finds the introduction by them).
pub(crate) const INTRODUCAO_DOS_CUSTOS: &str = "User + system CPU of each process over the run";
pub(crate) const SEM_BASE: &str = " — not run this time";

struct Medida {
    secao: &'static str,
    nome: String,
    valores: Vec<f64>,
    unidade: &'static str,
}

struct Meta {
    alvo: String,
    medido: String,
    atingida: bool,
}

/// One path's CPU per delivered event (medians over the repetitions), µs.
struct CustoPorEvento {
    caminho: String,
    proprio: f64,
    postgres: f64,
    nats: f64,
}

#[derive(Default)]
pub(crate) struct Relatorio {
    medidas: Vec<Medida>,
    metas: Vec<Meta>,
    notas: Vec<String>,
    custos: Vec<CustoPorEvento>,
    /// The baseline's CPU per transaction (section 2's raw INSERT), µs, when it ran.
    custo_base: Option<f64>,
}

impl Relatorio {
    /// Records one measurement (one value per repetition) and returns its median.
    pub(crate) fn medir(
        &mut self,
        secao: &'static str,
        nome: impl Into<String>,
        valores: Vec<f64>,
        unidade: &'static str,
    ) -> f64 {
        let m = mediana(&valores);
        let nome = nome.into();
        println!(
            "  {secao:<14} {nome:<58} {:>12} {unidade} (min {}, max {}, n={})",
            fmt(m),
            fmt(minimo(&valores)),
            fmt(maximo(&valores)),
            valores.len()
        );
        self.medidas.push(Medida {
            secao,
            nome,
            valores,
            unidade,
        });
        m
    }

    /// Records a target: what it asks, what was measured, whether it holds.
    pub(crate) fn meta(
        &mut self,
        alvo: impl Into<String>,
        medido: impl Into<String>,
        atingida: bool,
    ) {
        let (alvo, medido) = (alvo.into(), medido.into());
        println!(
            "  [{}] {alvo}: {medido}",
            if atingida { "met" } else { "MISSED" }
        );
        self.metas.push(Meta {
            alvo,
            medido,
            atingida,
        });
    }

    /// Records the baseline's CPU per transaction (µs, one value per repetition) that the CPU
    /// table divides by (their median).
    pub(crate) fn custo_base(&mut self, us: &[f64]) {
        self.custo_base = Some(mediana(us));
    }

    /// Records one end-to-end path's CPU per delivered event (µs, one value per repetition) of
    /// this process, PostgreSQL and nats-server (empty: a process the path does not use). The
    /// report lists their medians, every path in one table near its top.
    pub(crate) fn custo_por_evento(
        &mut self,
        caminho: impl Into<String>,
        proprio: &[f64],
        postgres: &[f64],
        nats: &[f64],
    ) {
        self.custos.push(CustoPorEvento {
            caminho: caminho.into(),
            proprio: mediana(proprio),
            postgres: mediana(postgres),
            nats: mediana(nats),
        });
    }

    /// The CPU table: every path's CPU per delivered event, split by process, over the
    /// baseline's CPU per transaction.
    fn tabela_de_custos(&self, md: &mut String) {
        if self.custos.is_empty() {
            return;
        }
        let _ = writeln!(md, "\n## CPU per delivered event\n");
        let _ = writeln!(
            md,
            "{INTRODUCAO_DOS_CUSTOS} (from /proc), divided by the events delivered; medians of the repetitions. The last column divides the whole by the CPU per transaction of section 2's baseline (a raw single-row INSERT, this process and PostgreSQL{}) in the same run: a change that saves work shows there even when the machine is busy.\n",
            self.custo_base
                .map_or(SEM_BASE.to_owned(), |base| format!(": {} µs", fmt(base)))
        );
        let _ = writeln!(
            md,
            "| path | this process (producers, relay, receiver) | PostgreSQL | nats-server | all | / baseline tx |\n|---|---:|---:|---:|---:|---:|"
        );
        for c in &self.custos {
            let todo = c.proprio + c.postgres + c.nats;
            // A process the path does not use (nats-server over HTTP, PostgreSQL on SQLite).
            let us = |v: f64| {
                if v > 0.0 {
                    format!("{} µs", fmt(v))
                } else {
                    "–".to_owned()
                }
            };
            let _ = writeln!(
                md,
                "| {} | {} µs | {} | {} | {} µs | {} |",
                c.caminho,
                fmt(c.proprio),
                us(c.postgres),
                us(c.nats),
                fmt(todo),
                self.custo_base
                    .map_or("–".to_owned(), |base| format!("{}×", fmt(todo / base)))
            );
        }
    }

    /// A line of explanation for the report.
    pub(crate) fn nota(&mut self, nota: impl Into<String>) {
        self.notas.push(nota.into());
    }

    pub(crate) fn markdown(&self, maquina: &str, comando: &str, parametros: &str) -> String {
        let mut md = String::new();
        let _ = writeln!(md, "# Benchmarks\n");
        let _ = writeln!(
            md,
            "Written by the bench binary; do not edit by hand. Re-run it to refresh.\n"
        );
        let _ = writeln!(
            md,
            "- **Date:** {}",
            chrono::Utc::now().format("%Y-%m-%d %H:%M UTC")
        );
        let _ = writeln!(md, "- **Machine:** {maquina}");
        let _ = writeln!(md, "- **Command:** `{comando}`");
        let _ = writeln!(md, "- **Parameters:** {parametros}");
        let _ = writeln!(
            md,
            "- **Reading it:** the machine is shared and noisy; each figure is the median of the repetitions (min and max beside it), and every target is a ratio against a baseline measured in the same run.\n"
        );
        let _ = writeln!(md, "## Targets\n");
        let _ = writeln!(md, "| target | measured | |\n|---|---|---|");
        for meta in &self.metas {
            let _ = writeln!(
                md,
                "| {} | {} | {} |",
                meta.alvo,
                meta.medido,
                if meta.atingida { "met" } else { "**missed**" }
            );
        }
        self.tabela_de_custos(&mut md);
        let _ = writeln!(md, "\n## Measurements\n");
        let _ = writeln!(
            md,
            "| section | measurement | median | min | max | unit | n |\n|---|---|---:|---:|---:|---|---:|"
        );
        for m in &self.medidas {
            let _ = writeln!(
                md,
                "| {} | {} | {} | {} | {} | {} | {} |",
                m.secao,
                m.nome,
                fmt(mediana(&m.valores)),
                fmt(minimo(&m.valores)),
                fmt(maximo(&m.valores)),
                m.unidade,
                m.valores.len()
            );
        }
        if !self.notas.is_empty() {
            let _ = writeln!(md, "\n## Notes\n");
            for nota in &self.notas {
                let _ = writeln!(md, "- {nota}");
            }
        }
        md
    }
}

/// Three significant figures, no exponent.
pub(crate) fn fmt(valor: f64) -> String {
    if !valor.is_finite() {
        return "–".into();
    }
    let abs = valor.abs();
    if abs >= 100.0 {
        format!("{valor:.0}")
    } else if abs >= 10.0 {
        format!("{valor:.1}")
    } else if abs >= 1.0 {
        format!("{valor:.2}")
    } else {
        format!("{valor:.3}")
    }
}
