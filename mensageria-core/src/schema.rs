//! Who creates the tables, and how everybody else checks them.
//!
//! On a schema shared by several apps exactly one app owns the mensageria tables: it calls
//! [`migrar`] at start. Every other app calls [`verificar_schema`], which never changes anything
//! and fails with a message that says what is missing and who must fix it (two migrators on one
//! table collide at boot).
//!
//! Migrations are recorded in `_mensageria_migrations`, never in the application's own
//! `_sqlx_migrations`, and go into the first schema of the connection's `search_path` on
//! PostgreSQL.

use sqlx::Pool;

use crate::{Banco, Erro};

/// The schema versions found by [`verificar_schema`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct VersaoSchema {
    /// The newest migration applied in the database.
    pub aplicada: i64,
    /// The newest migration this build knows.
    pub esperada: i64,
}

/// Creates or upgrades the mensageria tables: the schema owner's job. Running it again is a
/// no-op; concurrent runs wait for each other (PostgreSQL advisory lock).
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), mensageria_core::Erro> {
/// let pool = sqlx::SqlitePool::connect("sqlite::memory:").await?;
/// mensageria_core::migrar(&pool).await?;
/// mensageria_core::migrar(&pool).await?; // no-op
/// let versao = mensageria_core::verificar_schema(&pool).await?;
/// assert_eq!(versao.aplicada, versao.esperada);
/// # Ok(()) }
/// ```
pub async fn migrar<DB: Banco>(pool: &Pool<DB>) -> Result<(), Erro> {
    DB::migrar(pool).await?;
    Ok(())
}

/// Checks, without changing anything, that the mensageria tables exist and are at least as new
/// as this build needs: what an app that shares a schema it does not own calls at start.
///
/// A schema newer than this build is accepted (the owner upgrades first; migrations only add).
pub async fn verificar_schema<DB: Banco>(pool: &Pool<DB>) -> Result<VersaoSchema, Erro> {
    let esperada = DB::versao_esperada();
    match DB::versao_aplicada(pool).await? {
        None | Some(0) => Err(Erro::SchemaAusente {
            tabela: crate::banco::TABELA_MIGRACOES,
        }),
        Some(aplicada) if aplicada < esperada => {
            Err(Erro::SchemaDesatualizado { aplicada, esperada })
        }
        Some(aplicada) => Ok(VersaoSchema { aplicada, esperada }),
    }
}
