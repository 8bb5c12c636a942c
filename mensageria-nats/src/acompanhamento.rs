//! Watching a receiving app's durables while it consumes: every few seconds, each lane's durable
//! is asked for its state. A durable deleted under the running consumer is recreated at once (it
//! starts again from the stream's first message: the receptor's dedup absorbs what was applied);
//! a stream that is gone is said at ERROR every 30 s while it stays gone, never a silent stall.
//! The lag of each tipo (its lanes summed: waiting, in flight, redelivered, the oldest unsettled
//! message's age against the stream's `max_age`) goes to the metrics and, with the app's
//! registration, to `mensageria_receptores`, where `status` and `doctor` read it.

use std::sync::Arc;
use std::time::Duration;

use async_nats::jetstream::consumer::pull;
use async_nats::jetstream::context::ConsumerInfoErrorKind;
use async_nats::jetstream::stream::Stream;
use mensageria_core::Banco;
use mensageria_core::operacoes::{self, Consumo, MortaRecebida};
use mensageria_core::sqlx::Pool;
use tokio_util::sync::CancellationToken;

/// How often a problem that persists is said again.
const REPETIR_AVISO: Duration = Duration::from_secs(30);

/// One lane's durable, as the consumer created it.
pub(crate) struct Vigiada {
    /// The tipo of an unordered lane; `None` for an ordered lane (shared by the app's tipos).
    pub(crate) tipo: Option<&'static str>,
    pub(crate) duravel: String,
    pub(crate) assunto: String,
    pub(crate) config: pull::Config,
}

/// The watcher of one receiving app's durables.
pub(crate) struct Acompanhamento<DB: Banco> {
    pub(crate) pool: Pool<DB>,
    pub(crate) fluxo: Stream,
    pub(crate) app: String,
    pub(crate) vigiadas: Vec<Vigiada>,
    pub(crate) max_age: Duration,
    pub(crate) intervalo: Duration,
    pub(crate) adiadas: Arc<crate::expiracao::Adiadas>,
}

impl<DB: Banco> Acompanhamento<DB> {
    pub(crate) async fn rodar(mut self, cancelar: CancellationToken) {
        let mut avisado: Option<tokio::time::Instant> = None;
        loop {
            // Asking the server is cancelled at once at shutdown; what the stream deleted, once
            // known, is recorded whatever comes (never dropped by a shutdown).
            let primeira = tokio::select! {
                _ = cancelar.cancelled() => return,
                primeira = self.primeira_sequencia() => primeira,
            };
            if let Some(primeira) = primeira {
                self.guardar_expiradas(primeira).await;
            }
            let rodada = self.verificar();
            let problema = tokio::select! {
                _ = cancelar.cancelled() => return,
                problema = rodada => problema,
            };
            match problema {
                Some(problema)
                    if avisado.is_none_or(|quando| quando.elapsed() >= REPETIR_AVISO) =>
                {
                    avisado = Some(tokio::time::Instant::now());
                    tracing::error!(app = %self.app, stream = %self.fluxo.cached_info().config.name, error = %problema, "mensageria nats: {problema}");
                }
                Some(_) => {}
                None => avisado = None,
            }
            tokio::select! {
                _ = cancelar.cancelled() => return,
                _ = tokio::time::sleep(self.intervalo) => {}
            }
        }
    }

