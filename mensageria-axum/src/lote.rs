//! The batch form of every receptor, `POST {base}/{tipo}/lote`: up to N events of one tipo
//! applied in **one** transaction, with one dedup statement for all of them, and an outcome per
//! event.
//!
//! A rejection or a panic of one event must neither lose, double nor block the others, and must
//! not make the others' functions run again and again (issue 25: re-applying the batch without
//! each failed event in turn ran 16,640 functions for 128 good and 128 failing events). The rule:
//!
//! 1. A round is applied in one transaction with no savepoint (nothing paid for the possibility
//!    of a failure): one dedup statement, the function once per new event, one commit.
//! 2. At its first failing event, the round is rolled back; that event keeps its outcome and is
//!    not run again. The round's other events are then applied in one new transaction, each in a
//!    savepoint of its own through the single route's dedup + effect step
//!    ([`aplicar_em`](crate::receber::aplicar_em)), so any later failure is rolled back alone.
//!
//! So **the receptor's function runs at most twice per event, whatever fails**: once for an
//! event of a round with no failure, and for every event after a round's first failure; twice
//! only for the new events that came before that failure (their first run was rolled back). 128
//! good and 128 failing events interleaved: 257 runs; the 128 good first: 384. A savepoint per
//! event was measured against one transaction per event for the second pass: the commits of the
//! latter cost 3–4 times as much (PostgreSQL, one poison event per 64). The function is the same
//! one the single route calls, in the order of the batch.
//!
//! Two events of one key in a batch are applied one after the other, as two requests would be:
//! the batch is cut into rounds in which every key appears once, each round its own
//! transaction. Two events of one **message id** are one message sent twice (a relay never does
//! that, but a sender may): only the first is looked at and applied, and every repeat gets its
//! outcome, with `duplicate` in place of `applied` — so whichever entry a sender matches by id,
//! it acks only what was applied and retries or dead-letters only what was not. The batch is not
//! refused: the OpenAPI document cannot say that ids must differ, and a client that follows it
//! must get a 200.

use std::cell::Cell;
use std::collections::HashMap;
use std::time::Duration;

use axum::extract::{Request, State};
use axum::http::{HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde::{Deserialize, Serialize};
use tracing::Instrument;
use uuid::Uuid;

use crate::cloudevents;
use crate::desfecho::{Caso, Desfecho};
use crate::receber::{autorizado, id_do_pedido, ler_corpo};
use crate::recepcao::{self, Entrada};
use crate::{Estado, Receptor};

/// Reads the request body, `{"eventos": [{"id": "<message id>", "correlacao": "...", "payload":
/// {..}}]}`, and refuses it as soon as `eventos` holds one event more than `limite`: the events
/// after that one are not read (a body of 70,000 events is not parsed whole to be refused).
fn ler_lote(corpo: &[u8], limite: usize) -> Result<Vec<Entrada<'_>>, Recusa> {
    let demais = Cell::new(false);
    let mut leitor = serde_json::Deserializer::from_slice(corpo);
    let lido = LeitorDoLote {
        limite,
        demais: &demais,
    }
    .deserialize(&mut leitor)
    .and_then(|eventos| leitor.end().map(|()| eventos));
    match lido {
        Ok(eventos) => Ok(eventos),
        Err(_) if demais.get() => Err(Recusa::Demais { limite }),
        Err(falha) => Err(Recusa::Invalido(falha.to_string())),
    }
}

/// The batch without its repeated message ids (each id's first event, in order), and for every
/// event of the batch, in order, the position of its id's first event among them and whether it
/// is a repeat.
fn sem_ids_repetidos(eventos: Vec<Entrada<'_>>) -> (Vec<Entrada<'_>>, Vec<(usize, bool)>) {
    let mut primeiro: HashMap<Uuid, usize> = HashMap::with_capacity(eventos.len());
    let mut unicos = Vec::with_capacity(eventos.len());
    let mut ordem = Vec::with_capacity(eventos.len());
    for evento in eventos {
        match primeiro.get(&evento.id) {
            Some(&posicao) => ordem.push((posicao, true)),
            None => {
                primeiro.insert(evento.id, unicos.len());
                ordem.push((unicos.len(), false));
                unicos.push(evento);
            }
        }
    }
    (unicos, ordem)
}

