//! The OpenAPI document of the receptores: one `POST` per receptor, its payload's schema, its
//! answers, its batch form (`openapi/lote.rs`), and the Bearer scheme. Served as JSON; no UI, nothing fetched.

use std::collections::BTreeMap;
use std::marker::PhantomData;

use axum::http::StatusCode;

use utoipa::openapi::path::{
    HttpMethod, OperationBuilder, ParameterBuilder, ParameterIn, PathItem, PathsBuilder,
};
use utoipa::openapi::request_body::{RequestBody, RequestBodyBuilder};
use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityRequirement, SecurityScheme};
use utoipa::openapi::{
    ComponentsBuilder, ContentBuilder, Header, HeaderBuilder, InfoBuilder, ObjectBuilder, OpenApi,
    OpenApiBuilder, RefOr, Required, Response, ResponseBuilder, Schema, Type,
};

use crate::desfecho::{Cabecalho, Caso};

/// A payload's schema and the component schemas it refers to.
///
/// `#[receptor]` fills it from the payload type's `utoipa::ToSchema` (utoipa 5, the version this
/// crate uses): `#[derive(serde::Deserialize, utoipa::ToSchema)]` on the payload publishes its
/// schema, doc comments and `#[schema(..)]` attributes included, in the OpenAPI document. A
/// payload type without it is documented as "schema not published", with no schema.
#[derive(Clone)]
pub struct EsquemaEvento {
    /// The schema of the request body; `None` when the payload type does not derive
    /// `utoipa::ToSchema`: the document then says the schema is not published, and gives the
    /// body no schema rather than one that would call any JSON value valid.
    pub esquema: Option<RefOr<Schema>>,
    /// Named schemas it refers to.
    pub componentes: Vec<(String, RefOr<Schema>)>,
}

/// Picks the payload's own schema when it implements `utoipa::ToSchema`, "not published"
/// otherwise (autoref specialization: the inherent method wins when its bound holds).
#[doc(hidden)]
pub struct Sonda<T>(PhantomData<T>);

impl<T> Sonda<T> {
    #[doc(hidden)]
    pub fn new() -> Self {
        Self(PhantomData)
    }
}

impl<T> Default for Sonda<T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T: utoipa::ToSchema> Sonda<T> {
    #[doc(hidden)]
    pub fn esquema(&self) -> EsquemaEvento {
        let mut componentes = Vec::new();
        T::schemas(&mut componentes);
        let nome = T::name();
        let esquema = if nome.is_empty() {
            T::schema()
        } else {
            componentes.push((nome.to_string(), T::schema()));
            RefOr::Ref(utoipa::openapi::Ref::from_schema_name(nome))
        };
        EsquemaEvento {
            esquema: Some(esquema),
            componentes,
        }
    }
}

#[doc(hidden)]
pub trait EsquemaGenerico {
    /// The payload's schema, or none.
    fn esquema(&self) -> EsquemaEvento;
}

/// A payload without `ToSchema`: its schema is not published. The document says so and gives
/// the body no schema, so it never calls valid a value the type refuses.
impl<T> EsquemaGenerico for &Sonda<T> {
    fn esquema(&self) -> EsquemaEvento {
        EsquemaEvento {
            esquema: None,
            componentes: Vec::new(),
        }
    }
}

/// The body of every 200: what was done.
fn esquema_resultado() -> RefOr<Schema> {
    let texto = || ObjectBuilder::new().schema_type(Type::String);
    RefOr::T(Schema::Object(
        ObjectBuilder::new()
            .schema_type(Type::Object)
            .property(
                "resultado",
                texto()
                    .enum_values(Some(casos(Caso::sucesso).map(Caso::codigo)))
                    .description(Some(descricao_dos_codigos(casos(Caso::sucesso)))),
            )
            .property("tipo", texto())
            .property("request_id", texto())
            .required("resultado")
            .required("tipo")
            .required("request_id")
            .build(),
    ))
}

