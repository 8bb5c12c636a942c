//! The OpenAPI document of the receptores (ADR 0020): one `POST` per receptor, its payload's
//! schema, its answers, and the Bearer scheme. Served as JSON; no UI, nothing fetched.

use std::marker::PhantomData;

use utoipa::openapi::path::{
    HttpMethod, OperationBuilder, ParameterBuilder, ParameterIn, PathItem, PathsBuilder,
};
use utoipa::openapi::request_body::RequestBodyBuilder;
use utoipa::openapi::security::{Http, HttpAuthScheme, SecurityRequirement, SecurityScheme};
use utoipa::openapi::{
    ComponentsBuilder, ContentBuilder, InfoBuilder, ObjectBuilder, OpenApi, OpenApiBuilder, RefOr,
    Required, ResponseBuilder, Schema, Type,
};

/// A payload's schema and the component schemas it refers to.
#[derive(Clone)]
pub struct EsquemaEvento {
    /// The schema of the request body.
    pub esquema: RefOr<Schema>,
    /// Named schemas it refers to.
    pub componentes: Vec<(String, RefOr<Schema>)>,
}

/// Picks the payload's own schema when it implements `utoipa::ToSchema`, a plain JSON object
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
            esquema,
            componentes,
        }
    }
}

#[doc(hidden)]
pub trait EsquemaGenerico {
    fn esquema(&self) -> EsquemaEvento {
        EsquemaEvento {
            esquema: RefOr::T(Schema::Object(
                ObjectBuilder::new()
                    .schema_type(Type::Object)
                    .description(Some(
                        "payload (derive utoipa::ToSchema on it for a full schema)",
                    ))
                    .build(),
            )),
            componentes: Vec::new(),
        }
    }
}

impl<T> EsquemaGenerico for &Sonda<T> {}

/// The body of every 200: what was done.
fn esquema_resultado() -> RefOr<Schema> {
    let texto = || ObjectBuilder::new().schema_type(Type::String);
    RefOr::T(Schema::Object(
        ObjectBuilder::new()
            .schema_type(Type::Object)
            .property(
                "resultado",
                texto()
                    .enum_values(Some(["applied", "duplicate"]))
                    .description(Some("`applied`: the effect was committed now; `duplicate`: it had been, nothing was done")),
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
                texto().description(Some("a stable code: unauthorized, payload_too_large, invalid_payload, invalid_key, rejected, temporary, panic, database, unknown_tipo")),
            )
            .property("mensagem", texto().description(Some("what went wrong, for a human")))
            .required("erro")
            .required("mensagem")
            .build(),
    ))
}

/// The document for `receptores` mounted under `base`.
pub(crate) fn documento<'a>(
    base: &str,
    receptores: impl IntoIterator<Item = &'a crate::ReceptorRegistrado>,
) -> OpenApi {
    let mut caminhos = PathsBuilder::new();
    let mut componentes = ComponentsBuilder::new().security_scheme(
        "bearer",
        SecurityScheme::Http(Http::new(HttpAuthScheme::Bearer)),
    );
    componentes = componentes
        .schema("MensageriaResultado", esquema_resultado())
        .schema("MensageriaErro", esquema_erro());
    let com_corpo = |descricao: &str, nome: &str| {
        ResponseBuilder::new()
            .description(descricao)
            .content(
                "application/json",
                ContentBuilder::new()
                    .schema(Some(RefOr::Ref(utoipa::openapi::Ref::from_schema_name(
                        nome,
                    ))))
                    .build(),
            )
            .build()
    };
    let resposta = |descricao: &str| com_corpo(descricao, "MensageriaErro");
    for receptor in receptores {
        let EsquemaEvento {
            esquema,
            componentes: nomeados,
        } = (receptor.esquema)();
        for (nome, esquema) in nomeados {
            componentes = componentes.schema(nome, esquema);
        }
        let operacao = OperationBuilder::new()
            .operation_id(Some(format!(
                "receber_{}",
                receptor.tipo.replace(['.', '-'], "_")
            )))
            .summary(Some(format!(
                "Receive `{}` (idempotent by natural key)",
                receptor.tipo
            )))
            .description(Some(if receptor.convergente {
                "Delivered at least once by a mensageria relay. Convergent: an event is applied \
                 when its version is newer than the last one applied for its natural key; an \
                 equal or older version answers 200 with `duplicate` and changes nothing."
            } else {
                "Delivered at least once by a mensageria relay. The same event applied N times has \
                 the effect of applying it once: a repeat answers 200 with `duplicate`."
            }))
            .parameter(
                ParameterBuilder::new()
                    .name("x-request-id")
                    .parameter_in(ParameterIn::Header)
                    .required(Required::False)
                    .description(Some(
                        "the message id (the relay sends it); echoed in the answer. Up to 128 \
                         printable ASCII characters, otherwise replaced by a fresh id",
                    ))
                    .schema(Some(
                        ObjectBuilder::new().schema_type(Type::String).max_length(Some(128)),
                    )),
            )
            .tag("mensageria")
            .request_body(Some(
                RequestBodyBuilder::new()
                    .content(
                        "application/json",
                        ContentBuilder::new().schema(Some(esquema)).build(),
                    )
                    .required(Some(Required::True))
                    .build(),
            ))
            .response(
                "200",
                com_corpo(
                    "applied, or duplicate (already applied: nothing done)",
                    "MensageriaResultado",
                ),
            )
            .response(
                "400",
                resposta("payload is not valid JSON for this tipo: dead-lettered by the relay"),
            )
            .response("401", resposta("missing or invalid bearer token"))
            .response(
                "408",
                ResponseBuilder::new()
                    .description("took longer than the configured time limit (empty body); rolled back; retried")
                    .build(),
            )
            .response("413", resposta("body over the size limit"))
            .response(
                "422",
                resposta("rejected by the receptor, or invalid natural key: dead-lettered"),
            )
            .response(
                "500",
                resposta("the receptor panicked; nothing applied; retried"),
            )
            .response(
                "503",
                resposta("temporary failure; nothing applied; retried (honours Retry-After)"),
            )
            .security(SecurityRequirement::new("bearer", Vec::<String>::new()));
        caminhos = caminhos.path(
            format!("{base}/{}", receptor.tipo),
            PathItem::new(HttpMethod::Post, operacao),
        );
    }
    OpenApiBuilder::new()
        .info(
            InfoBuilder::new()
                .title("mensageria receptores")
                .version(env!("CARGO_PKG_VERSION"))
                .build(),
        )
        .paths(caminhos.build())
        .components(Some(componentes.build()))
        .build()
}
