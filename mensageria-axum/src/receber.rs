//! The one handler behind every receptor: authenticate, bound, decode, dedup in the effect's
//! transaction, apply, answer.

use std::panic::AssertUnwindSafe;

use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use futures_util::FutureExt;
use mensageria_core::correlacao;
use mensageria_core::operacoes::{self, Recebida};
use serde_json::json;
use subtle::ConstantTimeEq;
use tracing::Instrument;
use uuid::Uuid;

use crate::{Estado, Receptor, Rejeicao};

/// The longest request id kept; longer ones are replaced by a fresh one.
const TAMANHO_MAXIMO_ID: usize = 128;

/// What a receptor did with one request: the body of every answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Resultado {
    /// First arrival (or newer version): the effect was applied and committed.
    Aplicado,
    /// Seen before (or an equal/older version): nothing was done.
    Duplicado,
}

impl Resultado {
    fn texto(self) -> &'static str {
        match self {
            Self::Aplicado => "applied",
            Self::Duplicado => "duplicate",
        }
    }
}

/// Handles one delivery for receptor `R`. The route of every `#[receptor]` is this function.
pub async fn receber<R: Receptor>(
    State(estado): State<Estado<R::Banco>>,
    pedido: Request,
) -> Response {
    let id_pedido = id_do_pedido(pedido.headers());
    let mut resposta = responder::<R>(estado, pedido, &id_pedido).await;
    if let Ok(valor) = HeaderValue::from_str(&id_pedido) {
        resposta.headers_mut().insert("x-request-id", valor);
    }
    resposta
}

async fn responder<R: Receptor>(
    estado: Estado<R::Banco>,
    pedido: Request,
    id_pedido: &str,
) -> Response {
    // 1. Who is calling: before any database access, before reading the body.
    if !autorizado(pedido.headers(), &estado.config.tokens) {
        tracing::warn!(
            tipo = R::TIPO,
            request_id = %id_pedido,
            presented = pedido.headers().contains_key(header::AUTHORIZATION),
            "mensageria receptor: missing or invalid bearer token; refused (401)"
        );
        let mut resposta = erro(
            StatusCode::UNAUTHORIZED,
            "unauthorized",
            "missing or invalid bearer token",
        );
        resposta
            .headers_mut()
            .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
        return resposta;
    }
    // The message id is what the sender said, never an id we made up for the request.
    let id_mensagem = pedido
        .headers()
        .get("x-request-id")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| Uuid::parse_str(v).ok());
    let correlacao_id = pedido
        .headers()
        .get("x-correlation-id")
        .and_then(|v| v.to_str().ok())
        .filter(|v| id_aceitavel(v))
        .map(str::to_owned)
        .unwrap_or_else(|| id_pedido.to_owned());

    // 2. How much: the body, bounded. A declared length over the limit is refused before
    // anything is read.
    let declarado = pedido
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declarado.is_some_and(|tamanho| tamanho > estado.config.limite_corpo as u64) {
        return muito_grande(estado.config.limite_corpo);
    }
    // 3. In what form: JSON, as the OpenAPI document says.
    if !e_json(pedido.headers()) {
        return erro(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "unsupported_media_type",
            "send the event as JSON: `Content-Type: application/json`",
        );
    }
    let corpo = match axum::body::to_bytes(pedido.into_body(), estado.config.limite_corpo).await {
        Ok(corpo) => corpo,
        Err(falha) if passou_do_limite(&falha) => {
            return muito_grande(estado.config.limite_corpo);
        }
        Err(falha) => {
            tracing::warn!(tipo = R::TIPO, request_id = %id_pedido, error = %falha, "mensageria receptor: the body ended early or broke; refused (400)");
            return erro(
                StatusCode::BAD_REQUEST,
                "incomplete_body",
                "the body ended before its Content-Length or the connection broke; nothing applied",
            );
        }
    };

    // 4. What: the payload and its identity.
    let evento: R::Evento = match serde_json::from_slice(&corpo) {
        Ok(evento) => evento,
        Err(falha) => {
            return erro(
                StatusCode::BAD_REQUEST,
                "invalid_payload",
                &format!("payload is not a valid `{}`: {falha}", R::TIPO),
            );
        }
    };
    let chave = match R::chave_natural(&evento) {
        Ok(chave) => chave,
        Err(falha) => {
            return erro(
                StatusCode::UNPROCESSABLE_ENTITY,
                "invalid_key",
                &falha.to_string(),
            );
        }
    };
    let versao = R::versao(&evento);

    let span = tracing::info_span!(
        "mensageria.receptor",
        tipo = R::TIPO,
        request_id = %id_pedido,
        id_mensagem = ?id_mensagem,
        chave = %chave.como_texto(),
    );
    async move {
        // 5. Dedup and effect, in one transaction.
        let mut tx = match estado.pool.begin().await {
            Ok(tx) => tx,
            Err(falha) => return indisponivel(&falha),
        };
        let recebida = Recebida {
            tipo: R::TIPO,
            chave: chave.como_texto(),
            id_mensagem,
            versao,
        };
        match operacoes::registrar_recebida::<R::Banco>(&mut *tx, recebida).await {
            Ok(true) => {}
            Ok(false) => {
                let _ = tx.commit().await;
                tracing::info!("mensageria receptor: duplicate, nothing applied");
                metrics_resultado(R::TIPO, "duplicate");
                return sucesso(Resultado::Duplicado, R::TIPO, id_pedido);
            }
            Err(falha) => return indisponivel(&falha),
        }
        let efeito = correlacao::com(correlacao_id, R::aplicar(&mut tx, evento));
        match AssertUnwindSafe(efeito).catch_unwind().await {
            Ok(Ok(())) => match tx.commit().await {
                Ok(()) => {
                    metrics_resultado(R::TIPO, "applied");
                    sucesso(Resultado::Aplicado, R::TIPO, id_pedido)
                }
                Err(falha) => indisponivel(&falha),
            },
            Ok(Err(Rejeicao::Permanente { motivo })) => {
                drop(tx);
                tracing::warn!(motivo = %motivo, "mensageria receptor: event rejected");
                metrics_resultado(R::TIPO, "rejected");
                erro(StatusCode::UNPROCESSABLE_ENTITY, "rejected", &motivo)
            }
            Ok(Err(Rejeicao::Temporaria {
                motivo,
                tentar_apos,
            })) => {
                drop(tx);
                tracing::warn!(motivo = %motivo, "mensageria receptor: temporary failure");
                metrics_resultado(R::TIPO, "temporary");
                let mut resposta = erro(StatusCode::SERVICE_UNAVAILABLE, "temporary", &motivo);
                if let Some(espera) = tentar_apos {
                    resposta.headers_mut().insert(
                        header::RETRY_AFTER,
                        HeaderValue::from(espera.as_secs().max(1)),
                    );
                }
                resposta
            }
            Err(_) => {
                drop(tx);
                tracing::error!("mensageria receptor: the receptor panicked; rolled back");
                metrics_resultado(R::TIPO, "panic");
                erro(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    "panic",
                    "the receptor panicked; nothing was applied",
                )
            }
        }
    }
    .instrument(span)
    .await
}

