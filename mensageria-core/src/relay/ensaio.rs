//! Test switches of the relay: faults it injects into its own deliveries so that adopters can
//! prove their receptors idempotent without a proxy and without sleeping.

/// Faults the relay injects into its own deliveries. Off by default; turned on only through
/// [`Config::com_ensaio`](super::Config::com_ensaio) (feature `teste`).
///
/// ```
/// # #[cfg(feature = "teste")] {
/// use mensageria_core::relay::Config;
/// use mensageria_core::teste::Ensaio;
///
/// // Every message is sent twice per attempt, and its first successful attempt is treated as
/// // if the ack had been lost: the next round sends it again. Each message reaches the
/// // receptor four times; `Relay::drenar` still returns without sleeping.
/// let config = Config::new("emissor")
///     .com_ensaio(Ensaio::new().duplicar_entregas().perder_primeiro_ack());
/// # let _ = config; }
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Ensaio {
    pub(crate) duplicar: bool,
    pub(crate) perder_primeiro_ack: bool,
}

impl Ensaio {
    /// No fault: the relay behaves as in production.
    pub fn new() -> Self {
        Self::default()
    }

    /// Runs the enviador twice for every attempt (back to back; the second outcome counts), as
    /// a sender that retried after a timeout would.
    pub fn duplicar_entregas(mut self) -> Self {
        self.duplicar = true;
        self
    }

    /// Treats the first successful attempt of every message as lost on the way back: the row
    /// is not deleted but made due again at once, so the next round delivers it again.
    pub fn perder_primeiro_ack(mut self) -> Self {
        self.perder_primeiro_ack = true;
        self
    }
}
