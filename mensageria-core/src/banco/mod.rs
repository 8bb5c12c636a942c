//! The stores: everything mensageria says to a database lives behind [`Banco`], one module per
//! backend, each holding its own SQL.
//!
//! [`Banco`] is implemented for [`sqlx::Postgres`] (feature `postgres`) and [`sqlx::Sqlite`]
//! (feature `sqlite`, the default) and sealed: the API is generic over it so one call works with
//! either pool, transaction or connection.

use std::future::Future;

use sqlx::{Executor, Pool};
use uuid::Uuid;

#[cfg(feature = "postgres")]
pub mod postgres;
#[cfg(feature = "sqlite")]
pub mod sqlite;

/// The name of mensageria's own migrations table (never the application's `_sqlx_migrations`).
pub const TABELA_MIGRACOES: &str = "_mensageria_migrations";

/// A row about to enter the saída.
#[doc(hidden)]
#[derive(Debug)]
pub struct NovaMensagem<'a> {
    pub id_mensagem: Uuid,
    pub tipo: &'a str,
    pub payload: &'a str,
    pub correlacao: Option<&'a str>,
}

/// A database mensageria can store its tables in: PostgreSQL or SQLite.
pub trait Banco: sqlx::Database + selado::Selado {
    /// Applies the migrations that are missing. See [`crate::migrar`].
    #[doc(hidden)]
    fn migrar(
        pool: &Pool<Self>,
    ) -> impl Future<Output = Result<(), sqlx::migrate::MigrateError>> + Send;

    /// The newest migration version this build knows.
    #[doc(hidden)]
    fn versao_esperada() -> i64;

    /// The newest migration applied, or `None` when the migrations table does not exist.
    #[doc(hidden)]
    fn versao_aplicada(
        pool: &Pool<Self>,
    ) -> impl Future<Output = Result<Option<i64>, sqlx::Error>> + Send;

    /// Inserts one row into the saída through the caller's executor.
    #[doc(hidden)]
    fn inserir_na_saida<'e, 'm, E>(
        executor: E,
        mensagem: NovaMensagem<'m>,
    ) -> impl Future<Output = Result<(), sqlx::Error>> + Send + 'm
    where
        E: Executor<'e, Database = Self> + 'm,
        'e: 'm;
}

mod selado {
    pub trait Selado {}
    #[cfg(feature = "postgres")]
    impl Selado for sqlx::Postgres {}
    #[cfg(feature = "sqlite")]
    impl Selado for sqlx::Sqlite {}
}

/// The newest version in a migrator.
fn ultima_versao(migrador: &sqlx::migrate::Migrator) -> i64 {
    migrador.iter().map(|m| m.version).max().unwrap_or(0)
}
