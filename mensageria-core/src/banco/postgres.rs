//! The PostgreSQL store.

use std::sync::LazyLock;

use sqlx::migrate::{MigrateError, Migrator};
use sqlx::{Executor, PgPool, Postgres};

use super::{Banco, NovaMensagem, TABELA_MIGRACOES, ultima_versao};

static MIGRADOR: LazyLock<Migrator> = LazyLock::new(|| {
    let mut migrador = sqlx::migrate!("migrations/postgres");
    migrador.dangerous_set_table_name(TABELA_MIGRACOES);
    migrador
});

impl Banco for Postgres {
    async fn migrar(pool: &PgPool) -> Result<(), MigrateError> {
        MIGRADOR.run(pool).await
    }

    fn versao_esperada() -> i64 {
        ultima_versao(&MIGRADOR)
    }

    async fn versao_aplicada(pool: &PgPool) -> Result<Option<i64>, sqlx::Error> {
        // to_regclass follows the search_path, as the migrations did.
        let existe: bool = sqlx::query_scalar("SELECT to_regclass($1) IS NOT NULL")
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
             VALUES ($1, $2, $3::json, $4)",
        )
        .bind(m.id_mensagem)
        .bind(m.tipo)
        .bind(m.payload)
        .bind(m.correlacao)
        .execute(executor)
        .await
        .map(drop)
    }
}
