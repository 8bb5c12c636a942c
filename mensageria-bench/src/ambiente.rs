//! Where the bench runs: the PostgreSQL server, a schema per scenario, SQLite files, the machine.

use std::str::FromStr;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use sqlx::{PgPool, SqlitePool};

pub(crate) fn database_url() -> String {
    std::env::var("DATABASE_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/postgres".to_owned())
}

/// A pool of one connection to `DATABASE_URL`, for the bench's own statements (schemas, server
/// facts).
async fn admin() -> PgPool {
    PgPool::connect(&database_url())
        .await
        .expect("PostgreSQL at DATABASE_URL (scripts/test starts it)")
}

/// A schema of one scenario's own, with the mensageria tables and the bench's business tables.
pub(crate) struct Pg {
    pub(crate) schema: String,
}

impl Pg {
    pub(crate) async fn novo() -> Self {
        let schema = format!("bench_{}", uuid::Uuid::now_v7().simple());
        let admin = admin().await;
        sqlx::query(sqlx::AssertSqlSafe(format!("CREATE SCHEMA {schema}")))
            .execute(&admin)
            .await
            .expect("create the bench schema");
        admin.close().await;
        let pg = Self { schema };
        let pool = pg.pool(2).await;
        mensageria_core::migrar(&pool).await.expect("migrate");
        for sql in [
            "CREATE TABLE negocio (id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY, valor TEXT NOT NULL)",
            "CREATE TABLE efeito (n BIGINT PRIMARY KEY, recebido_em TIMESTAMPTZ NOT NULL DEFAULT now())",
            "CREATE TABLE efeito_puro (n BIGINT PRIMARY KEY, recebido_em TIMESTAMPTZ NOT NULL DEFAULT now())",
        ] {
            sqlx::query(sql).execute(&pool).await.expect("bench tables");
        }
        pool.close().await;
        pg
    }

    /// A pool of `conexoes` on this schema.
    pub(crate) async fn pool(&self, conexoes: u32) -> PgPool {
        let opcoes = PgConnectOptions::from_str(&database_url())
            .expect("a valid DATABASE_URL")
            .options([("search_path", self.schema.as_str())]);
        PgPoolOptions::new()
            .max_connections(conexoes)
            .min_connections(conexoes)
            .connect_with(opcoes)
            .await
            .expect("connect to the bench schema")
    }

    pub(crate) async fn descartar(self) {
        let admin = admin().await;
        sqlx::query(sqlx::AssertSqlSafe(format!(
            "DROP SCHEMA {} CASCADE",
            self.schema
        )))
        .execute(&admin)
        .await
        .expect("drop the bench schema");
        admin.close().await;
    }
}

/// How old a `bench_*` schema must be before a run drops it as abandoned: far longer than a
/// full run takes (about 45 minutes), so a run going on elsewhere on the server keeps its own.
const ABANDONADO_APOS: Duration = Duration::from_secs(24 * 3600);

/// Whether the schema `nome` is a scenario's that a run left behind: a `bench_` schema whose
/// UUIDv7 says it was created more than [`ABANDONADO_APOS`] before `agora`. Any other name
/// (not the bench's, or not a UUIDv7) is never the bench's to drop.
fn abandonado(nome: &str, agora: SystemTime) -> bool {
    let Some(id) = nome
        .strip_prefix("bench_")
        .and_then(|resto| uuid::Uuid::try_parse(resto).ok())
    else {
        return false;
    };
    let Some(criado) = id.get_timestamp().filter(|_| id.get_version_num() == 7) else {
        return false;
    };
    let (segundos, nanos) = criado.to_unix();
    let criado = UNIX_EPOCH + Duration::new(segundos, nanos);
    agora
        .duration_since(criado)
        .is_ok_and(|idade| idade > ABANDONADO_APOS)
}

