//! The stream every app's relay publishes to and every receiving app consumes from, as declared
//! by the app: its name, the prefix of its subjects (`{prefixo}.{tipo}`), its replicas, storage,
//! retention, age, duplicate window and ordered lanes, checked against what exists in the broker
//! (the stream and its topology record, `topologia.rs`).

use std::time::Duration;

use async_nats::jetstream::context::GetStreamErrorKind;
use async_nats::jetstream::{self, stream};

use crate::ErroNats;
use crate::nome;
use crate::topologia::{self, Topologia};

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
    /// The app asked for a lane count (a record that says otherwise is refused).
    faixas_declaradas: bool,
    replicas: usize,
    retencao: Retencao,
    armazenamento: Armazenamento,
    limite_de_bytes: Option<i64>,
    /// Read from the broker (the stream and its topology record): what every app agrees on.
    verificado: bool,
}

/// How long the stream keeps a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum Retencao {
    /// Until its age passes `max_age` (or a byte limit is reached, when set: then publishing
    /// is refused and the message waits in the saída). Every receiving app, including one whose
    /// durable is created later, reads every message still kept. The default.
    #[default]
    Limites,
    /// Until every durable consumer that exists when it is stored has acknowledged it (and at
    /// most `max_age`). Saves space, but a message stored while no receiving app has a durable
    /// is deleted at once: start the receiving apps before the senders.
    Interesse,
}

/// Where the stream keeps messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum Armazenamento {
    /// On disk (the default): kept across a server's restart.
    #[default]
    Arquivo,
    /// In memory: lost when the servers holding it restart. Tests only.
    Memoria,
}

