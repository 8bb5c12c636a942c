//! Test and bench support (feature `teste`): the relay's claim and settlement statements, one
//! at a time, for tests that check the fencing and the claim's plan, and for the claim-scaling
//! bench. Not for applications: the relay ([`crate::relay::Relay`]) is what claims and settles.

use sqlx::Pool;

use crate::banco::Banco;
pub use crate::banco::interno::{Batimento, Pedido, Posse, Reivindicada};

/// The PostgreSQL claim statement, as the relay runs it (never prepared), for `EXPLAIN`.
#[cfg(feature = "postgres")]
pub const SQL_REIVINDICAR: &str = crate::banco::postgres::SQL_REIVINDICAR;

/// Leases up to `pedido.lote` due rows of `pedido.tipos`: bumps their attempts, pushes their
/// next attempt to the lease's end (database clock) and stamps the fencing token.
pub async fn reivindicar<DB: Banco>(
    pool: &Pool<DB>,
    pedido: Pedido<'_>,
) -> Result<Vec<Reivindicada>, sqlx::Error> {
    DB::reivindicar(pool, pedido).await
}

/// Deletes delivered rows, each `(id, token)` only if its lease token is still the one given;
/// returns the ids deleted (the others were fenced).
pub async fn confirmar_lote<DB: Banco>(
    pool: &Pool<DB>,
    pares: &[(i64, i64)],
) -> Result<Vec<i64>, sqlx::Error> {
    DB::confirmar_lote(pool, pares).await
}

/// Schedules a retry of row `id` in `atraso_ms`, if the lease `token` is still ours (`contar`
/// false gives the attempt back); `false` when fenced.
pub async fn reagendar<DB: Banco>(
    pool: &Pool<DB>,
    id: i64,
    token: i64,
    atraso_ms: i64,
    erro: &str,
    contar: bool,
) -> Result<bool, sqlx::Error> {
    DB::reagendar(pool, id, token, atraso_ms, erro, contar).await
}

/// Moves row `id` to the dead letters as `app`'s, if the lease `token` is still ours; `false`
/// when fenced.
pub async fn matar<DB: Banco>(
    pool: &Pool<DB>,
    id: i64,
    token: i64,
    erro: &str,
    app: &str,
) -> Result<bool, sqlx::Error> {
    DB::matar(pool, id, token, erro, app).await
}

/// Extends the leases of rows in flight to `lease_ms` from now, each only while its token is the
/// one given; returns how many were extended.
pub async fn renovar_leases<DB: Banco>(
    pool: &Pool<DB>,
    pares: &[(i64, i64)],
    lease_ms: i64,
) -> Result<u64, sqlx::Error> {
    DB::renovar_leases(pool, pares, lease_ms).await
}

/// Gives row `id` back unsent (due now, its attempt not counted), if the lease `token` is still
/// ours; `false` when fenced.
pub async fn liberar<DB: Banco>(pool: &Pool<DB>, id: i64, token: i64) -> Result<bool, sqlx::Error> {
    DB::liberar(pool, id, token).await
}

/// Takes the name `instancia` of `app` for a relay process (refused while a live process holds
/// it) and gives back the rows a dead earlier holder held; see [`Posse`].
pub async fn iniciar_instancia<DB: Banco>(
    pool: &Pool<DB>,
    instancia: &str,
    app: &str,
    morta_apos_ms: i64,
) -> Result<Posse, sqlx::Error> {
    DB::iniciar_instancia(pool, instancia, app, morta_apos_ms).await
}

/// The heartbeat of relay instance `instancia` of `app` under the incarnation `marca` (from
/// [`iniciar_instancia`]): records it alive and takes back the rows of sibling instances dead
/// for their dead-after period; see [`Batimento`].
pub async fn bater_instancia<DB: Banco>(
    pool: &Pool<DB>,
    instancia: &str,
    app: &str,
    marca: i64,
) -> Result<Batimento, sqlx::Error> {
    DB::bater_instancia(pool, instancia, app, marca).await
}
