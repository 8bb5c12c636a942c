//! The SQLite store, the embedded default.

use std::future::Future;
use std::path::Path;
use std::pin::Pin;
use std::sync::LazyLock;
use std::time::Duration;

use sqlx::migrate::Migrator;
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous};
use sqlx::{Executor, Sqlite, SqlitePool};

use super::linhas;
use super::{
    BancoInterno, Batimento, NovaMensagem, Pedido, Posse, Reivindicada, TABELA_MIGRACOES,
    ultima_versao,
};
use crate::operacoes::{
    AppRemovido, Backlog, FilaDoTipo, Instancia, Morta, MortaListada, MortasDoTipo, Recebida,
    Reivindicacao, TentativasDoTipo,
};

/// The database's clock, in milliseconds since the Unix epoch.
const AGORA: &str = "CAST(unixepoch('subsec') * 1000 AS INTEGER)";

/// The dedup statements' guard: no unowned record (`app = ''`, from before the key had an app)
/// of tipo `tipo` and key `chave` (SQL expressions) holds it, or, in convergent mode (`versao`,
/// the event's version expression), holds an equal or newer version.
fn sem_registro_sem_dono(tipo: &str, chave: &str, versao: Option<&str>) -> String {
    let versao = versao
        .map(|versao| format!(" AND ({versao} IS NULL OR l.versao >= {versao})"))
        .unwrap_or_default();
    format!(
        "NOT EXISTS (SELECT 1 FROM mensageria_recebidas l \
         WHERE l.app = '' AND l.tipo = {tipo} AND l.chave = {chave}{versao})"
    )
}

/// The dedup statements' conflict clause: nothing for a plain receptor, the newer version for a
/// convergent one.
fn conflito_recebida(convergente: bool) -> String {
    if convergente {
        format!(
            "ON CONFLICT (app, tipo, chave) DO UPDATE SET \
                 versao = excluded.versao, id_mensagem = excluded.id_mensagem, \
                 recebida_em = {AGORA} \
             WHERE mensageria_recebidas.versao IS NULL OR \
                 mensageria_recebidas.versao < excluded.versao"
        )
    } else {
        "ON CONFLICT (app, tipo, chave) DO NOTHING".to_owned()
    }
}

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
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
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

impl super::ConexaoDoBanco for sqlx::SqliteConnection {
    fn inserir<'m>(
        &'m mut self,
        mensagem: NovaMensagem<'m>,
    ) -> Pin<Box<dyn Future<Output = Result<(), sqlx::Error>> + Send + 'm>> {
        <Sqlite as BancoInterno>::inserir_na_saida(self, mensagem)
    }
}

