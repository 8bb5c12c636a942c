//! How a receptor says no: [`Rejeicao`].

use std::fmt;
use std::time::Duration;

/// Why a receptor did not apply an event. Its transaction, dedup record included, is rolled
/// back either way, so a redelivery is applied as if it were the first.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
#[doc(alias("Rejection", "handler error"))]
pub enum Rejeicao {
    /// The event itself is unacceptable (answers 422): the sender's relay dead-letters it.
    #[error("rejected: {motivo}")]
    Permanente {
        /// What is wrong with the event.
        motivo: String,
    },
    /// Not now (answers 503, with `Retry-After` when given): the sender's relay retries.
    #[error("temporarily unable to apply: {motivo}")]
    Temporaria {
        /// What went wrong.
        motivo: String,
        /// When to come back.
        tentar_apos: Option<Duration>,
    },
}

impl Rejeicao {
    /// The event will never be acceptable.
    pub fn permanente(motivo: impl fmt::Display) -> Self {
        Self::Permanente {
            motivo: motivo.to_string(),
        }
    }

    /// Try again later.
    pub fn temporaria(motivo: impl fmt::Display) -> Self {
        Self::Temporaria {
            motivo: motivo.to_string(),
            tentar_apos: None,
        }
    }

    /// Try again after `espera`.
    pub fn temporaria_apos(motivo: impl fmt::Display, espera: Duration) -> Self {
        Self::Temporaria {
            motivo: motivo.to_string(),
            tentar_apos: Some(espera),
        }
    }
}

/// `?` on sqlx calls just works. A database error inside the effect is temporary (retried),
/// except a PostgreSQL *data exception* (SQLSTATE class `22`: a NUL in text, a value out of
/// range, an invalid date), which the same event would hit on every redelivery: permanent, so
/// the sender dead-letters it instead of retrying it for days. Constraint violations stay
/// temporary: a foreign key may be satisfied by an event that has not arrived yet.
///
/// The database's own text (table and column names, values) stays in this service's log, in
/// the receptor's span (with the request id); the answer says only the SQLSTATE class.
impl From<mensageria_core::sqlx::Error> for Rejeicao {
    fn from(erro: mensageria_core::sqlx::Error) -> Self {
        let codigo = erro
            .as_database_error()
            .and_then(|e| e.code())
            .map(|codigo| codigo.into_owned());
        let classe = codigo
            .as_deref()
            .filter(|codigo| codigo.len() == 5)
            .map(|codigo| &codigo[..2]);
        tracing::warn!(error = %erro, sqlstate = codigo.as_deref().unwrap_or(""), "mensageria receptor: database error in the receptor");
        match classe {
            Some("22") => Self::permanente(
                "the event's data is refused by the database (SQLSTATE class 22, data exception); \
                 see the receiver's log",
            ),
            Some(classe) => Self::temporaria(format!(
                "database error (SQLSTATE class {classe}); see the receiver's log"
            )),
            None => Self::temporaria("database error; see the receiver's log"),
        }
    }
}

/// `?` on [`mensageria_core::enfileirar`] inside a receptor (a reply enqueued in the receptor's
/// transaction) just works: a database error is judged as above; a reply that can never be
/// enqueued (over the payload limit, not serializable, an invalid tipo) is permanent; anything
/// else (the schema missing or older than this build, no enviador for the reply's tipo in this
/// binary) is this service's setup, temporary: the sender retries until it is fixed.
impl From<mensageria_core::Erro> for Rejeicao {
    fn from(erro: mensageria_core::Erro) -> Self {
        use mensageria_core::Erro;
        match erro {
            Erro::Banco(fonte) => fonte.into(),
            erro @ (Erro::PayloadGrande { .. }
            | Erro::Serializacao { .. }
            | Erro::TipoInvalido { .. }) => Self::permanente(erro),
            erro => {
                tracing::warn!(error = %erro, "mensageria receptor: could not apply the event");
                Self::temporaria(erro)
            }
        }
    }
}