fn metrics_resultado(tipo: &'static str, resultado: &'static str) {
    metrics::counter!("mensageria_received_total", "tipo" => tipo, "resultado" => resultado)
        .increment(1);
}

/// `Authorization: Bearer <token>` against every accepted token, in constant time: the scheme
/// is case-insensitive (RFC 6750 / RFC 9110), and SHA-256 digests are compared, so the time
/// depends neither on the presented token's length nor on which token matched.
fn autorizado(cabecalhos: &HeaderMap, tokens: &[[u8; 32]]) -> bool {
    let Some(valor) = cabecalhos
        .get(header::AUTHORIZATION)
        .map(HeaderValue::as_bytes)
    else {
        return false;
    };
    let Some(apresentado) = credencial_bearer(valor) else {
        return false;
    };
    let resumo = crate::config::resumo_do_token(apresentado);
    tokens.iter().fold(false, |achou, token| {
        achou | bool::from(token.ct_eq(&resumo))
    })
}

/// The token of `Bearer <token>`, whatever the scheme's case and however many spaces follow.
fn credencial_bearer(valor: &[u8]) -> Option<&[u8]> {
    const ESQUEMA: &[u8] = b"bearer";
    if valor.len() <= ESQUEMA.len() || !valor[..ESQUEMA.len()].eq_ignore_ascii_case(ESQUEMA) {
        return None;
    }
    let resto = &valor[ESQUEMA.len()..];
    let espacos = resto.iter().take_while(|&&b| b == b' ').count();
    let token = &resto[espacos..];
    (espacos > 0 && !token.is_empty()).then_some(token)
}

/// Whether the request says its body is JSON (`application/json` or `application/*+json`,
/// parameters such as `charset` allowed).
fn e_json(cabecalhos: &HeaderMap) -> bool {
    let Some(valor) = cabecalhos
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
    else {
        return false;
    };
    let tipo = valor.split(';').next().unwrap_or("").trim();
    let Some((principal, sub)) = tipo.split_once('/') else {
        return false;
    };
    principal.eq_ignore_ascii_case("application")
        && (sub.eq_ignore_ascii_case("json")
            || sub.len() > 5 && sub[sub.len() - 5..].eq_ignore_ascii_case("+json"))
}

