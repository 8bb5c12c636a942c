//! The batch route's part of the document: `POST {base}/{tipo}/lote`, its envelope and its
//! per-event outcomes.

use axum::http::StatusCode;
use utoipa::openapi::path::{Operation, OperationBuilder, ParameterBuilder, ParameterIn};
use utoipa::openapi::request_body::RequestBodyBuilder;
use utoipa::openapi::schema::{
    AdditionalProperties, ArrayBuilder, KnownFormat, SchemaFormat, SchemaType,
};
use utoipa::openapi::security::SecurityRequirement;
use utoipa::openapi::{
    ContentBuilder, ObjectBuilder, Ref, RefOr, Required, Response, ResponseBuilder, Schema, Type,
};

use super::{ID_DO_PEDIDO_NA_RESPOSTA, cabecalho, parametro_ce_specversion, parametro_ce_type};
use crate::config::LimiteLote;
use crate::desfecho::Caso;

/// The outcomes an event of a batch can have, with the sender's next step for each.
const RESULTADOS: &[(Caso, &str)] = &[
    (Caso::Aplicado, "applied now (ack)"),
    (
        Caso::Duplicado,
        "already applied, or an equal or older version (ack)",
    ),
    (
        Caso::PayloadInvalido,
        "its payload is not valid JSON for this tipo (dead-letter)",
    ),
    (
        Caso::ChaveInvalida,
        "its natural key cannot be built (dead-letter)",
    ),
    (
        Caso::CorpoGrandeDemais,
        "its payload is over the body limit (dead-letter)",
    ),
    (Caso::Rejeitado, "rejected by the receptor (dead-letter)"),
    (
        Caso::Temporario,
        "temporary failure of the receptor (retry; see `retry_after_s`)",
    ),
    (Caso::Panico, "the receptor panicked (retry)"),
    (
        Caso::BancoIndisponivel,
        "the database failed (retry; see `retry_after_s`)",
    ),
    (
        Caso::Ocupado,
        "no database connection was free in time: the app is overloaded (retry after \
         `retry_after_s`, with fewer requests in flight)",
    ),
];

fn texto() -> ObjectBuilder {
    ObjectBuilder::new().schema_type(Type::String)
}

fn uuid() -> ObjectBuilder {
    texto().format(Some(SchemaFormat::KnownFormat(KnownFormat::Uuid)))
}

/// `MensageriaLote`: the request body.
pub(super) fn esquema_pedido(limite: LimiteLote) -> RefOr<Schema> {
    let evento = ObjectBuilder::new()
        .schema_type(Type::Object)
        .property(
            "id",
            uuid().description(Some(
                "the message id (what the single route takes as `x-request-id`)",
            )),
        )
        .property(
            "correlacao",
            ObjectBuilder::new()
                .schema_type(SchemaType::from_iter([Type::String, Type::Null]))
                .description(Some(
                "the correlation id in force when it was enqueued; messages the receptor enqueues \
                 carry it on (kept when up to 128 printable ASCII characters, the message id is \
                 used otherwise)",
            )),
        )
        .property(
            "traceparent",
            ObjectBuilder::new()
                .schema_type(SchemaType::from_iter([Type::String, Type::Null]))
                .description(Some(
                    "W3C Trace Context `traceparent` of the delivery this event belongs to: the \
                     event's work continues that trace (ignored when invalid)",
                )),
        )
        .property(
            "tracestate",
            ObjectBuilder::new()
                .schema_type(SchemaType::from_iter([Type::String, Type::Null]))
                .description(Some("W3C Trace Context `tracestate` that goes with `traceparent`")),
        )
        .property(
            "payload",
            ObjectBuilder::new()
                .schema_type(SchemaType::AnyValue)
                .description(Some(
                    "the event, as the single route takes it as its body (its schema is that \
                 route's request body); one that does not fit gets `invalid_payload` in its \
                 outcome, and the others are applied",
                )),
        )
        .required("id")
        .required("payload")
        .additional_properties(Some(AdditionalProperties::FreeForm(false)));
    RefOr::T(Schema::Object(
        ObjectBuilder::new()
            .schema_type(Type::Object)
            .property(
                "eventos",
                ArrayBuilder::new()
                    .items(evento)
                    .max_items(Some(limite.eventos))
                    .description(Some("the events, applied in this order")),
            )
            .required("eventos")
            .additional_properties(Some(AdditionalProperties::FreeForm(false)))
            .build(),
    ))
}

