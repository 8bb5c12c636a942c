//! The AsyncAPI 3.0 document of this binary's JetStream channels on a stream, served beside the
//! receptores' `openapi.json`: [`documento`] and [`rota`].

use mensageria_axum::axum::{Json, Router, routing::get};
use mensageria_core::contratos::asyncapi::{self, Canais};

use crate::Fluxo;

/// The AsyncAPI 3.0 document of what this binary sends (`#[enviador]`) and receives
/// (`#[receptor]`) through `fluxo`, as app `app` at version `versao`: its contracts
/// ([`mensageria_axum::contratos::do_app`]) as channels, messages and operations; only the
/// tipos in `tipos` (the ones that travel through the stream; empty: every tipo of the binary).
pub fn documento(fluxo: &Fluxo, app: &str, versao: &str, tipos: &[&str]) -> serde_json::Value {
    let canais = Canais {
        app,
        versao,
        fluxo: fluxo.nome(),
        prefixo: fluxo.prefixo(),
    };
    let contratos: Vec<_> = mensageria_axum::contratos::do_app()
        .into_iter()
        .filter(|c| tipos.is_empty() || tipos.contains(&c.tipo.as_str()))
        .collect();
    asyncapi::documento(&contratos, &canais)
}

/// `GET /m2m/asyncapi.json`: [`documento`], computed once; merge it into the app's router.
///
/// ```
/// # fn f(fluxo: &mensageria_nats::Fluxo, app: mensageria_axum::axum::Router) {
/// // pedido.criado goes through the stream (other tipos of the binary go over HTTP).
/// let app = app.merge(mensageria_nats::rota_asyncapi(
///     fluxo,
///     "pedidos",
///     env!("CARGO_PKG_VERSION"),
///     &["pedido.criado"],
/// ));
/// # }
/// ```
pub fn rota(fluxo: &Fluxo, app: &str, versao: &str, tipos: &[&str]) -> Router {
    let documento = documento(fluxo, app, versao, tipos);
    Router::new().route(
        "/m2m/asyncapi.json",
        get(move || {
            let documento = documento.clone();
            async move { Json(documento) }
        }),
    )
}