impl Fluxo {
    /// The stream `nome` whose subjects are `{prefixo}.>`, as production wants it: **three
    /// replicas** on a JetStream cluster (a PubAck means a majority stored the message), file
    /// storage, limits retention, messages kept 7 days, a duplicate window of 2 minutes
    /// (JetStream's default) and 4 ordered lanes. A laptop or a single server asks for one replica
    /// explicitly ([`com_replicas(1)`](Self::com_replicas)).
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
            faixas_declaradas: false,
            replicas: 3,
            retencao: Retencao::Limites,
            armazenamento: Armazenamento::Arquivo,
            limite_de_bytes: None,
            verificado: false,
        })
    }

    /// How many servers of a JetStream cluster keep a copy of every message (3 by default; 1 to
    /// 5). With 3, the stream survives the loss of any one server, its disk included: a PubAck
    /// then means a majority stored the message. With 1 (a laptop, a single-server test), the
    /// PubAck on which the relay deletes its saída row is one server's, whose file store syncs
    /// to disk every 2 minutes by default: lose that machine and what it had not synced is gone
    /// from both places. An existing stream with fewer replicas than this is refused
    /// ([`ErroNats::Topologia`]); one with more is fine.
    pub fn com_replicas(mut self, replicas: usize) -> Self {
        self.replicas = replicas.clamp(1, 5);
        self
    }

    /// The stream's replicas (the existing stream's, after [`garantir`](Self::garantir)).
    pub fn replicas(&self) -> usize {
        self.replicas
    }

    /// How the stream keeps messages ([`Retencao::Limites`] by default).
    pub fn com_retencao(mut self, retencao: Retencao) -> Self {
        self.retencao = retencao;
        self
    }

    /// Where the stream keeps messages ([`Armazenamento::Arquivo`] by default).
    pub fn com_armazenamento(mut self, armazenamento: Armazenamento) -> Self {
        self.armazenamento = armazenamento;
        self
    }

    /// The most bytes the stream keeps. When it is full, publishing is refused (`discard new`):
    /// the relay keeps the message in the saída and tries again, nothing is deleted unread.
    pub fn com_limite_de_bytes(mut self, bytes: u64) -> Self {
        self.limite_de_bytes = Some(i64::try_from(bytes).unwrap_or(i64::MAX));
        self
    }

    /// How many ordered lanes the stream has (4 by default): a message with an ordering key goes
    /// to the lane of its key, `{prefixo}._ordem.{n}.{tipo}`, whatever its tipo, and each
    /// receiving app consumes a lane one message at a time, in stream order: one key's steps of
    /// several tipos apply in turn. More lanes, more keys applied in parallel. The first app
    /// records the count in the broker (bucket `mensageria_topologia`) and every app reads it
    /// from there: an app that declares another count refuses to start.
    pub fn com_faixas_ordenadas(mut self, faixas: u32) -> Self {
        self.faixas = faixas.max(1);
        self.faixas_declaradas = true;
        self
    }

    /// The ordered lanes.
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

    /// The prefix of its subjects.
    pub fn prefixo(&self) -> &str {
        &self.prefixo
    }

    /// Whether these settings were read from the broker ([`garantir`](Self::garantir),
    /// [`ler`](Self::ler)), so every app agrees on them.
    pub fn verificado(&self) -> bool {
        self.verificado
    }

    /// The subject a message of `tipo` is published to.
    pub fn assunto(&self, tipo: &str) -> String {
        format!("{}.{tipo}", self.prefixo)
    }

    /// The subject of a message of `tipo` enqueued with ordering key `chave`: the lane of its
    /// key (a stable hash of the key's bytes, so every step of a key, of any tipo, takes the
    /// same lane).
    pub fn assunto_ordenado(&self, tipo: &str, chave: &str) -> String {
        format!(
            "{}.{tipo}",
            self.prefixo_da_faixa(faixa(chave, self.faixas))
        )
    }

    /// The subjects of lane `n` start with this (then `.{tipo}`).
    pub(crate) fn prefixo_da_faixa(&self, n: u32) -> String {
        format!("{}.{}.{n}", self.prefixo, MARCA_DAS_FAIXAS)
    }

    /// The tipo of a subject of an ordered lane, if it is one.
    pub(crate) fn tipo_da_faixa<'a>(&self, assunto: &'a str) -> Option<&'a str> {
        let resto = assunto
            .strip_prefix(self.prefixo.as_str())?
            .strip_prefix('.')?
            .strip_prefix(MARCA_DAS_FAIXAS)?
            .strip_prefix('.')?;
        resto.split_once('.').map(|(_, tipo)| tipo)
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

    /// Creates the stream if it does not exist (these settings, `discard new`) and its topology
    /// record, or checks the existing ones (an existing stream is never changed: a stream an
    /// operator created is checked, not overwritten) and returns the settings every app agrees
    /// on: the stream's own (window, age, replicas) and the record's ordered lanes. Apps that
    /// start together converge on one stream and one record. Refused
    /// ([`ErroNats::Topologia`]) when what exists contradicts what this app requires: fewer
    /// replicas, another retention, memory storage, `discard old` with limits, another lane
    /// count or prefix in the record.
    pub async fn garantir(&self, js: &jetstream::Context) -> Result<Fluxo, ErroNats> {
        let fluxo = match js.get_stream(&self.nome).await {
            Ok(fluxo) => fluxo,
            Err(erro) if matches!(erro.kind(), GetStreamErrorKind::JetStream(e) if e.code() == 404) => {
                self.criar(js).await?
            }
            Err(erro) => return Err(ErroNats::jetstream("reading the stream")(Box::new(erro))),
        };
        let verificado = self.verificar(js, fluxo.cached_info()).await?;
        if verificado.replicas == 1 {
            tracing::warn!(
                stream = %self.nome,
                "mensageria nats: the stream has one replica: a PubAck is one server's, and losing \
                 that server's disk loses what it had not synced (every 2 minutes by default) \
                 after the relay deleted it from the saída; fine for a laptop or a test, use 3 \
                 replicas on a cluster in production"
            );
        }
        Ok(verificado)
    }

    /// The existing stream and its topology record, checked as [`garantir`](Self::garantir)
    /// does, without creating the stream: what a receiving app or a publisher that does not own
    /// the stream calls. The record is written if the stream has none yet (from these settings:
    /// the first app wins).
    pub async fn ler(&self, js: &jetstream::Context) -> Result<Fluxo, ErroNats> {
        let fluxo = self.existente(js).await?;
        self.verificar(js, fluxo.cached_info()).await
    }

    /// The existing stream. On a cluster, a stream created a moment ago through another node may
    /// be unknown for a moment to the node this client asks: "not found" is asked again for up
    /// to [`ESPERA_PELO_FLUXO`] before it is believed.
    pub(crate) async fn existente(
        &self,
        js: &jetstream::Context,
    ) -> Result<stream::Stream, ErroNats> {
        let limite = tokio::time::Instant::now() + ESPERA_PELO_FLUXO;
        loop {
            match js.get_stream(&self.nome).await {
                Ok(fluxo) => return Ok(fluxo),
                Err(erro) if matches!(erro.kind(), GetStreamErrorKind::JetStream(e) if e.code() == 404) =>
                {
                    if tokio::time::Instant::now() >= limite {
                        return Err(ErroNats::FluxoAusente {
                            fluxo: self.nome.clone(),
                        });
                    }
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
                Err(erro) => return Err(ErroNats::jetstream("reading the stream")(Box::new(erro))),
            }
        }
    }

    /// Creates the stream; apps started together converge on the first one's stream.
    async fn criar(&self, js: &jetstream::Context) -> Result<stream::Stream, ErroNats> {
        let config = stream::Config {
            name: self.nome.clone(),
            description: Some(
                "mensageria outbox events; topology in KV bucket mensageria_topologia".to_owned(),
            ),
            subjects: vec![format!("{}.>", self.prefixo)],
            storage: match self.armazenamento {
                Armazenamento::Arquivo => stream::StorageType::File,
                Armazenamento::Memoria => stream::StorageType::Memory,
            },
            retention: match self.retencao {
                Retencao::Limites => stream::RetentionPolicy::Limits,
                Retencao::Interesse => stream::RetentionPolicy::Interest,
            },
            discard: stream::DiscardPolicy::New,
            max_bytes: self.limite_de_bytes.unwrap_or(-1),
            duplicate_window: self.janela,
            max_age: self.idade_maxima,
            num_replicas: self.replicas,
            ..Default::default()
        };
        match js.create_stream(config).await {
            Ok(fluxo) => Ok(fluxo),
            Err(erro) if erro.to_string().contains("replicas > 1") => {
                Err(ErroNats::ReplicasSemCluster {
                    fluxo: self.nome.clone(),
                    replicas: self.replicas,
                })
            }
            // Apps started together: another one created it between our look and our create,
            // with settings of its own ("already in use"). Its stream is the stream: read it.
            Err(erro) => self
                .existente(js)
                .await
                .map_err(|_| ErroNats::jetstream("creating or reading the stream")(Box::new(erro))),
        }
    }

    /// Checks the existing stream `existente` and the topology record (written from these
    /// settings when missing) against what this app requires; the settings every app agrees on.
    pub(crate) async fn verificar(
        &self,
        js: &jetstream::Context,
        info: &stream::Info,
    ) -> Result<Fluxo, ErroNats> {
        let existente = &info.config;
        let assuntos = format!("{}.>", self.prefixo);
        if !existente.subjects.iter().any(|s| s == &assuntos) {
            return Err(ErroNats::AssuntosDoFluxo {
                fluxo: self.nome.clone(),
                assuntos: existente.subjects.clone(),
                esperado: assuntos,
            });
        }
        let mut problemas = self.contradicoes(existente);
        let proposta = Topologia {
            formato: 1,
            prefixo: self.prefixo.clone(),
            faixas_ordenadas: self.faixas,
            disposicao: topologia::FAIXAS_POR_CHAVE.to_owned(),
            replicas: existente.num_replicas.max(1),
            fluxo_criado: i64::try_from(info.created.unix_timestamp_nanos()).unwrap_or(i64::MAX),
        };
        let registro =
            topologia::garantir(js, &self.nome, existente.num_replicas.max(1), &proposta).await?;
        problemas.extend(self.contradicoes_do_registro(&registro));
        if !problemas.is_empty() {
            return Err(ErroNats::Topologia {
                fluxo: self.nome.clone(),
                problema: problemas.join("; "),
            });
        }
        Ok(Self {
            janela: existente.duplicate_window,
            idade_maxima: existente.max_age,
            faixas: registro.faixas_ordenadas,
            replicas: existente.num_replicas.max(1),
            verificado: true,
            ..self.clone()
        })
    }

    /// What the existing stream does that this app cannot live with.
    fn contradicoes(&self, existente: &stream::Config) -> Vec<String> {
        let mut problemas = Vec::new();
        if existente.num_replicas.max(1) < self.replicas {
            problemas.push(format!(
                "it has {} replica(s) and this app requires {} (Fluxo::com_replicas): raise the \
                 stream's (`nats stream edit {} --replicas {}`) or declare what it has",
                existente.num_replicas.max(1),
                self.replicas,
                self.nome,
                self.replicas
            ));
        }
        let retencao = match existente.retention {
            stream::RetentionPolicy::Limits => Some(Retencao::Limites),
            stream::RetentionPolicy::Interest => Some(Retencao::Interesse),
            stream::RetentionPolicy::WorkQueue => None,
        };
        match retencao {
            None => problemas.push(
                "its retention is work-queue: each message goes to one consumer, so receiving \
                 apps would split the events instead of each getting all; recreate it with \
                 limits or interest retention"
                    .to_owned(),
            ),
            Some(retencao) if retencao != self.retencao => problemas.push(format!(
                "its retention is {retencao:?} and this app requires {:?} (Fluxo::com_retencao)",
                self.retencao
            )),
            Some(_) => {}
        }
        if existente.storage == stream::StorageType::Memory
            && self.armazenamento == Armazenamento::Arquivo
        {
            problemas.push(
                "it keeps messages in memory, lost when its servers restart: recreate it with \
                 file storage, or declare Armazenamento::Memoria (tests only)"
                    .to_owned(),
            );
        }
        let limitado = existente.max_bytes > 0
            || existente.max_messages > 0
            || existente.max_messages_per_subject > 0;
        if limitado && existente.discard == stream::DiscardPolicy::Old {
            problemas.push(format!(
                "it has size limits with `discard old`: when full it deletes its oldest \
                 messages, read or not, after the relay deleted them from the saída; set \
                 `discard new` (`nats stream edit {} --discard new`) so a full stream refuses \
                 publishes and the events wait in the saída",
                self.nome
            ));
        }
        problemas
    }

    /// What the stream's topology record says that this app cannot live with.
    fn contradicoes_do_registro(&self, registro: &Topologia) -> Vec<String> {
        let mut problemas = Vec::new();
        if registro.prefixo != self.prefixo {
            problemas.push(format!(
                "its record names prefix `{}` and this app uses `{}`",
                registro.prefixo, self.prefixo
            ));
        }
        if registro.disposicao != topologia::FAIXAS_POR_CHAVE {
            problemas.push(format!(
                "its record lays ordered lanes out as `{}`, which this version does not know",
                registro.disposicao
            ));
        }
        if self.faixas_declaradas && registro.faixas_ordenadas != self.faixas {
            problemas.push(format!(
                "its record says {} ordered lanes and this app declares {} \
                 (Fluxo::com_faixas_ordenadas): declare the record's, or leave the count out to \
                 take it",
                registro.faixas_ordenadas, self.faixas
            ));
        }
        problemas
    }
}

/// The token after the prefix that marks an ordered lane's subjects (a tipo starts with a
/// letter or a digit, so it never collides with one).
const MARCA_DAS_FAIXAS: &str = "_ordem";

/// How long a stream reported missing is asked for again before it is believed missing (a
/// cluster's nodes learn of a new stream within milliseconds).
const ESPERA_PELO_FLUXO: Duration = Duration::from_secs(2);

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
        assert!(assunto.starts_with("p._ordem."), "{assunto}");
        assert!(assunto.ends_with(".a.b"), "{assunto}");
        assert_eq!(fluxo.tipo_da_faixa(&assunto), Some("a.b"));
        assert_eq!(fluxo.tipo_da_faixa("p.a.b"), None);
        // One key's steps of two tipos share a lane.
        let outro = fluxo.assunto_ordenado("c", "pedido:42");
        assert_eq!(
            assunto.strip_suffix(".a.b"),
            outro.strip_suffix(".c"),
            "{assunto} {outro}"
        );
        // Keys spread over the lanes.
        let faixas: std::collections::HashSet<u32> =
            (0..64).map(|n| faixa(&format!("chave-{n}"), 4)).collect();
        assert_eq!(faixas.len(), 4);
        assert_eq!(faixa("x", 1), 0);
    }
}
