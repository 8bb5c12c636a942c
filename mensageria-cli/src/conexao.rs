//! The database a command talks to: PostgreSQL or SQLite, chosen by the URL, and the few SQL
//! fragments that differ between them.

use std::str::FromStr;
use std::time::Duration;

use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use sqlx::sqlite::{SqliteConnectOptions, SqlitePoolOptions};
use sqlx::{ConnectOptions, Connection, PgPool, SqlitePool};

use crate::erro::ErroCli;

/// How long connecting may take before the command gives up with one line.
const PRAZO_CONEXAO: Duration = Duration::from_secs(5);

/// An open pool on either backend.
pub(crate) enum Conexao {
    /// PostgreSQL, its `search_path` set to `--schema` when given.
    Postgres(PgPool),
    /// A SQLite file.
    Sqlite(SqlitePool),
}

/// Runs the same body with the pool of whichever backend `$conexao` holds; the body is
/// type-checked once per backend, so it can use sqlx's generic API without naming the backend.
macro_rules! nos_dois {
    ($conexao:expr, $pool:ident => $corpo:expr) => {
        match $conexao {
            $crate::conexao::Conexao::Postgres($pool) => $corpo,
            $crate::conexao::Conexao::Sqlite($pool) => $corpo,
        }
    };
}
pub(crate) use nos_dois;

/// Where to connect, as given on the command line.
pub(crate) struct Destino<'a> {
    /// `--database-url`.
    pub(crate) url: &'a str,
    /// `--schema` (PostgreSQL only).
    pub(crate) schema: Option<&'a str>,
    /// Create the SQLite file if it does not exist (only `migrar` does).
    pub(crate) criar: bool,
}

impl Conexao {
    /// Connects at once, so an unreachable database is reported before any work starts.
    pub(crate) async fn abrir(destino: Destino<'_>) -> Result<Self, ErroCli> {
        let url = destino.url;
        let falhou = |fonte| ErroCli::Conexao {
            url: sem_senha(url),
            fonte,
        };
        if url.starts_with("postgres://") || url.starts_with("postgresql://") {
            let mut opcoes = PgConnectOptions::from_str(url).map_err(falhou)?;
            if let Some(schema) = destino.schema {
                opcoes = opcoes.options([("search_path", schema)]);
            }
            sondar(&opcoes).await.map_err(falhou)?;
            let pool = PgPoolOptions::new()
                .max_connections(2)
                .acquire_timeout(PRAZO_CONEXAO)
                .connect_lazy_with(opcoes);
            Ok(Self::Postgres(pool))
        } else if url.starts_with("sqlite:") {
            let opcoes = SqliteConnectOptions::from_str(url)
                .map_err(falhou)?
                .create_if_missing(destino.criar)
                .busy_timeout(PRAZO_CONEXAO);
            sondar(&opcoes).await.map_err(falhou)?;
            let pool = SqlitePoolOptions::new()
                .max_connections(2)
                .acquire_timeout(PRAZO_CONEXAO)
                .connect_lazy_with(opcoes);
            Ok(Self::Sqlite(pool))
        } else {
            Err(ErroCli::UrlInvalida {
                url: sem_senha(url),
            })
        }
    }

    /// The SQL fragments of this backend.
    pub(crate) fn dialeto(&self) -> Dialeto {
        match self {
            Self::Postgres(_) => Dialeto::Postgres,
            Self::Sqlite(_) => Dialeto::Sqlite,
        }
    }

    /// Closes the pool (waits for its connections to end cleanly).
    pub(crate) async fn fechar(self) {
        nos_dois!(self, pool => pool.close().await)
    }
}

/// Opens and closes one connection, so the reason it fails (refused, unknown host, bad
/// password, no such file) is the one reported, not a pool timeout.
async fn sondar<O>(opcoes: &O) -> Result<(), sqlx::Error>
where
    O: ConnectOptions,
    O::Connection: Sized,
{
    match tokio::time::timeout(PRAZO_CONEXAO, opcoes.connect()).await {
        Ok(conexao) => conexao?.close().await,
        Err(_) => Err(sqlx::Error::PoolTimedOut),
    }
}

/// What differs in the SQL of the two backends: PostgreSQL stores `timestamptz`, `uuid` and
/// `json`; SQLite stores milliseconds since the epoch and text. Every query of the CLI reads
/// times as milliseconds and ids and payloads as text, through these fragments.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Dialeto {
    /// PostgreSQL.
    Postgres,
    /// SQLite.
    Sqlite,
}

impl Dialeto {
    /// The database clock, in milliseconds since the epoch.
    pub(crate) fn agora_ms(self) -> &'static str {
        match self {
            Self::Postgres => "CAST(extract(epoch FROM now()) * 1000 AS BIGINT)",
            Self::Sqlite => "CAST(unixepoch('subsec') * 1000 AS INTEGER)",
        }
    }

    /// A time column, in milliseconds since the epoch.
    pub(crate) fn ms(self, coluna: &str) -> String {
        match self {
            Self::Postgres => format!("CAST(extract(epoch FROM {coluna}) * 1000 AS BIGINT)"),
            Self::Sqlite => coluna.to_owned(),
        }
    }

    /// A `uuid` or `json` column, as text.
    pub(crate) fn texto(self, coluna: &str) -> String {
        match self {
            Self::Postgres => format!("{coluna}::text"),
            Self::Sqlite => coluna.to_owned(),
        }
    }

    /// A text parameter compared with a message id column.
    pub(crate) fn uuid(self, parametro: &str) -> String {
        match self {
            Self::Postgres => format!("{parametro}::uuid"),
            Self::Sqlite => parametro.to_owned(),
        }
    }
}

/// The URL with its password replaced by `***`, fit for messages.
pub(crate) fn sem_senha(url: &str) -> String {
    let url = sem_senha_na_consulta(url);
    let url = url.as_str();
    let Some((esquema, resto)) = url.split_once("://") else {
        return url.to_owned();
    };
    let Some((credenciais, servidor)) = resto.rsplit_once('@') else {
        return url.to_owned();
    };
    match credenciais.split_once(':') {
        Some((usuario, _)) => format!("{esquema}://{usuario}:***@{servidor}"),
        None => url.to_owned(),
    }
}

/// `?password=…` (or `&password=…`) in the query string, masked.
fn sem_senha_na_consulta(url: &str) -> String {
    let Some((base, consulta)) = url.split_once('?') else {
        return url.to_owned();
    };
    let partes: Vec<String> = consulta
        .split('&')
        .map(|parte| match parte.split_once('=') {
            Some((chave, _)) if chave.eq_ignore_ascii_case("password") => format!("{chave}=***"),
            _ => parte.to_owned(),
        })
        .collect();
    format!("{base}?{}", partes.join("&"))
}

#[cfg(test)]
mod testes {
    use super::sem_senha;

    #[test]
    fn esconde_a_senha() {
        assert_eq!(
            sem_senha("postgres://app:segredo@db:5432/x"),
            "postgres://app:***@db:5432/x"
        );
        assert_eq!(
            sem_senha("postgres://postgres@127.0.0.1/x"),
            "postgres://postgres@127.0.0.1/x"
        );
        assert_eq!(sem_senha("sqlite:app.db"), "sqlite:app.db");
        assert_eq!(
            sem_senha("postgres://app@db/x?sslmode=require&password=segredo"),
            "postgres://app@db/x?sslmode=require&password=***"
        );
    }
}
