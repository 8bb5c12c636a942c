//! The demo's final figures and their table.

use std::fmt;
use std::time::Duration;

/// What one demo run measured. `perdidas` and `aplicadas_duas_vezes` are the promise: both 0.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Relatorio {
    /// Messages committed with their business row.
    pub enfileiradas: u64,
    /// HTTP requests that reached the receptor.
    pub entregas: u64,
    /// Deliveries beyond the first of each message.
    pub reentregas: u64,
    /// Deliveries the receptor answered `duplicate` (a no-op).
    pub duplicatas: u64,
    /// Deliveries answered neither `applied` nor `duplicate`: cut mid-request (by the crash or
    /// a send timeout) or refused.
    pub outras: u64,
    /// Effects in the fiscal's table (one per natural key).
    pub aplicadas: u64,
    /// Answers the proxy lost after the receptor committed.
    pub acks_perdidos: u64,
    /// Times the relay was killed.
    pub quedas: u64,
    /// Committed by the emissor, never applied by the fiscal.
    pub perdidas: u64,
    /// Effects applied more than once.
    pub aplicadas_duas_vezes: u64,
    /// Effects of messages the emissor never committed.
    pub inesperadas: u64,
    /// Messages in the emissor's dead letters.
    pub mortas: u64,
    /// Wall time of the run.
    pub duracao: Duration,
}

impl Relatorio {
    /// Nothing lost, nothing applied twice, nothing made up.
    pub fn ok(&self) -> bool {
        self.perdidas == 0 && self.aplicadas_duas_vezes == 0 && self.inesperadas == 0
    }
}

impl fmt::Display for Relatorio {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let linhas: [(&str, u64, &str); 12] = [
            (
                "enqueued",
                self.enfileiradas,
                "committed with their business row",
            ),
            (
                "deliveries",
                self.entregas,
                "HTTP requests reaching the receptor",
            ),
            (
                "redeliveries",
                self.reentregas,
                "deliveries after a message's first",
            ),
            (
                "duplicates absorbed",
                self.duplicatas,
                "answered `duplicate`: a no-op",
            ),
            (
                "cut or refused",
                self.outras,
                "neither answer: cut mid-request, or refused",
            ),
            (
                "effects applied",
                self.aplicadas,
                "rows in the fiscal's effect table",
            ),
            (
                "acks lost by the proxy",
                self.acks_perdidos,
                "after the receptor committed",
            ),
            ("relay crashes", self.quedas, "killed mid-round, restarted"),
            ("dead letters", self.mortas, ""),
            (
                "lost",
                self.perdidas,
                "committed, never applied (must be 0)",
            ),
            ("applied twice", self.aplicadas_duas_vezes, "(must be 0)"),
            (
                "unexpected",
                self.inesperadas,
                "applied, never committed (must be 0)",
            ),
        ];
        for (nome, valor, nota) in linhas {
            writeln!(f, "  {nome:<24} {valor:>8}  {nota}")?;
        }
        write!(
            f,
            "  {:<24} {:>7.1}s  {}",
            "wall time",
            self.duracao.as_secs_f64(),
            if self.ok() {
                "nothing lost, nothing applied twice"
            } else {
                "FAILED: the promise was broken"
            }
        )
    }
}