/// Whether reading the body failed because it went over the limit (413), rather than because
/// it ended early or the connection broke (400).
fn passou_do_limite(falha: &axum::Error) -> bool {
    let mut fonte: Option<&(dyn std::error::Error + 'static)> = Some(falha);
    while let Some(erro) = fonte {
        if erro.is::<http_body_util::LengthLimitError>() {
            return true;
        }
        fonte = erro.source();
    }
    false
}

/// A request id is kept when it is short and printable ASCII; otherwise a fresh one is made.
fn id_aceitavel(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= TAMANHO_MAXIMO_ID
        && id.bytes().all(|b| (0x21..=0x7e).contains(&b))
}

fn id_do_pedido(cabecalhos: &HeaderMap) -> String {
    cabecalhos
        .get("x-request-id")
        .and_then(|v| v.to_str().ok())
        .filter(|id| id_aceitavel(id))
        .map(str::to_owned)
        .unwrap_or_else(|| Uuid::now_v7().to_string())
}

fn sucesso(resultado: Resultado, tipo: &str, id_pedido: &str) -> Response {
    let corpo = json!({ "resultado": resultado.texto(), "tipo": tipo, "request_id": id_pedido });
    (StatusCode::OK, axum::Json(corpo)).into_response()
}

pub(crate) fn erro(status: StatusCode, codigo: &str, mensagem: &str) -> Response {
    let corpo = json!({ "erro": codigo, "mensagem": mensagem });
    (status, axum::Json(corpo)).into_response()
}

fn muito_grande(limite: usize) -> Response {
    erro(
        StatusCode::PAYLOAD_TOO_LARGE,
        "payload_too_large",
        &format!("body over {limite} bytes; raise `Config::com_limite_corpo` or send less"),
    )
}

fn indisponivel(falha: &mensageria_core::sqlx::Error) -> Response {
    tracing::error!(error = %falha, "mensageria receptor: database error; nothing applied");
    let mut resposta = erro(
        StatusCode::SERVICE_UNAVAILABLE,
        "database",
        "database unavailable; retry later",
    );
    resposta
        .headers_mut()
        .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
    resposta
}

#[cfg(test)]
mod testes {
    use super::*;

    #[test]
    fn bearer_confere_qualquer_token_aceito() {
        let tokens: Vec<[u8; 32]> = ["novo", "antigo"]
            .iter()
            .map(|t| crate::config::resumo_do_token(t.as_bytes()))
            .collect();
        let com = |v: &str| {
            let mut h = HeaderMap::new();
            h.insert(header::AUTHORIZATION, HeaderValue::from_str(v).unwrap());
            h
        };
        for bom in [
            "Bearer novo",
            "Bearer antigo",
            "bearer novo",
            "BEARER  novo",
        ] {
            assert!(autorizado(&com(bom), &tokens), "{bom}");
        }
        for ruim in [
            "Bearer outro",
            "Basic novo",
            "Bearer ",
            "Bearer novox",
            "Bearernovo",
            "novo",
            "Bearer nov",
        ] {
            assert!(!autorizado(&com(ruim), &tokens), "{ruim}");
        }
        assert!(!autorizado(&HeaderMap::new(), &tokens));
        assert!(!autorizado(&com("Bearer x"), &[]));
    }

    #[test]
    fn so_json_e_aceito() {
        let com = |v: &str| {
            let mut h = HeaderMap::new();
            h.insert(header::CONTENT_TYPE, HeaderValue::from_str(v).unwrap());
            h
        };
        for bom in [
            "application/json",
            "Application/JSON; charset=utf-8",
            "application/cloudevents+json",
        ] {
            assert!(e_json(&com(bom)), "{bom}");
        }
        for ruim in [
            "text/plain",
            "text/html",
            "application/xml",
            "json",
            "+json",
            "",
        ] {
            assert!(!e_json(&com(ruim)), "{ruim}");
        }
        assert!(!e_json(&HeaderMap::new()));
    }

    #[test]
    fn id_do_pedido_hostil_e_trocado() {
        let com = |v: &[u8]| {
            let mut h = HeaderMap::new();
            h.insert("x-request-id", HeaderValue::from_bytes(v).unwrap());
            h
        };
        assert_eq!(id_do_pedido(&com(b"abc-123")), "abc-123");
        for hostil in [&b"a b"[..], b"\xff\xfe", &[b'x'; 200], b"a\tb"] {
            let id = id_do_pedido(&com(hostil));
            assert!(Uuid::parse_str(&id).is_ok(), "{hostil:?} -> {id}");
        }
    }
}
