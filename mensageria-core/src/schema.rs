//! Who creates the tables, and how everybody else checks them.
//!
//! On a schema shared by several apps exactly one app owns the mensageria tables: it calls
//! [`migrar`] at start. Every other app calls [`verificar_schema`], which never changes anything
//! and fails with a message that says what is missing and who must fix it (two migrators on one
//! table collide at boot). An app that may start before the owner calls
//! [`esperar_schema`] instead: the same check, retried for a bounded time.
//!
//! Migrations are recorded in `_mensageria_migrations`, never in the application's own
//! `_sqlx_migrations`, and go into the first schema of the connection's `search_path` on
//! PostgreSQL.

use std::time::Duration;

use sqlx::Pool;
use tokio::time::Instant;

use crate::banco::Banco;
use crate::erro::Erro;

/// The first pause of [`esperar_schema`] between two checks; it doubles up to
/// [`ESPERA_MAXIMA`].
const ESPERA_INICIAL: Duration = Duration::from_millis(100);
/// The longest pause of [`esperar_schema`] between two checks.
const ESPERA_MAXIMA: Duration = Duration::from_secs(2);

/// The schema versions found by [`verificar_schema`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct VersaoSchema {
    /// The newest migration applied in the database.
    pub aplicada: i64,
    /// The newest migration this build knows.
    pub esperada: i64,
}

/// Creates or upgrades the mensageria tables: the schema owner's job. Running it again is a
/// no-op (and logs nothing); concurrent runs wait for each other (PostgreSQL advisory lock).
///
/// On PostgreSQL the tables go into the first existing schema of the connection's
/// `search_path`; when none of them exists, [`Erro::SchemaInexistente`] says which schema to
/// create (`CREATE SCHEMA …`) before anything runs. mensageria never creates a schema itself:
/// who may create one is the database administrator's decision.
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
#[doc(alias = "migrate")]
pub async fn migrar<DB: Banco>(pool: &Pool<DB>) -> Result<(), Erro> {
    DB::migrar(pool).await?;
    Ok(())
}

/// Checks, without changing anything, that the mensageria tables exist and are at least as new
/// as this build needs: what an app that shares a schema it does not own calls at start.
///
/// A schema newer than this build is accepted (the owner upgrades first; migrations add, or drop
/// what no build since needs: version 7 drops the lease owner's index, which an older build's
/// relay does not need either).
#[doc(alias("verify_schema", "check_schema"))]
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

/// [`verificar_schema`], retried until it succeeds or `prazo` has passed: what an app that does
/// not own the schema calls at start when it may come up before the owner (containers started
/// together, a deployment that upgrades the owner at the same time).
///
/// Retries while the schema is missing ([`Erro::SchemaAusente`]), older than this build
/// ([`Erro::SchemaDesatualizado`]: the owner may be upgrading it right now) or the database
/// cannot be reached ([`Erro::Banco`]), checking after 100 ms, then doubling the pause up to
/// 2 s. Logs one INFO line when it starts waiting (with the reason as `error` and `limite_ms`)
/// and one when the schema is ready (`fora_por_ms`: how long it waited); nothing when the schema
/// is ready at once. After `prazo` it returns the last error, whose text says who must do what.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), mensageria_core::Erro> {
/// use std::time::Duration;
///
/// let pool = sqlx::SqlitePool::connect("sqlite::memory:").await?;
/// // Nobody migrated: the wait ends after its deadline with the explanation.
/// let erro = mensageria_core::esperar_schema(&pool, Duration::from_millis(50)).await.unwrap_err();
/// assert!(matches!(erro, mensageria_core::Erro::SchemaAusente { .. }));
///
/// mensageria_core::migrar(&pool).await?; // the owner's job
/// let versao = mensageria_core::esperar_schema(&pool, Duration::from_secs(30)).await?;
/// assert_eq!(versao.aplicada, versao.esperada);
/// # Ok(()) }
/// ```
#[doc(alias = "wait_for_schema")]
pub async fn esperar_schema<DB: Banco>(
    pool: &Pool<DB>,
    prazo: Duration,
) -> Result<VersaoSchema, Erro> {
    let inicio = Instant::now();
    let mut pausa = ESPERA_INICIAL;
    let mut esperando = false;
    loop {
        let erro = match verificar_schema(pool).await {
            Ok(versao) => {
                if esperando {
                    tracing::info!(
                        aplicada = versao.aplicada,
                        esperada = versao.esperada,
                        fora_por_ms = inicio.elapsed().as_millis() as u64,
                        "mensageria: the schema is ready; starting"
                    );
                }
                return Ok(versao);
            }
            Err(
                erro @ (Erro::SchemaAusente { .. }
                | Erro::SchemaDesatualizado { .. }
                | Erro::Banco(_)),
            ) => erro,
            Err(outro) => return Err(outro),
        };
        let passou = inicio.elapsed();
        if passou >= prazo {
            return Err(erro);
        }
        if !esperando {
            esperando = true;
            tracing::info!(
                error = %erro,
                limite_ms = prazo.as_millis() as u64,
                "mensageria: waiting for the owner of the schema to run `migrar`"
            );
        }
        tokio::time::sleep(pausa.min(prazo - passou)).await;
        pausa = (pausa * 2).min(ESPERA_MAXIMA);
    }
}
