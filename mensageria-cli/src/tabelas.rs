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

/// An instant in milliseconds since the epoch, as RFC 3339 (UTC).
pub(crate) fn rfc3339(ms: i64) -> String {
    chrono::DateTime::from_timestamp_millis(ms)
        .map(|t| t.to_rfc3339_opts(chrono::SecondsFormat::Millis, true))
        .unwrap_or_default()
}
