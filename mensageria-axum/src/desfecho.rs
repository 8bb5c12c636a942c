//! Every answer a receptor gives, declared once: [`Desfecho`] (what happened to one request,
//! with its details) and [`Caso`] (the kind of answer: status, stable code, metric label,
//! documented headers and description). The handler answers with a `Desfecho`; the OpenAPI
//! document lists the `Caso`s, so the two cannot disagree.

use std::time::Duration;

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::json;

use crate::ErroChave;

/// Declares [`Caso`] and the list of all its variants, so the list cannot miss one.
macro_rules! casos {
    ($($(#[$doc:meta])* $variante:ident,)*) => {
        /// The kind of an answer: what the OpenAPI document and the metrics know of it.
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        pub(crate) enum Caso {
            $($(#[$doc])* $variante,)*
        }

        impl Caso {
            /// Every kind of answer, in the order a request meets them (the two 200s in the
            /// order their `resultado` values are documented).
            pub(crate) const TODOS: &[Caso] = &[$(Caso::$variante,)*];
        }
    };
}

casos! {
    /// 401: no accepted bearer token.
    NaoAutorizado,
    /// 400: CloudEvents attributes that do not fit the route (`ce-type` another tipo,
    /// `ce-specversion` not `1.0`, a `ce-*` attribute sent twice).
    CloudEventsInvalido,
    /// 413: the body is over the limit.
    CorpoGrandeDemais,
    /// 415: the body is not declared as JSON (or is a CloudEvents structured-mode envelope).
    NaoJson,
    /// 400: the body ended early or the connection broke.
    CorpoIncompleto,
    /// 400: the body is not a valid payload.
    PayloadInvalido,
    /// 422: the natural key cannot be built.
    ChaveInvalida,
    /// 200: first arrival (or newer version): the effect was applied and committed.
    Aplicado,
    /// 200: seen before (or an equal/older version): nothing was done.
    Duplicado,
    /// 422: the receptor rejected the event.
    Rejeitado,
    /// 503: the receptor failed temporarily.
    Temporario,
    /// 500: the receptor panicked.
    Panico,
    /// 503: the database failed around the receptor.
    BancoIndisponivel,
    /// 503: no database connection freed up in time (`Config::com_espera_por_conexao`): the
    /// app is overloaded; nothing was read from the database, nothing applied.
    Ocupado,
    /// 404: no receptor for this tipo (answered by the router, not by a receptor's route).
    TipoDesconhecido,
}

/// A header an answer may carry besides `x-request-id`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Cabecalho {
    /// `WWW-Authenticate: Bearer`.
    WwwAuthenticate,
    /// `Retry-After: <seconds>`.
    RetryAfter,
}

impl Caso {
    /// The HTTP status.
    pub(crate) fn status(self) -> StatusCode {
        match self {
            Self::Aplicado | Self::Duplicado => StatusCode::OK,
            Self::CloudEventsInvalido | Self::CorpoIncompleto | Self::PayloadInvalido => {
                StatusCode::BAD_REQUEST
            }
            Self::NaoAutorizado => StatusCode::UNAUTHORIZED,
            Self::TipoDesconhecido => StatusCode::NOT_FOUND,
            Self::CorpoGrandeDemais => StatusCode::PAYLOAD_TOO_LARGE,
            Self::NaoJson => StatusCode::UNSUPPORTED_MEDIA_TYPE,
            Self::ChaveInvalida | Self::Rejeitado => StatusCode::UNPROCESSABLE_ENTITY,
            Self::Panico => StatusCode::INTERNAL_SERVER_ERROR,
            Self::Temporario | Self::BancoIndisponivel | Self::Ocupado => {
                StatusCode::SERVICE_UNAVAILABLE
            }
        }
    }

    /// The stable code of the body: `resultado` of a 200, `erro` of any other answer.
    pub(crate) fn codigo(self) -> &'static str {
        match self {
            Self::Aplicado => "applied",
            Self::Duplicado => "duplicate",
            Self::NaoAutorizado => "unauthorized",
            Self::CloudEventsInvalido => "invalid_cloudevent",
            Self::CorpoGrandeDemais => "payload_too_large",
            Self::NaoJson => "unsupported_media_type",
            Self::CorpoIncompleto => "incomplete_body",
            Self::PayloadInvalido => "invalid_payload",
            Self::ChaveInvalida => "invalid_key",
            Self::Rejeitado => "rejected",
            Self::Temporario => "temporary",
            Self::Panico => "panic",
            Self::BancoIndisponivel => "database",
            Self::Ocupado => "busy",
            Self::TipoDesconhecido => "unknown_tipo",
        }
    }

    /// The `resultado` label of `mensageria_received_total`: what the receptor's effect came
    /// to. Refusals before the effect (auth, body, payload, key) and database failures are not
    /// counted there (they are logged).
    pub(crate) fn metrica(self) -> Option<&'static str> {
        match self {
            Self::Aplicado
            | Self::Duplicado
            | Self::Rejeitado
            | Self::Temporario
            | Self::Panico => Some(self.codigo()),
            Self::NaoAutorizado
            | Self::CloudEventsInvalido
            | Self::CorpoGrandeDemais
            | Self::NaoJson
            | Self::CorpoIncompleto
            | Self::PayloadInvalido
            | Self::ChaveInvalida
            | Self::BancoIndisponivel
            | Self::Ocupado
            | Self::TipoDesconhecido => None,
        }
    }

    /// The header the answer may carry besides `x-request-id`.
    pub(crate) fn cabecalho(self) -> Option<Cabecalho> {
        match self {
            Self::NaoAutorizado => Some(Cabecalho::WwwAuthenticate),
            Self::Temporario | Self::BancoIndisponivel | Self::Ocupado => {
                Some(Cabecalho::RetryAfter)
            }
            _ => None,
        }
    }

    /// Whether it is a 200, whose body says what was done (`MensageriaResultado`) rather than
    /// what went wrong (`MensageriaErro`).
    pub(crate) fn sucesso(self) -> bool {
        self.status().is_success()
    }

    /// Whether a receptor's route gives it (the 404 comes from the router's catch-all route).
    pub(crate) fn na_rota_do_receptor(self) -> bool {
        self != Self::TipoDesconhecido
    }

    /// What it means for the sender, for the OpenAPI document.
    pub(crate) fn descricao(self) -> &'static str {
        match self {
            Self::Aplicado => "the effect was committed now",
            Self::Duplicado => "already applied (or an equal or older version): nothing done",
            Self::NaoAutorizado => {
                "missing or invalid bearer token; refused before the body is read"
            }
            Self::CloudEventsInvalido => {
                "a CloudEvents `ce-type` that is not this route's tipo, a `ce-specversion` \
                 other than `1.0`, or a `ce-*` attribute sent twice; refused before the body is \
                 read"
            }
            Self::CorpoGrandeDemais => "body over the size limit; nothing read past it",
            Self::NaoJson => {
                "the body is not declared as JSON (`application/json` or `application/*+json`), \
                 or is a CloudEvents structured-mode envelope (`application/cloudevents+json`: \
                 only binary mode is read); nothing read"
            }
            Self::CorpoIncompleto => {
                "the body ended before its Content-Length or the connection broke; nothing applied"
            }
            Self::PayloadInvalido => {
                "the body is not valid JSON for this tipo; nothing applied; dead-lettered by the \
                 relay"
            }
            Self::ChaveInvalida => {
                "its natural key cannot be built (over 1 KiB, for one); dead-lettered"
            }
            Self::Rejeitado => "rejected by the receptor; rolled back; dead-lettered",
            Self::Temporario => {
                "temporary failure of the receptor; nothing applied; retried (honours \
                 Retry-After)"
            }
            Self::Panico => "the receptor panicked; nothing applied; retried",
            Self::BancoIndisponivel => {
                "database unavailable; nothing applied; retried (honours Retry-After)"
            }
            Self::Ocupado => {
                "overloaded: no database connection was free in time; nothing applied; retried \
                 after Retry-After without counting an attempt, with fewer requests in flight"
            }
            Self::TipoDesconhecido => "any tipo this app has no receptor for",
        }
    }
}

