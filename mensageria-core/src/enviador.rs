//! The sender side of one tipo: the [`Enviador`] contract, what a send gets ([`ContextoEnvio`])
//! and how it fails ([`FalhaEnvio`]).
//!
//! Users never implement [`Enviador`] by hand: `#[enviador(tipo = "...")]` on an async function
//! implements it for the function's payload type and registers the function in the
//! [`Registro`](crate::registro::Registro). An [`Evento`] (`#[evento(tipo = "...")]`) is a type whose tipo
//! is declared next to it, so it can live in a contracts crate shared by sender and receiver.

use std::any::{Any, TypeId};
use std::collections::HashMap;
use std::fmt;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use serde::Serialize;
use serde::de::DeserializeOwned;
use uuid::Uuid;

use crate::rastreamento::ContextoRastreamento;

/// An event type with its tipo declared next to it: what a contracts crate shares.
///
/// Implemented by `#[evento(tipo = "...")]` on a struct or an enum, never by hand. A type of a
/// contracts crate (used by the sending app and by the receiving app alike) declares its tipo
/// once; declaring it registers nothing, so linking the contracts crate never makes an app's
/// relay claim the tipo. Only an app that puts `#[enviador]` on a function taking the type can
/// enqueue and send it; `#[enviador]` and `#[receptor]` then need no `tipo = "..."` (they take
/// [`Evento::TIPO`]).
///
/// ```
/// use mensageria_core::{Evento, evento};
/// use serde::{Deserialize, Serialize};
///
/// #[evento(tipo = "pedido.criado")]
/// #[derive(Serialize, Deserialize)]
/// pub struct PedidoCriado {
///     pub pedido: i64,
/// }
///
/// assert_eq!(PedidoCriado::TIPO, "pedido.criado");
/// // Declaring an event registers no enviador: no relay claims it because of this crate.
/// assert!(mensageria_core::Registro::global().tipos().is_empty());
/// ```
#[doc(alias = "event")]
#[doc(alias = "contract")]
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not an `#[evento]`, so it has no tipo of its own",
    label = "`{Self}` declares no tipo",
    note = "give the attribute the tipo (`tipo = \"...\"`), or declare it once next to the type \
            with `#[mensageria_core::evento(tipo = \"...\")]`"
)]
pub trait Evento: Serialize + DeserializeOwned + Send + Sync + 'static {
    /// The tipo this event travels as.
    const TIPO: &'static str;
}

/// A payload type that this app knows how to send.
///
/// Implemented by `#[enviador]`, never by hand: the attribute also registers the function with
/// the relay. [`enfileirar`](crate::enfileirar) requires it, so enqueueing a payload nobody in
/// this app can send does not compile.
///
/// `Por` ("by") names the enviador: `#[enviador]` implements `Enviador<M>` with `M` a hidden
/// type it generates next to the function. A type parameter of the app's own is what lets an app
/// implement this trait for a type of another crate (a contracts crate's [`Evento`]) under Rust's
/// orphan rule. Nobody writes `Por`: [`enfileirar`](crate::enfileirar) and friends infer it from
/// the one enviador the app has for the payload. Two enviadores for one payload in one app leave
/// it ambiguous ("type annotations needed" where it is enqueued); keep one.
#[diagnostic::on_unimplemented(
    message = "`{Self}` has no enviador: this app cannot send it, so it cannot be enqueued",
    label = "no `#[enviador]` function of this app takes `{Self}` as its payload",
    note = "add `#[mensageria_core::enviador(tipo = \"...\")]` to an \
            `async fn(evento: {Self}, ctx: &ContextoEnvio) -> Result<(), FalhaEnvio>` in this app \
            (for a contracts crate's `#[evento]`, plain `#[mensageria_core::enviador]`: the tipo \
            comes from the type)",
    note = "if this app's enviadores live in a library crate, name it in the binary \
            (`use that_crate as _;`): a crate nothing names is not loaded, nor are its enviadores",
    note = "who enqueues a tipo must be able to send it: otherwise the row would wait forever for \
            a relay that never claims it"
)]
#[doc(alias("Sender", "producer"))]
pub trait Enviador<Por>: Serialize + DeserializeOwned + Send + Sync + 'static {
    /// The tipo this payload travels as.
    const TIPO: &'static str;

    /// Sends one payload; called by the relay.
    fn enviar<'a>(
        self,
        ctx: &'a ContextoEnvio,
    ) -> impl Future<Output = Result<(), FalhaEnvio>> + Send + 'a;

    /// The ordering key of this payload ([`crate::ordem`]): `Some` when the attribute says
    /// `ordem = ...`, so [`enfileirar`](crate::enfileirar) enqueues it ordered; `None` (the
    /// default) keeps it unordered.
    fn chave_ordem(&self) -> Option<String> {
        None
    }
}

