//! Operations: what an operator (and the `mensageria` CLI) does with a mensageria schema, as
//! documented functions over any [`Banco`] pool.
//!
//! - **Dead letters** ([`mensageria_mortas`](#tables)): [`listar_mortas`], [`buscar_morta`],
//!   [`reenfileirar_morta`] (one), [`reenfileirar_mortas`] (every one of a tipo, or all),
//!   [`descartar_morta`].
//! - **Receiver-side dead letters** (`mensageria_mortas_recebidas`: events a broker consumer's
//!   receptor refused for good): [`registrar_morta_recebida`], [`mortas_recebidas`],
//!   [`buscar_morta_recebida`], [`descartar_morta_recebida`], [`mortas_recebidas_por_tipo`].
//! - **Dedup records** of the receptores: [`registrar_recebida`] (the write a receptor makes in
//!   its transaction), [`registrar_recebidas`] (a batch's, in one statement) and [`purgar_recebidas`] (old records, in short batches).
//! - **Read models** behind `mensageria status`, `doctor` and `apps`: [`fila`], [`tentativas`],
//!   [`mortas_por_tipo`], [`reivindicacoes`], [`instancias`], [`versao_aplicada`],
//!   [`versao_esperada`], [`migracoes_falhas`], and [`remover_app`] for a retired app.
//! - **Ordering keys** (`mensageria ordem mostrar`, `status`, `doctor`): [`fila_da_chave`] (one
//!   key's queue) and [`retidas`] (rows held behind another tipo's head).
//! - **The backlog measure** the relay publishes as gauges: [`medir_backlog`].
//!
//! Every function reads or writes through the pool it is given, on the database's clock; times
//! come back in milliseconds since the Unix epoch (`*_em_ms`) and ages in milliseconds (`*_ha_ms`,
//! `idade_*`). Errors are [`ErroOperacao`]. The SQL lives with each backend, in
//! `banco/postgres.rs` and `banco/sqlite.rs`.
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use mensageria_core::operacoes;
//!
//! let pool = sqlx::SqlitePool::connect("sqlite::memory:").await?;
//! mensageria_core::migrar(&pool).await?;
//! assert!(operacoes::fila(&pool).await?.is_empty());
//! assert_eq!(operacoes::listar_mortas(&pool, None, 10).await?.total, 0);
//! # Ok(()) }
//! ```
//!
//! # Tables
//!
//! `mensageria_saida` (pending messages), `mensageria_mortas` (dead letters),
//! `mensageria_recebidas` (dedup records), `mensageria_apps` (which app claims which tipo) and
//! `mensageria_instancias` (relay instances and their heartbeats).

use std::num::NonZeroU32;
use std::time::Duration;

use sqlx::Pool;
use uuid::Uuid;

use crate::banco::Banco;

/// What went wrong in an operation, and what to do about it.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ErroOperacao {
    /// The database answered with an error or could not be reached.
    #[error("database error: {0}")]
    Banco(#[from] sqlx::Error),

    /// No dead letter has this message id (replayed or discarded meanwhile, or never there).
    #[error(
        "no dead letter with message id {id_mensagem}; `listar_mortas` shows the ones there are"
    )]
    MortaNaoEncontrada {
        /// The id asked for.
        id_mensagem: Uuid,
    },

    /// No receiver-side dead letter has this message id (of this app, when one was named).
    #[error(
        "no receiver-side dead letter with message id {id_mensagem}{}; \
         `mortas_recebidas` shows the ones there are",
        app.as_deref().map(|a| format!(" of app `{a}`")).unwrap_or_default()
    )]
    MortaRecebidaNaoEncontrada {
        /// The id asked for.
        id_mensagem: Uuid,
        /// The app asked for, if one.
        app: Option<String>,
    },

    /// Unowned dedup records can only be given to named apps.
    #[error(
        "name the receiving app(s) that should own the unowned dedup records (`--app <app>`, \
         once per app); a blank name owns nothing"
    )]
    SemApp,

    /// Several receiving apps keep a dead letter with this message id: name the app.
    #[error(
        "receiver-side dead letters with message id {id_mensagem} are kept by {} apps ({}): \
         name the app",
        apps.len(),
        apps.join(", ")
    )]
    MortaRecebidaAmbigua {
        /// The id asked for.
        id_mensagem: Uuid,
        /// The apps that keep one.
        apps: Vec<String>,
    },

    /// [`remover_app`] found instances of the app alive: nothing was changed.
    #[error(
        "refusing to remove app `{app}`: instance(s) {} are alive; stop its relays first, then \
         try again; nothing was changed",
        instancias.join(", ")
    )]
    AppVivo {
        /// The app.
        app: String,
        /// Its instances still alive (`app@name`).
        instancias: Vec<String>,
    },
}

/// The shortest silence after which a relay instance counts as dead, whatever its own dead-after
/// period: a relay configured with a very short lease (a test's) should not flicker between alive
/// and dead in an operator's report because one heartbeat was late. [`remover_app`] and the CLI's
/// `apps` and `doctor` judge instances with it.
pub const PISO_DE_VIDA: Duration = Duration::from_secs(10);

fn ms(duracao: Duration) -> i64 {
    i64::try_from(duracao.as_millis()).unwrap_or(i64::MAX)
}

// ---------------------------------------------------------------------------------------------
// Dead letters

/// One dead letter, in full: a row of `mensageria_mortas`.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
#[doc(alias("DeadLetter", "dead letter"))]
pub struct Morta {
    /// Its message id (the one the receptor dedups on).
    pub id_mensagem: Uuid,
    /// Its tipo.
    pub tipo: String,
    /// Attempts made before the relay gave up.
    pub tentativas: i64,
    /// The last attempt's error.
    pub ultimo_erro: String,
    /// The app whose relay dead-lettered it (`None` for rows older than that column).
    pub app: Option<String>,
    /// Its correlation id, if it had one.
    pub correlacao: Option<String>,
    /// When it was first enqueued (ms since the epoch).
    pub criada_em_ms: i64,
    /// When it became a dead letter (ms since the epoch).
    pub morta_em_ms: i64,
    /// How long ago that was (ms, database clock; never negative).
    pub morta_ha_ms: i64,
    /// The payload, JSON text byte for byte as enqueued.
    pub payload: String,
    /// The W3C `traceparent` it was enqueued under, if any: its trace in the tracing backend
    /// (see [`crate::rastreamento`]); a replay continues that trace.
    pub traceparent: Option<String>,
}

