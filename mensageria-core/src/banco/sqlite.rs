//! The SQLite store, the embedded default.

use std::path::Path;
use std::sync::LazyLock;
use std::time::Duration;

use sqlx::migrate::{MigrateError, Migrator};
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous};
use sqlx::{Executor, Sqlite, SqlitePool};

use super::{Banco, NovaMensagem, TABELA_MIGRACOES, ultima_versao};

static MIGRADOR: LazyLock<Migrator> = LazyLock::new(|| {
    let mut migrador = sqlx::migrate!("migrations/sqlite");
    migrador.dangerous_set_table_name(TABELA_MIGRACOES);
    migrador
});

/// Opens (creating if needed) the SQLite file at `caminho` with the settings mensageria expects
/// from a store shared by a relay, a receptor and the app's own writes: WAL journal (readers do
/// not block the writer), `synchronous = FULL` (a commit survives power loss) and a 5 s busy
/// timeout (concurrent writers wait instead of failing with `SQLITE_BUSY`).
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let dir = tempfile::tempdir()?;
/// let pool = mensageria_core::banco::sqlite::abrir(dir.path().join("app.db")).await?;
/// mensageria_core::migrar(&pool).await?;
/// # Ok(()) }
/// ```
pub async fn abrir(caminho: impl AsRef<Path>) -> Result<SqlitePool, sqlx::Error> {
    let opcoes = SqliteConnectOptions::new()
        .filename(caminho)
        .create_if_missing(true)
        .journal_mode(SqliteJournalMode::Wal)
        .synchronous(SqliteSynchronous::Full)
        .busy_timeout(Duration::from_secs(5));
    SqlitePoolOptions::new()
        .max_connections(8)
        .connect_with(opcoes)
        .await
}

impl Banco for Sqlite {
    async fn migrar(pool: &SqlitePool) -> Result<(), MigrateError> {
        MIGRADOR.run(pool).await
    }

    fn versao_esperada() -> i64 {
        ultima_versao(&MIGRADOR)
    }

    async fn versao_aplicada(pool: &SqlitePool) -> Result<Option<i64>, sqlx::Error> {
        let existe: bool = sqlx::query_scalar(
            "SELECT EXISTS (SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?1)",
        )
        .bind(TABELA_MIGRACOES)
        .fetch_one(pool)
        .await?;
        if !existe {
            return Ok(None);
        }
        sqlx::query_scalar(
            "SELECT coalesce(max(version), 0) FROM _mensageria_migrations WHERE success",
        )
        .fetch_one(pool)
        .await
        .map(Some)
    }

    async fn inserir_na_saida<'e, 'm, E>(
        executor: E,
        m: NovaMensagem<'m>,
    ) -> Result<(), sqlx::Error>
    where
        E: Executor<'e, Database = Self> + 'm,
        'e: 'm,
    {
        sqlx::query(
            "INSERT INTO mensageria_saida (id_mensagem, tipo, payload, correlacao) \
             VALUES (?1, ?2, ?3, ?4)",
        )
        .bind(m.id_mensagem.to_string())
        .bind(m.tipo)
        .bind(m.payload)
        .bind(m.correlacao)
        .execute(executor)
        .await
        .map(drop)
    }
}