/// Why a send did not succeed, which tells the relay what to do next.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
#[doc(alias("SendError", "delivery failure"))]
pub enum FalhaEnvio {
    /// It may work later (destination down, 5xx, timeout, 401/403/404 during a deploy):
    /// the relay retries with backoff until the attempt or age limit, then dead-letters.
    #[error("temporary failure, will retry: {motivo}")]
    Temporaria {
        /// What happened, for the logs and the row's last error.
        motivo: String,
        /// How long the destination asked us to wait (`Retry-After`), if it did.
        tentar_apos: Option<Duration>,
    },
    /// It will never work (the destination rejected the payload itself: 400, 413, 422):
    /// the relay moves the message to dead letters at once.
    #[error("permanent failure, dead-lettered: {motivo}")]
    Permanente {
        /// What happened, for the logs and the dead letter.
        motivo: String,
    },
    /// The destination is overloaded and said so before doing anything (a receptor's `503`
    /// `busy`: no database connection freed up in time; any `429`). The relay retries after
    /// `tentar_apos` (or its backoff base) without counting an attempt, and lowers how many
    /// deliveries of the tipo it keeps in flight (see [`relay`](crate::relay#backpressure)).
    #[error("destination overloaded, will retry: {motivo}")]
    Sobrecarga {
        /// What happened, for the logs and the row's last error.
        motivo: String,
        /// How long the destination asked us to wait (`Retry-After`), if it did.
        tentar_apos: Option<Duration>,
    },
}

impl FalhaEnvio {
    /// A failure worth retrying.
    pub fn temporaria(motivo: impl fmt::Display) -> Self {
        Self::Temporaria {
            motivo: motivo.to_string(),
            tentar_apos: None,
        }
    }

    /// A failure that no retry will fix.
    pub fn permanente(motivo: impl fmt::Display) -> Self {
        Self::Permanente {
            motivo: motivo.to_string(),
        }
    }

    /// The destination is overloaded: retry later, with fewer deliveries in flight.
    pub fn sobrecarga(motivo: impl fmt::Display) -> Self {
        Self::Sobrecarga {
            motivo: motivo.to_string(),
            tentar_apos: None,
        }
    }
}

/// What one delivery attempt knows besides the payload: the message's identity and the
/// resources the app handed to the relay (an HTTP [destination](ContextoEnvio::recurso), a
/// client, configuration).
///
/// ```
/// use mensageria_core::ContextoEnvio;
/// use uuid::Uuid;
///
/// #[derive(Debug, PartialEq)]
/// struct BaseUrl(&'static str);
///
/// let ctx = ContextoEnvio::new(Uuid::now_v7(), "mdfe.encerramento")
///     .com_tentativa(3)
///     .com_app("emissor")
///     .com_recurso(BaseUrl("http://127.0.0.1:8080"));
/// assert_eq!(ctx.tentativa(), 3);
/// assert_eq!(ctx.app(), Some("emissor"));
/// assert_eq!(ctx.recurso::<BaseUrl>(), Some(&BaseUrl("http://127.0.0.1:8080")));
/// ```
#[derive(Clone)]
#[doc(alias("SendContext", "delivery context"))]
pub struct ContextoEnvio {
    id_mensagem: Uuid,
    tipo: String,
    tentativa: u32,
    correlacao: Option<String>,
    app: Option<String>,
    chave_ordem: Option<String>,
    rastreamento: Option<ContextoRastreamento>,
    recursos: Recursos,
}

