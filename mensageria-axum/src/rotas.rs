//! Mounting: every registered receptor at once ([`router`]), or one at a time ([`rota`]).

use std::any::Any;
use std::collections::HashMap;
use std::time::Duration;

use axum::Router;
use axum::extract::{FromRef, Path};
use axum::http::StatusCode;
use axum::routing::{MethodRouter, get, post};
use mensageria_core::sqlx::Pool;
use mensageria_core::{Banco, Erro, ErroConfiguracao, operacoes};
use tower_http::timeout::TimeoutLayer;
use tower_http::trace::TraceLayer;

use crate::desfecho::Desfecho;
use crate::lote::receber_lote;
use crate::receber::receber;
use crate::receptor::{ReceptorRegistrado, registrados};
use crate::{Config, Estado, Receptor};

/// A router with every receptor registered in this binary for this backend at
/// `POST {base}/{tipo}`, the OpenAPI document at `GET {openapi}`, a JSON 404 for unknown tipos,
/// the request timeout and a `tower_http` trace span per request.
///
/// Fails when the configuration does not hang together or two crates register one tipo for this
/// backend. A binary may hold one receptor of a tipo per backend (e.g. `Postgres` and `Sqlite`):
/// each backend's router mounts its own.
#[doc(alias = "routes")]
pub fn router<DB: Banco>(pool: Pool<DB>, config: Config) -> Result<Router, Erro> {
    let estado = Estado::new(pool, config)?;
    let config = std::sync::Arc::clone(&estado.config);
    let mut por_tipo: HashMap<&str, &ReceptorRegistrado> = HashMap::new();
    let mut app = Router::new();
    let mut montados = Vec::new();
    for receptor in registrados() {
        let Some(rotas) = (receptor.montar)(&estado as &dyn Any) else {
            tracing::debug!(
                tipo = receptor.tipo,
                receptor = %receptor.descricao(),
                "mensageria: receptor is for another database backend; not mounted on this router"
            );
            continue;
        };
        if let Some(outro) = por_tipo.insert(receptor.tipo, receptor) {
            return Err(ErroConfiguracao::ReceptorDuplicado {
                tipo: receptor.tipo,
                primeiro: outro.descricao(),
                segundo: receptor.descricao(),
            }
            .into());
        }
        let caminho = format!("{}/{}", config.caminho_base, receptor.tipo);
        app = app
            .route(&format!("{caminho}/lote"), rotas.lote)
            .route(&caminho, rotas.unica);
        montados.push(receptor);
    }
    montados.sort_by_key(|r| r.tipo);
    registrar_enquanto_vive(&estado, montados.iter().map(|r| r.tipo).collect());
    let documento = crate::openapi::documento(
        &config.app,
        &config.caminho_base,
        config.limite_lote,
        montados.iter().copied(),
    );
    let documento = std::sync::Arc::new(documento);
    app = app
        .route(
            &config.caminho_openapi,
            get(move || {
                let documento = std::sync::Arc::clone(&documento);
                async move { axum::Json((*documento).clone()) }
            }),
        )
        .route(
            &format!("{}/{{tipo}}", config.caminho_base),
            post(tipo_desconhecido),
        )
        .route(
            &format!("{}/{{tipo}}/lote", config.caminho_base),
            post(tipo_desconhecido),
        );
    Ok(app
        .layer(TimeoutLayer::with_status_code(
            StatusCode::REQUEST_TIMEOUT,
            limite(config.tempo_limite),
        ))
        // Outermost: one `request` span per HTTP request (method, URI), around the receptor's
        // own `mensageria.receptor` span; the status and latency are logged at the end.
        .layer(TraceLayer::new_for_http()))
}

/// Keeps the app's registration (`mensageria_receptores`, transport `http`) while the router
/// lives: the task holds the configuration weakly and stops once every route is dropped. Outside
/// a Tokio runtime nothing is registered (said at debug level).
fn registrar_enquanto_vive<DB: Banco>(estado: &Estado<DB>, tipos: Vec<&'static str>) {
    let Ok(runtime) = tokio::runtime::Handle::try_current() else {
        tracing::debug!(
            "mensageria: router built outside a Tokio runtime; receiving app not registered"
        );
        return;
    };
    if tipos.is_empty() {
        return;
    }
    let vivo = std::sync::Arc::downgrade(&estado.config);
    runtime.spawn(crate::presenca::manter(
        estado.pool.clone(),
        estado.config.app.clone(),
        tipos,
        "http",
        move || vivo.strong_count() > 0,
        std::future::pending(),
    ));
}

fn limite(tempo: Duration) -> Duration {
    tempo.max(Duration::from_millis(1))
}

async fn tipo_desconhecido(Path(tipo): Path<String>) -> Desfecho {
    let tipo: String = tipo.chars().filter(|c| !c.is_control()).take(128).collect();
    Desfecho::TipoDesconhecido { tipo }
}

/// The route of one receptor, for a router with your own state `S` (which must give the
/// receptores' [`Estado`] through `FromRef`).
pub fn rota<R, S>() -> MethodRouter<S>
where
    R: Receptor,
    Estado<R::Banco>: FromRef<S>,
    S: Clone + Send + Sync + 'static,
{
    post(receber::<R>)
}

/// The batch route of one receptor (`POST {base}/{tipo}/lote`: up to
/// [`Config::com_limite_lote`] events of its tipo in one transaction, an outcome per event), for
/// a router with your own state `S`; [`router`] mounts it next to [`rota`].
pub fn rota_lote<R, S>() -> MethodRouter<S>
where
    R: Receptor,
    Estado<R::Banco>: FromRef<S>,
    S: Clone + Send + Sync + 'static,
{
    post(receber_lote::<R>)
}

/// The two routes of one receptor: one event, and a batch of them.
#[doc(hidden)]
pub struct RotasDoReceptor {
    pub(crate) unica: MethodRouter,
    pub(crate) lote: MethodRouter,
}

/// For generated code: the routes of `R` if `estado` is an `Estado` of `R`'s backend.
#[doc(hidden)]
pub fn montar<R: Receptor>(estado: &dyn Any) -> Option<RotasDoReceptor> {
    estado
        .downcast_ref::<Estado<R::Banco>>()
        .map(|estado| RotasDoReceptor {
            unica: post(receber::<R>).with_state(estado.clone()),
            lote: post(receber_lote::<R>).with_state(estado.clone()),
        })
}

/// Deletes this receiving app's dedup records (`config`'s app) older than its configured
/// retention, in batches of 1000 (no long locks); returns how many. Another app's records on the
/// same schema are left to it. Run it periodically (the CLI's `purgar --app` does the same).
#[doc(alias("purge", "dedup retention"))]
pub async fn purgar<DB: Banco>(pool: &Pool<DB>, config: &Config) -> Result<u64, Erro> {
    config.validar()?;
    let lote = std::num::NonZeroU32::new(1000).expect("1000 is not zero");
    Ok(
        operacoes::purgar_recebidas(pool, Some(&config.app), config.retencao, lote)
            .await?
            .apagadas,
    )
}
