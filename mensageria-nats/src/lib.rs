//! NATS JetStream as a transport of mensageria, on both sides.
//!
//! - **Publishing** ([`Publicador`]): a relay resource. Each app's relay still claims only the
//!   tipos it registered an enviador for, and publishes each message to `{prefixo}.{tipo}` of one
//!   stream ([`Fluxo`]) with its message id as `Nats-Msg-Id`; the saída row is acknowledged only
//!   on the stream's PubAck.
//! - **Consuming** ([`Consumidor`]): each receiving app has a durable pull consumer per tipo, so
//!   every app gets every event (fan-out) and the replicas of one app share the work. A fetched
//!   batch goes through the same receiving path as the HTTP routes
//!   ([`mensageria_axum::recepcao`]): the receptor's natural-key dedup, written in the effect's
//!   transaction, is the guarantee; JetStream's duplicate window only saves work.
//!
//! The same `#[enviador]` and `#[receptor]` serve HTTP and JetStream: what changes is the
//! resource handed to the relay and the door the receptores are fed through.
#![cfg_attr(docsrs, feature(doc_cfg))]

mod acompanhamento;
mod asyncapi;
mod conexao;
mod consumidor;
mod diagnostico;
mod erro;
mod expiracao;
mod fluxo;
mod nome;
mod publicador;
mod retomada;
mod topologia;
mod troca;

pub use asyncapi::{documento as asyncapi, rota as rota_asyncapi};
pub use conexao::{conectar, opcoes_de_conexao, servidores};
pub use consumidor::{Config as ConfigConsumidor, Consumidor, ConsumidorHandle, Inicio};
pub use diagnostico::{Achado, diagnosticar};
pub use erro::ErroNats;
pub use fluxo::{Armazenamento, Fluxo, Retencao};
pub use publicador::Publicador;

/// The headers a replayed receiving-side dead letter carries (`mensageria mortas-recebidas
/// reenviar` writes them, the [`Consumidor`] reads them): one place, so writer and reader agree.
pub mod cabecalhos {
    /// The message id of the dead letter a message replays; the app forgets that dead letter
    /// when it applies the replay.
    pub const REENVIO_DE: &str = "Mensageria-Reenvio-De";
    /// The replayed message's place in its ordering key (its original stream sequence).
    pub const SEQUENCIA_ORIGINAL: &str = "Mensageria-Sequencia-Original";
    /// The ordering key (the CloudEvents partitioning extension, as
    /// `mensageria_core::cloudevents::atributos` writes it).
    pub const CHAVE_DE_ORDEM: &str = "ce-partitionkey";
}

/// Re-exported: the NATS client these types take, at the version mensageria uses.
pub use async_nats;