/// The body of every error answer.
fn esquema_erro() -> RefOr<Schema> {
    let texto = || ObjectBuilder::new().schema_type(Type::String);
    RefOr::T(Schema::Object(
        ObjectBuilder::new()
            .schema_type(Type::Object)
            .property(
                "erro",
                texto().description(Some(format!(
                    "a stable code: {}",
                    casos(|caso| !caso.sucesso())
                        .map(|caso| {
                            let status = caso.status().as_u16();
                            if caso.na_rota_do_receptor() {
                                format!("{} ({status})", caso.codigo())
                            } else {
                                format!("{} ({status}, {})", caso.codigo(), caso.descricao())
                            }
                        })
                        .collect::<Vec<_>>()
                        .join(", ")
                ))),
            )
            .property(
                "mensagem",
                texto().description(Some("what went wrong, for a human")),
            )
            .required("erro")
            .required("mensagem")
            .build(),
    ))
}

/// A header's schema: a string.
fn cabecalho(descricao: &str) -> Header {
    HeaderBuilder::new()
        .schema(ObjectBuilder::new().schema_type(Type::String))
        .description(Some(descricao))
        .build()
}

const ID_DO_PEDIDO_NA_RESPOSTA: &str = "the request id: the `x-request-id` sent (or the CloudEvents \
     `ce-id` when there is no `x-request-id`), when kept, otherwise a fresh UUID";

/// The kinds of answer (in the order a request meets them) that pass `filtro`.
fn casos(filtro: fn(Caso) -> bool) -> impl Iterator<Item = Caso> {
    Caso::TODOS
        .iter()
        .copied()
        .filter(move |caso| filtro(*caso))
}

/// "`code`: what it means; `code`: ..." for `casos`.
fn descricao_dos_codigos(casos: impl Iterator<Item = Caso>) -> String {
    casos
        .map(|caso| format!("`{}`: {}", caso.codigo(), caso.descricao()))
        .collect::<Vec<_>>()
        .join("; ")
}

/// The answers of a receptor's route, one per status, each built from the [`Caso`]s that give
/// it, so the document says what the handler does; plus the 408 of the time limit, which
/// answers instead of the handler (empty body, no request id).
fn respostas() -> Vec<(String, Response)> {
    let mut por_status: BTreeMap<u16, Vec<Caso>> = BTreeMap::new();
    for caso in casos(Caso::na_rota_do_receptor) {
        por_status
            .entry(caso.status().as_u16())
            .or_default()
            .push(caso);
    }
    let mut respostas: Vec<(String, Response)> = por_status
        .into_iter()
        .map(|(status, casos)| (status.to_string(), resposta(&casos)))
        .collect();
    respostas.push((
        StatusCode::REQUEST_TIMEOUT.as_u16().to_string(),
        ResponseBuilder::new()
            .description(
                "took longer than the configured time limit (empty body); rolled back; retried",
            )
            .build(),
    ));
    respostas
}

/// One status's answer: its codes and what they mean, its body's schema and its headers.
fn resposta(casos: &[Caso]) -> Response {
    let corpo = if casos.iter().all(|caso| caso.sucesso()) {
        "MensageriaResultado"
    } else {
        "MensageriaErro"
    };
    let mut resposta = ResponseBuilder::new()
        .description(descricao_dos_codigos(casos.iter().copied()))
        .header("x-request-id", cabecalho(ID_DO_PEDIDO_NA_RESPOSTA))
        .content(
            "application/json",
            ContentBuilder::new()
                .schema(Some(RefOr::Ref(utoipa::openapi::Ref::from_schema_name(
                    corpo,
                ))))
                .build(),
        );
    let mut cabecalhos: Vec<Cabecalho> = casos.iter().filter_map(|caso| caso.cabecalho()).collect();
    cabecalhos.dedup();
    for extra in cabecalhos {
        resposta = match extra {
            Cabecalho::WwwAuthenticate => resposta.header(
                "www-authenticate",
                cabecalho("`Bearer`: the scheme this endpoint takes"),
            ),
            Cabecalho::RetryAfter => resposta.header(
                "retry-after",
                HeaderBuilder::new()
                    .schema(
                        ObjectBuilder::new()
                            .schema_type(Type::String)
                            .pattern(Some("^[0-9]+$")),
                    )
                    .description(Some(
                        "seconds to wait before retrying, when the receptor or the database said",
                    ))
                    .build(),
            ),
        };
    }
    resposta.build()
}