/// One dead letter as a list shows it: [`Morta`] without its payload and correlation id.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct MortaListada {
    /// Its message id.
    pub id_mensagem: Uuid,
    /// Its tipo.
    pub tipo: String,
    /// Attempts made before the relay gave up.
    pub tentativas: i64,
    /// The app whose relay dead-lettered it.
    pub app: Option<String>,
    /// When it became a dead letter (ms since the epoch).
    pub morta_em_ms: i64,
    /// How long ago that was (ms; never negative).
    pub morta_ha_ms: i64,
    /// The last attempt's error.
    pub ultimo_erro: String,
}

/// An event the receiving side refused for good after a broker delivered it (see
/// `mensageria-nats`): kept as received, in the receiving app's database, since the broker was
/// told to stop redelivering it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MortaRecebida {
    /// The receiving app.
    pub app: String,
    /// The message id.
    pub id_mensagem: Uuid,
    /// Its tipo.
    pub tipo: String,
    /// Where it came from (`nats:<stream>:<subject>`).
    pub origem: String,
    /// The payload as received.
    pub payload: String,
    /// The correlation id it came with, if any.
    pub correlacao: Option<String>,
    /// Why it was refused.
    pub motivo: String,
    /// How many times the broker had delivered it.
    pub entregas: i64,
    /// When it was kept (ms since the epoch; set by the database when recording).
    pub morta_em_ms: i64,
    /// The W3C `traceparent` it arrived with, if any: a replay continues that trace.
    pub traceparent: Option<String>,
    /// Its `tracestate`, if any.
    pub tracestate: Option<String>,
    /// Its stream sequence, when a broker delivered it (a message with no usable id is found by
    /// it; schema 10 on, SQLite 6).
    pub sequencia: Option<i64>,
    /// The ordering key it travelled with, when it came through an ordered lane (schema 11 on,
    /// SQLite 7): it holds the key's later messages behind it, and the key's dead letters are
    /// replayed in `sequencia` order.
    pub chave_ordem: Option<String>,
}

/// Keeps one receiver-side dead letter (an event a broker delivered and the receptor refused for
/// good); a second record of the same app and message id changes nothing. Returns whether it was
/// recorded now. `morta_em_ms` is ignored: the database's clock sets it.
pub async fn registrar_morta_recebida<DB: Banco>(
    pool: &Pool<DB>,
    morta: &MortaRecebida,
) -> Result<bool, ErroOperacao> {
    Ok(DB::registrar_morta_recebida(pool, morta).await?)
}

/// The receiver-side dead letters of `app` (every app with `None`), newest first, at most
/// `limite` (none when it is negative).
pub async fn mortas_recebidas<DB: Banco>(
    pool: &Pool<DB>,
    app: Option<&str>,
    limite: i64,
) -> Result<Vec<MortaRecebida>, ErroOperacao> {
    Ok(DB::mortas_recebidas(pool, app, limite.max(0)).await?)
}

/// The receiver-side dead letter `id_mensagem` of `app` (or of whichever app holds it, with
/// `None`): [`ErroOperacao::MortaRecebidaNaoEncontrada`] if none,
/// [`ErroOperacao::MortaRecebidaAmbigua`] if `app` is `None` and several apps hold it (fan-out:
/// every receiving app gets the event, and each may refuse it).
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// # let pool = sqlx::SqlitePool::connect("sqlite::memory:").await?;
/// # mensageria_core::migrar(&pool).await?;
/// use mensageria_core::operacoes::{self, ErroOperacao};
///
/// let id = uuid::Uuid::now_v7();
/// assert!(matches!(
///     operacoes::buscar_morta_recebida(&pool, id, Some("estoque")).await,
///     Err(ErroOperacao::MortaRecebidaNaoEncontrada { .. })
/// ));
/// # Ok(()) }
/// ```
#[doc(alias = "get_received_dead_letter")]
pub async fn buscar_morta_recebida<DB: Banco>(
    pool: &Pool<DB>,
    id_mensagem: Uuid,
    app: Option<&str>,
) -> Result<MortaRecebida, ErroOperacao> {
    let mut achadas = DB::buscar_mortas_recebidas(pool, id_mensagem, app).await?;
    match achadas.len() {
        0 => Err(ErroOperacao::MortaRecebidaNaoEncontrada {
            id_mensagem,
            app: app.map(str::to_owned),
        }),
        1 => Ok(achadas.remove(0)),
        _ => Err(ErroOperacao::MortaRecebidaAmbigua {
            id_mensagem,
            apps: achadas.into_iter().map(|m| m.app).collect(),
        }),
    }
}

/// The first dead letter of `app` with ordering key `chave` that comes before position
/// `sequencia` of the key (a later message of the key is held behind it), if there is one.
pub async fn morta_recebida_que_retem<DB: Banco>(
    pool: &Pool<DB>,
    app: &str,
    chave: &str,
    sequencia: i64,
) -> Result<Option<Uuid>, ErroOperacao> {
    Ok(DB::morta_recebida_que_retem(pool, app, chave, sequencia).await?)
}

/// The ordering keys of `app` whose receiver-side dead letters its JetStream consumer resumes
/// by itself: `parked` ones (temporary failures), and `held` ones (which go on once nothing is
/// before them any more: the dead letter they waited behind was replayed or discarded).
pub async fn chaves_a_retomar<DB: Banco>(
    pool: &Pool<DB>,
    app: &str,
) -> Result<Vec<String>, ErroOperacao> {
    Ok(DB::chaves_a_retomar(pool, app).await?)
}

/// The dead letters of `app` with ordering key `chave`, in the key's order (`sequencia`).
pub async fn mortas_recebidas_da_chave<DB: Banco>(
    pool: &Pool<DB>,
    app: &str,
    chave: &str,
) -> Result<Vec<MortaRecebida>, ErroOperacao> {
    Ok(DB::mortas_recebidas_da_chave(pool, app, chave).await?)
}

