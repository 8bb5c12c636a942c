//! The PostgreSQL store.

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::LazyLock;
use std::time::Duration;

use sqlx::migrate::Migrator;
use sqlx::postgres::PgListener;
use sqlx::{Executor, PgPool, Postgres};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::linhas;
use super::{
    BancoInterno, Batimento, NovaMensagem, Pedido, Posse, Reivindicada, TABELA_MIGRACOES,
    ultima_versao,
};
use crate::operacoes::{
    AppRemovido, Backlog, FilaDoTipo, Instancia, Morta, MortaListada, MortasDoTipo, Recebida,
    Reivindicacao, TentativasDoTipo,
};

/// A receptor's dedup record (`$1` app, `$2` tipo, `$3` key, `$4` message id, `$5` version),
/// plain mode: nothing when the app, or nobody (an unowned row from before the key had an app),
/// already recorded the key.
const SQL_REGISTRAR_RECEBIDA: &str = "INSERT INTO mensageria_recebidas \
         (app, tipo, chave, id_mensagem, versao) \
     SELECT $1, $2, $3, $4, $5 \
     WHERE NOT EXISTS (SELECT 1 FROM mensageria_recebidas l \
         WHERE l.app = '' AND l.tipo = $2 AND l.chave = $3) \
     ON CONFLICT (app, tipo, chave) DO NOTHING";

/// [`SQL_REGISTRAR_RECEBIDA`] in convergent mode: recorded when newer than what the app (or an
/// unowned row) holds.
const SQL_REGISTRAR_RECEBIDA_CONVERGENTE: &str = "INSERT INTO mensageria_recebidas \
         (app, tipo, chave, id_mensagem, versao) \
     SELECT $1, $2, $3, $4, $5 \
     WHERE NOT EXISTS (SELECT 1 FROM mensageria_recebidas l \
         WHERE l.app = '' AND l.tipo = $2 AND l.chave = $3 AND l.versao >= $5) \
     ON CONFLICT (app, tipo, chave) DO UPDATE SET \
         versao = EXCLUDED.versao, id_mensagem = EXCLUDED.id_mensagem, recebida_em = now() \
     WHERE mensageria_recebidas.versao IS NULL OR mensageria_recebidas.versao < EXCLUDED.versao";

/// A batch's dedup records (`$1` app, `$2` tipo, `$3`-`$5` keys, ids, versions), plain mode:
/// the keys recorded now.
const SQL_REGISTRAR_RECEBIDAS: &str = "INSERT INTO mensageria_recebidas \
         (app, tipo, chave, id_mensagem, versao) \
     SELECT $1, $2, t.chave, t.id, t.versao \
     FROM unnest($3::text[], $4::uuid[], $5::int8[]) AS t(chave, id, versao) \
     WHERE NOT EXISTS (SELECT 1 FROM mensageria_recebidas l \
         WHERE l.app = '' AND l.tipo = $2 AND l.chave = t.chave) \
     ON CONFLICT (app, tipo, chave) DO NOTHING \
     RETURNING chave";

/// [`SQL_REGISTRAR_RECEBIDAS`] in convergent mode: the keys recorded or moved to a newer version.
const SQL_REGISTRAR_RECEBIDAS_CONVERGENTE: &str = "INSERT INTO mensageria_recebidas \
         (app, tipo, chave, id_mensagem, versao) \
     SELECT $1, $2, t.chave, t.id, t.versao \
     FROM unnest($3::text[], $4::uuid[], $5::int8[]) AS t(chave, id, versao) \
     WHERE NOT EXISTS (SELECT 1 FROM mensageria_recebidas l \
         WHERE l.app = '' AND l.tipo = $2 AND l.chave = t.chave \
             AND (t.versao IS NULL OR l.versao >= t.versao)) \
     ON CONFLICT (app, tipo, chave) DO UPDATE SET \
         versao = EXCLUDED.versao, id_mensagem = EXCLUDED.id_mensagem, recebida_em = now() \
     WHERE mensageria_recebidas.versao IS NULL OR mensageria_recebidas.versao < EXCLUDED.versao \
     RETURNING chave";

/// The claim (see `reivindicar`); `teste::reivindicacao` shows it to the plan regression test.
///
/// A row is claimable when it is due (`proxima_tentativa_em`) and not leased (`lease_ate` unset
/// or past). The claim writes only columns no index covers, so PostgreSQL makes it a HOT update
/// when the page has room (migrations 6 and 7: the saída's pages are filled half full and the
/// lease owner is not indexed): no index entry is written, and a delivered row costs its insert,
/// this update and its delete. A leased row stays where it was in `mensageria_saida_fila`, so a
/// claim walks the rows in flight at the head of its tipo (a heap visit each, bounded by the
/// deliveries in flight); an expired lease of a live instance is claimed when the claims reach
/// back to its due time (the full scan, every `varredura` of `Config::com_piso`); a dead
/// instance's rows are put back at the head by the take-back.
pub(crate) const SQL_REIVINDICAR: &str = "WITH alvo AS ( \
         SELECT f.id, f.devida_em FROM unnest($1::text[], $6::int8[]) AS t(tipo, piso_ms) \
         CROSS JOIN LATERAL ( \
             SELECT s.id, s.proxima_tentativa_em AS devida_em FROM mensageria_saida s \
             WHERE s.tipo = t.tipo \
               AND s.proxima_tentativa_em >= to_timestamp(t.piso_ms / 1000.0) \
               AND s.proxima_tentativa_em <= now() \
               AND (s.lease_ate IS NULL OR s.lease_ate <= now()) \
               AND (s.chave_ordem IS NULL OR ( \
                   NOT EXISTS (SELECT 1 FROM mensageria_saida a \
                       WHERE a.chave_ordem = s.chave_ordem AND a.seq_ordem < s.seq_ordem) \
                   AND NOT ($7 AND EXISTS (SELECT 1 FROM mensageria_mortas m \
                       WHERE m.chave_ordem = s.chave_ordem AND m.seq_ordem < s.seq_ordem)))) \
             ORDER BY s.proxima_tentativa_em, s.id \
             LIMIT $2 FOR UPDATE SKIP LOCKED \
         ) f \
         LIMIT $2 \
     ) \
     UPDATE mensageria_saida s SET \
         tentativas = s.tentativas + 1, \
         lease_ate = now() + make_interval(secs => $3::float8 / 1000), \
         lease_dono = $4, \
         lease_token = $5 \
     FROM alvo WHERE s.id = alvo.id \
     RETURNING s.id, s.id_mensagem, s.tipo, s.payload::text, s.correlacao, s.tentativas, \
         (extract(epoch FROM now() - s.criada_em) * 1000)::int8, \
         CASE WHEN s.chave_ordem IS NULL \
             THEN (extract(epoch FROM alvo.devida_em) * 1000)::int8 ELSE 0 END, \
         s.chave_ordem, s.traceparent, s.tracestate";

/// The insert of an ordered message. The key's advisory lock (transaction-scoped, in the
/// two-`int4` key space, so it never meets an application's or the leader's `bigint` lock) is
/// taken in the CTE, before `nextval` runs in the outer SELECT: a second transaction enqueueing
/// for the same key waits here until the first commits or rolls back, then draws a larger
/// sequence, so one key's sequence order is its commit order. Only ordered enqueues pay it, and
/// only against enqueues of the same key (or of a key whose 32-bit hash collides).
const SQL_INSERIR_ORDENADA: &str = "WITH trava AS ( \
         SELECT pg_advisory_xact_lock(1836020324, hashtext($7)) \
     ) \
     INSERT INTO mensageria_saida \
         (id_mensagem, tipo, payload, correlacao, traceparent, tracestate, chave_ordem, seq_ordem) \
     SELECT $1, $2, $3::json, $4, $5, $6, $7, nextval('mensageria_ordem_seq') FROM trava";

