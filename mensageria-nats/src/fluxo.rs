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
    faixas: u32,
    replicas: usize,
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
            faixas: 4,
            replicas: 1,
        })
    }

    /// How many servers of a JetStream cluster keep a copy of every message (1 by default; 1 to
    /// 5). With 3, the stream survives the loss of any one server, its disk included: a PubAck
    /// then means a majority stored the message. With 1, the PubAck on which the relay deletes
    /// its saída row is one server's, whose file store syncs to disk every 2 minutes by default:
    /// lose that machine and what it had not synced is gone from both places. Use 1 for a
    /// laptop or a single-server test, 3 in production. An existing stream keeps its own.
    pub fn com_replicas(mut self, replicas: usize) -> Self {
        self.replicas = replicas.clamp(1, 5);
        self
    }

    /// The stream's replicas (the existing stream's, after [`garantir`](Self::garantir)).
    pub fn replicas(&self) -> usize {
        self.replicas
    }

    /// How many ordered lanes each tipo has (4 by default): a message with an ordering key goes
    /// to the lane of its key, `{prefixo}.{tipo}.o{n}`, which each receiving app consumes one
    /// message at a time, in stream order. More lanes, more ordered keys applied in parallel.
    /// The stream records it when [`garantir`](Self::garantir) creates it, and every app that
    /// calls `garantir` afterwards takes the stream's value.
    pub fn com_faixas_ordenadas(mut self, faixas: u32) -> Self {
        self.faixas = faixas.max(1);
        self
    }

    /// The ordered lanes per tipo.
    pub fn faixas_ordenadas(&self) -> u32 {
        self.faixas
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

    /// The subject of a message of `tipo` enqueued with ordering key `chave`: the lane of its
    /// key (a stable hash of the key's bytes, so every step of a key takes the same lane).
    pub fn assunto_ordenado(&self, tipo: &str, chave: &str) -> String {
        self.assunto_da_faixa(tipo, faixa(chave, self.faixas))
    }

    /// The subject of lane `n` of `tipo`.
    pub(crate) fn assunto_da_faixa(&self, tipo: &str, n: u32) -> String {
        format!("{}.{tipo}.o{n}", self.prefixo)
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
    /// duplicate window and age, and its ordered lanes recorded in its description), or checks
    /// that the existing one captures `{prefixo}.>` and returns its settings (an existing stream
    /// is never changed: its owner's settings win, ordered lanes included, so every app that
    /// calls `garantir` agrees on them).
    pub async fn garantir(&self, js: &jetstream::Context) -> Result<Fluxo, ErroNats> {
        let assuntos = format!("{}.>", self.prefixo);
        let config = stream::Config {
            name: self.nome.clone(),
            description: Some(format!("{PREFIXO_DA_DESCRICAO}{}", self.faixas)),
            subjects: vec![assuntos.clone()],
            storage: stream::StorageType::File,
            duplicate_window: self.janela,
            max_age: self.idade_maxima,
            num_replicas: self.replicas,
            ..Default::default()
        };
        let fluxo = match js.get_or_create_stream(config).await {
            Ok(fluxo) => fluxo,
            // Apps started together: another one created it between our look and our create,
            // with settings of its own ("already in use"). Its stream is the stream: read it.
            Err(erro) => js.get_stream(&self.nome).await.map_err(|_| {
                ErroNats::jetstream("creating or reading the stream")(Box::new(erro))
            })?,
        };
        let existente = &fluxo.cached_info().config;
        if !existente.subjects.iter().any(|s| s == &assuntos) {
            return Err(ErroNats::AssuntosDoFluxo {
                fluxo: self.nome.clone(),
                assuntos: existente.subjects.clone(),
                esperado: assuntos,
            });
        }
        // The stream says how many ordered lanes its tipos have, so a sender and a receiver that
        // were configured differently still agree (a lane nobody consumes would never deliver).
        let faixas = existente
            .description
            .as_deref()
            .and_then(|descricao| descricao.strip_prefix(PREFIXO_DA_DESCRICAO))
            .and_then(|faixas| faixas.trim().parse().ok())
            .unwrap_or(self.faixas);
        Ok(Self {
            janela: existente.duplicate_window,
            idade_maxima: existente.max_age,
            faixas,
            replicas: existente.num_replicas.max(1),
            ..self.clone()
        })
    }
}

/// How the stream's description records its ordered lanes: `mensageria ordered-lanes=4`.
const PREFIXO_DA_DESCRICAO: &str = "mensageria ordered-lanes=";

/// The lane of `chave` among `faixas`: FNV-1a of its bytes (the same on every build and
/// toolchain, unlike `DefaultHasher`), modulo the lanes.
fn faixa(chave: &str, faixas: u32) -> u32 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in chave.bytes() {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
    }
    u32::try_from(hash % u64::from(faixas.max(1))).unwrap_or(0)
}

#[cfg(test)]
mod testes {
    use super::*;

    #[test]
    fn cada_chave_tem_uma_faixa_estavel() {
        let fluxo = Fluxo::new("S", "p").unwrap();
        assert_eq!(fluxo.assunto("a.b"), "p.a.b");
        let assunto = fluxo.assunto_ordenado("a.b", "pedido:42");
        assert_eq!(assunto, fluxo.assunto_ordenado("a.b", "pedido:42"));
        assert!(assunto.starts_with("p.a.b.o"), "{assunto}");
        // Keys spread over the lanes.
        let faixas: std::collections::HashSet<u32> =
            (0..64).map(|n| faixa(&format!("chave-{n}"), 4)).collect();
        assert_eq!(faixas.len(), 4);
        assert_eq!(faixa("x", 1), 0);
    }
}