/// Deletes `app`'s receiver-side dead letter `id_mensagem` for good;
/// [`ErroOperacao::MortaRecebidaNaoEncontrada`] if there is none. Replaying one is the
/// receiving app's job (its consumer holds the receptor), not a database operation.
#[doc(alias = "discard_received_dead_letter")]
pub async fn descartar_morta_recebida<DB: Banco>(
    pool: &Pool<DB>,
    app: &str,
    id_mensagem: Uuid,
) -> Result<(), ErroOperacao> {
    match DB::descartar_morta_recebida(pool, app, id_mensagem).await? {
        0 => Err(ErroOperacao::MortaRecebidaNaoEncontrada {
            id_mensagem,
            app: Some(app.to_owned()),
        }),
        _ => Ok(()),
    }
}

/// How many receiver-side dead letters one receiving app keeps of one tipo.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct MortasRecebidasDoTipo {
    /// The receiving app.
    pub app: String,
    /// The tipo.
    pub tipo: String,
    /// Its receiver-side dead letters.
    pub mortas: i64,
}

/// Receiver-side dead letters per receiving app and tipo, by app then tipo.
pub async fn mortas_recebidas_por_tipo<DB: Banco>(
    pool: &Pool<DB>,
) -> Result<Vec<MortasRecebidasDoTipo>, ErroOperacao> {
    Ok(DB::mortas_recebidas_por_tipo(pool).await?)
}

/// A page of dead letters: what [`listar_mortas`] returns.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct PaginaDeMortas {
    /// Dead letters matching the filter, all of them (not only those in `mortas`).
    pub total: i64,
    /// The newest ones, at most the limit asked for.
    pub mortas: Vec<MortaListada>,
}

/// The dead letters (of `tipo`, when given), newest first, at most `limite` of them, and how
/// many match in all.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// # let pool = sqlx::SqlitePool::connect("sqlite::memory:").await?;
/// # mensageria_core::migrar(&pool).await?;
/// use mensageria_core::operacoes;
///
/// let pagina = operacoes::listar_mortas(&pool, Some("mdfe.encerramento"), 50).await?;
/// for morta in &pagina.mortas {
///     println!("{} {} {}", morta.id_mensagem, morta.tentativas, morta.ultimo_erro);
/// }
/// assert_eq!(pagina.total, 0);
/// # Ok(()) }
/// ```
#[doc(alias("dead letters", "dlq", "list_dead_letters"))]
pub async fn listar_mortas<DB: Banco>(
    pool: &Pool<DB>,
    tipo: Option<&str>,
    limite: i64,
) -> Result<PaginaDeMortas, ErroOperacao> {
    let (mortas, total) = DB::listar_mortas(pool, tipo, limite.max(0)).await?;
    Ok(PaginaDeMortas { total, mortas })
}

/// The dead letter `id_mensagem` in full, or [`ErroOperacao::MortaNaoEncontrada`].
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// # let pool = sqlx::SqlitePool::connect("sqlite::memory:").await?;
/// # mensageria_core::migrar(&pool).await?;
/// use mensageria_core::operacoes::{self, ErroOperacao};
///
/// let id = uuid::Uuid::now_v7();
/// assert!(matches!(
///     operacoes::buscar_morta(&pool, id).await,
///     Err(ErroOperacao::MortaNaoEncontrada { .. })
/// ));
/// # Ok(()) }
/// ```
#[doc(alias = "get_dead_letter")]
pub async fn buscar_morta<DB: Banco>(
    pool: &Pool<DB>,
    id_mensagem: Uuid,
) -> Result<Morta, ErroOperacao> {
    DB::buscar_morta(pool, id_mensagem)
        .await?
        .ok_or(ErroOperacao::MortaNaoEncontrada { id_mensagem })
}

/// Puts the dead letter `id_mensagem` back in the saída: same message id, payload and
/// correlation id, attempts reset to 0 and its age counted from now (the relay's
/// `idade_maxima` starts over). The relay of the app that sends its tipo delivers it at its next
/// round. [`ErroOperacao::MortaNaoEncontrada`] if there is no such dead letter.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// # let pool = sqlx::SqlitePool::connect("sqlite::memory:").await?;
/// # mensageria_core::migrar(&pool).await?;
/// use mensageria_core::operacoes::{self, ErroOperacao};
///
/// let resultado = operacoes::reenfileirar_morta(&pool, uuid::Uuid::now_v7()).await;
/// assert!(matches!(resultado, Err(ErroOperacao::MortaNaoEncontrada { .. })));
/// # Ok(()) }
/// ```
#[doc(alias("replay", "requeue", "redrive"))]
pub async fn reenfileirar_morta<DB: Banco>(
    pool: &Pool<DB>,
    id_mensagem: Uuid,
) -> Result<(), ErroOperacao> {
    match DB::reenfileirar_mortas(pool, Some(id_mensagem), None).await? {
        0 => Err(ErroOperacao::MortaNaoEncontrada { id_mensagem }),
        _ => Ok(()),
    }
}

/// Puts every dead letter of `tipo` (of every tipo with `None`) back in the saída, as
/// [`reenfileirar_morta`] does for one, in one transaction; returns how many moved.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// # let pool = sqlx::SqlitePool::connect("sqlite::memory:").await?;
/// # mensageria_core::migrar(&pool).await?;
/// use mensageria_core::operacoes;
///
/// let movidas = operacoes::reenfileirar_mortas(&pool, Some("mdfe.encerramento")).await?;
/// assert_eq!(movidas, 0);
/// # Ok(()) }
/// ```
#[doc(alias("replay", "requeue", "redrive"))]
pub async fn reenfileirar_mortas<DB: Banco>(
    pool: &Pool<DB>,
    tipo: Option<&str>,
) -> Result<u64, ErroOperacao> {
    Ok(DB::reenfileirar_mortas(pool, None, tipo).await?)
}