/// The `ce-type` header of the route of `tipo` (single and batch).
fn parametro_ce_type(tipo: &str) -> ParameterBuilder {
    ParameterBuilder::new()
        .name("ce-type")
        .parameter_in(ParameterIn::Header)
        .required(Required::False)
        .description(Some(
            "CloudEvents binary mode: the event type, which must be this route's tipo, sent once \
             (400 `invalid_cloudevent` otherwise)",
        ))
        .schema(Some(
            ObjectBuilder::new()
                .schema_type(Type::String)
                .enum_values(Some([tipo])),
        ))
}

/// The `ce-specversion` header (single and batch routes).
fn parametro_ce_specversion() -> ParameterBuilder {
    ParameterBuilder::new()
        .name("ce-specversion")
        .parameter_in(ParameterIn::Header)
        .required(Required::False)
        .description(Some(
            "CloudEvents binary mode: the CloudEvents version, which must be `1.0`, sent once \
             (400 `invalid_cloudevent` otherwise)",
        ))
        .schema(Some(
            ObjectBuilder::new()
                .schema_type(Type::String)
                .enum_values(Some(["1.0"])),
        ))
}

/// The document for `receptores` mounted under `base`.
pub(crate) fn documento<'a>(
    app: &str,
    base: &str,
    limite_lote: crate::config::LimiteLote,
    receptores: impl IntoIterator<Item = &'a crate::receptor::ReceptorRegistrado>,
) -> OpenApi {
    let mut caminhos = PathsBuilder::new();
    let mut componentes = componentes_comuns(limite_lote);
    let respostas = respostas();
    for receptor in receptores {
        let EsquemaEvento {
            esquema,
            componentes: nomeados,
        } = (receptor.esquema)();
        for (nome, esquema) in nomeados {
            componentes = componentes.schema(nome, esquema);
        }
        let operacao = operacao_do_receptor(receptor, esquema, &respostas);
        caminhos = caminhos
            .path(
                format!("{base}/{}", receptor.tipo),
                PathItem::new(HttpMethod::Post, operacao),
            )
            .path(
                format!("{base}/{}/lote", receptor.tipo),
                PathItem::new(
                    HttpMethod::Post,
                    lote::operacao(receptor.tipo, receptor.convergente, limite_lote),
                ),
            );
    }
    OpenApiBuilder::new()
        .info(
            InfoBuilder::new()
                .title(format!("mensageria receptores of {app}"))
                .description(Some(format!(
                    "The receptores of receiving app `{app}`: its dedup records, keyed by app, \
                     tipo and natural key, are its own (another app receiving the same tipo on \
                     the same schema applies every event too)."
                )))
                .version(env!("CARGO_PKG_VERSION"))
                .extensions(Some(
                    utoipa::openapi::extensions::ExtensionsBuilder::new()
                        .add("x-mensageria-app", app)
                        .build(),
                ))
                .build(),
        )
        .paths(caminhos.build())
        .components(Some(componentes.build()))
        .build()
}

/// The components of every document, whatever its receptores: the Bearer scheme, the bodies of
/// the answers and the batch's request and answer.
fn componentes_comuns(limite_lote: crate::config::LimiteLote) -> ComponentsBuilder {
    ComponentsBuilder::new()
        .security_scheme("bearer", esquema_bearer())
        .schema("MensageriaResultado", esquema_resultado())
        .schema("MensageriaErro", esquema_erro())
        .schema("MensageriaLote", lote::esquema_pedido(limite_lote))
        .schema("MensageriaResultadosDoLote", lote::esquema_resposta())
}