/// What became of one request: the answer, with its details. Built by the handler (and the
/// router's 404), turned into the HTTP answer by [`IntoResponse`].
#[derive(Debug)]
pub(crate) enum Desfecho {
    /// See [`Caso::NaoAutorizado`].
    NaoAutorizado,
    /// See [`Caso::CloudEventsInvalido`].
    CloudEventsInvalido {
        /// Which attribute does not fit, and what to send instead.
        motivo: String,
    },
    /// See [`Caso::CorpoGrandeDemais`].
    CorpoGrandeDemais {
        /// The configured limit, in bytes.
        limite: usize,
    },
    /// See [`Caso::NaoJson`].
    NaoJson,
    /// See [`Caso::NaoJson`]: a CloudEvents structured-mode envelope.
    CloudEventsEstruturado,
    /// See [`Caso::CorpoIncompleto`].
    CorpoIncompleto,
    /// See [`Caso::PayloadInvalido`].
    PayloadInvalido {
        /// The receptor's tipo.
        tipo: &'static str,
        /// What serde_json said.
        falha: serde_json::Error,
    },
    /// See [`Caso::ChaveInvalida`].
    ChaveInvalida(ErroChave),
    /// See [`Caso::Duplicado`].
    Duplicado {
        /// The receptor's tipo.
        tipo: &'static str,
        /// The request id, echoed in the body.
        id_pedido: String,
    },
    /// See [`Caso::Aplicado`].
    Aplicado {
        /// The receptor's tipo.
        tipo: &'static str,
        /// The request id, echoed in the body.
        id_pedido: String,
    },
    /// See [`Caso::Rejeitado`].
    Rejeitado {
        /// The receptor's reason.
        motivo: String,
    },
    /// See [`Caso::Temporario`].
    Temporario {
        /// The receptor's reason.
        motivo: String,
        /// When to come back, if the receptor said.
        tentar_apos: Option<Duration>,
    },
    /// See [`Caso::Panico`].
    Panico,
    /// See [`Caso::BancoIndisponivel`].
    BancoIndisponivel,
    /// See [`Caso::Ocupado`].
    Ocupado,
    /// See [`Caso::TipoDesconhecido`].
    TipoDesconhecido {
        /// The tipo asked for, already stripped of control characters and cut short.
        tipo: String,
    },
}