/// Deletes the dead letter `id_mensagem` for good (it cannot be replayed afterwards).
/// [`ErroOperacao::MortaNaoEncontrada`] if there is none (replayed or discarded meanwhile).
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// # let pool = sqlx::SqlitePool::connect("sqlite::memory:").await?;
/// # mensageria_core::migrar(&pool).await?;
/// let resultado = mensageria_core::operacoes::descartar_morta(&pool, uuid::Uuid::now_v7()).await;
/// assert!(resultado.is_err());
/// # Ok(()) }
/// ```
#[doc(alias("discard", "delete_dead_letter"))]
pub async fn descartar_morta<DB: Banco>(
    pool: &Pool<DB>,
    id_mensagem: Uuid,
) -> Result<(), ErroOperacao> {
    match DB::descartar_morta(pool, id_mensagem).await? {
        0 => Err(ErroOperacao::MortaNaoEncontrada { id_mensagem }),
        _ => Ok(()),
    }
}

// ---------------------------------------------------------------------------------------------
// Dedup records

/// A receptor's dedup record, about to be written by [`registrar_recebida`].
#[derive(Debug, Clone, Copy)]
pub struct Recebida<'a> {
    /// The receiving app: each app that receives a tipo keeps its own dedup records, so two
    /// apps on one schema both apply every event (the name its `Config` gives, validated as
    /// relay app names are).
    pub app: &'a str,
    /// The tipo received.
    pub tipo: &'a str,
    /// The natural key, as the receptor encoded it (canonical JSON).
    pub chave: &'a str,
    /// The message id the sender gave, if any (kept for tracing, not for dedup).
    pub id_mensagem: Option<Uuid>,
    /// Convergent mode: the event's version (`None`: plain dedup, the first arrival wins).
    pub versao: Option<i64>,
}

/// Writes a receptor's dedup record through `conexao` (the receptor's transaction): `true` for
/// the first arrival of `(app, tipo, chave)` (or, with a `versao`, a newer version than the one
/// stored): apply the effect in the same transaction; `false` for a duplicate (or an equal or
/// older version): apply nothing. A concurrent duplicate waits for the first transaction, then
/// sees its outcome. `mensageria-axum`'s receptores call it; a hand-written receiver can too.
///
/// A record written before schema version 10 (PostgreSQL; 6 on SQLite) has no app (`app = ''`):
/// until `mensageria recebidas adotar` gives it to its owner, every app counts it as its own, so
/// no key applied before the upgrade is applied again.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// use mensageria_core::operacoes::{Recebida, registrar_recebida};
///
/// let pool = sqlx::SqlitePool::connect("sqlite::memory:").await?;
/// mensageria_core::migrar(&pool).await?;
/// let recebida = Recebida {
///     app: "fiscal",
///     tipo: "mdfe.encerramento",
///     chave: "[\"4321\"]",
///     id_mensagem: None,
///     versao: None,
/// };
/// let mut tx = pool.begin().await?;
/// assert!(registrar_recebida::<sqlx::Sqlite>(&mut *tx, recebida).await?, "first arrival");
/// assert!(!registrar_recebida::<sqlx::Sqlite>(&mut *tx, recebida).await?, "a duplicate");
/// // Another receiving app keeps records of its own: it applies the event too.
/// let outra = Recebida { app: "auditoria", ..recebida };
/// assert!(registrar_recebida::<sqlx::Sqlite>(&mut *tx, outra).await?, "another app's first");
/// tx.commit().await?;
/// # Ok(()) }
/// ```
#[doc(alias("inbox", "dedup", "idempotency"))]
pub async fn registrar_recebida<'c, DB: Banco>(
    conexao: &'c mut <DB as sqlx::Database>::Connection,
    recebida: Recebida<'c>,
) -> Result<bool, sqlx::Error> {
    exigir_app(recebida.app)?;
    DB::registrar_recebida(conexao, recebida).await
}

/// A dedup record must name its receiving app: a blank one would be an unowned record, which
/// every other app counts as its own.
fn exigir_app(app: &str) -> Result<(), sqlx::Error> {
    if app.trim().is_empty() {
        return Err(sqlx::Error::InvalidArgument(
            "a dedup record needs its receiving app's name (Recebida::app is blank)".to_owned(),
        ));
    }
    Ok(())
}

/// The dedup records of a batch, written through `conexao` (the batch's transaction)
/// in one statement per tipo: for each recebida, in order, `true` when it is recorded now (first arrival,
/// or with a `versao` a newer version than the one stored: apply its effect in the same
/// transaction) and `false` for a duplicate (apply nothing). A key given twice is recorded at
/// most once, for its first occurrence. mensageria-axum's batch route (`POST {base}/{tipo}/lote`)
/// calls it.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// use mensageria_core::operacoes::{Recebida, registrar_recebidas};
///
/// let pool = sqlx::SqlitePool::connect("sqlite::memory:").await?;
/// mensageria_core::migrar(&pool).await?;
/// let recebida = |chave| Recebida {
///     app: "estoque",
///     tipo: "loja.pedido",
///     chave,
///     id_mensagem: None,
///     versao: None,
/// };
/// let mut tx = pool.begin().await?;
/// let primeira = [recebida("[1]"), recebida("[2]")];
/// assert_eq!(registrar_recebidas::<sqlx::Sqlite>(&mut *tx, &primeira).await?, [true, true]);
/// let segunda = [recebida("[2]"), recebida("[3]"), recebida("[3]")];
/// assert_eq!(registrar_recebidas::<sqlx::Sqlite>(&mut *tx, &segunda).await?, [false, true, false]);
/// tx.commit().await?;
/// # Ok(()) }
/// ```
pub async fn registrar_recebidas<DB: Banco>(
    conexao: &mut <DB as sqlx::Database>::Connection,
    recebidas: &[Recebida<'_>],
) -> Result<Vec<bool>, sqlx::Error> {
    for recebida in recebidas {
        exigir_app(recebida.app)?;
    }
    let mut vistas = std::collections::HashSet::with_capacity(recebidas.len());
    let primeiras: Vec<bool> = recebidas
        .iter()
        .map(|r| vistas.insert((r.app, r.tipo, r.chave)))
        .collect();
    let mut grupos: Vec<(&str, &str)> = recebidas.iter().map(|r| (r.app, r.tipo)).collect();
    grupos.sort_unstable();
    grupos.dedup();
    // One statement per app and tipo (a receptor's batch has one of each).
    let mut novas = std::collections::HashSet::new();
    for (app, tipo) in grupos {
        let do_grupo = |r: &&Recebida<'_>| r.app == app && r.tipo == tipo;
        let itens = recebidas
            .iter()
            .zip(&primeiras)
            .filter(|(r, primeira)| **primeira && do_grupo(r))
            .map(|(r, _)| (r.chave.to_owned(), r.id_mensagem, r.versao))
            .collect();
        let convergente = recebidas
            .iter()
            .filter(do_grupo)
            .any(|r| r.versao.is_some());
        for chave in DB::registrar_recebidas(conexao, app, tipo, itens, convergente).await? {
            novas.insert((app, tipo, chave));
        }
    }
    Ok(recebidas
        .iter()
        .zip(primeiras)
        .map(|(r, primeira)| primeira && novas.contains(&(r.app, r.tipo, r.chave.to_owned())))
        .collect())
}

/// What [`purgar_recebidas`] deleted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct Purga {
    /// Dedup records deleted.
    pub apagadas: u64,
    /// Statements run (batches).
    pub lotes: u64,
}

