//! The one handler behind every receptor: authenticate, bound, decode, dedup in the effect's
//! transaction, apply, answer.

use std::panic::AssertUnwindSafe;

use axum::body::Bytes;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, header};
use axum::response::{IntoResponse, Response};
use futures_util::FutureExt;
use mensageria_core::correlacao;
use mensageria_core::operacoes::{self, Recebida};
use mensageria_core::rastreamento::ContextoRastreamento;
use mensageria_core::sqlx::Transaction;
use subtle::ConstantTimeEq;
use tracing::Instrument;
use uuid::Uuid;

use crate::cloudevents;
use crate::desfecho::{Desfecho, atraso_do_efeito};
use crate::{Estado, Receptor, Rejeicao};

/// The longest request id kept; longer ones are replaced by a fresh one.
const TAMANHO_MAXIMO_ID: usize = 128;

/// Handles one delivery for receptor `R`. The route of every `#[receptor]` is this function.
pub(crate) async fn receber<R: Receptor>(
    State(estado): State<Estado<R::Banco>>,
    pedido: Request,
) -> Response {
    let id_pedido = id_do_pedido(pedido.headers());
    let app = std::sync::Arc::clone(&estado.config);
    let (Ok(desfecho) | Err(desfecho)) = responder::<R>(estado, pedido, &id_pedido).await;
    desfecho.contar(&app.app, R::TIPO);
    let mut resposta = desfecho.into_response();
    if let Ok(valor) = HeaderValue::from_str(&id_pedido) {
        resposta.headers_mut().insert("x-request-id", valor);
    }
    resposta
}

/// The steps of one request, in order; the first refusal is the answer (`Err`).
async fn responder<R: Receptor>(
    estado: Estado<R::Banco>,
    pedido: Request,
    id_pedido: &str,
) -> Result<Desfecho, Desfecho> {
    // 1. Who is calling: before any database access, before reading the body.
    if !autorizado(pedido.headers(), &estado.config.tokens) {
        tracing::warn!(
            tipo = R::TIPO,
            request_id = %id_pedido,
            presented = pedido.headers().contains_key(header::AUTHORIZATION),
            "mensageria receptor: missing or invalid bearer token; refused (401)"
        );
        return Err(Desfecho::NaoAutorizado);
    }
    // A CloudEvents binary-mode request must be meant for this route, in a version we read.
    if let Err(motivo) = cloudevents::conferir(pedido.headers(), R::TIPO) {
        tracing::warn!(
            tipo = R::TIPO,
            request_id = %id_pedido,
            error = %motivo,
            "mensageria receptor: CloudEvents attributes do not fit this route; refused (400)"
        );
        return Err(Desfecho::CloudEventsInvalido { motivo });
    }
    // The message id is what the sender said, never an id we made up for the request.
    let id_mensagem = id_do_remetente(pedido.headers())
        .and_then(|v| v.to_str().ok())
        .and_then(|v| Uuid::parse_str(v).ok());
    let correlacao_id = pedido
        .headers()
        .get("x-correlation-id")
        .and_then(|v| v.to_str().ok())
        .filter(|v| id_aceitavel(v))
        .map(str::to_owned)
        .unwrap_or_else(|| id_pedido.to_owned());
    let rastreamento = ContextoRastreamento::de_cabecalhos(|nome| {
        pedido.headers().get(nome).and_then(|v| v.to_str().ok())
    });

    // 2. and 3. How much and in what form.
    let corpo = ler_corpo(pedido, estado.config.limite_corpo, R::TIPO, id_pedido).await?;

    // 4. What: the payload and its identity.
    let evento: R::Evento =
        serde_json::from_slice(&corpo).map_err(|falha| Desfecho::PayloadInvalido {
            tipo: R::TIPO,
            falha,
        })?;
    let chave = R::chave_natural(&evento).map_err(Desfecho::ChaveInvalida)?;
    let recebida = Recebida {
        app: &estado.config.app,
        tipo: R::TIPO,
        chave: chave.como_texto(),
        id_mensagem,
        versao: R::versao(&evento),
    };

    let span = tracing::info_span!(
        "mensageria.receptor",
        tipo = R::TIPO,
        request_id = %id_pedido,
        id_mensagem = ?id_mensagem,
        chave = %chave.como_texto(),
    );
    // The sender's trace goes on here: the function and its effect belong to it.
    if let Some(rastreamento) = &rastreamento {
        rastreamento.continuar(&span);
    }
    let resultado = aplicar::<R>(&estado, recebida, evento, correlacao_id);
    match resultado.instrument(span).await? {
        Resultado::Aplicado => {
            if let Some(id) = id_mensagem {
                atraso_do_efeito(&estado.config.app, R::TIPO, id);
            }
            Ok(Desfecho::Aplicado {
                tipo: R::TIPO,
                id_pedido: id_pedido.to_owned(),
            })
        }
        Resultado::Duplicado => Ok(Desfecho::Duplicado {
            tipo: R::TIPO,
            id_pedido: id_pedido.to_owned(),
        }),
    }
}

/// What the transaction came to when it committed.
pub(crate) enum Resultado {
    /// First arrival (or newer version): the effect was applied and committed.
    Aplicado,
    /// Seen before (or an equal/older version): nothing was done.
    Duplicado,
}

