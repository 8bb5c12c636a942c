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
    /// Runs `sql` with text parameters on this database (see [`mensageria_testes::executar`]).
    fn executar(&self, sql: String, textos: &[&str], para_que: &str) -> impl Future<Output = ()>;
    /// Keeps a receiver-side dead letter as a broker consumer does
    /// (`operacoes::registrar_morta_recebida`).
    fn registrar_morta_recebida(
        &self,
        morta: &mensageria_core::operacoes::MortaRecebida,
    ) -> impl Future<Output = ()>;

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
    fn executar(&self, sql: String, textos: &[&str], para_que: &str) -> impl Future<Output = ()> {
        mensageria_testes::executar(&self.pool, sql, textos, para_que)
    }
    async fn registrar_morta_recebida(&self, morta: &mensageria_core::operacoes::MortaRecebida) {
        let novo = mensageria_core::operacoes::registrar_morta_recebida(&self.pool, morta)
            .await
            .expect("keep a receiver-side dead letter");
        assert!(novo, "a receiver-side dead letter recorded twice");
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
    fn executar(&self, sql: String, textos: &[&str], para_que: &str) -> impl Future<Output = ()> {
        mensageria_testes::executar(&self.pool, sql, textos, para_que)
    }
    async fn registrar_morta_recebida(&self, morta: &mensageria_core::operacoes::MortaRecebida) {
        let novo = mensageria_core::operacoes::registrar_morta_recebida(&self.pool, morta)
            .await
            .expect("keep a receiver-side dead letter");
        assert!(novo, "a receiver-side dead letter recorded twice");
    }
}

/// Plants a row in the saída of `tipo`, with `tentativas` attempts, created `criada_ha_ms` ago
/// and leased by a relay when `em_voo`. Returns its message id.
pub(crate) async fn plantar_saida(
    db: &impl Alvo,
    tipo: &str,
    tentativas: i32,
    criada_ha_ms: i64,
    em_voo: bool,
) -> uuid::Uuid {
    let id = uuid::Uuid::now_v7();
    let (lease_ate, lease_token) = if em_voo {
        // Leased for another hour, as a relay delivering it would have.
        (db.ha(-3_600_000), "42")
    } else {
        ("NULL".to_owned(), "NULL")
    };
    let sql = format!(
        "INSERT INTO mensageria_saida \
             (id_mensagem, tipo, payload, tentativas, criada_em, lease_dono, lease_ate, lease_token) \
         VALUES ({}, $2, {}, {tentativas}, {}, 'relay', {lease_ate}, {lease_token})",
        db.uuid("$1"),
        db.json("'{}'"),
        db.ha(criada_ha_ms),
    );
    db.executar(sql, &[&id.to_string(), tipo], "plant a saída row")
        .await;
    id
}

/// Plants a dead letter of `tipo` with `payload` (JSON text); returns its id.
pub(crate) async fn plantar_morta(db: &impl Alvo, tipo: &str, payload: &str) -> uuid::Uuid {
    let id = uuid::Uuid::now_v7();
    let sql = format!(
        "INSERT INTO mensageria_mortas \
             (id_mensagem, tipo, payload, criada_em, tentativas, ultimo_erro, app) \
         VALUES ({}, $2, {}, {}, 25, 'gave up after 25 attempts: HTTP 503', 'emissor')",
        db.uuid("$1"),
        db.json("$3"),
        db.ha(86_400_000),
    );
    db.executar(
        sql,
        &[&id.to_string(), tipo, payload],
        "plant a dead letter",
    )
    .await;
    id
}

/// Keeps a receiver-side dead letter of `app` and `tipo` with `payload` (any text) and `motivo`
/// (why the receptor refused it), delivered 3 times, as the JetStream consumer does; returns its
/// message id.
pub(crate) async fn plantar_morta_recebida(
    db: &impl Alvo,
    app: &str,
    tipo: &str,
    payload: &str,
    motivo: &str,
) -> uuid::Uuid {
    let id = uuid::Uuid::now_v7();
    plantar_morta_recebida_com_id(db, id, app, tipo, payload, motivo).await;
    id
}

/// [`plantar_morta_recebida`] with a given message id (fan-out: two apps refuse one event).
pub(crate) async fn plantar_morta_recebida_com_id(
    db: &impl Alvo,
    id: uuid::Uuid,
    app: &str,
    tipo: &str,
    payload: &str,
    motivo: &str,
) {
    db.registrar_morta_recebida(&mensageria_core::operacoes::MortaRecebida {
        app: app.to_owned(),
        id_mensagem: id,
        tipo: tipo.to_owned(),
        origem: format!("nats:MENSAGERIA:mensageria.{tipo}"),
        payload: payload.to_owned(),
        correlacao: Some("corr-1".to_owned()),
        motivo: motivo.to_owned(),
        entregas: 3,
        morta_em_ms: 0,
        traceparent: None,
        tracestate: None,
        sequencia: Some(7),
        chave_ordem: None,
    })
    .await;
}

/// Registers `app` as claiming `tipo`, last seen `visto_ha_ms` ago: what a relay's heartbeat
/// writes.
pub(crate) async fn plantar_app(db: &impl Alvo, app: &str, tipo: &str, visto_ha_ms: i64) {
    let sql = format!(
        "INSERT INTO mensageria_apps (app, tipo, visto_em) VALUES ($1, $2, {})",
        db.ha(visto_ha_ms),
    );
    db.executar(sql, &[app, tipo], "plant an app registration")
        .await;
}

/// Plants a relay `instancia` of `app`, last heart-beaten `visto_ha_ms` ago (started a minute
/// before that, dead after 3 s as by default), as the relay's heartbeat writes it; `parada` and
/// `recuperada` (`Some(ms ago)`) record a graceful stop or a sibling's takeover.
pub(crate) async fn plantar_instancia(
    db: &impl Alvo,
    instancia: &str,
    app: &str,
    visto_ha_ms: i64,
    parada: Option<i64>,
    recuperada: Option<i64>,
) {
    let quando = |ms: Option<i64>| match ms {
        Some(ms) => db.ha(ms),
        None => "NULL".to_owned(),
    };
    let sql = format!(
        "INSERT INTO mensageria_instancias \
             (instancia, app, iniciada_em, visto_em, morta_apos_ms, parada_em, recuperada_em) \
         VALUES ($1, $2, {}, {}, 3000, {}, {})",
        db.ha(visto_ha_ms + 60_000),
        db.ha(visto_ha_ms),
        quando(parada),
        quando(recuperada),
    );
    db.executar(sql, &[instancia, app], "plant a relay instance")
        .await;
}

/// The schema version this build of mensageria-core migrates to.
pub(crate) fn versao_esperada<DB: mensageria_core::Banco>(_pool: &sqlx::Pool<DB>) -> i64 {
    mensageria_core::operacoes::versao_esperada::<DB>()
}

/// stdout of a finished command, as text.
pub(crate) fn stdout(saida: &assert_cmd::assert::Assert) -> String {
    String::from_utf8_lossy(&saida.get_output().stdout).into_owned()
}

/// stderr of a finished command, as text.
pub(crate) fn stderr(saida: &assert_cmd::assert::Assert) -> String {
    String::from_utf8_lossy(&saida.get_output().stderr).into_owned()
}
