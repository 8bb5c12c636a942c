//! The mensageria tables as the commands read them: the reusable queries, written once for
//! both backends through [`Dialeto`](crate::conexao::Dialeto).

use sqlx::AssertSqlSafe;

use crate::conexao::{Conexao, nos_dois};

/// The saída of one tipo.
#[derive(Debug, Clone)]
pub(crate) struct FilaDoTipo {
    /// The tipo.
    pub(crate) tipo: String,
    /// Rows of the tipo in the saída (not delivered yet).
    pub(crate) total: i64,
    /// Of those, leased right now (a relay is delivering them).
    pub(crate) em_voo: i64,
    /// Age of the oldest one (database clock).
    pub(crate) idade_mais_antiga_ms: i64,
}

/// Per tipo, what waits in the saída.
pub(crate) async fn fila(conexao: &Conexao) -> Result<Vec<FilaDoTipo>, sqlx::Error> {
    let d = conexao.dialeto();
    let agora = d.agora_ms();
    let sql = format!(
        "SELECT tipo, CAST(count(*) AS BIGINT), \
             CAST(coalesce(sum(CASE WHEN lease_ate IS NOT NULL AND {lease} > {agora} THEN 1 ELSE 0 END), 0) AS BIGINT), \
             CAST({agora} - min({criada}) AS BIGINT) \
         FROM mensageria_saida GROUP BY tipo ORDER BY tipo",
        lease = d.ms("lease_ate"),
        criada = d.ms("criada_em"),
    );
    let linhas: Vec<(String, i64, i64, i64)> = nos_dois!(conexao, pool => {
        sqlx::query_as(AssertSqlSafe(sql)).fetch_all(pool).await?
    });
    Ok(linhas
        .into_iter()
        .map(|(tipo, total, em_voo, idade)| FilaDoTipo {
            tipo,
            total,
            em_voo,
            idade_mais_antiga_ms: idade,
        })
        .collect())
}

/// `(tipo, attempts, rows)` of the saída.
pub(crate) async fn tentativas(conexao: &Conexao) -> Result<Vec<(String, i64, i64)>, sqlx::Error> {
    let sql = "SELECT tipo, CAST(tentativas AS BIGINT), CAST(count(*) AS BIGINT) \
               FROM mensageria_saida GROUP BY tipo, tentativas ORDER BY tipo, tentativas";
    Ok(nos_dois!(conexao, pool => sqlx::query_as(sql).fetch_all(pool).await?))
}

/// `(tipo, dead letters)`.
pub(crate) async fn mortas_por_tipo(conexao: &Conexao) -> Result<Vec<(String, i64)>, sqlx::Error> {
    let sql =
        "SELECT tipo, CAST(count(*) AS BIGINT) FROM mensageria_mortas GROUP BY tipo ORDER BY tipo";
    Ok(nos_dois!(conexao, pool => sqlx::query_as(sql).fetch_all(pool).await?))
}

/// One row of `mensageria_apps`: an app's relay claims a tipo.
#[derive(Debug, Clone)]
pub(crate) struct Reivindicacao {
    /// The app (its relay's `Config::app`).
    pub(crate) app: String,
    /// The tipo it claims.
    pub(crate) tipo: String,
    /// How long ago its relay last heart-beat (database clock).
    pub(crate) visto_ha_ms: i64,
    /// When, in milliseconds since the epoch.
    pub(crate) visto_em_ms: i64,
}

/// Every registration, by tipo then app.
pub(crate) async fn reivindicacoes(conexao: &Conexao) -> Result<Vec<Reivindicacao>, sqlx::Error> {
    let d = conexao.dialeto();
    let visto = d.ms("visto_em");
    let sql = format!(
        "SELECT app, tipo, CAST({agora} - {visto} AS BIGINT), {visto} \
         FROM mensageria_apps ORDER BY tipo, app",
        agora = d.agora_ms(),
    );
    let linhas: Vec<(String, String, i64, i64)> = nos_dois!(conexao, pool => {
        sqlx::query_as(AssertSqlSafe(sql)).fetch_all(pool).await?
    });
    Ok(linhas
        .into_iter()
        .map(|(app, tipo, visto_ha_ms, visto_em_ms)| Reivindicacao {
            app,
            tipo,
            visto_ha_ms,
            visto_em_ms,
        })
        .collect())
}

/// One row of `mensageria_instancias` (schema version 2 on): a relay instance (a process of an
/// app) and its heartbeat. Times in milliseconds since the epoch, ages on the database clock.
#[derive(Debug, Clone)]
pub(crate) struct Instancia {
    /// Its id, `app@name`: what `mensageria_saida.lease_dono` holds for the rows it leased.
    pub(crate) instancia: String,
    /// Its app.
    pub(crate) app: String,
    /// When it started.
    pub(crate) iniciada_em_ms: i64,
    /// Its last heartbeat.
    pub(crate) visto_em_ms: i64,
    /// How long ago that was.
    pub(crate) visto_ha_ms: i64,
    /// How long without a heartbeat before its siblings take it for dead.
    pub(crate) morta_apos_ms: i64,
    /// When it stopped gracefully, if it did.
    pub(crate) parada_em_ms: Option<i64>,
    /// When a sibling took its rows back (it was dead), if one did.
    pub(crate) recuperada_em_ms: Option<i64>,
    /// Rows of the saída it holds leased right now.
    pub(crate) em_voo: i64,
}

/// Every relay instance, by app then newest heartbeat first.
pub(crate) async fn instancias(conexao: &Conexao) -> Result<Vec<Instancia>, sqlx::Error> {
    let d = conexao.dialeto();
    let agora = d.agora_ms();
    let visto = d.ms("i.visto_em");
    let sql = format!(
        "SELECT i.instancia, i.app, {iniciada}, {visto}, CAST({agora} - {visto} AS BIGINT), \
             CAST(i.morta_apos_ms AS BIGINT), {parada}, {recuperada}, \
             (SELECT CAST(count(*) AS BIGINT) FROM mensageria_saida s \
              WHERE s.lease_dono = i.instancia AND s.lease_token IS NOT NULL \
                AND {lease} > {agora}) \
         FROM mensageria_instancias i ORDER BY i.app, i.visto_em DESC, i.instancia",
        iniciada = d.ms("i.iniciada_em"),
        parada = d.ms("i.parada_em"),
        recuperada = d.ms("i.recuperada_em"),
        lease = d.ms("s.lease_ate"),
    );
    type Linha = (
        String,
        String,
        i64,
        i64,
        i64,
        i64,
        Option<i64>,
        Option<i64>,
        i64,
    );
    let linhas: Vec<Linha> = nos_dois!(conexao, pool => {
        sqlx::query_as(AssertSqlSafe(sql)).fetch_all(pool).await?
    });
    Ok(linhas
        .into_iter()
        .map(
            |(
                instancia,
                app,
                iniciada_em_ms,
                visto_em_ms,
                visto_ha_ms,
                morta_apos_ms,
                parada_em_ms,
                recuperada_em_ms,
                em_voo,
            )| Instancia {
                instancia,
                app,
                iniciada_em_ms,
                visto_em_ms,
                visto_ha_ms,
                morta_apos_ms,
                parada_em_ms,
                recuperada_em_ms,
                em_voo,
            },
        )
        .collect())
}

/// An instant in milliseconds since the epoch, as RFC 3339 (UTC).
pub(crate) fn rfc3339(ms: i64) -> String {
    chrono::DateTime::from_timestamp_millis(ms)
        .map(|t| t.to_rfc3339_opts(chrono::SecondsFormat::Millis, true))
        .unwrap_or_default()
}
