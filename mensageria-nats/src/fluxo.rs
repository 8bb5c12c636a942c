//! The stream every app's relay publishes to and every receiving app consumes from: its name,
//! the prefix of its subjects (`{prefixo}.{tipo}`) and its duplicate window.

use std::time::Duration;

use async_nats::jetstream::{self, stream};

use crate::ErroNats;
use crate::nome;

/// A JetStream stream as mensageria uses it: one subject per tipo, `{prefixo}.{tipo}`, and a
/// duplicate window in which a message published twice with the same `Nats-Msg-Id` (its message
/// id) is stored once.
///
/// ```
/// use std::time::Duration;
/// use mensageria_nats::Fluxo;
///
/// let fluxo = Fluxo::new("MENSAGERIA", "mensageria")?.com_janela_de_duplicatas(Duration::from_secs(300));
/// assert_eq!(fluxo.assunto("pedido.criado"), "mensageria.pedido.criado");
/// // The relay publishes a message again at most send timeout + lease after its first try.
/// fluxo.exigir_janela(&mensageria_core::relay::Config::new("loja"))?;
/// # Ok::<(), mensageria_nats::ErroNats>(())
/// ```
#[derive(Debug, Clone)]
#[doc(alias("stream"))]
pub struct Fluxo {
    nome: String,
    prefixo: String,
    janela: Duration,
    idade_maxima: Duration,
}

impl Fluxo {
    /// The stream `nome` whose subjects are `{prefixo}.>`; a duplicate window of 2 minutes
    /// (JetStream's default) and messages kept 7 days.
    pub fn new(nome: impl Into<String>, prefixo: impl Into<String>) -> Result<Self, ErroNats> {
        let (nome, prefixo) = (nome.into(), prefixo.into());
        nome::validar_fluxo(&nome)?;
        nome::validar_prefixo(&prefixo)?;
        Ok(Self {
            nome,
            prefixo,
            janela: Duration::from_secs(120),
            idade_maxima: Duration::from_secs(7 * 24 * 3600),
        })
    }

    /// How long the stream remembers message ids to drop a second publish of one message.
    pub fn com_janela_de_duplicatas(mut self, janela: Duration) -> Self {
        self.janela = janela;
        self
    }

    /// How long the stream keeps a message (a receiving app down for longer loses it).
    pub fn com_idade_maxima(mut self, idade: Duration) -> Self {
        self.idade_maxima = idade;
        self
    }

    /// The stream's name.
    pub fn nome(&self) -> &str {
        &self.nome
    }

    /// The subject a message of `tipo` is published to.
    pub fn assunto(&self, tipo: &str) -> String {
        format!("{}.{tipo}", self.prefixo)
    }

    /// The duplicate window.
    pub fn janela_de_duplicatas(&self) -> Duration {
        self.janela
    }

    /// The rule between the stream and a relay that publishes to it: a message whose PubAck was
    /// lost is published again within the relay's send timeout plus its lease, and that second
    /// publish should fall inside the duplicate window so the stream, not the receptor, absorbs
    /// it. Beyond the window the receptors' natural-key dedup is still exact; the window saves
    /// work, it is not the guarantee.
    pub fn exigir_janela(&self, relay: &mensageria_core::relay::Config) -> Result<(), ErroNats> {
        let minimo = relay.tempo_limite_envio() + relay.lease();
        if self.janela < minimo {
            return Err(ErroNats::JanelaCurta {
                fluxo: self.nome.clone(),
                janela: self.janela,
                minimo,
            });
        }
        Ok(())
    }

    /// Creates the stream if it does not exist (file storage, subjects `{prefixo}.>`, this
    /// duplicate window and age), or checks that the existing one captures `{prefixo}.>` and
    /// returns its settings (an existing stream is never changed: its owner's settings win).
    pub async fn garantir(&self, js: &jetstream::Context) -> Result<Fluxo, ErroNats> {
        let assuntos = format!("{}.>", self.prefixo);
        let config = stream::Config {
            name: self.nome.clone(),
            subjects: vec![assuntos.clone()],
            storage: stream::StorageType::File,
            duplicate_window: self.janela,
            max_age: self.idade_maxima,
            ..Default::default()
        };
        let fluxo = js
            .get_or_create_stream(config)
            .await
            .map_err(|e| ErroNats::jetstream("creating or reading the stream")(Box::new(e)))?;
        let existente = &fluxo.cached_info().config;
        if !existente.subjects.iter().any(|s| s == &assuntos) {
            return Err(ErroNats::AssuntosDoFluxo {
                fluxo: self.nome.clone(),
                assuntos: existente.subjects.clone(),
                esperado: assuntos,
            });
        }
        Ok(Self {
            janela: existente.duplicate_window,
            idade_maxima: existente.max_age,
            ..self.clone()
        })
    }
}
