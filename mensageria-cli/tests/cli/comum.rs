//! What every test needs: run the binary against a test database, and SQL fragments to plant
//! rows on either backend.

use assert_cmd::Command;
use mensageria_testes::{PgIsolado, SqliteIsolado, database_url};

/// A test database the binary can be pointed at.
pub(crate) trait Alvo {
    /// `--database-url …` (and `--schema …`).
    fn argumentos(&self) -> Vec<String>;
    /// SQL for "`ms` milliseconds before the database clock", in the backend's time type.
    fn ha(&self, ms: i64) -> String;
    /// SQL for a text parameter stored in a message id column.
    fn uuid(&self, parametro: &str) -> String;
    /// SQL for a text parameter stored in a JSON column.
    fn json(&self, parametro: &str) -> String;

    /// `mensageria <args>` on this database, ready to run.
    fn mensageria(&self, args: &[&str]) -> Command {
        let mut comando = Command::new(env!("CARGO_BIN_EXE_mensageria"));
        comando
            .env_remove("DATABASE_URL")
            .env_remove("MENSAGERIA_SCHEMA")
            .args(self.argumentos())
            .args(args);
        comando
    }

    /// Runs `mensageria <args> --json`, expects success, parses stdout.
    fn json_de(&self, args: &[&str]) -> serde_json::Value {
        let saida = self.mensageria(args).arg("--json").assert().success();
        let texto = String::from_utf8_lossy(&saida.get_output().stdout).into_owned();
        serde_json::from_str(&texto).unwrap_or_else(|e| panic!("not JSON ({e}): {texto}"))
    }
}

impl Alvo for PgIsolado {
    fn argumentos(&self) -> Vec<String> {
        vec![
            "--database-url".into(),
            database_url(),
            "--schema".into(),
            self.schema.clone(),
        ]
    }
    fn ha(&self, ms: i64) -> String {
        format!("(now() - make_interval(secs => {ms} / 1000.0))")
    }
    fn uuid(&self, parametro: &str) -> String {
        format!("{parametro}::uuid")
    }
    fn json(&self, parametro: &str) -> String {
        format!("{parametro}::json")
    }
}

impl Alvo for SqliteIsolado {
    fn argumentos(&self) -> Vec<String> {
        vec![
            "--database-url".into(),
            format!("sqlite://{}", self.caminho.display()),
        ]
    }
    fn ha(&self, ms: i64) -> String {
        format!("(CAST(unixepoch('subsec') * 1000 AS INTEGER) - {ms})")
    }
    fn uuid(&self, parametro: &str) -> String {
        parametro.to_owned()
    }
    fn json(&self, parametro: &str) -> String {
        parametro.to_owned()
    }
}

/// Plants a row in the saída: `plantar_saida!(db, tipo, tentativas, created ms ago, leased?)`.
/// Returns its message id.
#[macro_export]
macro_rules! plantar_saida {
    ($db:expr, $tipo:expr, $tentativas:expr, $criada_ha_ms:expr, $em_voo:expr) => {{
        let id = uuid::Uuid::now_v7();
        let (lease_ate, lease_token) = if $em_voo {
            // Leased for another hour, as a relay delivering it would have.
            ($crate::comum::Alvo::ha(&$db, -3_600_000), "42")
        } else {
            ("NULL".to_owned(), "NULL")
        };
        let sql = format!(
            "INSERT INTO mensageria_saida \
                 (id_mensagem, tipo, payload, tentativas, criada_em, lease_dono, lease_ate, lease_token) \
             VALUES ({}, $2, {}, $3, {}, 'relay', {lease_ate}, {lease_token})",
            $crate::comum::Alvo::uuid(&$db, "$1"),
            $crate::comum::Alvo::json(&$db, "'{}'"),
            $crate::comum::Alvo::ha(&$db, $criada_ha_ms),
        );
        sqlx::query(sqlx::AssertSqlSafe(sql))
            .bind(id.to_string())
            .bind($tipo)
            .bind($tentativas as i32)
            .execute(&$db.pool)
            .await
            .expect("plant a saída row");
        id
    }};
}

