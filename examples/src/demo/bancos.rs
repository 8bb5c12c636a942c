//! The few queries of the demo, for each backend: the embedded default (two SQLite files in a
//! temporary directory) or PostgreSQL (a fresh schema per app, dropped at the end).

use std::future::Future;
use std::str::FromStr;

use mensageria_core::Banco;
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use sqlx::{Encode, Executor, FromRow, IntoArguments, PgPool, Pool, Type};

use super::Erro;
use super::emissor::{self, EncerramentoMdfe};
use super::fiscal;

/// What the demo does with a database, written once for both backends (`$1` placeholders and
/// `count(*)` read alike in both).
pub(crate) trait BancoDemo: Banco {
    /// Migrates the saída and creates the business table.
    fn preparar_emissor(pool: &Pool<Self>) -> impl Future<Output = Result<(), Erro>> + Send;
    /// Migrates the dedup table and creates the effect table.
    fn preparar_fiscal(pool: &Pool<Self>) -> impl Future<Output = Result<(), Erro>> + Send;
    /// The producer's transaction: the business row and the message, together or not at all.
    fn encerrar(
        pool: &Pool<Self>,
        evento: &EncerramentoMdfe,
    ) -> impl Future<Output = Result<(), Erro>> + Send;
    /// Rows still in the saída, and of those how many are leased.
    fn pendentes(pool: &Pool<Self>) -> impl Future<Output = Result<(i64, i64), Erro>> + Send;
    /// Dead letters (a demo run should have none).
    fn mortas(pool: &Pool<Self>) -> impl Future<Output = Result<i64, Erro>> + Send;
    /// The keys of every MDF-e the emissor committed.
    fn encerradas(pool: &Pool<Self>) -> impl Future<Output = Result<Vec<String>, Erro>> + Send;
    /// The fiscal's effects: key and how many times it was applied.
    fn efeitos(pool: &Pool<Self>) -> impl Future<Output = Result<Vec<(String, i64)>, Erro>> + Send;
}

impl<DB> BancoDemo for DB
where
    DB: Banco<Arguments: IntoArguments<DB>>,
    for<'c> &'c mut DB::Connection: Executor<'c, Database = DB>,
    String: for<'q> Encode<'q, DB> + Type<DB>,
    (i64,): for<'r> FromRow<'r, DB::Row>,
    (String,): for<'r> FromRow<'r, DB::Row>,
    (i64, i64): for<'r> FromRow<'r, DB::Row>,
    (String, i64): for<'r> FromRow<'r, DB::Row>,
{
    async fn preparar_emissor(pool: &Pool<DB>) -> Result<(), Erro> {
        mensageria_core::migrar(pool).await?;
        sqlx::query(emissor::TABELA).execute(pool).await?;
        Ok(())
    }

    async fn preparar_fiscal(pool: &Pool<DB>) -> Result<(), Erro> {
        mensageria_core::migrar(pool).await?;
        sqlx::query(fiscal::TABELA).execute(pool).await?;
        Ok(())
    }

    async fn encerrar(pool: &Pool<DB>, evento: &EncerramentoMdfe) -> Result<(), Erro> {
        let mut tx = pool.begin().await?;
        sqlx::query("INSERT INTO mdfe (chave, cnpj, situacao) VALUES ($1, $2, 'encerrado')")
            .bind(&evento.chave_mdfe)
            .bind(&evento.cnpj)
            .execute(&mut *tx)
            .await?;
        mensageria_core::enfileirar(&mut *tx, evento).await?;
        tx.commit().await?;
        Ok(())
    }

    async fn pendentes(pool: &Pool<DB>) -> Result<(i64, i64), Erro> {
        Ok(
            sqlx::query_as("SELECT count(*), count(lease_token) FROM mensageria_saida")
                .fetch_one(pool)
                .await?,
        )
    }

    async fn mortas(pool: &Pool<DB>) -> Result<i64, Erro> {
        Ok(sqlx::query_scalar("SELECT count(*) FROM mensageria_mortas")
            .fetch_one(pool)
            .await?)
    }

    async fn encerradas(pool: &Pool<DB>) -> Result<Vec<String>, Erro> {
        Ok(sqlx::query_scalar("SELECT chave FROM mdfe")
            .fetch_all(pool)
            .await?)
    }

    async fn efeitos(pool: &Pool<DB>) -> Result<Vec<(String, i64)>, Erro> {
        Ok(
            sqlx::query_as("SELECT chave_mdfe, aplicacoes FROM encerramento")
                .fetch_all(pool)
                .await?,
        )
    }
}

/// A PostgreSQL schema of one app's own, for one run.
pub(crate) struct SchemaPg {
    pub(crate) pool: PgPool,
    nome: String,
}

impl SchemaPg {
    /// Creates `mensageria_demo_{app}_{random}` at `url` and a pool whose `search_path` is it.
    pub(crate) async fn criar(url: &str, app: &str) -> Result<Self, Erro> {
        let nome = format!("mensageria_demo_{app}_{}", uuid::Uuid::now_v7().simple());
        let admin = PgPool::connect(url)
            .await
            .map_err(|erro| format!("cannot reach the PostgreSQL of --postgres: {erro}"))?;
        sqlx::query(sqlx::AssertSqlSafe(format!("CREATE SCHEMA {nome}")))
            .execute(&admin)
            .await?;
        admin.close().await;
        let opcoes = PgConnectOptions::from_str(url)?.options([("search_path", nome.as_str())]);
        let pool = PgPoolOptions::new()
            .max_connections(8)
            .connect_with(opcoes)
            .await?;
        Ok(Self { pool, nome })
    }

    /// Drops the schema and everything in it.
    pub(crate) async fn descartar(self) -> Result<(), Erro> {
        sqlx::query(sqlx::AssertSqlSafe(format!(
            "DROP SCHEMA {} CASCADE",
            self.nome
        )))
        .execute(&self.pool)
        .await?;
        self.pool.close().await;
        Ok(())
    }
}