/// Deletes the dedup records older than `retencao` (of receiving app `app`, or of every app
/// with `None`), `lote` at a time (one short statement each, so no long locks), until a batch
/// comes back short. Each app may keep its records for as long as its own senders need: a
/// receiving app's `mensageria_axum::purgar` purges its own.
///
/// Keep `retencao` longer than the senders' redelivery horizon: a redelivery that arrives after
/// its record was purged is applied again.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// use std::num::NonZeroU32;
/// use std::time::Duration;
///
/// let pool = sqlx::SqlitePool::connect("sqlite::memory:").await?;
/// mensageria_core::migrar(&pool).await?;
/// let lote = NonZeroU32::new(1000).unwrap();
/// let retencao = Duration::from_secs(30 * 86_400);
/// let purga =
///     mensageria_core::operacoes::purgar_recebidas(&pool, Some("estoque"), retencao, lote).await?;
/// assert_eq!((purga.apagadas, purga.lotes), (0, 1));
/// # Ok(()) }
/// ```
#[doc(alias("purge", "inbox", "dedup"))]
pub async fn purgar_recebidas<DB: Banco>(
    pool: &Pool<DB>,
    app: Option<&str>,
    retencao: Duration,
    lote: NonZeroU32,
) -> Result<Purga, ErroOperacao> {
    let idade_ms = ms(retencao);
    let lote = u64::from(lote.get());
    let mut purga = Purga {
        apagadas: 0,
        lotes: 0,
    };
    loop {
        let agora = DB::purgar_recebidas(pool, app, idade_ms, lote as i64).await?;
        purga.apagadas += agora;
        purga.lotes += 1;
        if agora < lote {
            return Ok(purga);
        }
    }
}

/// How many dedup records one receiving app keeps of one tipo (`app` empty: unowned records,
/// written before schema version 10 on PostgreSQL, 6 on SQLite, when the key had no app).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct RecebidasDoApp {
    /// The receiving app; empty for unowned records.
    pub app: String,
    /// The tipo.
    pub tipo: String,
    /// Its dedup records.
    pub registros: i64,
    /// How long ago the newest one was written, in ms (database clock).
    pub mais_recente_ha_ms: i64,
}

/// Dedup records per receiving app and tipo, by app then tipo (unowned ones first, with an
/// empty app). One scan of `mensageria_recebidas`: an operator's query, not a hot path.
#[doc(alias("inbox", "dedup"))]
pub async fn recebidas_por_app<DB: Banco>(
    pool: &Pool<DB>,
) -> Result<Vec<RecebidasDoApp>, ErroOperacao> {
    Ok(DB::recebidas_por_app(pool).await?)
}

/// Gives the unowned dedup records (written before the key had an app; of `tipo`, when given)
/// to their owners after an upgrade: each record becomes a record of every app of `apps`, and
/// the unowned one goes, in batches of `lote` (one short transaction each). Returns how many
/// unowned records went.
///
/// Until then every receptor counts an unowned record of its tipo and key as its own, so an
/// upgrade applies no old key twice. When a single app received on the schema, give them to it.
/// When several received one tipo, the history does not say which applied what (before the
/// upgrade each key was applied by whichever came first): giving the records to all of them
/// keeps every old key deduplicated for every app (none applies it again; those the other app
/// applied stay missed by this one, as they already were). `mensageria recebidas adotar` runs it.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// use std::num::NonZeroU32;
/// use mensageria_core::operacoes::{adotar_recebidas, recebidas_por_app};
///
/// let pool = sqlx::SqlitePool::connect("sqlite::memory:").await?;
/// mensageria_core::migrar(&pool).await?;
/// let lote = NonZeroU32::new(10_000).unwrap();
/// let adotadas = adotar_recebidas(&pool, &["estoque", "analise"], None, lote).await?;
/// assert_eq!(adotadas, 0, "a new schema has no unowned record");
/// assert!(recebidas_por_app(&pool).await?.is_empty());
/// # Ok(()) }
/// ```
#[doc(alias("adopt", "inbox", "dedup"))]
pub async fn adotar_recebidas<DB: Banco>(
    pool: &Pool<DB>,
    apps: &[&str],
    tipo: Option<&str>,
    lote: NonZeroU32,
) -> Result<u64, ErroOperacao> {
    if apps.is_empty() || apps.iter().any(|app| app.trim().is_empty()) {
        return Err(ErroOperacao::SemApp);
    }
    let lote = u64::from(lote.get());
    let mut adotadas = 0;
    loop {
        let agora = DB::adotar_recebidas(pool, apps, tipo, lote as i64).await?;
        adotadas += agora;
        if agora < lote {
            return Ok(adotadas);
        }
    }
}

/// One receiving app's registration: it receives a tipo through a transport (`http`: a
/// router's receptor; `nats`: a JetStream consumer), seen `visto_ha_ms` ago.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ReceptorDoApp {
    /// The receiving app.
    pub app: String,
    /// The tipo it receives.
    pub tipo: String,
    /// `http` or `nats`.
    pub transporte: String,
    /// How long ago it last said so, in ms (database clock).
    pub visto_ha_ms: i64,
    /// A JetStream consumer's lag when it last said so (`None` over HTTP).
    pub consumo: Option<Consumo>,
}