/// The schema [`Erro::SchemaInexistente`](crate::erro::Erro::SchemaInexistente) suggests creating:
/// the first one `search_path` names other than `"$user"`, else the user's own.
fn schema_a_criar(search_path: &str, usuario: &str) -> String {
    search_path
        .split(',')
        .map(|nome| nome.trim().trim_matches('"'))
        .find(|nome| !nome.is_empty() && *nome != "$user")
        .unwrap_or(usuario)
        .to_owned()
}

/// The group-committed ack: deletes the delivered rows whose lease token is still the one the
/// delivery held, each pair on its own (one id may come twice, with a stale token and the
/// owner's); a primary-key probe per pair.
///
/// Every statement of the relay that touches the saída row by row (this one, [`SQL_RENOVAR`],
/// [`SQL_REAGENDAR`], `matar`, `liberar`, and the claim) is sent unprepared (`persistent(false)`)
/// and so planned with its real parameters on the table as it is: the saída is often empty, and
/// a prepared statement's generic plan, made after five runs while it was, is a sequential scan
/// that the connection keeps as the backlog grows, until the next autoanalyze (up to a
/// minute of naptime later). Planning a probe costs tens of microseconds; the trap cost
/// milliseconds per statement (`tests/relay.rs`, `plano_generico_*`).
///
/// Its rows are locked first, **in `id` order** (`ORDER BY … FOR UPDATE`: PostgreSQL locks the rows
/// as the sort hands them out), as [`SQL_RENOVAR`]'s are, so an ack batch and a lease renewal
/// that share rows wait for each other's first row and never deadlock; left to its plan, each
/// statement locked in the order of its join (the array's, or the table's) and the two could
/// each hold a row the other waited for.
pub(crate) const SQL_CONFIRMAR: &str = "WITH alvo AS ( \
         SELECT s.id, c.token FROM mensageria_saida s \
         JOIN unnest($1::bigint[], $2::bigint[]) AS c(id, token) \
           ON s.id = c.id AND s.lease_token = c.token \
         ORDER BY s.id FOR UPDATE OF s) \
     DELETE FROM mensageria_saida s USING alvo \
     WHERE s.id = alvo.id AND s.lease_token = alvo.token RETURNING s.id";

/// Lease renewal of the deliveries in flight (every lease/4), fenced by token; a HOT update, as
/// the claim is. Rows locked in `id` order, as [`SQL_CONFIRMAR`]'s.
pub(crate) const SQL_RENOVAR: &str = "WITH alvo AS ( \
         SELECT s.id, v.token FROM mensageria_saida s \
         JOIN unnest($1::bigint[], $2::bigint[]) AS v(id, token) \
           ON s.id = v.id AND s.lease_token = v.token \
         ORDER BY s.id FOR UPDATE OF s) \
     UPDATE mensageria_saida s SET \
         lease_ate = now() + make_interval(secs => $3::float8 / 1000) \
     FROM alvo WHERE s.id = alvo.id AND s.lease_token = alvo.token";

/// A retry: the row's next attempt in `$3` ms, fenced by token (a primary-key probe).
pub(crate) const SQL_REAGENDAR: &str = "UPDATE mensageria_saida SET \
         proxima_tentativa_em = now() + make_interval(secs => $3::float8 / 1000), \
         tentativas = CASE WHEN $5 THEN tentativas ELSE greatest(tentativas - 1, 0) END, \
         ultimo_erro = $4, lease_dono = NULL, lease_ate = NULL, lease_token = NULL \
     WHERE id = $1 AND lease_token = $2";

static MIGRADOR: LazyLock<Migrator> = LazyLock::new(|| {
    let mut migrador = sqlx::migrate!("migrations/postgres");
    migrador.dangerous_set_table_name(TABELA_MIGRACOES);
    // sqlx's lock is one per database and waited for inside a statement: a second migrator
    // (another schema's owner, or a replica of this one) waiting for it would hold a snapshot
    // that version 9's CREATE INDEX CONCURRENTLY waits for, while holding the lock it waits
    // for: a deadlock. `migrar` takes a lock of its own per schema, by polling.
    migrador.set_locking(false);
    migrador
});

/// The schema version before the dedup records' unique index by app (version 9).
const ANTES_DO_INDICE_POR_APP: i64 = 8;

/// Up to this many dedup records, version 9's index is built in a plain statement (a SHARE
/// lock held for the build: under 0.1 s at this size) instead of CONCURRENTLY, which waits for
/// every transaction of the database older than it: a new or small schema migrates at once.
const INDICE_DIRETO_ATE: i64 = 100_000;

/// The key of `migrar`'s lock, in the two-`int4` space (the ordered inserts' key space, with a
/// first half of its own): one per schema.
const SQL_TENTAR_TRAVA_DE_MIGRACAO: &str =
    "SELECT pg_try_advisory_lock(1836020325, hashtext(current_schema()))";

/// Runs the migrations on `conexao`, holding this schema's migration lock: concurrent owners of
/// one schema take turns; owners of other schemas in the same database do not wait.
async fn migrar_com_trava(conexao: &mut sqlx::PgConnection) -> Result<(), crate::erro::Erro> {
    // Polled, never waited for inside a statement (see `MIGRADOR`).
    while !sqlx::query_scalar::<_, bool>(SQL_TENTAR_TRAVA_DE_MIGRACAO)
        .fetch_one(&mut *conexao)
        .await?
    {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let migrado = async {
        MIGRADOR
            .run_direct(Some(ANTES_DO_INDICE_POR_APP), &mut *conexao, false)
            .await?;
        indice_por_app_direto(&mut *conexao).await?;
        MIGRADOR.run_direct(None, &mut *conexao, false).await?;
        Ok::<_, crate::erro::Erro>(())
    }
    .await;
    let liberado = sqlx::query("SELECT pg_advisory_unlock(1836020325, hashtext(current_schema()))")
        .execute(&mut *conexao)
        .await;
    // The migration's own error first; a failed unlock ends with the connection anyway.
    migrado?;
    liberado?;
    Ok(())
}

/// Version 9 (`CREATE UNIQUE INDEX CONCURRENTLY IF NOT EXISTS`) is a no-op when the index is
/// there: on a table of at most [`INDICE_DIRETO_ATE`] rows it is built here first, in a plain
/// statement.
async fn indice_por_app_direto(conexao: &mut sqlx::PgConnection) -> Result<(), sqlx::Error> {
    let pendente: bool = sqlx::query_scalar(
        "SELECT to_regclass('mensageria_recebidas_por_app') IS NULL \
             AND NOT EXISTS (SELECT 1 FROM _mensageria_migrations WHERE version >= 9)",
    )
    .fetch_one(&mut *conexao)
    .await?;
    if !pendente {
        return Ok(());
    }
    let linhas: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM (SELECT 1 FROM mensageria_recebidas LIMIT $1) AS amostra",
    )
    .bind(INDICE_DIRETO_ATE + 1)
    .fetch_one(&mut *conexao)
    .await?;
    if linhas <= INDICE_DIRETO_ATE {
        sqlx::query(
            "CREATE UNIQUE INDEX IF NOT EXISTS mensageria_recebidas_por_app \
             ON mensageria_recebidas (app, tipo, chave)",
        )
        .execute(&mut *conexao)
        .await?;
    }
    Ok(())
}

