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
use sqlx::Executor;
use uuid::Uuid;

use crate::banco::NovaMensagem;
use crate::{Banco, Enviador, Erro, Registro, correlacao};

/// The largest serialized payload accepted by default: 1 MiB.
pub const LIMITE_PAYLOAD_PADRAO: usize = 1024 * 1024;

/// Enqueues `payload` through `executor` (usually `&mut *tx`, the caller's transaction) with the
/// default [`Saida`]; returns the message id. Compiles only for payload types that have an
/// `#[enviador]`.
pub async fn enfileirar<'e, E, DB, T>(executor: E, payload: &T) -> Result<Uuid, Erro>
where
    E: Executor<'e, Database = DB>,
    DB: Banco,
    T: Enviador,
{
    Saida::new().enfileirar(executor, payload).await
}

/// Enqueues a JSON payload whose tipo comes from data, with the default [`Saida`]. Fails before
/// writing anything when no enviador of this binary handles `tipo`.
pub async fn enfileirar_json<'e, E, DB>(
    executor: E,
    tipo: &str,
    payload: &serde_json::Value,
) -> Result<Uuid, Erro>
where
    E: Executor<'e, Database = DB>,
    DB: Banco,
{
    Saida::new().enfileirar_json(executor, tipo, payload).await
}

/// The saída with its settings.
///
/// ```
/// let saida = mensageria_core::Saida::new().com_limite_payload(64 * 1024);
/// assert_eq!(saida.limite_payload(), 64 * 1024);
/// ```
#[derive(Debug, Clone)]
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

    /// Enqueues `payload` through `executor`; see [`enfileirar`].
    pub async fn enfileirar<'e, E, DB, T>(&self, executor: E, payload: &T) -> Result<Uuid, Erro>
    where
        E: Executor<'e, Database = DB>,
        DB: Banco,
        T: Enviador,
    {
        self.gravar(executor, T::TIPO, payload).await
    }

    /// Enqueues a JSON payload of a tipo known only at run time; see [`enfileirar_json`].
    pub async fn enfileirar_json<'e, E, DB>(
        &self,
        executor: E,
        tipo: &str,
        payload: &serde_json::Value,
    ) -> Result<Uuid, Erro>
    where
        E: Executor<'e, Database = DB>,
        DB: Banco,
    {
        let registro = Registro::global();
        if registro.enviador(tipo).is_none() {
            return Err(Erro::TipoNaoRegistrado {
                tipo: tipo.to_owned(),
                registrados: registro.tipos().to_vec(),
            });
        }
        self.gravar(executor, tipo, payload).await
    }

    async fn gravar<'e, E, DB, T>(&self, executor: E, tipo: &str, payload: &T) -> Result<Uuid, Erro>
    where
        E: Executor<'e, Database = DB>,
        DB: Banco,
        T: Serialize + ?Sized,
    {
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
        DB::inserir_na_saida(
            executor,
            NovaMensagem {
                id_mensagem,
                tipo,
                payload: &json,
                correlacao: correlacao.as_deref(),
            },
        )
        .await?;
        tracing::debug!(%id_mensagem, tipo, bytes = json.len(), "mensageria: enqueued");
        metrics::counter!("mensageria_enqueued_total", "tipo" => tipo.to_owned()).increment(1);
        crate::relay::acordar();
        Ok(id_mensagem)
    }
}