impl Desfecho {
    /// Its kind.
    pub(crate) fn caso(&self) -> Caso {
        match self {
            Self::NaoAutorizado => Caso::NaoAutorizado,
            Self::CloudEventsInvalido { .. } => Caso::CloudEventsInvalido,
            Self::CorpoGrandeDemais { .. } => Caso::CorpoGrandeDemais,
            Self::NaoJson | Self::CloudEventsEstruturado => Caso::NaoJson,
            Self::CorpoIncompleto => Caso::CorpoIncompleto,
            Self::PayloadInvalido { .. } => Caso::PayloadInvalido,
            Self::ChaveInvalida(_) => Caso::ChaveInvalida,
            Self::Duplicado { .. } => Caso::Duplicado,
            Self::Aplicado { .. } => Caso::Aplicado,
            Self::Rejeitado { .. } => Caso::Rejeitado,
            Self::Temporario { .. } => Caso::Temporario,
            Self::Panico => Caso::Panico,
            Self::BancoIndisponivel => Caso::BancoIndisponivel,
            Self::Ocupado => Caso::Ocupado,
            Self::TipoDesconhecido { .. } => Caso::TipoDesconhecido,
        }
    }

    /// Counts it in `mensageria_received_total` when its kind is counted there.
    pub(crate) fn contar(&self, app: &str, tipo: &'static str) {
        if let Some(resultado) = self.caso().metrica() {
            metrics::counter!(
                "mensageria_received_total",
                "app" => app.to_owned(),
                "tipo" => tipo,
                "resultado" => resultado
            )
            .increment(1);
        }
    }

    /// The body: what was done, or the code and a message for a human.
    fn corpo(&self) -> serde_json::Value {
        let codigo = self.caso().codigo();
        match (self, self.mensagem()) {
            (Self::Aplicado { tipo, id_pedido } | Self::Duplicado { tipo, id_pedido }, _) => {
                json!({ "resultado": codigo, "tipo": tipo, "request_id": id_pedido })
            }
            (_, mensagem) => json!({ "erro": codigo, "mensagem": mensagem }),
        }
    }