/// Drops the scenario schemas that runs killed before their cleanup (`Pg::descartar`) left on
/// the server, and returns their names. A run calls it once, before its first scenario.
pub(crate) async fn varrer_abandonados(agora: SystemTime) -> Vec<String> {
    let admin = admin().await;
    let nomes: Vec<String> =
        sqlx::query_scalar(r"SELECT nspname::text FROM pg_namespace WHERE nspname LIKE 'bench\_%'")
            .fetch_all(&admin)
            .await
            .expect("list the bench schemas");
    let mut descartados = Vec::new();
    for nome in nomes.into_iter().filter(|n| abandonado(n, agora)) {
        // The name was parsed as `bench_` and a UUID: nothing in it to quote.
        sqlx::query(sqlx::AssertSqlSafe(format!(
            "DROP SCHEMA IF EXISTS {nome} CASCADE"
        )))
        .execute(&admin)
        .await
        .expect("drop an abandoned bench schema");
        descartados.push(nome);
    }
    admin.close().await;
    descartados
}

/// A SQLite file with the mensageria tables and the business table.
pub(crate) async fn sqlite(dir: &tempfile::TempDir, nome: &str) -> SqlitePool {
    let pool = mensageria_core::banco::sqlite::abrir(&dir.path().join(nome))
        .await
        .expect("open SQLite");
    mensageria_core::migrar(&pool).await.expect("migrate");
    sqlx::query("CREATE TABLE negocio (id INTEGER PRIMARY KEY AUTOINCREMENT, valor TEXT NOT NULL)")
        .execute(&pool)
        .await
        .expect("business table");
    pool
}

/// What this machine is, for the report.
pub(crate) async fn maquina() -> String {
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|t| {
            t.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split(':').nth(1))
                .map(|m| m.trim().to_owned())
        })
        .unwrap_or_else(|| "unknown CPU".into());
    let nucleos = std::thread::available_parallelism().map_or(0, |n| n.get());
    let memoria_gib = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|t| {
            t.lines()
                .find(|l| l.starts_with("MemTotal"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|kib| kib.parse::<f64>().ok())
        })
        .map_or(0.0, |kib| kib / 1024.0 / 1024.0);
    let versao_pg = match PgPool::connect(&database_url()).await {
        Ok(pool) => {
            let versao: String = sqlx::query_scalar("SHOW server_version")
                .fetch_one(&pool)
                .await
                .unwrap_or_default();
            pool.close().await;
            versao
        }
        Err(_) => "unreachable".into(),
    };
    format!(
        "{nucleos} cores ({cpu}), {memoria_gib:.0} GiB RAM, PostgreSQL {versao_pg} (stock config, same machine), SQLite (bundled, WAL, synchronous=FULL)"
    )
}

/// Resident memory of this process, in KiB.
pub(crate) fn rss_kib() -> u64 {
    rss_kib_de("self")
}

/// Resident memory of process `pid` (or `self`), in KiB; 0 when it is gone.
pub(crate) fn rss_kib_de(pid: &str) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|t| {
            t.lines()
                .find(|l| l.starts_with("VmRSS"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|kib| kib.parse().ok())
        })
        .unwrap_or(0)
}

/// CPU seconds (user + system) used so far by this process, by every PostgreSQL process and by
/// every nats-server process of the machine: the difference over a run says what each part
/// cost (other load on the machine counts too, so read it as a median).
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Cpu {
    pub(crate) proprio: f64,
    pub(crate) postgres: f64,
    pub(crate) nats: f64,
}

impl Cpu {
    pub(crate) fn agora() -> Self {
        let mut cpu = Cpu {
            proprio: segundos_de_cpu("self").unwrap_or(0.0),
            ..Cpu::default()
        };
        let Ok(processos) = std::fs::read_dir("/proc") else {
            return cpu;
        };
        for processo in processos.flatten() {
            let pid = processo.file_name();
            let Some(pid) = pid
                .to_str()
                .filter(|p| p.bytes().all(|b| b.is_ascii_digit()))
            else {
                continue;
            };
            let nome = std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default();
            let alvo = match nome.trim() {
                n if n.starts_with("postgres") => &mut cpu.postgres,
                "nats-server" => &mut cpu.nats,
                _ => continue,
            };
            *alvo += segundos_de_cpu(pid).unwrap_or(0.0);
        }
        cpu
    }