/// The Bearer scheme every route takes.
fn esquema_bearer() -> SecurityScheme {
    SecurityScheme::Http(
        HttpBuilder::new()
            .scheme(HttpAuthScheme::Bearer)
            .description(Some(
                "`Authorization: Bearer <token>`, any of the tokens configured on the \
                 receiving app (several while one is rotated); the scheme name is \
                 case-insensitive. Checked before the body is read.",
            ))
            .build(),
    )
}

/// The `POST` of `receptor`'s single route: what it does, its headers, its body (of schema
/// `esquema`, when published), its security and its `respostas`.
fn operacao_do_receptor(
    receptor: &crate::receptor::ReceptorRegistrado,
    esquema: Option<RefOr<Schema>>,
    respostas: &[(String, Response)],
) -> OperationBuilder {
    let operacao = OperationBuilder::new()
        .operation_id(Some(format!(
            "receber_{}",
            receptor.tipo.replace(['.', '-'], "_")
        )))
        .summary(Some(format!(
            "Receive `{}` (idempotent by natural key)",
            receptor.tipo
        )))
        .description(Some(descricao_da_operacao(receptor.convergente)))
        .parameter(parametro_x_request_id())
        .parameter(parametro_x_correlation_id())
        .parameter(parametro_ce_id())
        .parameter(parametro_ce_type(receptor.tipo))
        .parameter(parametro_ce_specversion())
        .tag("mensageria")
        .request_body(Some(corpo_do_pedido(esquema)))
        .security(SecurityRequirement::new("bearer", Vec::<String>::new()));
    respostas
        .iter()
        .cloned()
        .fold(operacao, |operacao, (status, resposta)| {
            operacao.response(status, resposta)
        })
}

/// What a receptor's route promises about repeats: convergent (by version) or idempotent.
fn descricao_da_operacao(convergente: bool) -> &'static str {
    if convergente {
        "Delivered at least once by a mensageria relay. Convergent: an event is applied \
         when its version is newer than the last one applied for its natural key; an \
         equal or older version answers 200 with `duplicate` and changes nothing."
    } else {
        "Delivered at least once by a mensageria relay. The same event applied N times has \
         the effect of applying it once: a repeat answers 200 with `duplicate`."
    }
}

/// The `x-request-id` header of the single route.
fn parametro_x_request_id() -> ParameterBuilder {
    ParameterBuilder::new()
        .name("x-request-id")
        .parameter_in(ParameterIn::Header)
        .required(Required::False)
        .description(Some(
            "the message id (the relay sends it), carried into the logs and echoed \
             in the answer. Any value is accepted: one of up to 128 printable ASCII \
             characters is kept, any other is replaced by a fresh UUID",
        ))
        .schema(Some(ObjectBuilder::new().schema_type(Type::String)))
}

/// The `x-correlation-id` header of the single route.
fn parametro_x_correlation_id() -> ParameterBuilder {
    ParameterBuilder::new()
        .name("x-correlation-id")
        .parameter_in(ParameterIn::Header)
        .required(Required::False)
        .description(Some(
            "the correlation id the relay propagates; messages the receptor \
             enqueues carry it on. Any value is accepted: one of up to 128 printable \
             ASCII characters is kept, the request id is used otherwise",
        ))
        .schema(Some(ObjectBuilder::new().schema_type(Type::String)))
}

/// The `ce-id` header of the single route.
fn parametro_ce_id() -> ParameterBuilder {
    ParameterBuilder::new()
        .name("ce-id")
        .parameter_in(ParameterIn::Header)
        .required(Required::False)
        .description(Some(
            "CloudEvents binary mode (the relay sends it, any CloudEvents producer \
             may): the event id, taken as the message and request id when there is \
             no `x-request-id`",
        ))
        .schema(Some(ObjectBuilder::new().schema_type(Type::String)))
}