impl super::ConexaoDoBanco for sqlx::PgConnection {
    fn inserir<'m>(
        &'m mut self,
        mensagem: NovaMensagem<'m>,
    ) -> Pin<Box<dyn Future<Output = Result<(), sqlx::Error>> + Send + 'm>> {
        <Postgres as BancoInterno>::inserir_na_saida(self, mensagem)
    }
}

impl BancoInterno for Postgres {
    async fn migrar(pool: &PgPool) -> Result<(), crate::erro::Erro> {
        let mut conexao = pool.acquire().await?;
        // PostgreSQL's own error for a search_path naming no existing schema ("no schema has
        // been selected to create in") names neither the schema nor the fix: check first.
        let (atual, caminho, usuario): (Option<String>, String, String) = sqlx::query_as(
            "SELECT current_schema(), current_setting('search_path'), CAST(current_user AS TEXT)",
        )
        .fetch_one(&mut *conexao)
        .await?;
        if atual.is_none() {
            return Err(crate::erro::Erro::SchemaInexistente {
                sugerido: schema_a_criar(&caminho, &usuario),
                search_path: caminho,
            });
        }
        // The migrations table is created `IF NOT EXISTS`: every run after the first would get
        // a NOTICE ("already exists, skipping") that sqlx logs at INFO, in every app's start-up
        // log. This connection hears only warnings and errors while the migrations run.
        conexao
            .execute("SET client_min_messages TO warning")
            .await?;
        // `run_direct` is `run` on a connection already in hand (sqlx's own way around
        // "implementation of `Acquire` is not general enough" in a `Send` future).
        let migrado = migrar_com_trava(&mut conexao).await;
        if let Err(erro) = conexao.execute("RESET client_min_messages").await {
            // Never hand the pool a connection with a changed setting.
            let _ = sqlx::Connection::close(conexao.detach()).await;
            migrado?;
            return Err(erro.into());
        }
        migrado
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

    fn inserir_na_saida<'e, 'm, E>(
        executor: E,
        m: NovaMensagem<'m>,
    ) -> Pin<Box<dyn Future<Output = Result<(), sqlx::Error>> + Send + 'm>>
    where
        E: Executor<'e, Database = Self> + 'm,
        'e: 'm,
    {
        Box::pin(async move {
            let consulta = match m.chave_ordem {
                None => sqlx::query(
                    "INSERT INTO mensageria_saida \
                         (id_mensagem, tipo, payload, correlacao, traceparent, tracestate) \
                     VALUES ($1, $2, $3::json, $4, $5, $6)",
                ),
                Some(_) => sqlx::query(SQL_INSERIR_ORDENADA),
            };
            let consulta = consulta
                .bind(m.id_mensagem)
                .bind(m.tipo)
                .bind(m.payload)
                .bind(m.correlacao)
                .bind(m.traceparent)
                .bind(m.tracestate);
            let consulta = match m.chave_ordem {
                None => consulta,
                Some(chave) => consulta.bind(chave),
            };
            consulta.execute(executor).await.map(drop)
        })
    }

    async fn reivindicar(pool: &PgPool, p: Pedido<'_>) -> Result<Vec<Reivindicada>, sqlx::Error> {
        // One index-ordered probe per tipo (LATERAL), so the plan walks
        // mensageria_saida_fila from the head of each tipo and never sorts the backlog; rows of
        // tipos not in $1 are never read. Each probe starts at the tipo's keyset floor ($6), so
        // index entries of delivered rows that vacuum has not cleared yet are not walked over.
        // Not prepared (`persistent(false)`): each claim is planned with its real parameters, so
        // a plan made while the table was empty (Seq Scan + Sort) is never reused on a large one.
        let linhas = sqlx::query_as::<
            _,
            (
                i64,
                uuid::Uuid,
                String,
                String,
                Option<String>,
                i32,
                i64,
                i64,
                Option<String>,
                Option<String>,
                Option<String>,
            ),
        >(SQL_REIVINDICAR)
        .persistent(false)
        .bind(p.tipos)
        .bind(p.lote)
        .bind(p.lease_ms)
        .bind(p.dono)
        .bind(p.token)
        .bind(p.pisos_ms)
        .bind(p.bloquear_apos_morta)
        .fetch_all(pool)
        .await?;
        Ok(linhas
            .into_iter()
            .map(
                |(
                    id,
                    id_mensagem,
                    tipo,
                    payload,
                    correlacao,
                    tentativas,
                    idade_ms,
                    devida_em_ms,
                    chave_ordem,
                    traceparent,
                    tracestate,
                )| {
                    Reivindicada {
                        id,
                        id_mensagem,
                        tipo,
                        payload,
                        correlacao,
                        tentativas,
                        idade_ms,
                        devida_em_ms,
                        chave_ordem,
                        traceparent,
                        tracestate,
                    }
                },
            )
            .collect())
    }

    async fn confirmar_lote(pool: &PgPool, pares: &[(i64, i64)]) -> Result<Vec<i64>, sqlx::Error> {
        let (ids, tokens): (Vec<i64>, Vec<i64>) = pares.iter().copied().unzip();
        sqlx::query_scalar(SQL_CONFIRMAR)
            .persistent(false)
            .bind(ids)
            .bind(tokens)
            .fetch_all(pool)
            .await
    }

    async fn reagendar(
        pool: &PgPool,
        id: i64,
        token: i64,
        atraso_ms: i64,
        erro: &str,
        contar: bool,
    ) -> Result<bool, sqlx::Error> {
        let r = sqlx::query(SQL_REAGENDAR)
            .persistent(false)
            .bind(id)
            .bind(token)
            .bind(atraso_ms)
            .bind(erro)
            .bind(contar)
            .execute(pool)
            .await?;
        Ok(r.rows_affected() == 1)
    }

    async fn renovar_leases(
        pool: &PgPool,
        pares: &[(i64, i64)],
        lease_ms: i64,
    ) -> Result<u64, sqlx::Error> {
        let (ids, tokens): (Vec<i64>, Vec<i64>) = pares.iter().copied().unzip();
        let r = sqlx::query(SQL_RENOVAR)
            .persistent(false)
            .bind(ids)
            .bind(tokens)
            .bind(lease_ms)
            .execute(pool)
            .await?;
        Ok(r.rows_affected())
    }

    async fn iniciar_instancia(
        pool: &PgPool,
        instancia: &str,
        app: &str,
        morta_apos_ms: i64,
    ) -> Result<Posse, sqlx::Error> {
        let mut tx = pool.begin().await?;
        // The row lock of the upsert makes two processes starting under one name take turns.
        let marca: Option<i64> = sqlx::query_scalar(
            "INSERT INTO mensageria_instancias (instancia, app, morta_apos_ms) VALUES ($1, $2, $3) \
             ON CONFLICT (instancia) DO UPDATE SET app = EXCLUDED.app, iniciada_em = \
                 greatest(clock_timestamp(), mensageria_instancias.iniciada_em \
                     + interval '1 microsecond'), \
                 visto_em = now(), morta_apos_ms = EXCLUDED.morta_apos_ms, parada_em = NULL, \
                 recuperada_em = NULL \
             WHERE mensageria_instancias.parada_em IS NOT NULL \
                OR mensageria_instancias.visto_em < now() - make_interval( \
                       secs => mensageria_instancias.morta_apos_ms::float8 / 1000) \
             RETURNING (extract(epoch FROM iniciada_em) * 1000000)::bigint",
        )
        .bind(instancia)
        .bind(app)
        .bind(morta_apos_ms)
        .fetch_optional(&mut *tx)
        .await?;
        let Some(marca) = marca else {
            let visto_ha_ms: i64 = sqlx::query_scalar(
                "SELECT (extract(epoch FROM now() - visto_em) * 1000)::bigint \
                 FROM mensageria_instancias WHERE instancia = $1",
            )
            .bind(instancia)
            .fetch_one(&mut *tx)
            .await?;
            tx.rollback().await?;
            return Ok(Posse::Ocupada { visto_ha_ms });
        };
        // Rows a dead earlier holder of the name still held: nobody renews their leases.
        let r = sqlx::query(
            "UPDATE mensageria_saida SET proxima_tentativa_em = now(), lease_dono = NULL, \
                 lease_ate = NULL, lease_token = NULL \
             WHERE lease_dono = $1 AND lease_token IS NOT NULL",
        )
        .bind(instancia)
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(Posse::Tomada {
            marca,
            recuperadas: r.rows_affected(),
        })
    }

    async fn bater_instancia(
        pool: &PgPool,
        instancia: &str,
        app: &str,
        marca: i64,
    ) -> Result<Batimento, sqlx::Error> {
        let batido = sqlx::query(
            "UPDATE mensageria_instancias SET visto_em = now(), parada_em = NULL, \
                 recuperada_em = NULL \
             WHERE instancia = $1 \
               AND (extract(epoch FROM iniciada_em) * 1000000)::bigint = $2",
        )
        .bind(instancia)
        .bind(marca)
        .execute(pool)
        .await?
        .rows_affected();
        if batido == 0 {
            return Ok(Batimento::Perdida);
        }
        // Two statements in one transaction, the second only when a sibling died: the
        // take-back scans the saída (the lease owner is not indexed, so that claims are HOT
        // updates: migration 7), and a heartbeat that finds nobody dead sends no second
        // statement at all.
        let mut tx = pool.begin().await?;
        let mortas: Vec<String> = sqlx::query_scalar(
            "UPDATE mensageria_instancias SET recuperada_em = now() \
             WHERE app = $2 AND instancia <> $1 AND parada_em IS NULL AND recuperada_em IS NULL \
               AND visto_em < now() - make_interval(secs => morta_apos_ms::float8 / 1000) \
             RETURNING instancia",
        )
        .bind(instancia)
        .bind(app)
        .fetch_all(&mut *tx)
        .await?;
        if mortas.is_empty() {
            tx.rollback().await?;
            return Ok(Batimento::Batido { recuperadas: 0 });
        }
        let r = sqlx::query(
            "UPDATE mensageria_saida SET proxima_tentativa_em = now(), lease_dono = NULL, \
                 lease_ate = NULL, lease_token = NULL \
             WHERE lease_dono = ANY($1) AND lease_token IS NOT NULL",
        )
        .bind(&mortas)
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(Batimento::Batido {
            recuperadas: r.rows_affected(),
        })
    }

    async fn parar_instancia(
        pool: &PgPool,
        instancia: &str,
        marca: i64,
    ) -> Result<(), sqlx::Error> {
        sqlx::query(
            "UPDATE mensageria_instancias SET parada_em = now() WHERE instancia = $1 \
               AND (extract(epoch FROM iniciada_em) * 1000000)::bigint = $2",
        )
        .bind(instancia)
        .bind(marca)
        .execute(pool)
        .await?;
        Ok(())
    }

    async fn matar(
        pool: &PgPool,
        id: i64,
        token: i64,
        erro: &str,
        app: &str,
    ) -> Result<bool, sqlx::Error> {
        let r = sqlx::query(
            "WITH morta AS ( \
                 DELETE FROM mensageria_saida WHERE id = $1 AND lease_token = $2 \
                 RETURNING id_mensagem, tipo, payload, correlacao, criada_em, tentativas, \
                     chave_ordem, seq_ordem, traceparent, tracestate \
             ) \
             INSERT INTO mensageria_mortas \
                 (id_mensagem, tipo, payload, correlacao, criada_em, tentativas, ultimo_erro, app, \
                  chave_ordem, seq_ordem, traceparent, tracestate) \
             SELECT id_mensagem, tipo, payload, correlacao, criada_em, tentativas, $3, $4, \
                 chave_ordem, seq_ordem, traceparent, tracestate \
             FROM morta \
             ON CONFLICT (id_mensagem) DO UPDATE SET \
                 morta_em = now(), tentativas = EXCLUDED.tentativas, \
                 ultimo_erro = EXCLUDED.ultimo_erro, chave_ordem = EXCLUDED.chave_ordem, \
                 seq_ordem = EXCLUDED.seq_ordem, traceparent = EXCLUDED.traceparent, \
                 tracestate = EXCLUDED.tracestate",
        )
        .persistent(false)
        .bind(id)
        .bind(token)
        .bind(erro)
        .bind(app)
        .execute(pool)
        .await?;
        Ok(r.rows_affected() == 1)
    }

    async fn liberar(pool: &PgPool, id: i64, token: i64) -> Result<bool, sqlx::Error> {
        let r = sqlx::query(
            "UPDATE mensageria_saida SET proxima_tentativa_em = now(), \
                 tentativas = greatest(tentativas - 1, 0), \
                 lease_dono = NULL, lease_ate = NULL, lease_token = NULL \
             WHERE id = $1 AND lease_token = $2",
        )
        .persistent(false)
        .bind(id)
        .bind(token)
        .execute(pool)
        .await?;
        Ok(r.rows_affected() == 1)
    }

    async fn registrar_app(
        pool: &PgPool,
        app: &str,
        tipos: &[&str],
    ) -> Result<Vec<(String, String)>, sqlx::Error> {
        sqlx::query(
            "INSERT INTO mensageria_apps (app, tipo) SELECT $1, unnest($2::text[]) \
             ON CONFLICT (app, tipo) DO UPDATE SET visto_em = now()",
        )
        .bind(app)
        .bind(tipos)
        .execute(pool)
        .await?;
        sqlx::query_as(
            "SELECT app, tipo FROM mensageria_apps WHERE tipo = ANY($2) AND app <> $1 \
             ORDER BY tipo, app",
        )
        .bind(app)
        .bind(tipos)
        .fetch_all(pool)
        .await
    }

    async fn reenfileirar_mortas(
        pool: &PgPool,
        id_mensagem: Option<uuid::Uuid>,
        tipo: Option<&str>,
    ) -> Result<u64, sqlx::Error> {
        let r = sqlx::query(
            "WITH volta AS ( \
                 DELETE FROM mensageria_mortas \
                 WHERE ($1::uuid IS NULL OR id_mensagem = $1) AND ($2::text IS NULL OR tipo = $2) \
                 RETURNING id_mensagem, tipo, payload, correlacao, criada_em, chave_ordem, \
                     seq_ordem, traceparent, tracestate \
             ) \
             INSERT INTO mensageria_saida \
                 (id_mensagem, tipo, payload, correlacao, chave_ordem, seq_ordem, traceparent, \
                  tracestate) \
             SELECT id_mensagem, tipo, payload, correlacao, chave_ordem, seq_ordem, traceparent, \
                 tracestate FROM volta",
        )
        .bind(id_mensagem)
        .bind(tipo)
        .execute(pool)
        .await?;
        Ok(r.rows_affected())
    }

    async fn liderar(
        pool: &PgPool,
        chave: i64,
    ) -> Result<Option<sqlx::Transaction<'static, Postgres>>, sqlx::Error> {
        let mut tx = pool.begin().await?;
        let lider: bool = sqlx::query_scalar("SELECT pg_try_advisory_xact_lock($1)")
            .bind(chave)
            .fetch_one(&mut *tx)
            .await?;
        Ok(lider.then_some(tx))
    }