/// Plants a dead letter: `plantar_morta!(db, tipo, payload JSON text)`; returns its id.
#[macro_export]
macro_rules! plantar_morta {
    ($db:expr, $tipo:expr, $payload:expr) => {{
        let id = uuid::Uuid::now_v7();
        let sql = format!(
            "INSERT INTO mensageria_mortas \
                 (id_mensagem, tipo, payload, criada_em, tentativas, ultimo_erro, app) \
             VALUES ({}, $2, {}, {}, 25, 'gave up after 25 attempts: HTTP 503', 'emissor')",
            $crate::comum::Alvo::uuid(&$db, "$1"),
            $crate::comum::Alvo::json(&$db, "$3"),
            $crate::comum::Alvo::ha(&$db, 86_400_000),
        );
        sqlx::query(sqlx::AssertSqlSafe(sql))
            .bind(id.to_string())
            .bind($tipo)
            .bind($payload)
            .execute(&$db.pool)
            .await
            .expect("plant a dead letter");
        id
    }};
}

/// Registers `app` as claiming `tipo`, last seen `ms` ago: what a relay's heartbeat writes.
#[macro_export]
macro_rules! plantar_app {
    ($db:expr, $app:expr, $tipo:expr, $visto_ha_ms:expr) => {{
        let sql = format!(
            "INSERT INTO mensageria_apps (app, tipo, visto_em) VALUES ($1, $2, {})",
            $crate::comum::Alvo::ha(&$db, $visto_ha_ms),
        );
        sqlx::query(sqlx::AssertSqlSafe(sql))
            .bind($app)
            .bind($tipo)
            .execute(&$db.pool)
            .await
            .expect("plant an app registration");
    }};
}

/// Plants a relay instance of `app`, last heart-beaten `ms` ago (started a minute before that,
/// dead after 3 s as by default), as the relay's heartbeat writes it; `parada` and `recuperada`
/// (`Some(ms ago)`) record a graceful stop or a sibling's takeover:
/// `plantar_instancia!(db, "app@pod-1", "app", visto ha ms, parada, recuperada)`.
#[macro_export]
macro_rules! plantar_instancia {
    ($db:expr, $instancia:expr, $app:expr, $visto_ha_ms:expr, $parada:expr, $recuperada:expr) => {{
        let quando = |ms: Option<i64>| match ms {
            Some(ms) => $crate::comum::Alvo::ha(&$db, ms),
            None => "NULL".to_owned(),
        };
        let visto: i64 = $visto_ha_ms;
        let sql = format!(
            "INSERT INTO mensageria_instancias \
                 (instancia, app, iniciada_em, visto_em, morta_apos_ms, parada_em, recuperada_em) \
             VALUES ($1, $2, {}, {}, 3000, {}, {})",
            $crate::comum::Alvo::ha(&$db, visto + 60_000),
            $crate::comum::Alvo::ha(&$db, visto),
            quando($parada),
            quando($recuperada),
        );
        sqlx::query(sqlx::AssertSqlSafe(sql))
            .bind($instancia)
            .bind($app)
            .execute(&$db.pool)
            .await
            .expect("plant a relay instance");
    }};
}

/// The schema version this build of mensageria-core migrates to.
pub(crate) fn versao_esperada<DB: mensageria_core::Banco>(_pool: &sqlx::Pool<DB>) -> i64 {
    mensageria_core::operacoes::versao_esperada::<DB>()
}

/// `SELECT count(*) FROM <tabela>` (plus an optional `WHERE`).
#[macro_export]
macro_rules! contar {
    ($db:expr, $sql:expr) => {{
        let n: i64 = sqlx::query_scalar(sqlx::AssertSqlSafe(format!(
            "SELECT CAST(count(*) AS BIGINT) FROM {}",
            $sql
        )))
        .fetch_one(&$db.pool)
        .await
        .expect("count");
        n
    }};
}

/// stdout of a finished command, as text.
pub(crate) fn stdout(saida: &assert_cmd::assert::Assert) -> String {
    String::from_utf8_lossy(&saida.get_output().stdout).into_owned()
}

/// stderr of a finished command, as text.
pub(crate) fn stderr(saida: &assert_cmd::assert::Assert) -> String {
    String::from_utf8_lossy(&saida.get_output().stderr).into_owned()
}
