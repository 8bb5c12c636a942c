//! A database of one test's own: a fresh PostgreSQL schema ([`PgIsolado`]) or a temporary
//! SQLite file ([`SqliteIsolado`]), migrated, with a small pool, removed by `fechar`. Tests that
//! use them run in parallel against one real server without seeing each other's rows.

#[cfg(feature = "postgres")]
pub use self::postgres::{PgIsolado, database_url};
#[cfg(feature = "sqlite")]
pub use self::sqlite::SqliteIsolado;

#[cfg(feature = "postgres")]
mod postgres {
    use std::str::FromStr;

    use sqlx::Connection as _;
    use sqlx::PgPool;
    use sqlx::postgres::{PgConnectOptions, PgPoolOptions};

    use crate::erro::Erro;

    /// The PostgreSQL server a test reaches: `DATABASE_URL`, or
    /// `postgres://postgres@127.0.0.1:5432/postgres` when it is not set.
    pub fn database_url() -> String {
        std::env::var("DATABASE_URL")
            .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/postgres".to_owned())
    }

    /// The pool size of [`PgIsolado::novo`] and [`PgIsolado::em`]: enough for a relay and a
    /// router in one test, small enough that many tests share one server.
    const CONEXOES: u32 = 3;

    /// A PostgreSQL schema of one test's own, with the mensageria tables, and a pool whose
    /// `search_path` is that schema (so unqualified SQL, yours and mensageria's, lands there).
    ///
    /// Each test gets a schema named `mensageria_teste_<uuidv7>`; [`fechar`](Self::fechar)
    /// closes the pool and drops the schema with everything in it. A test that fails its
    /// assertion never reaches `fechar`: dropping a `PgIsolado` that was not closed drops its
    /// schema too, on a connection of its own (waiting at most 5 s for locks that tasks of the
    /// failed test may still hold). A process killed outright runs no destructor: each new
    /// `PgIsolado` sweeps the test schemas created over six hours ago (the UUIDv7 in the name
    /// is its creation time), never younger ones.
    ///
    /// ```no_run
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), mensageria_core::Erro> {
    /// use mensageria_core::teste::PgIsolado;
    ///
    /// let db = PgIsolado::novo().await?; // DATABASE_URL, or the local server
    /// sqlx::query("CREATE TABLE estoque (item TEXT PRIMARY KEY, qtd BIGINT NOT NULL)")
    ///     .execute(db.pool())
    ///     .await?;
    /// // ... a relay and a router on db.pool().clone(), your assertions ...
    /// db.fechar().await?; // closes the pool, drops the schema
    /// # Ok(()) }
    /// ```
    #[derive(Debug)]
    pub struct PgIsolado {
        pool: PgPool,
        schema: String,
        opcoes: PgConnectOptions,
        admin: PgConnectOptions,
        /// `fechar` ran: nothing left for `drop` to do.
        fechado: bool,
    }

    impl PgIsolado {
        /// A fresh schema on [`database_url`], migrated ([`migrar`](crate::migrar)), with a
        /// pool of 3 connections.
        #[doc(alias = "new")]
        pub async fn novo() -> Result<Self, Erro> {
            Self::em(&database_url()).await
        }

        /// A fresh schema on the server at `url`, migrated, with a pool of 3 connections.
        pub async fn em(url: &str) -> Result<Self, Erro> {
            let isolado = Self::vazio(url, CONEXOES).await?;
            if let Err(erro) = crate::migrar(&isolado.pool).await {
                let _ = isolado.fechar().await;
                return Err(erro);
            }
            Ok(isolado)
        }

        /// A fresh, **empty** schema on the server at `url` (no mensageria tables: for tests
        /// of migrations and of an app that must wait for its schema's owner), with a pool of
        /// `conexoes` connections.
        pub async fn vazio(url: &str, conexoes: u32) -> Result<Self, Erro> {
            let admin = PgConnectOptions::from_str(url)?;
            varrer_schemas_velhos(&admin).await;
            let schema = format!("{PREFIXO}{}", uuid::Uuid::now_v7().simple());
            // The name is ours (letters, digits, `_`): nothing to quote.
            executar_uma_vez(&admin, format!("CREATE SCHEMA {schema}")).await?;
            let opcoes = admin.clone().options([("search_path", schema.as_str())]);
            let pool = match conectar(opcoes.clone(), conexoes).await {
                Ok(pool) => pool,
                Err(erro) => {
                    let _ = executar_uma_vez(&admin, format!("DROP SCHEMA {schema} CASCADE")).await;
                    return Err(erro.into());
                }
            };
            Ok(Self {
                pool,
                schema,
                opcoes,
                admin,
                fechado: false,
            })
        }

        /// The test's pool (its `search_path` is the test's schema).
        pub fn pool(&self) -> &PgPool {
            &self.pool
        }

        /// The schema's name.
        pub fn schema(&self) -> &str {
            &self.schema
        }

        /// The connect options of the test's pool, `search_path` included: for a pool of your
        /// own on the same schema (another app, a replica, a proxy in between, an
        /// `application_name`).
        pub fn opcoes_de_conexao(&self) -> PgConnectOptions {
            self.opcoes.clone()
        }

        /// Another pool of `conexoes` connections on the same schema (another app or replica
        /// sharing it). Close it before [`fechar`](Self::fechar), which waits for nobody.
        pub async fn outro_pool(&self, conexoes: u32) -> Result<PgPool, Erro> {
            Ok(conectar(self.opcoes.clone(), conexoes).await?)
        }

        /// Closes the pool and drops the schema with everything in it. Connections of other
        /// pools still on the schema do not hold it up (the drop waits for their locks only).
        pub async fn fechar(mut self) -> Result<(), Erro> {
            self.pool.close().await;
            self.fechado = true;
            executar_uma_vez(&self.admin, apagar(&self.schema)).await?;
            Ok(())
        }
    }

    /// A `PgIsolado` dropped without [`fechar`](PgIsolado::fechar) (its test panicked, or
    /// returned early) drops its schema on a fresh connection, from a thread and a runtime of
    /// its own (a destructor cannot await, and may run inside or outside a runtime). A failure
    /// is printed, never a panic during a panic.
    impl Drop for PgIsolado {
        fn drop(&mut self) {
            if self.fechado {
                return;
            }
            let admin = self
                .admin
                .clone()
                .options([("lock_timeout", PRAZO_DE_TRAVA)]);
            let schema = self.schema.clone();
            let apagado = std::thread::spawn(move || {
                let runtime = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .map_err(|e| e.to_string())?;
                runtime
                    .block_on(executar_uma_vez(&admin, apagar(&schema)))
                    .map_err(|e| e.to_string())
            })
            .join();
            match apagado {
                Ok(Ok(())) => {}
                Ok(Err(erro)) => eprintln!(
                    "mensageria teste: could not drop schema {} ({erro}); the next PgIsolado \
                     sweeps it after six hours",
                    self.schema
                ),
                Err(_) => eprintln!("mensageria teste: dropping schema {} panicked", self.schema),
            }
        }
    }

    /// Every test schema's name starts with this, followed by a UUIDv7 in simple form.
    const PREFIXO: &str = "mensageria_teste_";

    /// How long a test schema may live before any new `PgIsolado` sweeps it.
    const VIDA_MAXIMA: std::time::Duration = std::time::Duration::from_secs(6 * 3600);

    /// The longest `drop` waits for a lock before giving up on dropping the schema.
    const PRAZO_DE_TRAVA: &str = "5s";

    fn apagar(schema: &str) -> String {
        // The name is ours (letters, digits, `_`): nothing to quote.
        format!("DROP SCHEMA IF EXISTS {schema} CASCADE")
    }

    /// When a test schema was created, read from the UUIDv7 in its name (`None`: not ours).
    fn criado_em(schema: &str) -> Option<std::time::SystemTime> {
        let id = uuid::Uuid::try_parse(schema.strip_prefix(PREFIXO)?).ok()?;
        let (segundos, nanos) = id.get_timestamp()?.to_unix();
        Some(std::time::UNIX_EPOCH + std::time::Duration::new(segundos, nanos))
    }

    /// Drops the test schemas older than [`VIDA_MAXIMA`], left by processes killed before
    /// any destructor ran. Best effort: a failure (a sibling test sweeping the same schema, a
    /// lock) is ignored, the next sweep tries again.
    async fn varrer_schemas_velhos(admin: &PgConnectOptions) {
        let admin = admin.clone().options([("lock_timeout", PRAZO_DE_TRAVA)]);
        let Ok(mut conexao) = sqlx::PgConnection::connect_with(&admin).await else {
            return;
        };
        let nomes: Vec<String> = sqlx::query_scalar(
            "SELECT nspname::text FROM pg_namespace WHERE starts_with(nspname, $1)",
        )
        .bind(PREFIXO)
        .fetch_all(&mut conexao)
        .await
        .unwrap_or_default();
        let limite = std::time::SystemTime::now() - VIDA_MAXIMA;
        for nome in nomes {
            if criado_em(&nome).is_some_and(|criado| criado < limite) {
                let _ = sqlx::query(sqlx::AssertSqlSafe(apagar(&nome)))
                    .execute(&mut conexao)
                    .await;
            }
        }
        let _ = conexao.close().await;
    }

    async fn conectar(opcoes: PgConnectOptions, conexoes: u32) -> Result<PgPool, sqlx::Error> {
        PgPoolOptions::new()
            .max_connections(conexoes)
            .connect_with(opcoes)
            .await
    }

    /// Runs `sql` on a connection of its own, closed afterwards.
    async fn executar_uma_vez(opcoes: &PgConnectOptions, sql: String) -> Result<(), sqlx::Error> {
        let mut conexao = sqlx::PgConnection::connect_with(opcoes).await?;
        let resultado = sqlx::query(sqlx::AssertSqlSafe(sql))
            .execute(&mut conexao)
            .await;
        conexao.close().await?;
        resultado.map(drop)
    }
}