/// A JetStream consumer's lag for one tipo (its lanes summed), as its app measured it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct Consumo {
    /// Messages in the stream waiting to be delivered to it.
    pub pendentes: i64,
    /// Messages delivered to it and not settled yet.
    pub em_voo: i64,
    /// Messages delivered more than once (the server's count).
    pub reentregues: i64,
    /// The oldest message it has not settled: its age in ms (0 when none waits).
    pub mais_antiga_ms: i64,
    /// The stream's `max_age` in ms: past it, the stream deletes a message, applied or not.
    pub max_age_ms: i64,
}

impl Consumo {
    /// A lag as measured: waiting, in flight, redelivered, oldest age and the stream's
    /// `max_age`, in ms.
    pub fn new(
        pendentes: i64,
        em_voo: i64,
        reentregues: i64,
        mais_antiga_ms: i64,
        max_age_ms: i64,
    ) -> Self {
        Self {
            pendentes,
            em_voo,
            reentregues,
            mais_antiga_ms,
            max_age_ms,
        }
    }
}

/// Records a JetStream consumer's registration with its lag: receiving app `app` consumes
/// `tipo` (transport `nats`), now. `mensageria_nats::Consumidor` calls it every few seconds;
/// `status` and `doctor` read it.
pub async fn registrar_consumidor<DB: Banco>(
    pool: &Pool<DB>,
    app: &str,
    tipo: &str,
    consumo: &Consumo,
) -> Result<(), ErroOperacao> {
    Ok(DB::registrar_consumidor(pool, app, tipo, consumo).await?)
}

/// Records that receiving app `app` receives `tipos` through `transporte` (`http` or `nats`),
/// now: what `status` and `doctor` read to see a pure receiver. `mensageria_axum::servir` and
/// `mensageria_nats::Consumidor` call it at start and every 15 s.
pub async fn registrar_receptores<DB: Banco>(
    pool: &Pool<DB>,
    app: &str,
    tipos: &[&str],
    transporte: &str,
) -> Result<(), ErroOperacao> {
    if tipos.is_empty() {
        return Ok(());
    }
    Ok(DB::registrar_receptores(pool, app, tipos, transporte).await?)
}

/// Whether receiving app `app` applied message `id_mensagem` (its dedup record says so). An
/// unindexed look, for rare checks: a JetStream consumer asks it before recording as expired a
/// message a sibling replica may have applied.
pub async fn recebida_por_id<DB: Banco>(
    pool: &Pool<DB>,
    app: &str,
    id_mensagem: Uuid,
) -> Result<bool, ErroOperacao> {
    Ok(DB::recebida_por_id(pool, app, id_mensagem).await?)
}

/// Forgets a retired receiving app's registrations (`mensageria_receptores`); returns how many
/// rows went. Its dedup records and dead letters stay (purged by age, or discarded).
pub async fn esquecer_receptor<DB: Banco>(pool: &Pool<DB>, app: &str) -> Result<u64, ErroOperacao> {
    Ok(DB::esquecer_receptor(pool, app).await?)
}

/// Every receiving app's registrations, by tipo then app.
pub async fn receptores<DB: Banco>(pool: &Pool<DB>) -> Result<Vec<ReceptorDoApp>, ErroOperacao> {
    Ok(DB::receptores(pool).await?)
}

// ---------------------------------------------------------------------------------------------
// Read models

/// The saída of one tipo: what [`fila`] returns per tipo.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct FilaDoTipo {
    /// The tipo.
    pub tipo: String,
    /// Rows of the tipo in the saída (not delivered yet, leased or not).
    pub total: i64,
    /// Of those, leased right now (a relay is delivering them).
    pub em_voo: i64,
    /// Age of the oldest one, in ms (database clock).
    pub idade_mais_antiga_ms: i64,
    /// Of those, rows of an ordering key waiting behind a dead letter of their key: held back
    /// under the relay's default [`OrdemAposMorta::Bloquear`](crate::ordem::OrdemAposMorta)
    /// until that letter is replayed or discarded.
    pub atras_de_morta: i64,
}

/// Per tipo with rows in the saída, what waits, by tipo.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// # let pool = sqlx::SqlitePool::connect("sqlite::memory:").await?;
/// # mensageria_core::migrar(&pool).await?;
/// for f in mensageria_core::operacoes::fila(&pool).await? {
///     println!("{}: {} pending, {} in flight", f.tipo, f.total - f.em_voo, f.em_voo);
/// }
/// # Ok(()) }
/// ```
pub async fn fila<DB: Banco>(pool: &Pool<DB>) -> Result<Vec<FilaDoTipo>, ErroOperacao> {
    Ok(DB::fila(pool).await?)
}

/// How many rows of a tipo have had a given number of attempts: what [`tentativas`] returns.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct TentativasDoTipo {
    /// The tipo.
    pub tipo: String,
    /// Attempts so far.
    pub tentativas: i64,
    /// Rows of the tipo with that many attempts.
    pub mensagens: i64,
}

/// The saída's attempts histogram: rows per tipo and number of attempts, by tipo then attempts.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// # let pool = sqlx::SqlitePool::connect("sqlite::memory:").await?;
/// # mensageria_core::migrar(&pool).await?;
/// assert!(mensageria_core::operacoes::tentativas(&pool).await?.is_empty());
/// # Ok(()) }
/// ```
pub async fn tentativas<DB: Banco>(pool: &Pool<DB>) -> Result<Vec<TentativasDoTipo>, ErroOperacao> {
    Ok(DB::tentativas(pool).await?)
}

/// How many dead letters a tipo has: what [`mortas_por_tipo`] returns.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct MortasDoTipo {
    /// The tipo.
    pub tipo: String,
    /// Its dead letters.
    pub mortas: i64,
}

/// Dead letters per tipo, by tipo.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// # let pool = sqlx::SqlitePool::connect("sqlite::memory:").await?;
/// # mensageria_core::migrar(&pool).await?;
/// assert!(mensageria_core::operacoes::mortas_por_tipo(&pool).await?.is_empty());
/// # Ok(()) }
/// ```
pub async fn mortas_por_tipo<DB: Banco>(
    pool: &Pool<DB>,
) -> Result<Vec<MortasDoTipo>, ErroOperacao> {
    Ok(DB::mortas_por_tipo(pool).await?)
}

