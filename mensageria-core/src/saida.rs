//! The saída: the outbox table, written in the caller's transaction.
//!
//! A message enters the saída in the same transaction as the business write that caused it:
//! both commit or neither does. The relay delivers it afterwards, at least once.
//!
//! ```
//! use mensageria_core::{ContextoEnvio, FalhaEnvio, enviador};
//! use serde::{Deserialize, Serialize};
//!
//! #[derive(Serialize, Deserialize)]
//! struct Encerramento { chave_mdfe: String }
//!
//! #[enviador(tipo = "mdfe.encerramento")]
//! async fn enviar(evento: Encerramento, ctx: &ContextoEnvio) -> Result<(), FalhaEnvio> {
//!     Ok(())
//! }
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), mensageria_core::Erro> {
//! let pool = sqlx::SqlitePool::connect("sqlite::memory:").await?;
//! mensageria_core::migrar(&pool).await?;
//!
//! let mut tx = pool.begin().await?;
//! // ... the business write, on &mut *tx ...
//! let evento = Encerramento { chave_mdfe: "4321".into() };
//! let id = mensageria_core::enfileirar(&mut *tx, &evento).await?;
//! tx.commit().await?;
//!
//! // A tipo that comes from data is checked before anything is written:
//! let erro = mensageria_core::enfileirar_json(&pool, "nfe.ninguem", &serde_json::json!({})).await;
//! assert!(erro.is_err());
//! # let _ = id; Ok(()) }
//! ```

use serde::Serialize;
use tracing::Instrument;
use uuid::Uuid;

use crate::banco::NovaMensagem;
use crate::banco::interno::ConexaoInterna;
use crate::correlacao;
use crate::enviador::Enviador;
use crate::erro::Erro;
use crate::rastreamento::ContextoRastreamento;
use crate::registro::Registro;

/// What [`enfileirar`] writes through: the caller's transaction, a connection or the pool, on
/// PostgreSQL or SQLite.
///
/// | you have | pass | the row commits |
/// |---|---|---|
/// | `tx: Transaction<'_, DB>` (from `pool.begin()`) | `&mut *tx` or `&mut tx` | with `tx` |
/// | `tx: &mut Transaction<'_, DB>` (a receptor's, a helper's) | `&mut *tx` (or `tx`, which moves the reference) | with `tx` |
/// | `conexao: PoolConnection<DB>` | `&mut *conexao` or `&mut conexao` | at once, or with its open transaction |
/// | `&mut PgConnection` / `&mut SqliteConnection` | itself | likewise |
/// | `pool: Pool<DB>` | `&pool` | at once, on its own |
///
/// So the same `enfileirar(&mut *tx, &evento)` works in a handler that began the transaction
/// and in a receptor that was handed it. Sealed: implemented for the types above only (an
/// `sqlx::Executor` of your own is not accepted).
///
/// ```
/// use mensageria_core::{ContextoEnvio, FalhaEnvio, enfileirar, enviador};
/// use mensageria_core::sqlx::{Sqlite, Transaction};
/// # #[derive(serde::Serialize, serde::Deserialize)] struct Reserva { pedido: i64 }
/// # #[enviador(tipo = "estoque.reservado")]
/// # async fn enviar(_: Reserva, _: &ContextoEnvio) -> Result<(), FalhaEnvio> { Ok(()) }
///
/// // A function handed someone else's transaction (as a receptor is):
/// async fn reservar(tx: &mut Transaction<'_, Sqlite>, pedido: i64) -> Result<(), mensageria_core::Erro> {
///     enfileirar(&mut *tx, &Reserva { pedido }).await?;
///     Ok(())
/// }
///
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), mensageria_core::Erro> {
/// let pool = mensageria_core::sqlx::SqlitePool::connect("sqlite::memory:").await?;
/// mensageria_core::migrar(&pool).await?;
/// let mut tx = pool.begin().await?;
/// reservar(&mut tx, 7).await?;
/// enfileirar(&mut *tx, &Reserva { pedido: 8 }).await?;
/// tx.commit().await?;
/// enfileirar(&pool, &Reserva { pedido: 9 }).await?;
/// let mut conexao = pool.acquire().await?;
/// enfileirar(&mut *conexao, &Reserva { pedido: 10 }).await?;
/// # Ok(()) }
/// ```
#[doc(alias = "executor")]
#[diagnostic::on_unimplemented(
    message = "`enfileirar` cannot write through `{Self}`",
    label = "not a transaction, connection or pool of PostgreSQL or SQLite",
    note = "pass the transaction (`&mut *tx`), a connection (`&mut *conexao`) or the pool (`&pool`)"
)]
pub trait Conexao: ConexaoInterna {}