#[cfg(feature = "sqlite")]
mod sqlite {
    use std::path::Path;

    use sqlx::SqlitePool;

    use crate::erro::Erro;

    /// A SQLite file of one test's own, in a temporary directory, with the mensageria tables;
    /// the pool is opened as [`banco::sqlite::abrir`](crate::banco::sqlite::abrir) opens it
    /// (WAL, a busy timeout). [`fechar`](Self::fechar) closes the pool and deletes the
    /// directory (dropping it without `fechar` deletes the directory too).
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), mensageria_core::Erro> {
    /// use mensageria_core::teste::SqliteIsolado;
    ///
    /// let db = SqliteIsolado::novo().await?;
    /// sqlx::query("CREATE TABLE pago (pedido TEXT NOT NULL)").execute(db.pool()).await?;
    /// let arquivo = db.caminho().to_owned();
    /// db.fechar().await?;
    /// assert!(!arquivo.exists());
    /// # Ok(()) }
    /// ```
    #[derive(Debug)]
    pub struct SqliteIsolado {
        pool: SqlitePool,
        caminho: std::path::PathBuf,
        dir: tempfile::TempDir,
    }

    impl SqliteIsolado {
        /// A fresh file, migrated ([`migrar`](crate::migrar)).
        #[doc(alias = "new")]
        pub async fn novo() -> Result<Self, Erro> {
            let isolado = Self::vazio().await?;
            if let Err(erro) = crate::migrar(&isolado.pool).await {
                let _ = isolado.fechar().await;
                return Err(erro);
            }
            Ok(isolado)
        }

        /// A fresh, **empty** file (no mensageria tables).
        pub async fn vazio() -> Result<Self, Erro> {
            let dir = tempfile::Builder::new()
                .prefix("mensageria-teste-")
                .tempdir()
                .map_err(sqlx::Error::Io)?;
            let caminho = dir.path().join("teste.db");
            let pool = crate::banco::sqlite::abrir(&caminho).await?;
            Ok(Self { pool, caminho, dir })
        }

        /// The test's pool.
        pub fn pool(&self) -> &SqlitePool {
            &self.pool
        }

        /// The database file.
        pub fn caminho(&self) -> &Path {
            &self.caminho
        }

        /// Closes the pool and deletes the file (and its directory).
        pub async fn fechar(self) -> Result<(), Erro> {
            self.pool.close().await;
            self.dir.close().map_err(sqlx::Error::Io)?;
            Ok(())
        }
    }
}
