//! Messages the stream deletes (its `max_age`, or its limits) before this app settled them: none
//! vanishes unrecorded.
//!
//! - **While the app runs**, every message nak'd for a later redelivery is remembered, with what
//!   its dead letter would hold ([`Adiadas`]). A redelivery or a settlement forgets it. When the
//!   watcher finds the stream's first sequence past it, the stream deleted it while it waited:
//!   it is kept in `mensageria_mortas_recebidas` (`expired`, with its payload and last error).
//!   A message that keeps failing is given up before that (`idade_maxima`, at most three
//!   quarters of `max_age`), so this catches the rest: a nak delay longer than what was left.
//! - **When the app starts** on a durable it already had, the stream may have deleted messages
//!   while it was away, before they were delivered to it. Which of them were of its tipo cannot
//!   be known (they are gone): when the stream's first sequence is past what the durable was
//!   last delivered, and the app was away longer than `max_age` (its registration says when it
//!   was last seen) or left messages waiting, one dead letter per lane records the range
//!   (`possibly_expired`), so the loss is visible and the operator replays from the source.

use std::collections::HashMap;
use std::sync::Mutex;

use mensageria_core::operacoes::MortaRecebida;

/// The most payload bytes remembered for nak'd messages; past it a record keeps no payload.
const TETO_DE_BYTES: usize = 64 * 1024 * 1024;

/// The nak'd messages waiting for their redelivery, by stream sequence.
#[derive(Debug, Default)]
pub(crate) struct Adiadas {
    estado: Mutex<Estado>,
}

#[derive(Debug, Default)]
struct Estado {
    por_sequencia: HashMap<u64, MortaRecebida>,
    bytes: usize,
}

impl Adiadas {
    /// `morta` (what its dead letter would hold) waits for a redelivery.
    pub(crate) fn adiar(&self, sequencia: u64, mut morta: MortaRecebida) {
        let mut estado = self.estado.lock().unwrap_or_else(|e| e.into_inner());
        if estado.bytes + morta.payload.len() > TETO_DE_BYTES {
            morta.payload =
                "(not kept: over the consumer's memory cap for waiting messages)".into();
        }
        estado.bytes += morta.payload.len();
        if let Some(antiga) = estado.por_sequencia.insert(sequencia, morta) {
            estado.bytes -= antiga.payload.len();
        }
    }

    /// It came back (a redelivery) or was settled.
    pub(crate) fn esquecer(&self, sequencia: u64) {
        let mut estado = self.estado.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(antiga) = estado.por_sequencia.remove(&sequencia) {
            estado.bytes -= antiga.payload.len();
        }
    }

    /// Those below the stream's first sequence: deleted while they waited. Forgotten here.
    pub(crate) fn expiradas(&self, primeira: u64) -> Vec<MortaRecebida> {
        let mut estado = self.estado.lock().unwrap_or_else(|e| e.into_inner());
        let sequencias: Vec<u64> = estado
            .por_sequencia
            .keys()
            .copied()
            .filter(|s| *s < primeira)
            .collect();
        let mut expiradas = Vec::with_capacity(sequencias.len());
        for sequencia in sequencias {
            if let Some(morta) = estado.por_sequencia.remove(&sequencia) {
                estado.bytes -= morta.payload.len();
                expiradas.push(morta);
            }
        }
        expiradas
    }
}
