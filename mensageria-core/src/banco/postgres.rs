//! The PostgreSQL store.

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::LazyLock;
use std::time::Duration;

use sqlx::migrate::{MigrateError, Migrator};
use sqlx::postgres::PgListener;
use sqlx::{Executor, PgPool, Postgres};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::{Banco, NovaMensagem, Pedido, Recebida, Reivindicada, TABELA_MIGRACOES, ultima_versao};

/// The claim (see `reivindicar`). Public only for the plan regression test.
#[doc(hidden)]
pub const SQL_REIVINDICAR: &str = "WITH alvo AS ( \
         SELECT f.id, f.devida_em FROM unnest($1::text[], $6::int8[]) AS t(tipo, piso_ms) \
         CROSS JOIN LATERAL ( \
             SELECT s.id, s.proxima_tentativa_em AS devida_em FROM mensageria_saida s \
             WHERE s.tipo = t.tipo \
               AND s.proxima_tentativa_em >= to_timestamp(t.piso_ms / 1000.0) \
               AND s.proxima_tentativa_em <= now() \
             ORDER BY s.proxima_tentativa_em, s.id \
             LIMIT $2 FOR UPDATE SKIP LOCKED \
         ) f \
         LIMIT $2 \
     ) \
     UPDATE mensageria_saida s SET \
         tentativas = s.tentativas + 1, \
         proxima_tentativa_em = now() + make_interval(secs => $3::float8 / 1000), \
         lease_ate = now() + make_interval(secs => $3::float8 / 1000), \
         lease_dono = $4, \
         lease_token = $5 \
     FROM alvo WHERE s.id = alvo.id \
     RETURNING s.id, s.id_mensagem, s.tipo, s.payload::text, s.correlacao, s.tentativas, \
         (extract(epoch FROM now() - s.criada_em) * 1000)::int8, \
         (extract(epoch FROM alvo.devida_em) * 1000)::int8";

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

    fn inserir_na_saida<'e, 'm, E>(
        executor: E,
        m: NovaMensagem<'m>,
    ) -> Pin<Box<dyn Future<Output = Result<(), sqlx::Error>> + Send + 'm>>
    where
        E: Executor<'e, Database = Self> + 'm,
        'e: 'm,
    {
        Box::pin(async move {
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
        })
    }

    async fn reivindicar(pool: &PgPool, p: Pedido<'_>) -> Result<Vec<Reivindicada>, sqlx::Error> {
        // One index-ordered probe per tipo (LATERAL), so the plan walks
        // mensageria_saida_fila from the head of each tipo and never sorts the backlog; rows of
        // tipos not in $1 are never read. Each probe starts at the tipo's keyset floor ($6), so
        // index entries of delivered rows that vacuum has not cleared yet are not walked over. Not prepared (`persistent(false)`): each claim is
        // planned with its real parameters, so a plan made while the table was empty (Seq Scan +
        // Sort) is never reused on a large one.
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
            ),
        >(SQL_REIVINDICAR)
        .persistent(false)
        .bind(p.tipos)
        .bind(p.lote)
        .bind(p.lease_ms)
        .bind(p.dono)
        .bind(p.token)
        .bind(p.pisos_ms)
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
                    }
                },
            )
            .collect())
    }

    async fn confirmar_lote(pool: &PgPool, pares: &[(i64, i64)]) -> Result<Vec<i64>, sqlx::Error> {
        let (ids, tokens): (Vec<i64>, Vec<i64>) = pares.iter().copied().unzip();
        sqlx::query_scalar(
            "DELETE FROM mensageria_saida s USING unnest($1::bigint[], $2::bigint[]) AS c(id, token) \
             WHERE s.id = c.id AND s.lease_token = c.token RETURNING s.id",
        )
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
        let r = sqlx::query(
            "UPDATE mensageria_saida SET \
                 proxima_tentativa_em = now() + make_interval(secs => $3::float8 / 1000), \
                 tentativas = CASE WHEN $5 THEN tentativas ELSE greatest(tentativas - 1, 0) END, \
                 ultimo_erro = $4, lease_dono = NULL, lease_ate = NULL, lease_token = NULL \
             WHERE id = $1 AND lease_token = $2",
        )
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
        // Not prepared: a generic plan made while the saída was small (hash join over a
        // sequential scan) would stay with the connection as the backlog grows; planned per
        // call it is one primary-key probe per row.
        let r = sqlx::query(
            "UPDATE mensageria_saida s SET \
                 lease_ate = now() + make_interval(secs => $3::float8 / 1000), \
                 proxima_tentativa_em = now() + make_interval(secs => $3::float8 / 1000) \
             FROM unnest($1::bigint[], $2::bigint[]) AS v(id, token) \
             WHERE s.id = v.id AND s.lease_token = v.token",
        )
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
    ) -> Result<u64, sqlx::Error> {
        sqlx::query(
            "INSERT INTO mensageria_instancias (instancia, app, morta_apos_ms) VALUES ($1, $2, $3) \
             ON CONFLICT (instancia) DO UPDATE SET app = EXCLUDED.app, iniciada_em = now(), \
                 visto_em = now(), morta_apos_ms = EXCLUDED.morta_apos_ms, parada_em = NULL, \
                 recuperada_em = NULL",
        )
        .bind(instancia)
        .bind(app)
        .bind(morta_apos_ms)
        .execute(pool)
        .await?;
        // Rows an earlier incarnation of this instance held: it is gone (we are it).
        let r = sqlx::query(
            "UPDATE mensageria_saida SET proxima_tentativa_em = now(), lease_dono = NULL, \
                 lease_ate = NULL, lease_token = NULL \
             WHERE lease_dono = $1 AND lease_token IS NOT NULL",
        )
        .bind(instancia)
        .execute(pool)
        .await?;
        Ok(r.rows_affected())
    }

    async fn bater_instancia(
        pool: &PgPool,
        instancia: &str,
        app: &str,
        morta_apos_ms: i64,
    ) -> Result<u64, sqlx::Error> {
        sqlx::query(
            "INSERT INTO mensageria_instancias (instancia, app, morta_apos_ms) VALUES ($1, $2, $3) \
             ON CONFLICT (instancia) DO UPDATE SET visto_em = now(), parada_em = NULL, \
                 recuperada_em = NULL",
        )
        .bind(instancia)
        .bind(app)
        .bind(morta_apos_ms)
        .execute(pool)
        .await?;
        let r = sqlx::query(
            "WITH mortas AS ( \
                 UPDATE mensageria_instancias SET recuperada_em = now() \
                 WHERE app = $2 AND instancia <> $1 AND parada_em IS NULL \
                   AND recuperada_em IS NULL \
                   AND visto_em < now() - make_interval(secs => morta_apos_ms::float8 / 1000) \
                 RETURNING instancia \
             ) \
             UPDATE mensageria_saida SET proxima_tentativa_em = now(), lease_dono = NULL, \
                 lease_ate = NULL, lease_token = NULL \
             WHERE lease_dono IN (SELECT instancia FROM mortas) AND lease_token IS NOT NULL",
        )
        .bind(instancia)
        .bind(app)
        .execute(pool)
        .await?;
        Ok(r.rows_affected())
    }

    async fn parar_instancia(pool: &PgPool, instancia: &str) -> Result<(), sqlx::Error> {
        sqlx::query("UPDATE mensageria_instancias SET parada_em = now() WHERE instancia = $1")
            .bind(instancia)
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
                 RETURNING id_mensagem, tipo, payload, correlacao, criada_em, tentativas \
             ) \
             INSERT INTO mensageria_mortas \
                 (id_mensagem, tipo, payload, correlacao, criada_em, tentativas, ultimo_erro, app) \
             SELECT id_mensagem, tipo, payload, correlacao, criada_em, tentativas, $3, $4 FROM morta \
             ON CONFLICT (id_mensagem) DO UPDATE SET \
                 morta_em = now(), tentativas = EXCLUDED.tentativas, ultimo_erro = EXCLUDED.ultimo_erro",
        )
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
            "SELECT app, tipo FROM mensageria_apps WHERE tipo = ANY($2) AND app <> $1 ORDER BY tipo, app",
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
                 RETURNING id_mensagem, tipo, payload, correlacao, criada_em \
             ) \
             INSERT INTO mensageria_saida (id_mensagem, tipo, payload, correlacao) \
             SELECT id_mensagem, tipo, payload, correlacao FROM volta",
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
            "INSERT INTO mensageria_recebidas (tipo, chave, id_mensagem, versao) VALUES ($1, $2, $3, $4) \
             ON CONFLICT (tipo, chave) DO UPDATE SET \
                 versao = EXCLUDED.versao, id_mensagem = EXCLUDED.id_mensagem, recebida_em = now() \
             WHERE mensageria_recebidas.versao IS NULL OR mensageria_recebidas.versao < EXCLUDED.versao"
        } else {
            "INSERT INTO mensageria_recebidas (tipo, chave, id_mensagem, versao) VALUES ($1, $2, $3, $4) \
             ON CONFLICT (tipo, chave) DO NOTHING"
        };
        let feito = sqlx::query(sql)
            .bind(r.tipo)
            .bind(r.chave)
            .bind(r.id_mensagem)
            .bind(r.versao)
            .execute(conexao)
            .await?;
        Ok(feito.rows_affected() == 1)
    }

    async fn purgar_recebidas(pool: &PgPool, idade_ms: i64, lote: i64) -> Result<u64, sqlx::Error> {
        let r = sqlx::query(
            "DELETE FROM mensageria_recebidas WHERE ctid IN ( \
                 SELECT ctid FROM mensageria_recebidas \
                 WHERE recebida_em < now() - make_interval(secs => $1::float8 / 1000) LIMIT $2)",
        )
        .bind(idade_ms)
        .bind(lote)
        .execute(pool)
        .await?;
        Ok(r.rows_affected())
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
            tracing::warn!(error = %erro, retry_in = ?espera, "mensageria relay: LISTEN connection lost; polling covers the gap, listening again shortly");
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