impl ContextoEnvio {
    /// A context for the first attempt of message `id_mensagem` of `tipo`, with no resources.
    /// The relay builds these; tests of an enviador build their own.
    pub fn new(id_mensagem: Uuid, tipo: impl Into<String>) -> Self {
        Self {
            id_mensagem,
            tipo: tipo.into(),
            tentativa: 1,
            correlacao: None,
            app: None,
            chave_ordem: None,
            rastreamento: None,
            recursos: Recursos::default(),
        }
    }

    /// Sets the attempt number (1 for the first delivery).
    pub fn com_tentativa(mut self, tentativa: u32) -> Self {
        self.tentativa = tentativa;
        self
    }

    /// Sets the correlation id captured at enqueue.
    pub fn com_correlacao(mut self, correlacao: Option<String>) -> Self {
        self.correlacao = correlacao;
        self
    }

    /// Sets the name of the sending app (the relay sets its
    /// [`Config::app`](crate::relay::Config::app)).
    pub fn com_app(mut self, app: impl Into<String>) -> Self {
        self.app = Some(app.into());
        self
    }

    /// Sets the ordering key the message was enqueued with
    /// ([`enfileirar_ordenado`](crate::saida::enfileirar_ordenado)); the relay sets it.
    pub fn com_chave_ordem(mut self, chave: Option<String>) -> Self {
        self.chave_ordem = chave;
        self
    }

    /// The message's ordering key, if it was enqueued with one: the relay releases one message
    /// of a key at a time, and a broker transport keeps them in one ordered lane.
    pub fn chave_ordem(&self) -> Option<&str> {
        self.chave_ordem.as_deref()
    }

    /// Sets the W3C trace context the message was enqueued under; the relay sets it.
    pub fn com_rastreamento(mut self, rastreamento: Option<ContextoRastreamento>) -> Self {
        self.rastreamento = rastreamento;
        self
    }

    /// The W3C trace context the message was enqueued under (see [`crate::rastreamento`]), if
    /// any: a `Destino` and a broker transport send it as `traceparent`/`tracestate`; an
    /// enviador of its own may do the same.
    pub fn rastreamento(&self) -> Option<&ContextoRastreamento> {
        self.rastreamento.as_ref()
    }

    /// Adds a resource, replacing any earlier one of the same type.
    pub fn com_recurso<R: Send + Sync + 'static>(mut self, recurso: R) -> Self {
        self.recursos.substituir(recurso);
        self
    }

    /// Replaces every resource by `recursos` (the relay shares one set among all deliveries).
    pub(crate) fn com_recursos(mut self, recursos: Recursos) -> Self {
        self.recursos = recursos;
        self
    }

    /// The message id: unique per enqueued message, stable across redeliveries; sent downstream
    /// as `x-request-id`.
    pub fn id_mensagem(&self) -> Uuid {
        self.id_mensagem
    }

    /// The tipo being delivered.
    pub fn tipo(&self) -> &str {
        &self.tipo
    }

    /// The sending app's name, from the relay's [`Config`](crate::relay::Config); `None` in a
    /// context built by hand without [`com_app`](Self::com_app). A `Destino` sends it as the
    /// CloudEvents `ce-source`.
    pub fn app(&self) -> Option<&str> {
        self.app.as_deref()
    }

    /// The attempt number, 1 for the first delivery.
    pub fn tentativa(&self) -> u32 {
        self.tentativa
    }

    /// The correlation id captured at enqueue, or the message id when there was none.
    pub fn correlacao(&self) -> String {
        self.correlacao
            .clone()
            .unwrap_or_else(|| self.id_mensagem.to_string())
    }

    /// The resource of type `R` the app handed to the relay for this delivery's tipo
    /// ([`Relay::recurso_para`](crate::relay::Relay::recurso_para)), else the one it handed for
    /// every tipo ([`Relay::recurso`](crate::relay::Relay::recurso)), if any.
    pub fn recurso<R: Send + Sync + 'static>(&self) -> Option<&R> {
        self.recursos.obter(&self.tipo)
    }

    /// The resource of type `R`, or a temporary failure naming the missing type (a deployment
    /// mistake the relay keeps retrying and logging until it is fixed).
    pub fn exigir<R: Send + Sync + 'static>(&self) -> Result<&R, FalhaEnvio> {
        self.recurso().ok_or_else(|| {
            FalhaEnvio::temporaria(format!(
                "the relay was started without a `{}` resource; add it with the relay's \
                 `recurso(...)`",
                std::any::type_name::<R>()
            ))
        })
    }
}