    async fn registrar_recebida<'c>(
        conexao: &'c mut sqlx::PgConnection,
        r: Recebida<'c>,
    ) -> Result<bool, sqlx::Error> {
        let sql = if r.versao.is_some() {
            SQL_REGISTRAR_RECEBIDA_CONVERGENTE
        } else {
            SQL_REGISTRAR_RECEBIDA
        };
        let feito = sqlx::query(sql)
            .bind(r.app)
            .bind(r.tipo)
            .bind(r.chave)
            .bind(r.id_mensagem)
            .bind(r.versao)
            .execute(conexao)
            .await?;
        Ok(feito.rows_affected() == 1)
    }

    async fn registrar_recebidas<'c>(
        conexao: &'c mut sqlx::PgConnection,
        app: &'c str,
        tipo: &'c str,
        itens: Vec<(String, Option<uuid::Uuid>, Option<i64>)>,
        convergente: bool,
    ) -> Result<Vec<String>, sqlx::Error> {
        let mut chaves = Vec::with_capacity(itens.len());
        let mut ids = Vec::with_capacity(itens.len());
        let mut versoes = Vec::with_capacity(itens.len());
        for (chave, id, versao) in itens {
            chaves.push(chave);
            ids.push(id);
            versoes.push(versao);
        }
        // RETURNING gives the rows inserted or (convergent) updated: the keys to apply.
        let sql = if convergente {
            SQL_REGISTRAR_RECEBIDAS_CONVERGENTE
        } else {
            SQL_REGISTRAR_RECEBIDAS
        };
        sqlx::query_scalar(sql)
            .bind(app)
            .bind(tipo)
            .bind(chaves)
            .bind(ids)
            .bind(versoes)
            .fetch_all(conexao)
            .await
    }

    async fn purgar_recebidas(
        pool: &PgPool,
        app: Option<&str>,
        idade_ms: i64,
        lote: i64,
    ) -> Result<u64, sqlx::Error> {
        let r = sqlx::query(
            "DELETE FROM mensageria_recebidas WHERE ctid IN ( \
                 SELECT ctid FROM mensageria_recebidas \
                 WHERE recebida_em < now() - make_interval(secs => $1::float8 / 1000) \
                     AND ($3::text IS NULL OR app = $3) \
                 LIMIT $2)",
        )
        .bind(idade_ms)
        .bind(lote)
        .bind(app)
        .execute(pool)
        .await?;
        Ok(r.rows_affected())
    }

    async fn adotar_recebidas(
        pool: &PgPool,
        apps: &[&str],
        tipo: Option<&str>,
        lote: i64,
    ) -> Result<u64, sqlx::Error> {
        // One statement: the unowned rows leave and their copies arrive in the same commit, so
        // a receptor sees one or the other, never neither.
        let movidas: i64 = sqlx::query_scalar(
            "WITH movidas AS ( \
                 DELETE FROM mensageria_recebidas WHERE ctid IN ( \
                     SELECT ctid FROM mensageria_recebidas \
                     WHERE app = '' AND ($2::text IS NULL OR tipo = $2) LIMIT $3) \
                 RETURNING tipo, chave, id_mensagem, versao, recebida_em \
             ), copiadas AS ( \
                 INSERT INTO mensageria_recebidas \
                     (app, tipo, chave, id_mensagem, versao, recebida_em) \
                 SELECT a.app, m.tipo, m.chave, m.id_mensagem, m.versao, m.recebida_em \
                 FROM movidas m CROSS JOIN unnest($1::text[]) AS a(app) \
                 ON CONFLICT (app, tipo, chave) DO NOTHING \
             ) \
             SELECT count(*) FROM movidas",
        )
        .bind(apps)
        .bind(tipo)
        .bind(lote)
        .fetch_one(pool)
        .await?;
        Ok(movidas as u64)
    }

    async fn recebidas_por_app(
        pool: &PgPool,
    ) -> Result<Vec<crate::operacoes::RecebidasDoApp>, sqlx::Error> {
        let linhas: Vec<linhas::LinhaRecebidasDoApp> = sqlx::query_as(
            "SELECT app, tipo, count(*), \
                     CAST(extract(epoch FROM now() - max(recebida_em)) * 1000 AS BIGINT) \
                 FROM mensageria_recebidas GROUP BY app, tipo ORDER BY app, tipo",
        )
        .fetch_all(pool)
        .await?;
        Ok(linhas::recebidas_por_app(linhas))
    }

    async fn registrar_receptores(
        pool: &PgPool,
        app: &str,
        tipos: &[&str],
        transporte: &str,
    ) -> Result<(), sqlx::Error> {
        sqlx::query(
            "INSERT INTO mensageria_receptores (app, tipo, transporte) \
             SELECT $1, t.tipo, $3 FROM unnest($2::text[]) AS t(tipo) \
             ON CONFLICT (app, tipo, transporte) DO UPDATE SET visto_em = now()",
        )
        .bind(app)
        .bind(tipos)
        .bind(transporte)
        .execute(pool)
        .await?;
        Ok(())
    }

    async fn registrar_consumidor(
        pool: &PgPool,
        app: &str,
        tipo: &str,
        c: &crate::operacoes::Consumo,
    ) -> Result<(), sqlx::Error> {
        sqlx::query(
            "INSERT INTO mensageria_receptores (app, tipo, transporte, pendentes, em_voo, \
                 reentregues, mais_antiga_ms, max_age_ms) \
             VALUES ($1, $2, 'nats', $3, $4, $5, $6, $7) \
             ON CONFLICT (app, tipo, transporte) DO UPDATE SET visto_em = now(), \
                 pendentes = EXCLUDED.pendentes, em_voo = EXCLUDED.em_voo, \
                 reentregues = EXCLUDED.reentregues, mais_antiga_ms = EXCLUDED.mais_antiga_ms, \
                 max_age_ms = EXCLUDED.max_age_ms",
        )
        .bind(app)
        .bind(tipo)
        .bind(c.pendentes)
        .bind(c.em_voo)
        .bind(c.reentregues)
        .bind(c.mais_antiga_ms)
        .bind(c.max_age_ms)
        .execute(pool)
        .await?;
        Ok(())
    }

    async fn recebida_por_id(
        pool: &PgPool,
        app: &str,
        id_mensagem: uuid::Uuid,
    ) -> Result<bool, sqlx::Error> {
        sqlx::query_scalar(super::SQL_RECEBIDA_POR_ID)
            .bind(app)
            .bind(id_mensagem)
            .fetch_one(pool)
            .await
    }

    async fn esquecer_receptor(pool: &PgPool, app: &str) -> Result<u64, sqlx::Error> {
        let feito = sqlx::query(super::SQL_ESQUECER_RECEPTOR)
            .bind(app)
            .execute(pool)
            .await?;
        Ok(feito.rows_affected())
    }

    async fn receptores(
        pool: &PgPool,
    ) -> Result<Vec<crate::operacoes::ReceptorDoApp>, sqlx::Error> {
        let linhas: Vec<linhas::LinhaReceptor> = sqlx::query_as(
            "SELECT app, tipo, transporte, \
                 CAST(CAST(extract(epoch FROM now()) * 1000 AS BIGINT) \
                     - CAST(extract(epoch FROM visto_em) * 1000 AS BIGINT) AS BIGINT), \
                 pendentes, em_voo, reentregues, mais_antiga_ms, max_age_ms \
             FROM mensageria_receptores ORDER BY tipo, app, transporte",
        )
        .fetch_all(pool)
        .await?;
        Ok(linhas::receptores(linhas))
    }

    async fn medir_backlog(pool: &PgPool, tipos: &[&str]) -> Result<Vec<Backlog>, sqlx::Error> {
        let linhas: Vec<(String, i64, f64)> = sqlx::query_as(
            "SELECT t.tipo, count(s.id), \
                 coalesce(extract(epoch FROM now() - min(s.criada_em)), 0)::float8 \
             FROM unnest($1::text[]) AS t(tipo) \
             LEFT JOIN mensageria_saida s ON s.tipo = t.tipo \
             GROUP BY t.tipo",
        )
        .bind(tipos)
        .fetch_all(pool)
        .await?;
        Ok(linhas
            .into_iter()
            .map(|(tipo, linhas, idade_segundos)| Backlog {
                tipo,
                linhas,
                idade_segundos,
            })
            .collect())
    }

    async fn fila(pool: &PgPool) -> Result<Vec<FilaDoTipo>, sqlx::Error> {
        let sql = format!(
            "SELECT tipo, CAST(count(*) AS BIGINT), \
                 CAST(coalesce(sum(CASE WHEN lease_ate IS NOT NULL \
                     AND CAST(extract(epoch FROM lease_ate) * 1000 AS BIGINT) \
                         > CAST(extract(epoch FROM now()) * 1000 AS BIGINT) \
                     THEN 1 ELSE 0 END), 0) AS BIGINT), \
                 CAST(CAST(extract(epoch FROM now()) * 1000 AS BIGINT) \
                     - min(CAST(extract(epoch FROM criada_em) * 1000 AS BIGINT)) AS BIGINT), \
                 {} \
             FROM mensageria_saida GROUP BY tipo ORDER BY tipo",
            super::SQL_ATRAS_DE_MORTA
        );
        let linhas: Vec<linhas::LinhaFila> = sqlx::query_as(sqlx::AssertSqlSafe(sql))
            .fetch_all(pool)
            .await?;
        Ok(linhas::fila(linhas))
    }

    async fn tentativas(pool: &PgPool) -> Result<Vec<TentativasDoTipo>, sqlx::Error> {
        let linhas: Vec<linhas::LinhaTentativas> = sqlx::query_as(super::SQL_TENTATIVAS)
            .fetch_all(pool)
            .await?;
        Ok(linhas::tentativas(linhas))
    }

    async fn mortas_por_tipo(pool: &PgPool) -> Result<Vec<MortasDoTipo>, sqlx::Error> {
        let linhas: Vec<linhas::LinhaMortas> = sqlx::query_as(super::SQL_MORTAS_POR_TIPO)
            .fetch_all(pool)
            .await?;
        Ok(linhas::mortas_por_tipo(linhas))
    }

    async fn reivindicacoes(pool: &PgPool) -> Result<Vec<Reivindicacao>, sqlx::Error> {
        let linhas: Vec<linhas::LinhaReivindicacao> = sqlx::query_as(
            "SELECT app, tipo, \
                 CAST(CAST(extract(epoch FROM now()) * 1000 AS BIGINT) \
                     - CAST(extract(epoch FROM visto_em) * 1000 AS BIGINT) AS BIGINT), \
                 CAST(extract(epoch FROM visto_em) * 1000 AS BIGINT) \
             FROM mensageria_apps ORDER BY tipo, app",
        )
        .fetch_all(pool)
        .await?;
        Ok(linhas::reivindicacoes(linhas))
    }

    async fn instancias(pool: &PgPool) -> Result<Vec<Instancia>, sqlx::Error> {
        let linhas: Vec<linhas::LinhaInstancia> = sqlx::query_as(
            "SELECT i.instancia, i.app, \
                 CAST(extract(epoch FROM i.iniciada_em) * 1000 AS BIGINT), \
                 CAST(extract(epoch FROM i.visto_em) * 1000 AS BIGINT), \
                 CAST(CAST(extract(epoch FROM now()) * 1000 AS BIGINT) \
                     - CAST(extract(epoch FROM i.visto_em) * 1000 AS BIGINT) AS BIGINT), \
                 CAST(i.morta_apos_ms AS BIGINT), \
                 CAST(extract(epoch FROM i.parada_em) * 1000 AS BIGINT), \
                 CAST(extract(epoch FROM i.recuperada_em) * 1000 AS BIGINT), \
                 coalesce(l.linhas, 0) \
             FROM mensageria_instancias i \
             LEFT JOIN ( \
                 SELECT s.lease_dono, CAST(count(*) AS BIGINT) AS linhas \
                 FROM mensageria_saida s \
                 WHERE s.lease_token IS NOT NULL \
                   AND CAST(extract(epoch FROM s.lease_ate) * 1000 AS BIGINT) \
                       > CAST(extract(epoch FROM now()) * 1000 AS BIGINT) \
                 GROUP BY s.lease_dono \
             ) l ON l.lease_dono = i.instancia \
             ORDER BY i.app, i.visto_em DESC, i.instancia",
        )
        .fetch_all(pool)
        .await?;
        Ok(linhas::instancias(linhas))
    }

    async fn migracoes_falhas(pool: &PgPool) -> Result<Vec<i64>, sqlx::Error> {
        sqlx::query_scalar(
            "SELECT version FROM _mensageria_migrations WHERE NOT success ORDER BY version",
        )
        .fetch_all(pool)
        .await
    }

    async fn listar_mortas(
        pool: &PgPool,
        tipo: Option<&str>,
        limite: i64,
    ) -> Result<(Vec<MortaListada>, i64), sqlx::Error> {
        let linhas: Vec<linhas::LinhaMortaListada<uuid::Uuid>> = sqlx::query_as(
            "SELECT id_mensagem, tipo, CAST(tentativas AS BIGINT), app, \
                 CAST(extract(epoch FROM morta_em) * 1000 AS BIGINT), \
                 CAST(CAST(extract(epoch FROM now()) * 1000 AS BIGINT) \
                     - CAST(extract(epoch FROM morta_em) * 1000 AS BIGINT) AS BIGINT), \
                 ultimo_erro \
             FROM mensageria_mortas WHERE (CAST($1 AS TEXT) IS NULL OR tipo = $1) \
             ORDER BY morta_em DESC, id_mensagem LIMIT $2",
        )
        .bind(tipo)
        .bind(limite)
        .fetch_all(pool)
        .await?;
        let total: i64 = sqlx::query_scalar(
            "SELECT CAST(count(*) AS BIGINT) FROM mensageria_mortas \
             WHERE (CAST($1 AS TEXT) IS NULL OR tipo = $1)",
        )
        .bind(tipo)
        .fetch_one(pool)
        .await?;
        Ok((linhas::mortas_listadas(linhas, Ok)?, total))
    }

    async fn registrar_morta_recebida(
        pool: &PgPool,
        morta: &crate::operacoes::MortaRecebida,
    ) -> Result<bool, sqlx::Error> {
        let r = sqlx::query(
            "INSERT INTO mensageria_mortas_recebidas \
                 (app, id_mensagem, tipo, origem, payload, correlacao, motivo, entregas, \
                  traceparent, tracestate, sequencia, chave_ordem) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12) \
             ON CONFLICT (app, id_mensagem) DO NOTHING",
        )
        .bind(&morta.app)
        .bind(morta.id_mensagem)
        .bind(&morta.tipo)
        .bind(&morta.origem)
        .bind(&morta.payload)
        .bind(&morta.correlacao)
        .bind(&morta.motivo)
        .bind(morta.entregas)
        .bind(&morta.traceparent)
        .bind(&morta.tracestate)
        .bind(morta.sequencia)
        .bind(&morta.chave_ordem)
        .execute(pool)
        .await?;
        Ok(r.rows_affected() == 1)
    }

    async fn mortas_recebidas(
        pool: &PgPool,
        app: Option<&str>,
        limite: i64,
    ) -> Result<Vec<crate::operacoes::MortaRecebida>, sqlx::Error> {
        let linhas: Vec<linhas::LinhaMortaRecebida<uuid::Uuid>> = sqlx::query_as(
            "SELECT app, id_mensagem, tipo, origem, payload, correlacao, motivo, entregas, \
                 (extract(epoch FROM morta_em) * 1000)::bigint, traceparent, tracestate, sequencia, chave_ordem \
             FROM mensageria_mortas_recebidas WHERE $1::text IS NULL OR app = $1 \
             ORDER BY morta_em DESC, id DESC LIMIT $2",
        )
        .bind(app)
        .bind(limite)
        .fetch_all(pool)
        .await?;
        Ok(linhas::mortas_recebidas(linhas, |id| id))
    }

    async fn buscar_mortas_recebidas(
        pool: &PgPool,
        id_mensagem: uuid::Uuid,
        app: Option<&str>,
    ) -> Result<Vec<crate::operacoes::MortaRecebida>, sqlx::Error> {
        let linhas: Vec<linhas::LinhaMortaRecebida<uuid::Uuid>> = sqlx::query_as(
            "SELECT app, id_mensagem, tipo, origem, payload, correlacao, motivo, entregas, \
                 (extract(epoch FROM morta_em) * 1000)::bigint, traceparent, tracestate, sequencia, chave_ordem \
             FROM mensageria_mortas_recebidas \
             WHERE id_mensagem = $1 AND ($2::text IS NULL OR app = $2) ORDER BY app",
        )
        .bind(id_mensagem)
        .bind(app)
        .fetch_all(pool)
        .await?;
        Ok(linhas::mortas_recebidas(linhas, |id| id))
    }

    async fn chaves_a_retomar(pool: &PgPool, app: &str) -> Result<Vec<String>, sqlx::Error> {
        sqlx::query_scalar(super::SQL_CHAVES_A_RETOMAR)
            .bind(app)
            .fetch_all(pool)
            .await
    }

    async fn morta_recebida_que_retem(
        pool: &PgPool,
        app: &str,
        chave: &str,
        sequencia: i64,
    ) -> Result<Option<uuid::Uuid>, sqlx::Error> {
        sqlx::query_scalar(super::SQL_MORTA_QUE_RETEM)
            .bind(app)
            .bind(chave)
            .bind(sequencia)
            .fetch_optional(pool)
            .await
    }

    async fn mortas_recebidas_da_chave(
        pool: &PgPool,
        app: &str,
        chave: &str,
    ) -> Result<Vec<crate::operacoes::MortaRecebida>, sqlx::Error> {
        let linhas: Vec<linhas::LinhaMortaRecebida<uuid::Uuid>> = sqlx::query_as(
            "SELECT app, id_mensagem, tipo, origem, payload, correlacao, motivo, entregas, \
                 (extract(epoch FROM morta_em) * 1000)::bigint, traceparent, tracestate, \
                 sequencia, chave_ordem \
             FROM mensageria_mortas_recebidas WHERE app = $1 AND chave_ordem = $2 \
             ORDER BY sequencia NULLS FIRST, id",
        )
        .bind(app)
        .bind(chave)
        .fetch_all(pool)
        .await?;
        Ok(linhas::mortas_recebidas(linhas, |id| id))
    }

    async fn descartar_morta_recebida(
        pool: &PgPool,
        app: &str,
        id_mensagem: uuid::Uuid,
    ) -> Result<u64, sqlx::Error> {
        let r = sqlx::query(
            "DELETE FROM mensageria_mortas_recebidas WHERE app = $1 AND id_mensagem = $2",
        )
        .bind(app)
        .bind(id_mensagem)
        .execute(pool)
        .await?;
        Ok(r.rows_affected())
    }

    async fn mortas_recebidas_por_tipo(
        pool: &PgPool,
    ) -> Result<Vec<crate::operacoes::MortasRecebidasDoTipo>, sqlx::Error> {
        let linhas: Vec<linhas::LinhaMortasRecebidas> =
            sqlx::query_as(super::SQL_MORTAS_RECEBIDAS_POR_TIPO)
                .fetch_all(pool)
                .await?;
        Ok(linhas::mortas_recebidas_por_tipo(linhas))
    }

    async fn buscar_morta(
        pool: &PgPool,
        id_mensagem: uuid::Uuid,
    ) -> Result<Option<Morta>, sqlx::Error> {
        let linha: Option<linhas::LinhaMorta<uuid::Uuid>> = sqlx::query_as(
            "SELECT id_mensagem, tipo, CAST(tentativas AS BIGINT), ultimo_erro, app, correlacao, \
                 CAST(extract(epoch FROM criada_em) * 1000 AS BIGINT), \
                 CAST(extract(epoch FROM morta_em) * 1000 AS BIGINT), \
                 CAST(CAST(extract(epoch FROM now()) * 1000 AS BIGINT) \
                     - CAST(extract(epoch FROM morta_em) * 1000 AS BIGINT) AS BIGINT), \
                 payload::text, traceparent \
             FROM mensageria_mortas WHERE id_mensagem = $1",
        )
        .bind(id_mensagem)
        .fetch_optional(pool)
        .await?;
        linhas::morta(linha, Ok)
    }

    async fn descartar_morta(pool: &PgPool, id_mensagem: uuid::Uuid) -> Result<u64, sqlx::Error> {
        let r = sqlx::query("DELETE FROM mensageria_mortas WHERE id_mensagem = $1")
            .bind(id_mensagem)
            .execute(pool)
            .await?;
        Ok(r.rows_affected())
    }

    async fn remover_app(
        pool: &PgPool,
        app: &str,
        piso_ms: i64,
    ) -> Result<Result<AppRemovido, Vec<String>>, sqlx::Error> {
        let mut tx = pool.begin().await?;
        let instancias = sqlx::query(
            "DELETE FROM mensageria_instancias WHERE app = $1 AND NOT ( \
                 parada_em IS NULL AND recuperada_em IS NULL \
                 AND CAST(extract(epoch FROM now()) * 1000 AS BIGINT) \
                     - CAST(extract(epoch FROM visto_em) * 1000 AS BIGINT) \
                     <= CASE WHEN morta_apos_ms > $2 THEN morta_apos_ms ELSE $2 END)",
        )
        .bind(app)
        .bind(piso_ms)
        .execute(&mut *tx)
        .await?
        .rows_affected();
        let vivas: Vec<String> = sqlx::query_scalar(
            "SELECT instancia FROM mensageria_instancias WHERE app = $1 ORDER BY instancia",
        )
        .bind(app)
        .fetch_all(&mut *tx)
        .await?;
        if !vivas.is_empty() {
            tx.rollback().await?;
            return Ok(Err(vivas));
        }
        let registros = sqlx::query("DELETE FROM mensageria_apps WHERE app = $1")
            .bind(app)
            .execute(&mut *tx)
            .await?
            .rows_affected();
        tx.commit().await?;
        Ok(Ok(AppRemovido {
            instancias,
            registros,
        }))
    }

    async fn retidas(pool: &PgPool) -> Result<Vec<crate::operacoes::Retida>, sqlx::Error> {
        let linhas: Vec<linhas::LinhaRetida> =
            sqlx::query_as(super::SQL_RETIDAS).fetch_all(pool).await?;
        Ok(linhas::retidas(linhas))
    }

    async fn fila_da_chave(
        pool: &PgPool,
        chave: &str,
        limite: i64,
    ) -> Result<(Vec<crate::operacoes::PosicaoNaChave>, i64), sqlx::Error> {
        let linhas: Vec<linhas::LinhaDaChave<uuid::Uuid>> = sqlx::query_as(
            "SELECT * FROM ( \
                 SELECT CAST(seq_ordem AS BIGINT) AS seq, id_mensagem, tipo, \
                     CAST(0 AS BIGINT) AS morta, CAST(tentativas AS BIGINT), \
                     CAST(CASE WHEN lease_token IS NOT NULL AND lease_ate > now() \
                         THEN 1 ELSE 0 END AS BIGINT), \
                     lease_dono, \
                     CAST(CAST(extract(epoch FROM proxima_tentativa_em) * 1000 AS BIGINT) \
                         - CAST(extract(epoch FROM now()) * 1000 AS BIGINT) AS BIGINT), \
                     CAST(CAST(extract(epoch FROM now()) * 1000 AS BIGINT) \
                         - CAST(extract(epoch FROM criada_em) * 1000 AS BIGINT) AS BIGINT), \
                     ultimo_erro, CAST(NULL AS TEXT) \
                 FROM mensageria_saida WHERE chave_ordem = $1 \
                 UNION ALL \
                 SELECT CAST(seq_ordem AS BIGINT), id_mensagem, tipo, CAST(1 AS BIGINT), \
                     CAST(tentativas AS BIGINT), CAST(0 AS BIGINT), CAST(NULL AS TEXT), \
                     CAST(NULL AS BIGINT), \
                     CAST(CAST(extract(epoch FROM now()) * 1000 AS BIGINT) \
                         - CAST(extract(epoch FROM criada_em) * 1000 AS BIGINT) AS BIGINT), \
                     ultimo_erro, app \
                 FROM mensageria_mortas WHERE chave_ordem = $1 \
             ) AS f ORDER BY seq, morta LIMIT $2",
        )
        .bind(chave)
        .bind(limite)
        .fetch_all(pool)
        .await?;
        let total: i64 = sqlx::query_scalar(super::SQL_TOTAL_DA_CHAVE)
            .bind(chave)
            .fetch_one(pool)
            .await?;
        Ok((linhas::fila_da_chave(linhas, Ok)?, total))
    }

    async fn escutar(pool: PgPool, cancelar: CancellationToken) {
        let mut espera = ESCUTA_ESPERA_INICIAL;
        loop {
            let inicio = Instant::now();
            let erro = tokio::select! {
                _ = cancelar.cancelled() => return,
                erro = ouvir(&pool) => erro,
            };
            if inicio.elapsed() > ESCUTA_ESPERA_MAXIMA {
                espera = ESCUTA_ESPERA_INICIAL; // it had been listening fine: start over
            }
            tracing::warn!(
                error = %erro,
                retry_in_ms = espera.as_millis() as u64,
                "mensageria relay: LISTEN connection lost; polling covers the gap, listening \
                 again shortly"
            );
            tokio::select! {
                _ = cancelar.cancelled() => return,
                _ = tokio::time::sleep(espera) => {}
            }
            espera = (espera * 2).min(ESCUTA_ESPERA_MAXIMA);
        }
    }
}