    /// One round: each durable checked (recreated when gone), each tipo's lag recorded. The
    /// problem that keeps consuming from working, if any.
    async fn verificar(&self) -> Option<String> {
        let mut problema = None;
        let mut por_tipo: Vec<(&'static str, Consumo)> = Vec::new();
        let mut ordenadas: Option<Consumo> = None;
        for vigiada in &self.vigiadas {
            let consumo = match self.fluxo.consumer_info(&vigiada.duravel).await {
                Ok(info) => {
                    let mais_antiga = if info.num_pending + info.num_ack_pending as u64 > 0 {
                        self.idade_da_mais_antiga(vigiada, info.ack_floor.stream_sequence)
                            .await
                    } else {
                        Duration::ZERO
                    };
                    Consumo::new(
                        i64::try_from(info.num_pending).unwrap_or(i64::MAX),
                        i64::try_from(info.num_ack_pending).unwrap_or(i64::MAX),
                        i64::try_from(info.num_redelivered).unwrap_or(i64::MAX),
                        ms(mais_antiga),
                        ms(self.max_age),
                    )
                }
                Err(erro) if erro.kind() == ConsumerInfoErrorKind::NotFound => {
                    self.recriar(vigiada).await;
                    continue;
                }
                Err(erro) if erro.kind() == ConsumerInfoErrorKind::StreamNotFound => {
                    return Some(
                        "the stream is gone: nothing is consumed until it is back; create it \
                         (`Fluxo::garantir`) and the durables are recreated"
                            .to_owned(),
                    );
                }
                Err(erro) => {
                    problema = Some(format!(
                        "could not read durable `{}`: {erro}",
                        vigiada.duravel
                    ));
                    continue;
                }
            };
            let soma = match vigiada.tipo {
                None => ordenadas.get_or_insert_with(|| vazio(self.max_age)),
                Some(tipo) => match por_tipo.iter().position(|(t, _)| *t == tipo) {
                    Some(posicao) => &mut por_tipo[posicao].1,
                    None => {
                        por_tipo.push((tipo, vazio(self.max_age)));
                        &mut por_tipo.last_mut().expect("just pushed").1
                    }
                },
            };
            somar(soma, &consumo);
        }
        // The ordered lanes carry every tipo of the app: their backlog shows on each.
        if let Some(ordenadas) = &ordenadas {
            for (_, consumo) in &mut por_tipo {
                somar(consumo, ordenadas);
            }
        }
        for (tipo, consumo) in &por_tipo {
            self.registrar(tipo, consumo).await;
        }
        problema
    }

    /// The stream's first sequence, if it answers (a failure is said by `verificar`).
    async fn primeira_sequencia(&mut self) -> Option<u64> {
        self.fluxo
            .info()
            .await
            .ok()
            .map(|info| info.state.first_sequence)
    }

    /// The nak'd messages the stream deleted before their redelivery (below its first sequence,
    /// `primeira`): kept as dead letters.
    async fn guardar_expiradas(&self, primeira: u64) {
        for morta in self.adiadas.expiradas(primeira) {
            // A sibling replica may have got the redelivery and applied it.
            let aplicada = operacoes::recebida_por_id(&self.pool, &morta.app, morta.id_mensagem)
                .await
                .unwrap_or(false);
            if !aplicada {
                registrar_perda(&self.pool, &morta).await;
            }
        }
    }

    /// The age of the oldest message of a lane not settled yet: the first message of its
    /// subject after the ack floor (every earlier one is settled), by its UUIDv7 id.
    async fn idade_da_mais_antiga(&self, vigiada: &Vigiada, piso: u64) -> Duration {
        let mensagem = self
            .fluxo
            .raw_message_builder()
            .sequence(piso + 1)
            .next_by_subject(vigiada.assunto.clone())
            .send()
            .await;
        let Ok(mensagem) = mensagem else {
            return Duration::ZERO;
        };
        crate::consumidor::id_dos_cabecalhos(&mensagem.headers)
            .and_then(crate::consumidor::idade_do_id)
            .unwrap_or_default()
    }

    /// A durable deleted under the running consumer: created again, said at ERROR.
    async fn recriar(&self, vigiada: &Vigiada) {
        match self
            .fluxo
            .get_or_create_consumer(&vigiada.duravel, vigiada.config.clone())
            .await
        {
            Ok(_) => {
                metrics::counter!(
                    "mensageria_consumer_recreated_total",
                    "app" => self.app.clone(),
                    "tipo" => vigiada.tipo.unwrap_or("_ordem")
                )
                .increment(1);
                tracing::error!(
                    app = %self.app,
                    tipo = vigiada.tipo.unwrap_or("_ordem"),
                    duravel = %vigiada.duravel,
                    "mensageria nats: the durable consumer was deleted while this app consumed; \
                     recreated it (it starts again from the stream's first message: the \
                     receptor's dedup absorbs what was applied)"
                );
            }
            Err(erro) => tracing::error!(
                app = %self.app,
                tipo = vigiada.tipo.unwrap_or("_ordem"),
                duravel = %vigiada.duravel,
                error = %erro,
                "mensageria nats: the durable consumer was deleted and could not be recreated; \
                 retrying"
            ),
        }
    }

    /// The tipo's lag to the metrics and to the app's registration.
    async fn registrar(&self, tipo: &'static str, consumo: &Consumo) {
        let rotulos = [("app", self.app.clone()), ("tipo", tipo.to_owned())];
        metrics::gauge!("mensageria_consumer_pending", &rotulos).set(consumo.pendentes as f64);
        metrics::gauge!("mensageria_consumer_ack_pending", &rotulos).set(consumo.em_voo as f64);
        metrics::gauge!("mensageria_consumer_redelivered", &rotulos)
            .set(consumo.reentregues as f64);
        metrics::gauge!("mensageria_consumer_oldest_age_seconds", &rotulos)
            .set(consumo.mais_antiga_ms as f64 / 1000.0);
        metrics::gauge!("mensageria_stream_max_age_seconds", &rotulos)
            .set(consumo.max_age_ms as f64 / 1000.0);
        if let Err(erro) =
            operacoes::registrar_consumidor(&self.pool, &self.app, tipo, consumo).await
        {
            tracing::debug!(app = %self.app, tipo, error = %erro, "mensageria nats: could not record the consumer's registration");
        }
    }
}

fn vazio(max_age: Duration) -> Consumo {
    Consumo::new(0, 0, 0, 0, ms(max_age))
}

fn somar(soma: &mut Consumo, outro: &Consumo) {
    *soma = Consumo::new(
        soma.pendentes + outro.pendentes,
        soma.em_voo + outro.em_voo,
        soma.reentregues + outro.reentregues,
        soma.mais_antiga_ms.max(outro.mais_antiga_ms),
        soma.max_age_ms,
    );
}

fn ms(duracao: Duration) -> i64 {
    i64::try_from(duracao.as_millis()).unwrap_or(i64::MAX)
}

/// Keeps a message the stream deleted before this app settled it, said at ERROR. If the
/// database refuses, the ERROR line is the record.
async fn registrar_perda<DB: Banco>(pool: &Pool<DB>, morta: &MortaRecebida) {
    tracing::error!(
        app = %morta.app,
        tipo = %morta.tipo,
        id_mensagem = %morta.id_mensagem,
        sequencia = ?morta.sequencia,
        error = %morta.motivo,
        "mensageria nats: the stream deleted a message this app had not applied; kept in \
         mensageria_mortas_recebidas"
    );
    metrics::counter!(
        "mensageria_consumer_expired_total",
        "app" => morta.app.clone(),
        "tipo" => morta.tipo.clone()
    )
    .increment(1);
    if let Err(erro) = operacoes::registrar_morta_recebida(pool, morta).await {
        tracing::error!(app = %morta.app, error = %erro, "mensageria nats: could not record the deleted message as a dead letter");
    }
}

/// At start, on the durables the app already had for `tipo`: did the stream delete messages
/// while the app was away, before they were delivered to it? When the stream's first sequence is
/// past what a lane's durable was last delivered, and the app's registration was last refreshed
/// longer than `max_age` ago (or it left messages waiting), the range is recorded as one dead
/// letter of the tipo (`possibly_expired`, its lanes' ranges joined): which of those messages
/// were of the tipo cannot be known, they are gone.
pub(crate) async fn conferir_ausencia<DB: Banco>(
    pool: &Pool<DB>,
    fluxo: &Stream,
    app: &str,
    tipo: &'static str,
    faixas: &[crate::consumidor::Faixa],
    primeira: u64,
    max_age: Duration,
) {
    let mut faixa_perdida: Option<(u64, u64)> = None;
    for faixa in faixas {
        let Ok(info) = fluxo.consumer_info(&faixa.duravel).await else {
            continue; // a new durable: it starts at the stream's first message
        };
        let entregue = info.delivered.stream_sequence;
        if entregue == 0 || entregue + 1 >= primeira {
            continue;
        }
        let (de, ate) = faixa_perdida.unwrap_or((entregue + 1, primeira - 1));
        faixa_perdida = Some((de.min(entregue + 1), ate.max(primeira - 1)));
    }
    let Some((de, ate)) = faixa_perdida else {
        return;
    };
    let registros = operacoes::receptores(pool).await.unwrap_or_default();
    let registro = registros
        .iter()
        .find(|r| r.app == app && r.tipo == tipo && r.transporte == "nats");
    let ausente = registro.is_none_or(|r| {
        r.visto_ha_ms > ms(max_age) || r.consumo.is_some_and(|c| c.pendentes + c.em_voo > 0)
    });
    if !ausente {
        return;
    }
    let assuntos: Vec<&str> = faixas.iter().map(|f| f.assunto.as_str()).collect();
    let morta = MortaRecebida {
        app: app.to_owned(),
        // The same range of the same app and tipo is one record, whoever finds it first.
        id_mensagem: id_da_lacuna(app, tipo, de, ate),
        tipo: tipo.to_owned(),
        origem: format!("nats:{}:{}", fluxo.cached_info().config.name, assuntos[0]),
        payload: serde_json::json!({
            "expired_sequences": [de, ate],
            "subjects": assuntos,
        })
        .to_string(),
        correlacao: None,
        motivo: format!(
            "possibly_expired: while this app was away the stream deleted sequences {de}..{ate} \
             (its max_age or limits) before they were delivered to it; those of tipo `{tipo}` \
             among them were never applied: replay them from their source"
        ),
        entregas: 0,
        morta_em_ms: 0,
        traceparent: None,
        tracestate: None,
        sequencia: i64::try_from(de).ok(),
        chave_ordem: None,
    };
    registrar_perda(pool, &morta).await;
}

/// A stable id for the record of the range `de..=ate` of `app` and `tipo` (a UUIDv8 from two
/// FNV-1a hashes of it), so replicas that start together record it once.
fn id_da_lacuna(app: &str, tipo: &str, de: u64, ate: u64) -> uuid::Uuid {
    let texto = format!("{app}\u{0}{tipo}\u{0}{de}\u{0}{ate}");
    let fnv = |semente: u64| {
        texto.bytes().fold(semente, |hash, byte| {
            (hash ^ u64::from(byte)).wrapping_mul(0x0000_0100_0000_01b3)
        })
    };
    let mut bytes = [0_u8; 16];
    bytes[..8].copy_from_slice(&fnv(0xcbf2_9ce4_8422_2325).to_be_bytes());
    bytes[8..].copy_from_slice(&fnv(0x84222325cbf29ce4).to_be_bytes());
    uuid::Uuid::new_v8(bytes)
}