/// Steps 2 and 3: the body, bounded (a declared length over the limit is refused before
/// anything is read), and declared as JSON, as the OpenAPI document says.
pub(crate) async fn ler_corpo(
    pedido: Request,
    limite: usize,
    tipo: &'static str,
    id_pedido: &str,
) -> Result<Bytes, Desfecho> {
    let declarado = pedido
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declarado.is_some_and(|tamanho| tamanho > limite as u64) {
        return Err(Desfecho::CorpoGrandeDemais { limite });
    }
    if cloudevents::estruturado(pedido.headers()) {
        return Err(Desfecho::CloudEventsEstruturado);
    }
    if !e_json(pedido.headers()) {
        return Err(Desfecho::NaoJson);
    }
    axum::body::to_bytes(pedido.into_body(), limite)
        .await
        .map_err(|falha| {
            if passou_do_limite(&falha) {
                Desfecho::CorpoGrandeDemais { limite }
            } else {
                tracing::warn!(tipo, request_id = %id_pedido, error = %falha, "mensageria receptor: the body ended early or broke; refused (400)");
                Desfecho::CorpoIncompleto
            }
        })
}

/// Step 5: dedup and effect, in one transaction of the pool; the receptor's refusal or panic
/// rolls both back.
async fn aplicar<R: Receptor>(
    estado: &Estado<R::Banco>,
    recebida: Recebida<'_>,
    evento: R::Evento,
    correlacao_id: String,
) -> Result<Resultado, Desfecho> {
    let tx = estado.admissao.abrir(&estado.pool).await?;
    aplicar_em::<R>(tx, recebida, evento, correlacao_id).await
}

/// The dedup record and the effect of one event in `tx`, committed together or not at all: a
/// transaction of the pool (the single route) or a savepoint of a batch's transaction (a batch's
/// round after a failure, see `lote.rs`). The one copy of this step.
pub(crate) async fn aplicar_em<R: Receptor>(
    mut tx: Transaction<'_, R::Banco>,
    recebida: Recebida<'_>,
    evento: R::Evento,
    correlacao_id: String,
) -> Result<Resultado, Desfecho> {
    match operacoes::registrar_recebida::<R::Banco>(&mut *tx, recebida).await {
        Ok(true) => {}
        Ok(false) => {
            // Nothing was written: no commit to wait for. The rollback is queued and leaves
            // with the connection's release (or the batch's next statement), off this path.
            drop(tx);
            tracing::info!("mensageria receptor: duplicate, nothing applied");
            return Ok(Resultado::Duplicado);
        }
        Err(falha) => return Err(indisponivel(falha)),
    }
    let efeito = correlacao::com(correlacao_id, R::aplicar(&mut tx, evento));
    match AssertUnwindSafe(efeito).catch_unwind().await {
        Ok(Ok(())) => {
            tx.commit().await.map_err(indisponivel)?;
            Ok(Resultado::Aplicado)
        }
        Ok(Err(Rejeicao::Permanente { motivo })) => {
            drop(tx);
            tracing::warn!(error = %motivo, "mensageria receptor: event rejected");
            Err(Desfecho::Rejeitado { motivo })
        }
        Ok(Err(Rejeicao::Temporaria {
            motivo,
            tentar_apos,
        })) => {
            drop(tx);
            tracing::warn!(error = %motivo, "mensageria receptor: temporary failure");
            Err(Desfecho::Temporario {
                motivo,
                tentar_apos,
            })
        }
        Err(_) => {
            drop(tx);
            tracing::error!("mensageria receptor: the receptor panicked; rolled back");
            Err(Desfecho::Panico)
        }
    }
}

/// A database failure around the receptor: logged here (its text stays in this service's
/// log), answered 503.
pub(crate) fn indisponivel(falha: mensageria_core::sqlx::Error) -> Desfecho {
    tracing::error!(error = %falha, "mensageria receptor: database error; nothing applied");
    Desfecho::BancoIndisponivel
}

/// `Authorization: Bearer <token>` against every accepted token, in constant time: the scheme
/// is case-insensitive (RFC 6750 / RFC 9110), and SHA-256 digests are compared, so the time
/// depends neither on the presented token's length nor on which token matched.
pub(crate) fn autorizado(cabecalhos: &HeaderMap, tokens: &[[u8; 32]]) -> bool {
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
pub(crate) fn id_aceitavel(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= TAMANHO_MAXIMO_ID
        && id.bytes().all(|b| (0x21..=0x7e).contains(&b))
}

/// The sender's id for this request: `x-request-id`, or, when that header is absent, the
/// CloudEvents `ce-id` (what a CloudEvents producer that is not a relay sends).
fn id_do_remetente(cabecalhos: &HeaderMap) -> Option<&HeaderValue> {
    cabecalhos
        .get("x-request-id")
        .or_else(|| cabecalhos.get(cloudevents::ID))
}

pub(crate) fn id_do_pedido(cabecalhos: &HeaderMap) -> String {
    id_do_remetente(cabecalhos)
        .and_then(|v| v.to_str().ok())
        .filter(|id| id_aceitavel(id))
        .map(str::to_owned)
        .unwrap_or_else(|| Uuid::now_v7().to_string())
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
        // A CloudEvents producer sends only `ce-id`; `x-request-id` wins when both are there.
        let mut h = HeaderMap::new();
        h.insert("ce-id", HeaderValue::from_static("1234-1234-1234"));
        assert_eq!(id_do_pedido(&h), "1234-1234-1234");
        h.insert("x-request-id", HeaderValue::from_static("abc-123"));
        assert_eq!(id_do_pedido(&h), "abc-123");
        for hostil in [&b"a b"[..], b"\xff\xfe", &[b'x'; 200], b"a\tb"] {
            let id = id_do_pedido(&com(hostil));
            assert!(Uuid::parse_str(&id).is_ok(), "{hostil:?} -> {id}");
        }
    }
}