    /// What was used since `antes`, in microseconds per one of `unidades`.
    pub(crate) fn por(self, antes: Cpu, unidades: f64) -> Cpu {
        let us = |depois: f64, antes: f64| (depois - antes) * 1e6 / unidades.max(1.0);
        Cpu {
            proprio: us(self.proprio, antes.proprio),
            postgres: us(self.postgres, antes.postgres),
            nats: us(self.nats, antes.nats),
        }
    }
}

/// utime + stime of `/proc/{pid}/stat`, in seconds (100 ticks a second on Linux x86_64).
pub(crate) fn segundos_de_cpu(pid: &str) -> Option<f64> {
    segundos_de_cpu_em(std::path::Path::new(&format!("/proc/{pid}/stat")))
}

/// utime + stime of a `stat` file of `/proc` (a process's or one of its threads'), in seconds.
pub(crate) fn segundos_de_cpu_em(stat: &std::path::Path) -> Option<f64> {
    let stat = std::fs::read_to_string(stat).ok()?;
    // The command name is in parentheses and may hold spaces: count fields after the last `)`.
    let depois = &stat[stat.rfind(')')? + 1..];
    let campos: Vec<&str> = depois.split_whitespace().collect();
    let utime: f64 = campos.get(11)?.parse().ok()?;
    let stime: f64 = campos.get(12)?.parse().ok()?;
    Some((utime + stime) / 100.0)
}

#[cfg(test)]
mod testes {
    use super::*;

    fn criado_ha(agora: SystemTime, idade: Duration) -> String {
        let quando = agora - idade;
        let desde = quando.duration_since(UNIX_EPOCH).unwrap();
        let ts = uuid::Timestamp::from_unix(uuid::NoContext, desde.as_secs(), desde.subsec_nanos());
        format!("bench_{}", uuid::Uuid::new_v7(ts).simple())
    }

    #[test]
    fn so_um_schema_do_bench_de_mais_de_um_dia_e_abandonado() {
        let agora = SystemTime::now();
        let hora = Duration::from_secs(3600);
        assert!(abandonado(&criado_ha(agora, 25 * hora), agora));
        assert!(
            !abandonado(&criado_ha(agora, hora), agora),
            "a run going on elsewhere"
        );
        // A UUIDv4 carries no time.
        let v4 = "bench_0f8fad5bd9cb469fa16570867728950e";
        for nome in ["public", "bench_", "bench_x", "outro_0190", v4] {
            assert!(!abandonado(nome, agora), "{nome}");
        }
    }

    /// Against the real server: an old scenario schema goes, a fresh one stays.
    #[tokio::test]
    async fn a_varredura_descarta_o_schema_abandonado_e_deixa_o_recente() {
        let agora = SystemTime::now();
        let velho = criado_ha(agora, Duration::from_secs(48 * 3600));
        let recente = Pg::novo().await;
        let admin = admin().await;
        sqlx::query(sqlx::AssertSqlSafe(format!("CREATE SCHEMA {velho}")))
            .execute(&admin)
            .await
            .unwrap();
        let descartados = varrer_abandonados(agora).await;
        assert!(descartados.contains(&velho), "{descartados:?}");
        assert!(!descartados.contains(&recente.schema));
        let existem: Vec<String> =
            sqlx::query_scalar("SELECT nspname::text FROM pg_namespace WHERE nspname = ANY($1)")
                .bind(vec![velho.clone(), recente.schema.clone()])
                .fetch_all(&admin)
                .await
                .unwrap();
        assert_eq!(existem, vec![recente.schema.clone()]);
        admin.close().await;
        recente.descartar().await;
    }
}