/// `MensageriaResultadosDoLote`: the 200's body.
pub(super) fn esquema_resposta() -> RefOr<Schema> {
    let descricao = RESULTADOS
        .iter()
        .map(|(caso, o_que)| format!("`{}`: {o_que}", caso.codigo()))
        .collect::<Vec<_>>()
        .join("; ");
    let resultado = ObjectBuilder::new()
        .schema_type(Type::Object)
        .property("id", uuid().description(Some("the event's message id")))
        .property(
            "resultado",
            texto()
                .enum_values(Some(RESULTADOS.iter().map(|(caso, _)| caso.codigo())))
                .description(Some(descricao)),
        )
        .property("mensagem", texto().description(Some("why it was not applied, for a human")))
        .property(
            "retry_after_s",
            ObjectBuilder::new()
                .schema_type(Type::Integer)
                .minimum(Some(1))
                .description(Some("seconds to wait before sending it again, when the receptor or the database said")),
        )
        .required("id")
        .required("resultado");
    RefOr::T(Schema::Object(
        ObjectBuilder::new()
            .schema_type(Type::Object)
            .property(
                "resultados",
                ArrayBuilder::new().items(resultado).description(Some(
                    "one per event, in the request's order; an `id` sent twice in the batch \
                         is applied once, and its repeat gets the same outcome (`duplicate` for \
                         `applied`)",
                )),
            )
            .required("resultados")
            .build(),
    ))
}

fn corpo(nome: &str) -> ContentBuilder {
    ContentBuilder::new().schema(Some(RefOr::Ref(Ref::from_schema_name(nome))))
}

fn resposta(descricao: &str, esquema: &str) -> Response {
    ResponseBuilder::new()
        .description(descricao)
        .header("x-request-id", cabecalho(ID_DO_PEDIDO_NA_RESPOSTA))
        .content("application/json", corpo(esquema).build())
        .build()
}

/// The batch's `x-request-id` header.
fn parametro_id_do_pedido() -> ParameterBuilder {
    ParameterBuilder::new()
        .name("x-request-id")
        .parameter_in(ParameterIn::Header)
        .required(Required::False)
        .description(Some(
            "the batch's request id, echoed in the answer. Any value is accepted: one of \
             up to 128 printable ASCII characters is kept, any other is replaced by a \
             fresh UUID",
        ))
        .schema(Some(texto()))
}

/// The batch operation of one receptor.
pub(super) fn operacao(tipo: &str, convergente: bool, limite: LimiteLote) -> Operation {
    let regra = if convergente {
        "Convergent: an event is applied when its version is newer than the last one applied \
         for its natural key (versions of one key in one batch are applied in the batch's order)."
    } else {
        "An event applied N times has the effect of applying it once (two events of one key in \
         one batch: the second is a duplicate)."
    };
    let mut operacao = OperationBuilder::new()
        .operation_id(Some(format!("receber_lote_{}", tipo.replace(['.', '-'], "_"))))
        .summary(Some(format!("Receive a batch of `{tipo}` (one transaction, an outcome per event)")))
        .description(Some(format!(
            "Up to {} events of this tipo, at most {} bytes, applied in one transaction: one \
             dedup statement for all, the receptor once per new event, one commit. {regra} An \
             event that is rejected, panics or fails for a while is taken out with its outcome \
             and the others are applied without it.",
            limite.eventos, limite.bytes
        )))
        .parameter(parametro_id_do_pedido())
        .parameter(parametro_ce_type(tipo))
        .parameter(parametro_ce_specversion())
        .tag("mensageria")
        .request_body(Some(
            RequestBodyBuilder::new()
                .description(Some(
                    "the batch, as JSON (`application/json` or any `application/*+json`; 415 \
                     otherwise)",
                ))
                .content("application/json", corpo("MensageriaLote").build())
                .required(Some(Required::True))
                .build(),
        ))
        .security(SecurityRequirement::new("bearer", Vec::<String>::new()))
        .response(
            "200",
            resposta("the batch was read: one outcome per event", "MensageriaResultadosDoLote"),
        )
        .response(
            "400",
            resposta(
                "`invalid_cloudevent`: CloudEvents attributes that do not fit this route \
                 (`ce-type` another tipo, `ce-specversion` not `1.0`, a `ce-*` attribute sent \
                 twice), refused before the body is read; `invalid_batch`: the body is not a \
                 batch envelope; `incomplete_body`: it ended early; nothing applied",
                "MensageriaErro",
            ),
        )
        .response(
            "401",
            ResponseBuilder::new()
                .description("`unauthorized`: missing or invalid bearer token; refused before the body is read")
                .header("x-request-id", cabecalho(ID_DO_PEDIDO_NA_RESPOSTA))
                .header("www-authenticate", cabecalho("`Bearer`: the scheme this endpoint takes"))
                .content("application/json", corpo("MensageriaErro").build())
                .build(),
        )
        .response(
            "413",
            resposta(
                "`payload_too_large`: the body is over the batch's byte limit; \
                 `batch_too_large`: more events than the limit (`maxItems`; refused as soon as \
                 the count passes it, the events after it unread); nothing applied",
                "MensageriaErro",
            ),
        )
        .response(
            "415",
            resposta(
                "`unsupported_media_type`: the body is not declared as JSON; nothing read",
                "MensageriaErro",
            ),
        );
    operacao = operacao.response(
        StatusCode::REQUEST_TIMEOUT.as_u16().to_string(),
        ResponseBuilder::new()
            .description("took longer than the configured time limit (empty body); rolled back; send it again")
            .build(),
    );
    operacao.build()
}