/// The channel the saída's trigger notifies; the payload is the saída's schema.
pub(crate) const CANAL_NOTIFICACAO: &str = "mensageria_saida";
const ESCUTA_ESPERA_INICIAL: Duration = Duration::from_millis(100);
const ESCUTA_ESPERA_MAXIMA: Duration = Duration::from_secs(30);

/// Listens until the connection fails; returns why.
async fn ouvir(pool: &PgPool) -> sqlx::Error {
    let resultado: Result<Infallible, sqlx::Error> = async {
        let schema: String = sqlx::query_scalar("SELECT current_schema()")
            .fetch_one(pool)
            .await?;
        let mut ouvinte = PgListener::connect_with(pool).await?;
        ouvinte.listen(CANAL_NOTIFICACAO).await?;
        // Whatever was inserted while we were not listening is due now.
        crate::relay::acordar();
        loop {
            let aviso = ouvinte.recv().await?;
            if aviso.payload() == schema {
                crate::relay::acordar();
            }
        }
    }
    .await;
    match resultado {
        Err(erro) => erro,
    }
}

/// Installs the statement-level trigger that makes every insert into this schema's saída
/// `pg_notify` the relays listening with `Config::com_notificacoes`. Idempotent.
pub(crate) async fn instalar_notificacoes(pool: &PgPool) -> Result<(), sqlx::Error> {
    let mut tx = pool.begin().await?;
    for sql in [
        "CREATE OR REPLACE FUNCTION mensageria_saida_notificar() RETURNS trigger \
         LANGUAGE plpgsql AS $$ BEGIN \
             PERFORM pg_notify('mensageria_saida', TG_TABLE_SCHEMA); RETURN NULL; \
         END $$",
        "DROP TRIGGER IF EXISTS mensageria_saida_notificar ON mensageria_saida",
        "CREATE TRIGGER mensageria_saida_notificar AFTER INSERT ON mensageria_saida \
         FOR EACH STATEMENT EXECUTE FUNCTION mensageria_saida_notificar()",
    ] {
        tx.execute(sql).await?;
    }
    tx.commit().await
}