impl BancoInterno for Sqlite {
    async fn migrar(pool: &SqlitePool) -> Result<(), crate::erro::Erro> {
        Ok(MIGRADOR.run(pool).await?)
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

    fn inserir_na_saida<'e, 'm, E>(
        executor: E,
        m: NovaMensagem<'m>,
    ) -> Pin<Box<dyn Future<Output = Result<(), sqlx::Error>> + Send + 'm>>
    where
        E: Executor<'e, Database = Self> + 'm,
        'e: 'm,
    {
        Box::pin(async move {
            // An ordered message takes its key's largest sequence (saída and dead letters) plus
            // one: SQLite has one writer at a time, so the read and the insert see no other
            // enqueue in between. NULL for an unordered one.
            sqlx::query(
                "INSERT INTO mensageria_saida \
                     (id_mensagem, tipo, payload, correlacao, chave_ordem, traceparent, \
                      tracestate, seq_ordem) \
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, CASE WHEN ?5 IS NULL THEN NULL ELSE 1 + max( \
                     coalesce((SELECT max(seq_ordem) FROM mensageria_saida \
                         WHERE chave_ordem = ?5), 0), \
                     coalesce((SELECT max(seq_ordem) FROM mensageria_mortas \
                         WHERE chave_ordem = ?5), 0)) END)",
            )
            .bind(m.id_mensagem.to_string())
            .bind(m.tipo)
            .bind(m.payload)
            .bind(m.correlacao)
            .bind(m.chave_ordem)
            .bind(m.traceparent)
            .bind(m.tracestate)
            .execute(executor)
            .await
            .map(drop)
        })
    }

    async fn reivindicar(
        pool: &SqlitePool,
        p: Pedido<'_>,
    ) -> Result<Vec<Reivindicada>, sqlx::Error> {
        // SQLite has one writer at a time: the UPDATE ... RETURNING is the claim, atomic against
        // every other relay on the file.
        let tipos = serde_json::to_string(p.tipos).expect("a list of strings serializes");
        let sql = format!(
            "UPDATE mensageria_saida SET \
                 tentativas = tentativas + 1, \
                 proxima_tentativa_em = {AGORA} + $3, \
                 lease_ate = {AGORA} + $3, lease_dono = $4, lease_token = $5 \
             WHERE id IN ( \
                 SELECT id FROM mensageria_saida \
                 WHERE tipo IN (SELECT value FROM json_each($1)) \
                 AND proxima_tentativa_em <= {AGORA} \
                 AND (chave_ordem IS NULL OR ( \
                     NOT EXISTS (SELECT 1 FROM mensageria_saida a \
                         WHERE a.chave_ordem = mensageria_saida.chave_ordem \
                           AND a.seq_ordem < mensageria_saida.seq_ordem) \
                     AND NOT ($6 AND EXISTS (SELECT 1 FROM mensageria_mortas m \
                         WHERE m.chave_ordem = mensageria_saida.chave_ordem \
                           AND m.seq_ordem < mensageria_saida.seq_ordem)))) \
                 ORDER BY proxima_tentativa_em, id LIMIT $2 \
             ) \
             RETURNING id, id_mensagem, tipo, payload, correlacao, tentativas, \
                 {AGORA} - criada_em, chave_ordem, traceparent, tracestate"
        );
        type Linha = (
            i64,
            String,
            String,
            String,
            Option<String>,
            i32,
            i64,
            Option<String>,
            Option<String>,
            Option<String>,
        );
        let linhas = sqlx::query_as::<_, Linha>(sqlx::AssertSqlSafe(sql))
            .bind(tipos)
            .bind(p.lote)
            .bind(p.lease_ms)
            .bind(p.dono)
            .bind(p.token)
            .bind(p.bloquear_apos_morta)
            .fetch_all(pool)
            .await?;
        linhas
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
                    chave_ordem,
                    traceparent,
                    tracestate,
                )| {
                    Ok(Reivindicada {
                        id,
                        id_mensagem: id_mensagem
                            .parse()
                            .map_err(|e| sqlx::Error::Decode(Box::new(e)))?,
                        tipo,
                        payload,
                        correlacao,
                        tentativas,
                        idade_ms,
                        devida_em_ms: 0,
                        chave_ordem,
                        traceparent,
                        tracestate,
                    })
                },
            )
            .collect()
    }

    async fn confirmar_lote(
        pool: &SqlitePool,
        pares: &[(i64, i64)],
    ) -> Result<Vec<i64>, sqlx::Error> {
        // The pairs travel as one JSON array of [id, token]: SQLite has no array parameters.
        let pares =
            serde_json::to_string(pares).map_err(|erro| sqlx::Error::Encode(erro.into()))?;
        sqlx::query_scalar(
            "DELETE FROM mensageria_saida WHERE (id, lease_token) IN \
             (SELECT json_extract(value, '$[0]'), json_extract(value, '$[1]') FROM json_each($1)) \
             RETURNING id",
        )
        .bind(pares)
        .fetch_all(pool)
        .await
    }

    async fn reagendar(
        pool: &SqlitePool,
        id: i64,
        token: i64,
        atraso_ms: i64,
        erro: &str,
        contar: bool,
    ) -> Result<bool, sqlx::Error> {
        let sql = format!(
            "UPDATE mensageria_saida SET proxima_tentativa_em = {AGORA} + $3, ultimo_erro = $4, \
                 tentativas = CASE WHEN $5 THEN tentativas ELSE max(tentativas - 1, 0) END, \
                 lease_dono = NULL, lease_ate = NULL, lease_token = NULL \
             WHERE id = $1 AND lease_token = $2"
        );
        let r = sqlx::query(sqlx::AssertSqlSafe(sql))
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
        pool: &SqlitePool,
        pares: &[(i64, i64)],
        lease_ms: i64,
    ) -> Result<u64, sqlx::Error> {
        let pares =
            serde_json::to_string(pares).map_err(|erro| sqlx::Error::Encode(erro.into()))?;
        let sql = format!(
            "UPDATE mensageria_saida SET lease_ate = {AGORA} + $2, \
             proxima_tentativa_em = {AGORA} + $2 \
             WHERE (id, lease_token) IN \
             (SELECT json_extract(value, '$[0]'), json_extract(value, '$[1]') FROM json_each($1))"
        );
        let r = sqlx::query(sqlx::AssertSqlSafe(sql))
            .bind(pares)
            .bind(lease_ms)
            .execute(pool)
            .await?;
        Ok(r.rows_affected())
    }

    async fn iniciar_instancia(
        pool: &SqlitePool,
        instancia: &str,
        app: &str,
        morta_apos_ms: i64,
    ) -> Result<Posse, sqlx::Error> {
        let mut tx = pool.begin().await?;
        let sql = format!(
            "INSERT INTO mensageria_instancias (instancia, app, morta_apos_ms) VALUES ($1, $2, $3) \
             ON CONFLICT (instancia) DO UPDATE SET app = excluded.app, \
                 iniciada_em = max({AGORA}, mensageria_instancias.iniciada_em + 1), \
                 visto_em = {AGORA}, morta_apos_ms = excluded.morta_apos_ms, parada_em = NULL, \
                 recuperada_em = NULL \
             WHERE mensageria_instancias.parada_em IS NOT NULL \
                OR mensageria_instancias.visto_em < {AGORA} - mensageria_instancias.morta_apos_ms \
             RETURNING iniciada_em"
        );
        let marca: Option<i64> = sqlx::query_scalar(sqlx::AssertSqlSafe(sql))
            .bind(instancia)
            .bind(app)
            .bind(morta_apos_ms)
            .fetch_optional(&mut *tx)
            .await?;
        let Some(marca) = marca else {
            let sql = format!(
                "SELECT {AGORA} - visto_em FROM mensageria_instancias WHERE instancia = $1"
            );
            let visto_ha_ms: i64 = sqlx::query_scalar(sqlx::AssertSqlSafe(sql))
                .bind(instancia)
                .fetch_one(&mut *tx)
                .await?;
            tx.rollback().await?;
            return Ok(Posse::Ocupada { visto_ha_ms });
        };
        let sql = format!(
            "UPDATE mensageria_saida SET proxima_tentativa_em = {AGORA}, lease_dono = NULL, \
                 lease_ate = NULL, lease_token = NULL \
             WHERE lease_dono = $1 AND lease_token IS NOT NULL"
        );
        let r = sqlx::query(sqlx::AssertSqlSafe(sql))
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
        pool: &SqlitePool,
        instancia: &str,
        app: &str,
        marca: i64,
    ) -> Result<Batimento, sqlx::Error> {
        let mut tx = pool.begin().await?;
        let sql = format!(
            "UPDATE mensageria_instancias SET visto_em = {AGORA}, parada_em = NULL, \
                 recuperada_em = NULL \
             WHERE instancia = $1 AND iniciada_em = $2"
        );
        let batido = sqlx::query(sqlx::AssertSqlSafe(sql))
            .bind(instancia)
            .bind(marca)
            .execute(&mut *tx)
            .await?
            .rows_affected();
        if batido == 0 {
            tx.rollback().await?;
            return Ok(Batimento::Perdida);
        }
        let sql = format!(
            "UPDATE mensageria_instancias SET recuperada_em = {AGORA} \
             WHERE app = $2 AND instancia <> $1 AND parada_em IS NULL AND recuperada_em IS NULL \
               AND visto_em < {AGORA} - morta_apos_ms \
             RETURNING instancia"
        );
        let mortas: Vec<String> = sqlx::query_scalar(sqlx::AssertSqlSafe(sql))
            .bind(instancia)
            .bind(app)
            .fetch_all(&mut *tx)
            .await?;
        let mut recuperadas = 0;
        for morta in mortas {
            let sql = format!(
                "UPDATE mensageria_saida SET proxima_tentativa_em = {AGORA}, lease_dono = NULL, \
                     lease_ate = NULL, lease_token = NULL \
                 WHERE lease_dono = $1 AND lease_token IS NOT NULL"
            );
            recuperadas += sqlx::query(sqlx::AssertSqlSafe(sql))
                .bind(morta)
                .execute(&mut *tx)
                .await?
                .rows_affected();
        }
        tx.commit().await?;
        Ok(Batimento::Batido { recuperadas })
    }

    async fn parar_instancia(
        pool: &SqlitePool,
        instancia: &str,
        marca: i64,
    ) -> Result<(), sqlx::Error> {
        let sql = format!(
            "UPDATE mensageria_instancias SET parada_em = {AGORA} \
             WHERE instancia = $1 AND iniciada_em = $2"
        );
        sqlx::query(sqlx::AssertSqlSafe(sql))
            .bind(instancia)
            .bind(marca)
            .execute(pool)
            .await?;
        Ok(())
    }

    async fn matar(
        pool: &SqlitePool,
        id: i64,
        token: i64,
        erro: &str,
        app: &str,
    ) -> Result<bool, sqlx::Error> {
        let mut tx = pool.begin().await?;
        let sql = format!(
            "INSERT INTO mensageria_mortas \
                 (id_mensagem, tipo, payload, correlacao, criada_em, tentativas, ultimo_erro, app, \
                  chave_ordem, seq_ordem, traceparent, tracestate) \
             SELECT id_mensagem, tipo, payload, correlacao, criada_em, tentativas, $3, $4, \
                 chave_ordem, seq_ordem, traceparent, tracestate \
             FROM mensageria_saida WHERE id = $1 AND lease_token = $2 \
             ON CONFLICT (id_mensagem) DO UPDATE SET \
                 morta_em = {AGORA}, tentativas = excluded.tentativas, \
                 ultimo_erro = excluded.ultimo_erro, chave_ordem = excluded.chave_ordem, \
                 seq_ordem = excluded.seq_ordem, traceparent = excluded.traceparent, \
                 tracestate = excluded.tracestate"
        );
        sqlx::query(sqlx::AssertSqlSafe(sql))
            .bind(id)
            .bind(token)
            .bind(erro)
            .bind(app)
            .execute(&mut *tx)
            .await?;
        let r = sqlx::query("DELETE FROM mensageria_saida WHERE id = $1 AND lease_token = $2")
            .bind(id)
            .bind(token)
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(r.rows_affected() == 1)
    }

    async fn liberar(pool: &SqlitePool, id: i64, token: i64) -> Result<bool, sqlx::Error> {
        let sql = format!(
            "UPDATE mensageria_saida SET proxima_tentativa_em = {AGORA}, \
                 tentativas = max(tentativas - 1, 0), \
                 lease_dono = NULL, lease_ate = NULL, lease_token = NULL \
             WHERE id = $1 AND lease_token = $2"
        );
        let r = sqlx::query(sqlx::AssertSqlSafe(sql))
            .bind(id)
            .bind(token)
            .execute(pool)
            .await?;
        Ok(r.rows_affected() == 1)
    }

    async fn registrar_app(
        pool: &SqlitePool,
        app: &str,
        tipos: &[&str],
    ) -> Result<Vec<(String, String)>, sqlx::Error> {
        let lista = serde_json::to_string(tipos).expect("a list of strings serializes");
        let sql = format!(
            "INSERT INTO mensageria_apps (app, tipo) SELECT $1, value FROM json_each($2) \
             WHERE true \
             ON CONFLICT (app, tipo) DO UPDATE SET visto_em = {AGORA}"
        );
        sqlx::query(sqlx::AssertSqlSafe(sql))
            .bind(app)
            .bind(&lista)
            .execute(pool)
            .await?;
        sqlx::query_as(
            "SELECT app, tipo FROM mensageria_apps \
             WHERE tipo IN (SELECT value FROM json_each($2)) AND app <> $1 ORDER BY tipo, app",
        )
        .bind(app)
        .bind(&lista)
        .fetch_all(pool)
        .await
    }

    async fn reenfileirar_mortas(
        pool: &SqlitePool,
        id_mensagem: Option<uuid::Uuid>,
        tipo: Option<&str>,
    ) -> Result<u64, sqlx::Error> {
        let id = id_mensagem.map(|id| id.to_string());
        let mut tx = pool.begin().await?;
        let filtro = "($1 IS NULL OR id_mensagem = $1) AND ($2 IS NULL OR tipo = $2)";
        sqlx::query(sqlx::AssertSqlSafe(format!(
            "INSERT INTO mensageria_saida \
                 (id_mensagem, tipo, payload, correlacao, chave_ordem, seq_ordem, traceparent, \
                  tracestate) \
             SELECT id_mensagem, tipo, payload, correlacao, chave_ordem, seq_ordem, traceparent, \
                 tracestate \
             FROM mensageria_mortas WHERE {filtro}"
        )))
        .bind(&id)
        .bind(tipo)
        .execute(&mut *tx)
        .await?;
        let r = sqlx::query(sqlx::AssertSqlSafe(format!(
            "DELETE FROM mensageria_mortas WHERE {filtro}"
        )))
        .bind(&id)
        .bind(tipo)
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(r.rows_affected())
    }

    async fn liderar(
        pool: &SqlitePool,
        _chave: i64,
    ) -> Result<Option<sqlx::Transaction<'static, Sqlite>>, sqlx::Error> {
        // No advisory locks in SQLite, and a single writer already serializes claims: every
        // replica may lead. The deferred transaction holds no lock until it is used.
        pool.begin().await.map(Some)
    }

    async fn escutar(_pool: SqlitePool, _cancelar: tokio_util::sync::CancellationToken) {
        tracing::warn!(
            "mensageria relay: SQLite has no LISTEN/NOTIFY; `com_notificacoes` is ignored. \
             Enqueues in this process still wake the relay at once; others are seen \
             at the next poll"
        );
    }

    async fn registrar_recebida<'c>(
        conexao: &'c mut sqlx::SqliteConnection,
        r: Recebida<'c>,
    ) -> Result<bool, sqlx::Error> {
        let versao = r.versao.is_some().then_some("$5");
        let sql = format!(
            "INSERT INTO mensageria_recebidas (app, tipo, chave, id_mensagem, versao) \
             SELECT $1, $2, $3, $4, $5 WHERE {} {}",
            sem_registro_sem_dono("$2", "$3", versao),
            conflito_recebida(versao.is_some()),
        );
        let feito = sqlx::query(sqlx::AssertSqlSafe(sql))
            .bind(r.app)
            .bind(r.tipo)
            .bind(r.chave)
            .bind(r.id_mensagem.map(|id| id.to_string()))
            .bind(r.versao)
            .execute(conexao)
            .await?;
        Ok(feito.rows_affected() == 1)
    }

    async fn registrar_recebidas<'c>(
        conexao: &'c mut sqlx::SqliteConnection,
        app: &'c str,
        tipo: &'c str,
        itens: Vec<(String, Option<uuid::Uuid>, Option<i64>)>,
        convergente: bool,
    ) -> Result<Vec<String>, sqlx::Error> {
        // One statement over a JSON array of the batch (`json_each`); the WHERE clause also
        // keeps SQLite from reading `ON CONFLICT` as a join constraint of the SELECT.
        let linhas: Vec<serde_json::Value> = itens
            .into_iter()
            .map(|(chave, id, versao)| {
                serde_json::json!([chave, id.map(|id| id.to_string()), versao])
            })
            .collect();
        let lote = serde_json::Value::Array(linhas).to_string();
        let versao = convergente.then_some("j.value ->> 2");
        let sql = format!(
            "INSERT INTO mensageria_recebidas (app, tipo, chave, id_mensagem, versao) \
             SELECT $1, $2, j.value ->> 0, j.value ->> 1, j.value ->> 2 FROM json_each($3) j \
             WHERE {} {} RETURNING chave",
            sem_registro_sem_dono("$2", "j.value ->> 0", versao),
            conflito_recebida(convergente),
        );
        sqlx::query_scalar(sqlx::AssertSqlSafe(sql))
            .bind(app)
            .bind(tipo)
            .bind(lote)
            .fetch_all(conexao)
            .await
    }

    async fn purgar_recebidas(
        pool: &SqlitePool,
        app: Option<&str>,
        idade_ms: i64,
        lote: i64,
    ) -> Result<u64, sqlx::Error> {
        let sql = format!(
            "DELETE FROM mensageria_recebidas WHERE rowid IN ( \
                 SELECT rowid FROM mensageria_recebidas \
                 WHERE recebida_em < {AGORA} - $1 AND ($3 IS NULL OR app = $3) LIMIT $2)"
        );
        let r = sqlx::query(sqlx::AssertSqlSafe(sql))
            .bind(idade_ms)
            .bind(lote)
            .bind(app)
            .execute(pool)
            .await?;
        Ok(r.rows_affected())
    }

    async fn adotar_recebidas(
        pool: &SqlitePool,
        apps: &[&str],
        tipo: Option<&str>,
        lote: i64,
    ) -> Result<u64, sqlx::Error> {
        // The write lock first (a read that upgrades to a write would meet a receptor's commit
        // with SQLITE_BUSY, past the busy timeout).
        let mut tx = pool.begin_with("BEGIN IMMEDIATE").await?;
        let rowids: Vec<i64> = sqlx::query_scalar(
            "SELECT rowid FROM mensageria_recebidas \
             WHERE app = '' AND ($1 IS NULL OR tipo = $1) LIMIT $2",
        )
        .bind(tipo)
        .bind(lote)
        .fetch_all(&mut *tx)
        .await?;
        let rowids = serde_json::to_string(&rowids).unwrap_or_else(|_| "[]".to_owned());
        for app in apps {
            sqlx::query(
                "INSERT INTO mensageria_recebidas \
                     (app, tipo, chave, id_mensagem, versao, recebida_em) \
                 SELECT $1, tipo, chave, id_mensagem, versao, recebida_em \
                 FROM mensageria_recebidas WHERE rowid IN (SELECT value FROM json_each($2)) \
                 ON CONFLICT (app, tipo, chave) DO NOTHING",
            )
            .bind(app)
            .bind(&rowids)
            .execute(&mut *tx)
            .await?;
        }
        let movidas = sqlx::query(
            "DELETE FROM mensageria_recebidas WHERE rowid IN (SELECT value FROM json_each($1))",
        )
        .bind(&rowids)
        .execute(&mut *tx)
        .await?
        .rows_affected();
        tx.commit().await?;
        Ok(movidas)
    }

    async fn recebidas_por_app(
        pool: &SqlitePool,
    ) -> Result<Vec<crate::operacoes::RecebidasDoApp>, sqlx::Error> {
        let sql = format!(
            "SELECT app, tipo, count(*), {AGORA} - max(recebida_em) \
             FROM mensageria_recebidas GROUP BY app, tipo ORDER BY app, tipo"
        );
        let linhas: Vec<linhas::LinhaRecebidasDoApp> = sqlx::query_as(sqlx::AssertSqlSafe(sql))
            .fetch_all(pool)
            .await?;
        Ok(linhas::recebidas_por_app(linhas))
    }

    async fn registrar_receptores(
        pool: &SqlitePool,
        app: &str,
        tipos: &[&str],
        transporte: &str,
    ) -> Result<(), sqlx::Error> {
        let tipos = serde_json::to_string(tipos).unwrap_or_else(|_| "[]".to_owned());
        let sql = format!(
            "INSERT INTO mensageria_receptores (app, tipo, transporte) \
             SELECT $1, value, $3 FROM json_each($2) WHERE true \
             ON CONFLICT (app, tipo, transporte) DO UPDATE SET visto_em = {AGORA}"
        );
        sqlx::query(sqlx::AssertSqlSafe(sql))
            .bind(app)
            .bind(tipos)
            .bind(transporte)
            .execute(pool)
            .await?;
        Ok(())
    }

    async fn registrar_consumidor(
        pool: &SqlitePool,
        app: &str,
        tipo: &str,
        c: &crate::operacoes::Consumo,
    ) -> Result<(), sqlx::Error> {
        let sql = format!(
            "INSERT INTO mensageria_receptores (app, tipo, transporte, pendentes, em_voo, \
                 reentregues, mais_antiga_ms, max_age_ms) \
             VALUES ($1, $2, 'nats', $3, $4, $5, $6, $7) \
             ON CONFLICT (app, tipo, transporte) DO UPDATE SET visto_em = {AGORA}, \
                 pendentes = excluded.pendentes, em_voo = excluded.em_voo, \
                 reentregues = excluded.reentregues, mais_antiga_ms = excluded.mais_antiga_ms, \
                 max_age_ms = excluded.max_age_ms"
        );
        sqlx::query(sqlx::AssertSqlSafe(sql))
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
        pool: &SqlitePool,
        app: &str,
        id_mensagem: uuid::Uuid,
    ) -> Result<bool, sqlx::Error> {
        sqlx::query_scalar(super::SQL_RECEBIDA_POR_ID)
            .bind(app)
            .bind(id_mensagem.to_string())
            .fetch_one(pool)
            .await
    }

    async fn esquecer_receptor(pool: &SqlitePool, app: &str) -> Result<u64, sqlx::Error> {
        let feito = sqlx::query(super::SQL_ESQUECER_RECEPTOR)
            .bind(app)
            .execute(pool)
            .await?;
        Ok(feito.rows_affected())
    }

    async fn receptores(
        pool: &SqlitePool,
    ) -> Result<Vec<crate::operacoes::ReceptorDoApp>, sqlx::Error> {
        let sql = format!(
            "SELECT app, tipo, transporte, {AGORA} - visto_em, \
                 pendentes, em_voo, reentregues, mais_antiga_ms, max_age_ms \
             FROM mensageria_receptores ORDER BY tipo, app, transporte"
        );
        let linhas: Vec<linhas::LinhaReceptor> = sqlx::query_as(sqlx::AssertSqlSafe(sql))
            .fetch_all(pool)
            .await?;
        Ok(linhas::receptores(linhas))
    }

    async fn medir_backlog(pool: &SqlitePool, tipos: &[&str]) -> Result<Vec<Backlog>, sqlx::Error> {
        let sql = format!(
            "SELECT count(*), coalesce({AGORA} - min(criada_em), 0) \
             FROM mensageria_saida WHERE tipo = $1"
        );
        let mut medidas = Vec::with_capacity(tipos.len());
        for tipo in tipos {
            let (linhas, idade_ms): (i64, i64) = sqlx::query_as(sqlx::AssertSqlSafe(sql.clone()))
                .bind(tipo)
                .fetch_one(pool)
                .await?;
            medidas.push(Backlog {
                tipo: (*tipo).to_owned(),
                linhas,
                idade_segundos: idade_ms.max(0) as f64 / 1000.0,
            });
        }
        Ok(medidas)
    }

    async fn fila(pool: &SqlitePool) -> Result<Vec<FilaDoTipo>, sqlx::Error> {
        let sql = format!(
            "SELECT tipo, CAST(count(*) AS BIGINT), \
                 CAST(coalesce(sum(CASE WHEN lease_ate IS NOT NULL AND lease_ate > {AGORA} \
                     THEN 1 ELSE 0 END), 0) AS BIGINT), \
                 CAST({AGORA} - min(criada_em) AS BIGINT), \
                 {} \
             FROM mensageria_saida GROUP BY tipo ORDER BY tipo",
            super::SQL_ATRAS_DE_MORTA
        );
        let linhas: Vec<linhas::LinhaFila> = sqlx::query_as(sqlx::AssertSqlSafe(sql))
            .fetch_all(pool)
            .await?;
        Ok(linhas::fila(linhas))
    }

    async fn tentativas(pool: &SqlitePool) -> Result<Vec<TentativasDoTipo>, sqlx::Error> {
        let linhas: Vec<linhas::LinhaTentativas> = sqlx::query_as(super::SQL_TENTATIVAS)
            .fetch_all(pool)
            .await?;
        Ok(linhas::tentativas(linhas))
    }

    async fn mortas_por_tipo(pool: &SqlitePool) -> Result<Vec<MortasDoTipo>, sqlx::Error> {
        let linhas: Vec<linhas::LinhaMortas> = sqlx::query_as(super::SQL_MORTAS_POR_TIPO)
            .fetch_all(pool)
            .await?;
        Ok(linhas::mortas_por_tipo(linhas))
    }

    async fn reivindicacoes(pool: &SqlitePool) -> Result<Vec<Reivindicacao>, sqlx::Error> {
        let sql = format!(
            "SELECT app, tipo, CAST({AGORA} - visto_em AS BIGINT), visto_em \
             FROM mensageria_apps ORDER BY tipo, app"
        );
        let linhas: Vec<linhas::LinhaReivindicacao> = sqlx::query_as(sqlx::AssertSqlSafe(sql))
            .fetch_all(pool)
            .await?;
        Ok(linhas::reivindicacoes(linhas))
    }

    async fn instancias(pool: &SqlitePool) -> Result<Vec<Instancia>, sqlx::Error> {
        let sql = format!(
            "SELECT i.instancia, i.app, i.iniciada_em, i.visto_em, \
                 CAST({AGORA} - i.visto_em AS BIGINT), CAST(i.morta_apos_ms AS BIGINT), \
                 i.parada_em, i.recuperada_em, \
                 (SELECT CAST(count(*) AS BIGINT) FROM mensageria_saida s \
                  WHERE s.lease_dono = i.instancia AND s.lease_token IS NOT NULL \
                    AND s.lease_ate > {AGORA}) \
             FROM mensageria_instancias i ORDER BY i.app, i.visto_em DESC, i.instancia"
        );
        let linhas: Vec<linhas::LinhaInstancia> = sqlx::query_as(sqlx::AssertSqlSafe(sql))
            .fetch_all(pool)
            .await?;
        Ok(linhas::instancias(linhas))
    }

    async fn migracoes_falhas(pool: &SqlitePool) -> Result<Vec<i64>, sqlx::Error> {
        sqlx::query_scalar(
            "SELECT version FROM _mensageria_migrations WHERE NOT success ORDER BY version",
        )
        .fetch_all(pool)
        .await
    }

    async fn listar_mortas(
        pool: &SqlitePool,
        tipo: Option<&str>,
        limite: i64,
    ) -> Result<(Vec<MortaListada>, i64), sqlx::Error> {
        let sql = format!(
            "SELECT id_mensagem, tipo, CAST(tentativas AS BIGINT), app, morta_em, \
                 CAST({AGORA} - morta_em AS BIGINT), ultimo_erro \
             FROM mensageria_mortas WHERE (CAST($1 AS TEXT) IS NULL OR tipo = $1) \
             ORDER BY morta_em DESC, id_mensagem LIMIT $2"
        );
        let linhas: Vec<linhas::LinhaMortaListada<String>> =
            sqlx::query_as(sqlx::AssertSqlSafe(sql))
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
        Ok((
            linhas::mortas_listadas(linhas, |id| uuid_do_texto(&id))?,
            total,
        ))
    }

    async fn registrar_morta_recebida(
        pool: &SqlitePool,
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
        .bind(morta.id_mensagem.to_string())
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
        pool: &SqlitePool,
        app: Option<&str>,
        limite: i64,
    ) -> Result<Vec<crate::operacoes::MortaRecebida>, sqlx::Error> {
        // The message id is stored as text here.
        let linhas: Vec<linhas::LinhaMortaRecebida<String>> = sqlx::query_as(
            "SELECT app, id_mensagem, tipo, origem, payload, correlacao, motivo, entregas, \
                     morta_em, traceparent, tracestate, sequencia, chave_ordem \
                 FROM mensageria_mortas_recebidas WHERE $1 IS NULL OR app = $1 \
                 ORDER BY morta_em DESC, id DESC LIMIT $2",
        )
        .bind(app)
        .bind(limite)
        .fetch_all(pool)
        .await?;
        Ok(linhas::mortas_recebidas(linhas, |id| {
            uuid::Uuid::parse_str(&id).unwrap_or_default()
        }))
    }

    async fn buscar_mortas_recebidas(
        pool: &SqlitePool,
        id_mensagem: uuid::Uuid,
        app: Option<&str>,
    ) -> Result<Vec<crate::operacoes::MortaRecebida>, sqlx::Error> {
        // The message id is stored as text here; it is the one asked for.
        let linhas: Vec<linhas::LinhaMortaRecebida<String>> = sqlx::query_as(
            "SELECT app, id_mensagem, tipo, origem, payload, correlacao, motivo, entregas, \
                 morta_em, traceparent, tracestate, sequencia, chave_ordem \
             FROM mensageria_mortas_recebidas \
             WHERE id_mensagem = $1 AND ($2 IS NULL OR app = $2) ORDER BY app",
        )
        .bind(id_mensagem.to_string())
        .bind(app)
        .fetch_all(pool)
        .await?;
        Ok(linhas::mortas_recebidas(linhas, |_| id_mensagem))
    }

    async fn chaves_a_retomar(pool: &SqlitePool, app: &str) -> Result<Vec<String>, sqlx::Error> {
        sqlx::query_scalar(super::SQL_CHAVES_A_RETOMAR)
            .bind(app)
            .fetch_all(pool)
            .await
    }

    async fn morta_recebida_que_retem(
        pool: &SqlitePool,
        app: &str,
        chave: &str,
        sequencia: i64,
    ) -> Result<Option<uuid::Uuid>, sqlx::Error> {
        let id: Option<String> = sqlx::query_scalar(super::SQL_MORTA_QUE_RETEM)
            .bind(app)
            .bind(chave)
            .bind(sequencia)
            .fetch_optional(pool)
            .await?;
        Ok(id.map(|id| uuid::Uuid::parse_str(&id).unwrap_or_default()))
    }

    async fn mortas_recebidas_da_chave(
        pool: &SqlitePool,
        app: &str,
        chave: &str,
    ) -> Result<Vec<crate::operacoes::MortaRecebida>, sqlx::Error> {
        // SQLite sorts NULLs first.
        let linhas: Vec<linhas::LinhaMortaRecebida<String>> = sqlx::query_as(
            "SELECT app, id_mensagem, tipo, origem, payload, correlacao, motivo, entregas, \
                 morta_em, traceparent, tracestate, sequencia, chave_ordem \
             FROM mensageria_mortas_recebidas WHERE app = $1 AND chave_ordem = $2 \
             ORDER BY sequencia, id",
        )
        .bind(app)
        .bind(chave)
        .fetch_all(pool)
        .await?;
        Ok(linhas::mortas_recebidas(linhas, |id| {
            uuid::Uuid::parse_str(&id).unwrap_or_default()
        }))
    }

    async fn descartar_morta_recebida(
        pool: &SqlitePool,
        app: &str,
        id_mensagem: uuid::Uuid,
    ) -> Result<u64, sqlx::Error> {
        let r = sqlx::query(
            "DELETE FROM mensageria_mortas_recebidas WHERE app = $1 AND id_mensagem = $2",
        )
        .bind(app)
        .bind(id_mensagem.to_string())
        .execute(pool)
        .await?;
        Ok(r.rows_affected())
    }

    async fn mortas_recebidas_por_tipo(
        pool: &SqlitePool,
    ) -> Result<Vec<crate::operacoes::MortasRecebidasDoTipo>, sqlx::Error> {
        let linhas: Vec<linhas::LinhaMortasRecebidas> =
            sqlx::query_as(super::SQL_MORTAS_RECEBIDAS_POR_TIPO)
                .fetch_all(pool)
                .await?;
        Ok(linhas::mortas_recebidas_por_tipo(linhas))
    }

    async fn buscar_morta(
        pool: &SqlitePool,
        id_mensagem: uuid::Uuid,
    ) -> Result<Option<Morta>, sqlx::Error> {
        let sql = format!(
            "SELECT id_mensagem, tipo, CAST(tentativas AS BIGINT), ultimo_erro, app, correlacao, \
                 criada_em, morta_em, CAST({AGORA} - morta_em AS BIGINT), payload, traceparent \
             FROM mensageria_mortas WHERE id_mensagem = $1"
        );
        let linha: Option<linhas::LinhaMorta<String>> = sqlx::query_as(sqlx::AssertSqlSafe(sql))
            .bind(id_mensagem.to_string())
            .fetch_optional(pool)
            .await?;
        linhas::morta(linha, |id| uuid_do_texto(&id))
    }

    async fn descartar_morta(
        pool: &SqlitePool,
        id_mensagem: uuid::Uuid,
    ) -> Result<u64, sqlx::Error> {
        let r = sqlx::query("DELETE FROM mensageria_mortas WHERE id_mensagem = $1")
            .bind(id_mensagem.to_string())
            .execute(pool)
            .await?;
        Ok(r.rows_affected())
    }

    async fn remover_app(
        pool: &SqlitePool,
        app: &str,
        piso_ms: i64,
    ) -> Result<Result<AppRemovido, Vec<String>>, sqlx::Error> {
        let mut tx = pool.begin().await?;
        let sql = format!(
            "DELETE FROM mensageria_instancias WHERE app = $1 AND NOT ( \
                 parada_em IS NULL AND recuperada_em IS NULL \
                 AND {AGORA} - visto_em \
                     <= CASE WHEN morta_apos_ms > $2 THEN morta_apos_ms ELSE $2 END)"
        );
        let instancias = sqlx::query(sqlx::AssertSqlSafe(sql))
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

    async fn retidas(pool: &SqlitePool) -> Result<Vec<crate::operacoes::Retida>, sqlx::Error> {
        let linhas: Vec<linhas::LinhaRetida> =
            sqlx::query_as(super::SQL_RETIDAS).fetch_all(pool).await?;
        Ok(linhas::retidas(linhas))
    }

    async fn fila_da_chave(
        pool: &SqlitePool,
        chave: &str,
        limite: i64,
    ) -> Result<(Vec<crate::operacoes::PosicaoNaChave>, i64), sqlx::Error> {
        let sql = format!(
            "SELECT * FROM ( \
                 SELECT seq_ordem AS seq, id_mensagem, tipo, 0 AS morta, tentativas, \
                     CASE WHEN lease_token IS NOT NULL AND lease_ate > {AGORA} \
                         THEN 1 ELSE 0 END, \
                     lease_dono, proxima_tentativa_em - {AGORA}, {AGORA} - criada_em, \
                     ultimo_erro, NULL \
                 FROM mensageria_saida WHERE chave_ordem = $1 \
                 UNION ALL \
                 SELECT seq_ordem, id_mensagem, tipo, 1, tentativas, 0, NULL, NULL, \
                     {AGORA} - criada_em, ultimo_erro, app \
                 FROM mensageria_mortas WHERE chave_ordem = $1 \
             ) AS f ORDER BY seq, morta LIMIT $2"
        );
        let linhas: Vec<linhas::LinhaDaChave<String>> = sqlx::query_as(sqlx::AssertSqlSafe(sql))
            .bind(chave)
            .bind(limite)
            .fetch_all(pool)
            .await?;
        let total: i64 = sqlx::query_scalar(super::SQL_TOTAL_DA_CHAVE)
            .bind(chave)
            .fetch_one(pool)
            .await?;
        Ok((
            linhas::fila_da_chave(linhas, |id| uuid_do_texto(&id))?,
            total,
        ))
    }
}

/// A message id stored as text (SQLite has no uuid type).
fn uuid_do_texto(texto: &str) -> Result<uuid::Uuid, sqlx::Error> {
    texto.parse().map_err(|e| sqlx::Error::Decode(Box::new(e)))
}