/// One row of `mensageria_apps`: an app's relay claims a tipo (refreshed every 15 s).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Reivindicacao {
    /// The app (its relay's `Config::app`).
    pub app: String,
    /// The tipo it claims.
    pub tipo: String,
    /// How long ago its relay last refreshed the claim, in ms (database clock).
    pub visto_ha_ms: i64,
    /// When, in ms since the epoch.
    pub visto_em_ms: i64,
}

impl Reivindicacao {
    /// A claim as the database would hold it (for tests of code that judges claims).
    pub fn new(app: &str, tipo: &str, visto_em_ms: i64, visto_ha_ms: i64) -> Self {
        Self {
            app: app.to_owned(),
            tipo: tipo.to_owned(),
            visto_ha_ms,
            visto_em_ms,
        }
    }
}

/// Every claim of a tipo by an app, by tipo then app.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// # let pool = sqlx::SqlitePool::connect("sqlite::memory:").await?;
/// # mensageria_core::migrar(&pool).await?;
/// assert!(mensageria_core::operacoes::reivindicacoes(&pool).await?.is_empty());
/// # Ok(()) }
/// ```
pub async fn reivindicacoes<DB: Banco>(
    pool: &Pool<DB>,
) -> Result<Vec<Reivindicacao>, ErroOperacao> {
    Ok(DB::reivindicacoes(pool).await?)
}

/// One row of `mensageria_instancias` (schema version 2 on): a relay instance (a process of an
/// app) and its heartbeat.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Instancia {
    /// Its id, `app@name`: what `mensageria_saida.lease_dono` holds for the rows it leased.
    pub instancia: String,
    /// Its app.
    pub app: String,
    /// When it started (ms since the epoch).
    pub iniciada_em_ms: i64,
    /// Its last heartbeat (ms since the epoch).
    pub visto_em_ms: i64,
    /// How long ago that was, in ms (database clock).
    pub visto_ha_ms: i64,
    /// How long without a heartbeat before its siblings take it for dead, in ms.
    pub morta_apos_ms: i64,
    /// When it stopped gracefully, if it did (ms since the epoch).
    pub parada_em_ms: Option<i64>,
    /// When a sibling took its rows back (it was dead), if one did (ms since the epoch).
    pub recuperada_em_ms: Option<i64>,
    /// Rows of the saída it holds leased right now.
    pub em_voo: i64,
}

impl Instancia {
    /// An instance row as the database would hold it, heart-beating `visto_ha_ms` ago with a
    /// dead-after period of `morta_apos_ms`, not stopped, not taken over, holding nothing (for
    /// tests of code that judges instances).
    pub fn new(
        instancia: &str,
        app: &str,
        iniciada_em_ms: i64,
        visto_em_ms: i64,
        visto_ha_ms: i64,
        morta_apos_ms: i64,
    ) -> Self {
        Self {
            instancia: instancia.to_owned(),
            app: app.to_owned(),
            iniciada_em_ms,
            visto_em_ms,
            visto_ha_ms,
            morta_apos_ms,
            parada_em_ms: None,
            recuperada_em_ms: None,
            em_voo: 0,
        }
    }
}

/// Every relay instance, by app then newest heartbeat first. Needs schema version 2 (a database
/// error on an older schema, which has no such table).
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// # let pool = sqlx::SqlitePool::connect("sqlite::memory:").await?;
/// # mensageria_core::migrar(&pool).await?;
/// assert!(mensageria_core::operacoes::instancias(&pool).await?.is_empty());
/// # Ok(()) }
/// ```
pub async fn instancias<DB: Banco>(pool: &Pool<DB>) -> Result<Vec<Instancia>, ErroOperacao> {
    Ok(DB::instancias(pool).await?)
}

/// The newest migration applied, `None` without the migrations table (or with none applied).
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// use mensageria_core::operacoes::{versao_aplicada, versao_esperada};
///
/// let pool = sqlx::SqlitePool::connect("sqlite::memory:").await?;
/// assert_eq!(versao_aplicada(&pool).await?, None);
/// mensageria_core::migrar(&pool).await?;
/// assert_eq!(versao_aplicada(&pool).await?, Some(versao_esperada::<sqlx::Sqlite>()));
/// # Ok(()) }
/// ```
pub async fn versao_aplicada<DB: Banco>(pool: &Pool<DB>) -> Result<Option<i64>, ErroOperacao> {
    Ok(DB::versao_aplicada(pool).await?.filter(|v| *v > 0))
}

/// The newest migration this build knows for backend `DB`.
pub fn versao_esperada<DB: Banco>() -> i64 {
    DB::versao_esperada()
}

/// Migration versions recorded as failed in `_mensageria_migrations` (fix them by hand, then
/// migrate again). A database error when the table does not exist.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// # let pool = sqlx::SqlitePool::connect("sqlite::memory:").await?;
/// mensageria_core::migrar(&pool).await?;
/// assert!(mensageria_core::operacoes::migracoes_falhas(&pool).await?.is_empty());
/// # Ok(()) }
/// ```
pub async fn migracoes_falhas<DB: Banco>(pool: &Pool<DB>) -> Result<Vec<i64>, ErroOperacao> {
    Ok(DB::migracoes_falhas(pool).await?)
}

/// What [`remover_app`] deleted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct AppRemovido {
    /// Rows deleted from `mensageria_instancias`.
    pub instancias: u64,
    /// Rows deleted from `mensageria_apps` (one per tipo it claimed).
    pub registros: u64,
}

/// Forgets a retired app: deletes its instance rows and its tipo registrations in one
/// transaction, and only if none of its instances is alive at that moment (no graceful stop,
/// not taken over, a heartbeat younger than its dead-after period or [`PISO_DE_VIDA`],
/// whichever is longer); otherwise [`ErroOperacao::AppVivo`] and nothing changes. The saída and
/// the dead letters are not touched: rows of its tipos left there are orphans unless another
/// app claims those tipos.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// # let pool = sqlx::SqlitePool::connect("sqlite::memory:").await?;
/// # mensageria_core::migrar(&pool).await?;
/// let removido = mensageria_core::operacoes::remover_app(&pool, "emissor-antigo").await?;
/// assert_eq!((removido.instancias, removido.registros), (0, 0));
/// # Ok(()) }
/// ```
pub async fn remover_app<DB: Banco>(
    pool: &Pool<DB>,
    app: &str,
) -> Result<AppRemovido, ErroOperacao> {
    DB::remover_app(pool, app, ms(PISO_DE_VIDA))
        .await?
        .map_err(|instancias| ErroOperacao::AppVivo {
            app: app.to_owned(),
            instancias,
        })
}