/// Removes what [`instalar_notificacoes`] installed. Idempotent.
pub(crate) async fn remover_notificacoes(pool: &PgPool) -> Result<(), sqlx::Error> {
    let mut tx = pool.begin().await?;
    tx.execute("DROP TRIGGER IF EXISTS mensageria_saida_notificar ON mensageria_saida")
        .await?;
    tx.execute("DROP FUNCTION IF EXISTS mensageria_saida_notificar()")
        .await?;
    tx.commit().await
}

/// Rows in a given state, for the relay's tests against PostgreSQL (the SQL stays here).
#[cfg(test)]
pub(crate) mod para_testes {
    use sqlx::PgPool;

    /// Empties the saída and leaves `n` leased rows in it (ids 1..=n), each with lease token 7.
    pub(crate) async fn so_arrendadas(pool: &PgPool, n: i64) {
        sqlx::query("DELETE FROM mensageria_saida")
            .execute(pool)
            .await
            .expect("empty the saída");
        sqlx::query(
            "INSERT INTO mensageria_saida (id, id_mensagem, tipo, payload, lease_dono, \
             lease_ate, lease_token) OVERRIDING SYSTEM VALUE \
             SELECT i, gen_random_uuid(), 't', '{}', 'eu', now() + interval '1 min', 7 \
             FROM generate_series(1, $1) AS i",
        )
        .bind(n)
        .execute(pool)
        .await
        .expect("leased rows");
    }

    /// Another transaction holds row `id`'s lock until the returned transaction ends.
    pub(crate) async fn travar(
        pool: &PgPool,
        id: i64,
    ) -> sqlx::Transaction<'static, sqlx::Postgres> {
        let mut tx = pool.begin().await.expect("begin");
        sqlx::query("SELECT 1 FROM mensageria_saida WHERE id = $1 FOR UPDATE")
            .bind(id)
            .execute(&mut *tx)
            .await
            .expect("lock the row");
        tx
    }
}