impl<C: ConexaoInterna> Conexao for C {}

/// The largest serialized payload accepted by default: 1 MiB.
pub const LIMITE_PAYLOAD_PADRAO: usize = 1024 * 1024;

/// Enqueues `payload` through `conexao` (usually `&mut *tx`, the caller's transaction, whether
/// `tx` is a `Transaction` or a `&mut Transaction`: see [`Conexao`]) with the default
/// [`Saida`]; returns the message id. Compiles only for payload types that have an
/// `#[enviador]` in this app; `Por` names that enviador (see [`Enviador`]) and is always
/// inferred, never written.
#[doc(alias("enqueue", "publish", "send", "outbox"))]
pub async fn enfileirar<C, T, Por>(conexao: C, payload: &T) -> Result<Uuid, Erro>
where
    C: Conexao,
    T: Enviador<Por>,
{
    Saida::new().enfileirar(conexao, payload).await
}

/// Enqueues `payload` through `conexao` as an **ordered** message of key `chave_ordem`, with
/// the default [`Saida`]: the relay does not start it while an earlier message of the same key
/// is in the saída (see [`crate::ordem`] for the guarantee, the dead-letter policy and the cost).
/// The key given here wins over one the payload's `#[enviador(ordem = ...)]` provides. Fails
/// before writing anything when the key is empty or over
/// [`LIMITE_CHAVE_ORDEM`](crate::ordem::LIMITE_CHAVE_ORDEM) bytes.
///
/// ```
/// use mensageria_core::{ContextoEnvio, FalhaEnvio, enfileirar_ordenado, enviador};
/// # #[derive(serde::Serialize, serde::Deserialize)]
/// # struct Passo { pedido: i64, passo: String }
/// # #[enviador(tipo = "pedido.passo")]
/// # async fn enviar(_: Passo, _: &ContextoEnvio) -> Result<(), FalhaEnvio> { Ok(()) }
///
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), mensageria_core::Erro> {
/// let pool = mensageria_core::sqlx::SqlitePool::connect("sqlite::memory:").await?;
/// mensageria_core::migrar(&pool).await?;
/// let mut tx = pool.begin().await?;
/// // "criado" is delivered (acknowledged by the receptor) before "cancelado" starts.
/// let passo = |nome: &str| Passo { pedido: 42, passo: nome.to_owned() };
/// enfileirar_ordenado(&mut *tx, &passo("criado"), "pedido:42").await?;
/// enfileirar_ordenado(&mut *tx, &passo("cancelado"), "pedido:42").await?;
/// tx.commit().await?;
///
/// // A key must say something:
/// assert!(enfileirar_ordenado(&pool, &passo("x"), "").await.is_err());
/// # Ok(()) }
/// ```
#[doc(alias("ordered", "partition key", "enqueue_ordered"))]
pub async fn enfileirar_ordenado<C, T, Por>(
    conexao: C,
    payload: &T,
    chave_ordem: &str,
) -> Result<Uuid, Erro>
where
    C: Conexao,
    T: Enviador<Por>,
{
    Saida::new()
        .enfileirar_ordenado(conexao, payload, chave_ordem)
        .await
}

/// Enqueues a JSON payload whose tipo comes from data, with the default [`Saida`]. Fails before
/// writing anything when no enviador of this binary handles `tipo`.
#[doc(alias = "enqueue_json")]
pub async fn enfileirar_json<C>(
    conexao: C,
    tipo: &str,
    payload: &serde_json::Value,
) -> Result<Uuid, Erro>
where
    C: Conexao,
{
    Saida::new().enfileirar_json(conexao, tipo, payload).await
}

/// The saída with its settings.
///
/// ```
/// let saida = mensageria_core::Saida::new().com_limite_payload(64 * 1024);
/// assert_eq!(saida.limite_payload(), 64 * 1024);
/// ```
#[derive(Debug, Clone)]
#[doc(alias("outbox", "transactional outbox"))]
pub struct Saida {
    limite_payload: usize,
}

impl Default for Saida {
    fn default() -> Self {
        Self::new()
    }
}

impl Saida {
    /// A saída with the default settings.
    pub fn new() -> Self {
        Self {
            limite_payload: LIMITE_PAYLOAD_PADRAO,
        }
    }

    /// Sets the largest serialized payload accepted, in bytes.
    pub fn com_limite_payload(mut self, bytes: usize) -> Self {
        self.limite_payload = bytes;
        self
    }

    /// The largest serialized payload accepted, in bytes.
    pub fn limite_payload(&self) -> usize {
        self.limite_payload
    }

    /// Enqueues `payload` through `conexao`; see [`enfileirar`].
    pub async fn enfileirar<C, T, Por>(&self, conexao: C, payload: &T) -> Result<Uuid, Erro>
    where
        C: Conexao,
        T: Enviador<Por>,
    {
        let chave = <T as Enviador<Por>>::chave_ordem(payload);
        self.gravar(
            conexao,
            <T as Enviador<Por>>::TIPO,
            payload,
            chave.as_deref(),
        )
        .await
    }

    /// Enqueues `payload` through `conexao`, ordered by `chave_ordem`; see
    /// [`enfileirar_ordenado`].
    pub async fn enfileirar_ordenado<C, T, Por>(
        &self,
        conexao: C,
        payload: &T,
        chave_ordem: &str,
    ) -> Result<Uuid, Erro>
    where
        C: Conexao,
        T: Enviador<Por>,
    {
        self.gravar(
            conexao,
            <T as Enviador<Por>>::TIPO,
            payload,
            Some(chave_ordem),
        )
        .await
    }

    /// Enqueues a JSON payload of a tipo known only at run time; see [`enfileirar_json`].
    pub async fn enfileirar_json<C>(
        &self,
        conexao: C,
        tipo: &str,
        payload: &serde_json::Value,
    ) -> Result<Uuid, Erro>
    where
        C: Conexao,
    {
        let registro = Registro::global();
        if registro.enviador(tipo).is_none() {
            return Err(Erro::TipoNaoRegistrado {
                tipo: tipo.to_owned(),
                registrados: registro.tipos().to_vec(),
            });
        }
        self.gravar(conexao, tipo, payload, None).await
    }

    async fn gravar<C, T>(
        &self,
        conexao: C,
        tipo: &str,
        payload: &T,
        chave_ordem: Option<&str>,
    ) -> Result<Uuid, Erro>
    where
        C: Conexao,
        T: Serialize + ?Sized,
    {
        if let Some(chave) = chave_ordem {
            crate::ordem::validar(tipo, chave)?;
        }
        let json = serde_json::to_string(payload).map_err(|fonte| Erro::Serializacao {
            tipo: tipo.to_owned(),
            fonte,
        })?;
        if json.len() > self.limite_payload {
            return Err(Erro::PayloadGrande {
                tipo: tipo.to_owned(),
                tamanho: json.len(),
                limite: self.limite_payload,
            });
        }
        let id_mensagem = Uuid::now_v7();
        let correlacao = correlacao::atual();
        // The enqueue is a span of the caller's trace, and the context stored with the message
        // is this span's: the relay's delivery spans are its children. Outside any trace
        // nothing is stored (the span alone would start one).
        let span = tracing::info_span!("mensageria.enfileirar", tipo, %id_mensagem);
        let rastreamento = ContextoRastreamento::em_rastro()
            .then(|| span.in_scope(ContextoRastreamento::do_span_atual))
            .flatten();
        conexao
            .inserir(NovaMensagem {
                id_mensagem,
                tipo,
                payload: &json,
                correlacao: correlacao.as_deref(),
                chave_ordem,
                traceparent: rastreamento.as_ref().map(ContextoRastreamento::traceparent),
                tracestate: rastreamento
                    .as_ref()
                    .and_then(ContextoRastreamento::tracestate),
            })
            .instrument(span)
            .await?;
        tracing::debug!(%id_mensagem, tipo, bytes = json.len(), "mensageria: enqueued");
        metrics::counter!("mensageria_enqueued_total", "tipo" => tipo.to_owned()).increment(1);
        crate::relay::acordar();
        Ok(id_mensagem)
    }
}