/// The envelope's reader: an object with one field, `eventos` (any other is refused, as
/// `deny_unknown_fields` would).
struct LeitorDoLote<'l> {
    limite: usize,
    /// Set when `eventos` passed `limite`: the error is then a 413, not a 400.
    demais: &'l Cell<bool>,
}

/// The envelope's one field.
#[derive(Deserialize)]
#[serde(field_identifier, rename_all = "lowercase")]
enum Campo {
    Eventos,
}

impl<'de> DeserializeSeed<'de> for LeitorDoLote<'_> {
    type Value = Vec<Entrada<'de>>;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_struct("PedidoLote", &["eventos"], self)
    }
}

impl<'de> Visitor<'de> for LeitorDoLote<'_> {
    type Value = Vec<Entrada<'de>>;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("an object with `eventos`")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut campos: A) -> Result<Self::Value, A::Error> {
        let mut eventos = None;
        while let Some(Campo::Eventos) = campos.next_key()? {
            if eventos.is_some() {
                return Err(de::Error::duplicate_field("eventos"));
            }
            eventos = Some(campos.next_value_seed(SequenciaDoLote {
                limite: self.limite,
                demais: self.demais,
            })?);
        }
        eventos.ok_or_else(|| de::Error::missing_field("eventos"))
    }
}

/// The `eventos` array, read up to `limite` events and one more.
struct SequenciaDoLote<'l> {
    limite: usize,
    demais: &'l Cell<bool>,
}

impl<'de> DeserializeSeed<'de> for SequenciaDoLote<'_> {
    type Value = Vec<Entrada<'de>>;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_seq(self)
    }
}

impl<'de> Visitor<'de> for SequenciaDoLote<'_> {
    type Value = Vec<Entrada<'de>>;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("an array of events")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut sequencia: A) -> Result<Self::Value, A::Error> {
        let mut eventos = Vec::with_capacity(sequencia.size_hint().unwrap_or(0).min(self.limite));
        while eventos.len() < self.limite {
            match sequencia.next_element()? {
                Some(evento) => eventos.push(evento),
                None => return Ok(eventos),
            }
        }
        // At the limit: one more element of any shape is one too many.
        if sequencia.next_element::<de::IgnoredAny>()?.is_some() {
            self.demais.set(true);
            return Err(de::Error::custom(format_args!(
                "more than {} events",
                self.limite
            )));
        }
        Ok(eventos)
    }
}

/// What became of one event of a batch, in the answer's `resultados`, in the request's order.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub(crate) struct ResultadoDoEvento {
    /// The event's message id.
    pub(crate) id: Uuid,
    /// The same stable code the single route answers with: `applied`, `duplicate` (ack),
    /// `invalid_payload`, `invalid_key`, `payload_too_large`, `rejected` (dead-letter),
    /// `temporary`, `panic`, `database` (retry).
    pub(crate) resultado: &'static str,
    /// For a human, when it was not applied.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) mensagem: Option<String>,
    /// Seconds to wait before retrying it, when the receptor or the database said.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) retry_after_s: Option<u64>,
}

/// A refusal of the whole batch, before any event is looked at.
enum Recusa {
    /// 401, 400 (CloudEvents attributes, incomplete body), 413 (body), 415: as the single route
    /// answers.
    Comum(Desfecho),
    /// 400: the body is not a batch envelope.
    Invalido(String),
    /// 413: more events than the limit.
    Demais { limite: usize },
}

impl IntoResponse for Recusa {
    fn into_response(self) -> Response {
        let (codigo, mensagem) = match self {
            Recusa::Comum(desfecho) => return desfecho.into_response(),
            Recusa::Invalido(falha) => (
                "invalid_batch",
                format!(
                    "not a batch: send {{\"eventos\": [{{\"id\": \"<uuid>\", \"payload\": {{...}}}}]}} \
                     ({falha})"
                ),
            ),
            Recusa::Demais { limite } => (
                "batch_too_large",
                format!("more than {limite} events; send at most {limite} per batch"),
            ),
        };
        let status = if codigo == "invalid_batch" {
            StatusCode::BAD_REQUEST
        } else {
            StatusCode::PAYLOAD_TOO_LARGE
        };
        (
            status,
            axum::Json(serde_json::json!({ "erro": codigo, "mensagem": mensagem })),
        )
            .into_response()
    }
}

