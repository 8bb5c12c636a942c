//! What can go wrong setting the transport up.

use std::time::Duration;

/// An error of the JetStream transport's set-up (publishing and consuming failures are outcomes
/// of each message, not errors: see [`Publicador`](crate::Publicador) and
/// [`Consumidor`](crate::Consumidor)).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ErroNats {
    /// A stream, prefix or app name JetStream would not take.
    #[error("invalid {campo} {valor:?}: {motivo}")]
    NomeInvalido {
        /// `stream`, `prefix` or `app`.
        campo: &'static str,
        /// The name given.
        valor: String,
        /// What is wrong with it.
        motivo: &'static str,
    },

    /// No server of the list could be reached.
    #[error(
        "cannot connect to NATS at {servidores}: {motivo}; check the URLs (a comma-separated \
         list of nats://host:port) and that a server with JetStream (-js) runs there"
    )]
    Conexao {
        /// The servers tried, credentials hidden.
        servidores: String,
        /// The client's error.
        motivo: String,
    },

    /// The stream's duplicate window is shorter than the time within which the relay publishes a
    /// message again after a lost PubAck.
    #[error(
        "stream `{fluxo}` keeps message ids for {janela:?}, but the relay may publish a message \
         again up to {minimo:?} after the first try (send timeout plus lease): set a duplicate \
         window of at least that (Fluxo::com_janela_de_duplicatas); the receptors' natural-key \
         dedup stays exact beyond it, the window only saves work"
    )]
    JanelaCurta {
        /// The stream.
        fluxo: String,
        /// Its duplicate window.
        janela: Duration,
        /// The least it must be.
        minimo: Duration,
    },

    /// An existing stream does not capture the subjects mensageria publishes to.
    #[error(
        "stream `{fluxo}` exists with subjects {assuntos:?}, which do not include `{esperado}`: \
         add it to the stream's subjects or choose another prefix"
    )]
    AssuntosDoFluxo {
        /// The stream.
        fluxo: String,
        /// Its subjects.
        assuntos: Vec<String>,
        /// What it must capture.
        esperado: String,
    },

    /// The stream does not exist.
    #[error(
        "stream `{fluxo}` does not exist: the app that owns it creates it at start \
         (mensageria_nats::Fluxo::garantir), or an operator does (then every app checks it); start \
         that app first"
    )]
    FluxoAusente {
        /// The stream.
        fluxo: String,
    },

    /// The stream, or its topology record, contradicts what this app requires: the app refuses to
    /// start rather than publish or consume on a topology it would misread.
    #[error(
        "stream `{fluxo}` does not match what this app requires: {problema}. An app never \
         changes an existing stream or its record (bucket `mensageria_topologia`): fix the \
         stream, or change the app's declaration (mensageria_nats::Fluxo)"
    )]
    Topologia {
        /// The stream.
        fluxo: String,
        /// What differs, and how to fix it.
        problema: String,
    },

    /// A replicated stream was asked of a server that is not part of a JetStream cluster.
    #[error(
        "stream `{fluxo}` asks for {replicas} replicas, but the server is not part of a \
         JetStream cluster: on a laptop or a single-server test declare one replica explicitly \
         (`Fluxo::new(..)?.com_replicas(1)`: it does not survive the loss of that server's \
         disk); in production run three servers with cluster routes"
    )]
    ReplicasSemCluster {
        /// The stream.
        fluxo: String,
        /// The replicas asked for.
        replicas: usize,
    },

    /// A JetStream API request failed (server down, JetStream disabled, permissions).
    #[error(
        "JetStream {operacao} failed: {fonte}; check that the servers are up with JetStream \
         enabled (-js) and, on a cluster, that a majority of them is up (a replicated stream or \
         durable needs a leader: it may still be electing one)"
    )]
    JetStream {
        /// What was being done.
        operacao: &'static str,
        /// The client's error.
        fonte: async_nats::Error,
    },

    /// The mensageria configuration does not hang together.
    #[error(transparent)]
    Configuracao(#[from] mensageria_core::ErroConfiguracao),
}

impl ErroNats {
    pub(crate) fn jetstream(
        operacao: &'static str,
    ) -> impl FnOnce(Box<dyn std::error::Error + Send + Sync>) -> Self {
        move |fonte| Self::JetStream { operacao, fonte }
    }
}