/// The request body of the single route: one event of schema `esquema`, as JSON. Without a
/// schema (a payload type without `utoipa::ToSchema`), the body has none and its description
/// says so.
fn corpo_do_pedido(esquema: Option<RefOr<Schema>>) -> RequestBody {
    const CORPO: &str = "the event, as JSON: `Content-Type: application/json` or any \
         `application/*+json` (415 otherwise, and for a CloudEvents structured-mode envelope, \
         `application/cloudevents+json`: the body is the event's data, as in binary mode). \
         Integer fields take integers written without a fraction or exponent (`2`, not `2.0` \
         nor `2e0`), as serde_json reads them: 400 `invalid_payload` otherwise";
    let descricao = match esquema {
        Some(_) => CORPO.to_owned(),
        None => format!("{CORPO}. {NAO_PUBLICADO}"),
    };
    RequestBodyBuilder::new()
        .description(Some(descricao))
        .content(
            "application/json",
            ContentBuilder::new().schema(esquema).build(),
        )
        .required(Some(Required::True))
        .build()
}

/// What the request body of a payload without `utoipa::ToSchema` says instead of a schema.
const NAO_PUBLICADO: &str = "Schema not published: the receiving app's payload type does not \
     derive `utoipa::ToSchema` (deriving it publishes the schema here). Not every JSON value is \
     accepted: what the type refuses is answered 400 `invalid_payload`";

mod lote;

#[cfg(test)]
mod testes {
    use serde_json::{Value, json};

    use super::{EsquemaGenerico as _, Sonda, corpo_do_pedido};

    fn json_de<T: serde::Serialize>(valor: &T) -> Value {
        serde_json::to_value(valor).unwrap()
    }

    /// The payload's schema, picked as the code `#[receptor]` generates picks it.
    macro_rules! esquema_de {
        ($payload:ty) => {
            (&Sonda::<$payload>::new()).esquema()
        };
    }

    #[test]
    fn um_payload_com_to_schema_publica_o_seu_esquema_e_os_que_ele_nomeia() {
        /// The closing.
        #[derive(utoipa::ToSchema)]
        #[allow(dead_code)]
        struct Encerramento {
            cnpj: String,
            municipio: Municipio,
        }
        #[derive(utoipa::ToSchema)]
        #[allow(dead_code)]
        struct Municipio {
            codigo_ibge: u32,
        }
        let esquema = esquema_de!(Encerramento);
        assert_eq!(
            json_de(&esquema.esquema),
            json!({"$ref": "#/components/schemas/Encerramento"})
        );
        let nomes: Vec<&str> = esquema
            .componentes
            .iter()
            .map(|(n, _)| n.as_str())
            .collect();
        assert_eq!(nomes, ["Municipio", "Encerramento"]);
        let encerramento = json_de(&esquema.componentes[1].1);
        assert_eq!(encerramento["description"], json!("The closing."));
        assert_eq!(encerramento["required"], json!(["cnpj", "municipio"]));
        assert_eq!(
            encerramento["properties"]["municipio"],
            json!({"$ref": "#/components/schemas/Municipio"})
        );
    }

    #[test]
    fn um_payload_sem_to_schema_fica_sem_esquema_e_o_corpo_diz_por_que() {
        #[derive(serde::Deserialize)]
        #[allow(dead_code)]
        struct Opaco {
            n: u8,
        }
        let esquema = esquema_de!(Opaco);
        assert!(esquema.esquema.is_none());
        assert!(esquema.componentes.is_empty());
        let corpo = json_de(&corpo_do_pedido(esquema.esquema));
        // No schema at all: not even `{}`, which would call any JSON value valid.
        assert_eq!(corpo["content"]["application/json"], json!({}));
        let descricao = corpo["description"].as_str().unwrap();
        assert!(
            descricao.contains("Schema not published: the receiving app's payload type does not derive `utoipa::ToSchema`"),
            "{descricao}"
        );
    }
}