/// Handles one batch for receptor `R`.
pub(crate) async fn receber_lote<R: Receptor>(
    State(estado): State<Estado<R::Banco>>,
    pedido: Request,
) -> Response {
    let id_pedido = id_do_pedido(pedido.headers());
    let mut resposta = match responder::<R>(estado, pedido, &id_pedido).await {
        Ok(resultados) => {
            axum::Json(serde_json::json!({ "resultados": resultados })).into_response()
        }
        Err(recusa) => recusa.into_response(),
    };
    if let Ok(valor) = HeaderValue::from_str(&id_pedido) {
        resposta.headers_mut().insert("x-request-id", valor);
    }
    resposta
}

async fn responder<R: Receptor>(
    estado: Estado<R::Banco>,
    pedido: Request,
    id_pedido: &str,
) -> Result<Vec<ResultadoDoEvento>, Recusa> {
    if !autorizado(pedido.headers(), &estado.config.tokens) {
        tracing::warn!(
            tipo = R::TIPO,
            request_id = %id_pedido,
            "mensageria receptor: batch with a missing or invalid bearer token; refused (401)"
        );
        return Err(Recusa::Comum(Desfecho::NaoAutorizado));
    }
    // The same CloudEvents binary-mode checks as the single route.
    if let Err(motivo) = cloudevents::conferir(pedido.headers(), R::TIPO) {
        tracing::warn!(
            tipo = R::TIPO,
            request_id = %id_pedido,
            error = %motivo,
            "mensageria receptor: batch with CloudEvents attributes that do not fit this route; \
             refused (400)"
        );
        return Err(Recusa::Comum(Desfecho::CloudEventsInvalido { motivo }));
    }
    let limite = estado.config.limite_lote;
    let corpo = ler_corpo(pedido, limite.bytes, R::TIPO, id_pedido)
        .await
        .map_err(Recusa::Comum)?;
    let (eventos, ordem) = sem_ids_repetidos(ler_lote(&corpo, limite.eventos)?);
    let span = tracing::info_span!(
        "mensageria.receptor.lote",
        tipo = R::TIPO,
        request_id = %id_pedido,
        eventos = ordem.len(),
    );
    let resultados = recepcao::aplicar_lote::<R>(
        &estado.pool,
        &estado.config.app,
        estado.config.limite_corpo,
        &eventos,
        Some(&estado.admissao),
    )
    .instrument(span)
    .await;
    let resultados: Vec<ResultadoDoEvento> = eventos
        .iter()
        .zip(resultados)
        .map(|(evento, desfecho)| {
            desfecho.contar(&estado.config.app, R::TIPO);
            resultado(evento.id, &desfecho)
        })
        .collect();
    Ok(ordem
        .into_iter()
        .map(|(posicao, repetido)| {
            let primeiro = &resultados[posicao];
            if repetido {
                primeiro.repetido()
            } else {
                primeiro.clone()
            }
        })
        .collect())
}

impl ResultadoDoEvento {
    /// The entry of a repeat of this event's message id: nothing more was done for it, so it
    /// has this outcome, except that an event applied now is a `duplicate` for its repeat.
    fn repetido(&self) -> Self {
        let mut entrada = self.clone();
        if entrada.resultado == Caso::Aplicado.codigo() {
            entrada.resultado = Caso::Duplicado.codigo();
        }
        entrada
    }
}

/// The entry of `resultados` for one event.
fn resultado(id: Uuid, desfecho: &Desfecho) -> ResultadoDoEvento {
    let caso = desfecho.caso();
    let mensagem = match caso {
        Caso::Aplicado | Caso::Duplicado => None,
        _ => desfecho.mensagem(),
    };
    let retry_after_s = match desfecho {
        Desfecho::Temporario { tentar_apos, .. } => {
            tentar_apos.map(|espera| espera.as_secs().max(1))
        }
        Desfecho::BancoIndisponivel | Desfecho::Ocupado => Some(Duration::from_secs(1).as_secs()),
        _ => None,
    };
    ResultadoDoEvento {
        id,
        resultado: caso.codigo(),
        mensagem,
        retry_after_s,
    }
}