    /// The message for a human of an answer that is not a 200 (`None` for a 200).
    pub(crate) fn mensagem(&self) -> Option<String> {
        let mensagem = match self {
            Self::Aplicado { .. } | Self::Duplicado { .. } => return None,
            Self::NaoAutorizado => "missing or invalid bearer token".to_owned(),
            Self::CorpoGrandeDemais { limite } => {
                format!("body over {limite} bytes; raise `Config::com_limite_corpo` or send less")
            }
            Self::NaoJson => "send the event as JSON: `Content-Type: application/json`".to_owned(),
            Self::CloudEventsEstruturado => {
                "CloudEvents structured mode is not supported: send binary mode, the event's data \
                 as the body with `Content-Type: application/json` and its attributes as `ce-*` \
                 headers"
                    .to_owned()
            }
            Self::CorpoIncompleto => {
                "the body ended before its Content-Length or the connection broke; nothing applied"
                    .to_owned()
            }
            Self::PayloadInvalido { tipo, falha } => {
                format!("payload is not a valid `{tipo}`: {falha}")
            }
            Self::ChaveInvalida(falha) => falha.to_string(),
            Self::CloudEventsInvalido { motivo }
            | Self::Rejeitado { motivo }
            | Self::Temporario { motivo, .. } => motivo.clone(),
            Self::Panico => "the receptor panicked; nothing was applied".to_owned(),
            Self::BancoIndisponivel => "database unavailable; retry later".to_owned(),
            Self::Ocupado => {
                "overloaded: no database connection was free in time; nothing applied; retry \
                 later, with fewer requests in flight"
                    .to_owned()
            }
            Self::TipoDesconhecido { tipo } => {
                format!("this app has no receptor for tipo `{tipo}`")
            }
        };
        Some(mensagem)
    }

    /// The value of the header of its kind ([`Caso::cabecalho`]), if this answer carries it.
    fn valor_do_cabecalho(&self) -> Option<HeaderValue> {
        match self {
            Self::NaoAutorizado => Some(HeaderValue::from_static("Bearer")),
            Self::BancoIndisponivel | Self::Ocupado => Some(HeaderValue::from_static("1")),
            Self::Temporario { tentar_apos, .. } => {
                tentar_apos.map(|espera| HeaderValue::from(espera.as_secs().max(1)))
            }
            _ => None,
        }
    }
}

impl IntoResponse for Desfecho {
    fn into_response(self) -> Response {
        let caso = self.caso();
        let mut resposta = (caso.status(), axum::Json(self.corpo())).into_response();
        if let (Some(cabecalho), Some(valor)) = (caso.cabecalho(), self.valor_do_cabecalho()) {
            let nome = match cabecalho {
                Cabecalho::WwwAuthenticate => header::WWW_AUTHENTICATE,
                Cabecalho::RetryAfter => header::RETRY_AFTER,
            };
            resposta.headers_mut().insert(nome, valor);
        }
        resposta
    }
}

/// Records `mensageria_effect_lag_seconds` for an event of `tipo` whose effect has just
/// committed: its age, from the enqueue instant its UUIDv7 message id carries (the sender's
/// clock) to now (this receiver's clock). An id without a timestamp records nothing; a negative
/// age (clocks apart) records 0.
pub(crate) fn atraso_do_efeito(app: &str, tipo: &'static str, id: uuid::Uuid) {
    let Some((segundos, nanos)) = id.get_timestamp().map(|t| t.to_unix()) else {
        return;
    };
    let enfileirada = std::time::UNIX_EPOCH + std::time::Duration::new(segundos, nanos);
    let idade = std::time::SystemTime::now()
        .duration_since(enfileirada)
        .unwrap_or_default();
    metrics::histogram!("mensageria_effect_lag_seconds", "app" => app.to_owned(), "tipo" => tipo)
        .record(idade.as_secs_f64());
}

#[cfg(test)]
mod testes {
    use super::*;

    #[test]
    fn codigos_sao_unicos_e_cada_caso_esta_na_lista() {
        let mut codigos: Vec<_> = Caso::TODOS.iter().map(|c| c.codigo()).collect();
        codigos.sort_unstable();
        codigos.dedup();
        assert_eq!(codigos.len(), Caso::TODOS.len());
    }

    #[test]
    fn so_o_que_tem_cabecalho_o_envia() {
        let desfechos = [
            Desfecho::NaoAutorizado,
            Desfecho::BancoIndisponivel,
            Desfecho::Ocupado,
            Desfecho::Temporario {
                motivo: "x".into(),
                tentar_apos: Some(Duration::from_millis(10)),
            },
            Desfecho::Panico,
        ];
        for desfecho in desfechos {
            let caso = desfecho.caso();
            let tem = desfecho.valor_do_cabecalho().is_some();
            assert_eq!(tem, caso.cabecalho().is_some(), "{caso:?}");
        }
    }
}