impl fmt::Debug for ContextoEnvio {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ContextoEnvio")
            .field("id_mensagem", &self.id_mensagem)
            .field("tipo", &self.tipo)
            .field("tentativa", &self.tentativa)
            .field("correlacao", &self.correlacao)
            .field("app", &self.app)
            .field("rastreamento", &self.rastreamento)
            .finish_non_exhaustive()
    }
}

/// One shared resource, of any type.
type Valor = Arc<dyn Any + Send + Sync>;

/// A set of values keyed by their type, shared by every delivery of a relay: the relay-wide
/// ones, and the ones handed for a single tipo, which win for deliveries of that tipo.
#[derive(Clone, Default)]
pub(crate) struct Recursos {
    comuns: Arc<HashMap<TypeId, Valor>>,
    por_tipo: Arc<HashMap<String, HashMap<TypeId, Valor>>>,
}

impl Recursos {
    /// Adds a relay-wide value; returns `false` (and keeps the earlier one) when one of the same
    /// type is already there: resources are found by type, so a second one would silently
    /// replace it.
    pub(crate) fn inserir<R: Send + Sync + 'static>(&mut self, recurso: R) -> bool {
        vaga(Arc::make_mut(&mut self.comuns), TypeId::of::<R>(), recurso)
    }

    /// Adds a value for deliveries of `tipo` only; `false` (keeping the earlier one) when that
    /// tipo already has one of the same type.
    pub(crate) fn inserir_para<R: Send + Sync + 'static>(
        &mut self,
        tipo: &str,
        recurso: R,
    ) -> bool {
        let do_tipo = Arc::make_mut(&mut self.por_tipo)
            .entry(tipo.to_owned())
            .or_default();
        vaga(do_tipo, TypeId::of::<R>(), recurso)
    }

    /// The tipos some resource was handed for.
    pub(crate) fn tipos_com_recurso(&self) -> impl Iterator<Item = &str> {
        self.por_tipo.keys().map(String::as_str)
    }

    /// Adds a relay-wide value, replacing any earlier one of the same type.
    pub(crate) fn substituir<R: Send + Sync + 'static>(&mut self, recurso: R) {
        Arc::make_mut(&mut self.comuns).insert(TypeId::of::<R>(), Arc::new(recurso));
    }

    /// The value of type `R` for a delivery of `tipo`: the one handed for that tipo, else the
    /// relay-wide one, if any.
    pub(crate) fn obter<R: Send + Sync + 'static>(&self, tipo: &str) -> Option<&R> {
        let chave = TypeId::of::<R>();
        let do_tipo = self
            .por_tipo
            .get(tipo)
            .and_then(|recursos| recursos.get(&chave));
        do_tipo.or_else(|| self.comuns.get(&chave))?.downcast_ref()
    }
}

/// Inserts `recurso` under `chave` unless the key is taken (then `false`, the map unchanged).
fn vaga<R: Send + Sync + 'static>(
    mapa: &mut HashMap<TypeId, Valor>,
    chave: TypeId,
    recurso: R,
) -> bool {
    match mapa.entry(chave) {
        std::collections::hash_map::Entry::Occupied(_) => false,
        std::collections::hash_map::Entry::Vacant(vaga) => {
            vaga.insert(Arc::new(recurso));
            true
        }
    }
}
