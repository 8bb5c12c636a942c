//! Harness of the end-to-end suites: every test gets its own PostgreSQL schema or SQLite file,
//! so the suite runs in parallel against real databases.
//!
//! PostgreSQL is reached at `DATABASE_URL`, by default `postgres://postgres@127.0.0.1:5432/postgres`
//! (`scripts/test` starts the local server when it is down).

use std::str::FromStr;

use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use sqlx::{PgPool, SqlitePool};

/// The PostgreSQL server the suites use.
pub fn database_url() -> String {
    std::env::var("DATABASE_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/postgres".to_owned())
}

/// A PostgreSQL schema of one test's own, dropped by [`PgIsolado::descartar`].
pub struct PgIsolado {
    /// A pool whose `search_path` is the test's schema.
    pub pool: PgPool,
    /// The schema's name.
    pub schema: String,
}

impl PgIsolado {
    /// Creates a fresh, empty schema (no mensageria tables yet).
    pub async fn novo() -> Self {
        let schema = format!("teste_{}", uuid::Uuid::now_v7().simple());
        let admin = PgPool::connect(&database_url())
            .await
            .expect("PostgreSQL at DATABASE_URL (run scripts/test, which starts it)");
        sqlx::query(sqlx::AssertSqlSafe(format!("CREATE SCHEMA {schema}")))
            .execute(&admin)
            .await
            .expect("create the test schema");
        admin.close().await;
        let pool = Self::pool_em(&schema, 8).await;
        Self { pool, schema }
    }

    /// Another pool on the same schema (another app, another replica).
    pub async fn outro_pool(&self, conexoes: u32) -> PgPool {
        Self::pool_em(&self.schema, conexoes).await
    }

    async fn pool_em(schema: &str, conexoes: u32) -> PgPool {
        let opcoes = PgConnectOptions::from_str(&database_url())
            .expect("a valid DATABASE_URL")
            .options([("search_path", schema)]);
        PgPoolOptions::new()
            .max_connections(conexoes)
            .connect_with(opcoes)
            .await
            .expect("connect to the test schema")
    }

    /// Drops the schema and everything in it.
    pub async fn descartar(self) {
        sqlx::query(sqlx::AssertSqlSafe(format!(
            "DROP SCHEMA {} CASCADE",
            self.schema
        )))
        .execute(&self.pool)
        .await
        .expect("drop the test schema");
        self.pool.close().await;
    }
}

/// A SQLite file of one test's own, in a temporary directory removed on drop.
pub struct SqliteIsolado {
    /// A pool on the file, opened as `mensageria_core::banco::sqlite::abrir` does.
    pub pool: SqlitePool,
    /// The file's path.
    pub caminho: std::path::PathBuf,
    _dir: tempfile::TempDir,
}

impl SqliteIsolado {
    /// Creates a fresh, empty database file.
    pub async fn novo() -> Self {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let caminho = dir.path().join("teste.db");
        let pool = mensageria_core::banco::sqlite::abrir(&caminho)
            .await
            .expect("open the SQLite file");
        Self {
            pool,
            caminho,
            _dir: dir,
        }
    }

    /// Nothing to drop beyond the directory; kept so both backends read alike.
    pub async fn descartar(self) {
        self.pool.close().await;
    }
}

/// Writes one test body twice, as `mod $nome { async fn postgres(); async fn sqlite(); }`, with
/// `$db` bound to a fresh [`PgIsolado`] or [`SqliteIsolado`]. Both have `.pool`; SQL in the body
/// uses `$1`-style parameters, which both backends accept.
#[macro_export]
macro_rules! nos_dois_bancos {
    ($(#[$meta:meta])* async fn $nome:ident($db:ident) $corpo:block) => {
        $(#[$meta])*
        mod $nome {
            #[allow(unused_imports)]
            use super::*;

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn postgres() {
                let $db = $crate::PgIsolado::novo().await;
                $corpo
                $db.descartar().await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn sqlite() {
                let $db = $crate::SqliteIsolado::novo().await;
                $corpo
                $db.descartar().await;
            }
        }
    };
}