// ---------------------------------------------------------------------------------------------
// Ordering keys

/// Rows of one tipo held behind the head of their ordering key when that head is of another
/// tipo: what [`retidas`] returns per (tipo, head's tipo, head in the dead letters or not).
///
/// Ordering keys are shared by every tipo and app of a schema (see [`crate::ordem`]): a key's
/// head of another tipo (another app's, perhaps) holds these rows until it is delivered, or,
/// when it is a dead letter, until it is replayed or discarded (under the relay's default
/// [`OrdemAposMorta::Bloquear`](crate::ordem::OrdemAposMorta)).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Retida {
    /// The tipo of the rows held.
    pub tipo: String,
    /// The tipo of the head holding them.
    pub tipo_da_cabeca: String,
    /// The head is a dead letter (else a row of the saída).
    pub cabeca_morta: bool,
    /// Rows of `tipo` held.
    pub linhas: i64,
    /// Keys they belong to.
    pub chaves: i64,
    /// One of those keys (the smallest), for `mensageria ordem mostrar`.
    pub exemplo: String,
}

/// Rows of the saída held behind the head of their ordering key when that head is of another
/// tipo, by tipo, head's tipo, then a saída head before a dead one. Rows behind a head of their
/// own tipo are a key's ordinary queue and are not listed. One scan of the ordered rows.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// # let pool = sqlx::SqlitePool::connect("sqlite::memory:").await?;
/// # mensageria_core::migrar(&pool).await?;
/// for r in mensageria_core::operacoes::retidas(&pool).await? {
///     println!("{} row(s) of {} wait behind a head of {}", r.linhas, r.tipo, r.tipo_da_cabeca);
/// }
/// # Ok(()) }
/// ```
#[doc(alias("held", "blocked", "ordering key"))]
pub async fn retidas<DB: Banco>(pool: &Pool<DB>) -> Result<Vec<Retida>, ErroOperacao> {
    Ok(DB::retidas(pool).await?)
}

/// One message of an ordering key's queue: what [`fila_da_chave`] lists, in the key's order.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct PosicaoNaChave {
    /// Its place in the key's order (`seq_ordem`).
    pub seq_ordem: i64,
    /// Its message id.
    pub id_mensagem: Uuid,
    /// Its tipo.
    pub tipo: String,
    /// It is a dead letter (else a row of the saída).
    pub morta: bool,
    /// Attempts so far.
    pub tentativas: i64,
    /// Leased right now: a relay is delivering it.
    pub em_voo: bool,
    /// The relay instance that leased it last (`app@name`), if one did.
    pub lease_dono: Option<String>,
    /// Ms from now until its next attempt (negative: due); `None` for a dead letter.
    pub proxima_em_ms: Option<i64>,
    /// Its age, in ms (database clock).
    pub idade_ms: i64,
    /// Its last attempt's error, if one failed.
    pub ultimo_erro: Option<String>,
    /// The app whose relay dead-lettered it (dead letters only).
    pub app: Option<String>,
}

/// One ordering key's queue: what [`fila_da_chave`] returns.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct FilaDaChave {
    /// Rows of the key in the saída and the dead letters, all of them.
    pub total: i64,
    /// The first ones in the key's order, at most the limit asked for: the first is the head,
    /// which every later one waits for.
    pub posicoes: Vec<PosicaoNaChave>,
}

/// The messages of ordering key `chave`, in the saída and the dead letters, in the key's
/// order (at most `limite`): who holds the key (the head, first) and who waits behind it.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// # let pool = sqlx::SqlitePool::connect("sqlite::memory:").await?;
/// # mensageria_core::migrar(&pool).await?;
/// let fila = mensageria_core::operacoes::fila_da_chave(&pool, "pedido:42", 100).await?;
/// if let Some(cabeca) = fila.posicoes.first() {
///     println!("held by {} of tipo {}", cabeca.id_mensagem, cabeca.tipo);
/// }
/// assert_eq!(fila.total, 0);
/// # Ok(()) }
/// ```
#[doc(alias("ordering key", "partition", "queue"))]
pub async fn fila_da_chave<DB: Banco>(
    pool: &Pool<DB>,
    chave: &str,
    limite: i64,
) -> Result<FilaDaChave, ErroOperacao> {
    let (posicoes, total) = DB::fila_da_chave(pool, chave, limite.max(0)).await?;
    Ok(FilaDaChave { total, posicoes })
}

// ---------------------------------------------------------------------------------------------
// Backlog

/// One tipo's backlog: what [`medir_backlog`] returns per tipo.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct Backlog {
    /// The tipo.
    pub tipo: String,
    /// Rows of the tipo in the saída (pending or in flight).
    pub linhas: i64,
    /// Age of the oldest, in seconds (0 when there is none).
    pub idade_segundos: f64,
}

/// The backlog of each of `tipos` (every one of them, 0 rows when it has none; in no particular
/// order): one grouped
/// query over those tipos only, never over other apps' rows. The relay publishes it at its
/// heartbeat as the gauges `mensageria_backlog` and `mensageria_backlog_oldest_age_seconds`.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// # let pool = sqlx::SqlitePool::connect("sqlite::memory:").await?;
/// # mensageria_core::migrar(&pool).await?;
/// let backlog = mensageria_core::operacoes::medir_backlog(&pool, &["mdfe.encerramento"]).await?;
/// assert_eq!(backlog[0].linhas, 0);
/// # Ok(()) }
/// ```
pub async fn medir_backlog<DB: Banco>(
    pool: &Pool<DB>,
    tipos: &[&str],
) -> Result<Vec<Backlog>, ErroOperacao> {
    Ok(DB::medir_backlog(pool, tipos).await?)
}
