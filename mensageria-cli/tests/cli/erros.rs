//! A database that is down, a URL of an unknown kind, a schema that is not there, bad
//! arguments: one clear line, a non-zero exit, never a panic, never a secret.

use assert_cmd::Command;
use mensageria_testes::{database_url, nos_dois_bancos};

use crate::comum::{Alvo, stderr, stdout};

fn mensageria(args: &[&str]) -> assert_cmd::assert::Assert {
    Command::new(env!("CARGO_BIN_EXE_mensageria"))
        .env_remove("DATABASE_URL")
        .env_remove("MENSAGERIA_SCHEMA")
        .env("RUST_BACKTRACE", "1")
        .args(args)
        .assert()
}

/// Exactly one line on stderr, starting with `inicio`, nothing on stdout, exit code 1.
fn uma_linha(saida: assert_cmd::assert::Assert, inicio: &str) {
    let saida = saida.code(1);
    let erro = stderr(&saida);
    assert_eq!(erro.lines().count(), 1, "{erro}");
    assert!(erro.starts_with(inicio), "{erro}");
    assert!(
        !erro.contains("panicked") && !erro.contains("backtrace"),
        "{erro}"
    );
    assert!(saida.get_output().stdout.is_empty());
}

#[test]
fn banco_fora_do_ar_da_uma_linha() {
    for comando in ["status", "doctor", "migrar"] {
        uma_linha(
            mensageria(&[
                "--database-url",
                "postgres://postgres:segredo@127.0.0.1:1/postgres",
                comando,
            ]),
            "mensageria: cannot connect to the database at postgres://postgres:***@127.0.0.1:1/postgres: ",
        );
    }
    let dir = tempfile_dir();
    let url = format!("sqlite://{}/nao/existe.db", dir.display());
    uma_linha(
        mensageria(&["--database-url", &url, "status"]),
        &format!("mensageria: cannot connect to the database at {url}: "),
    );
}

fn tempfile_dir() -> std::path::PathBuf {
    std::env::temp_dir().join(format!("mensageria-cli-{}", uuid::Uuid::now_v7().simple()))
}

#[test]
fn url_desconhecida_e_argumentos_ruins() {
    uma_linha(
        mensageria(&["--database-url", "mysql://root@localhost/db", "status"]),
        "mensageria: unsupported database URL `mysql://root@localhost/db`",
    );
    // clap's own errors, exit code 2.
    let sem_url = mensageria(&["status"]).code(2);
    assert!(stderr(&sem_url).contains("pass --database-url or set DATABASE_URL"));
    let sem_alvo = mensageria(&[
        "--database-url",
        "sqlite::memory:",
        "mortas",
        "reenfileirar",
    ])
    .code(2);
    assert!(
        stderr(&sem_alvo).contains("<ID|--tipo <TIPO>|--todas>"),
        "{}",
        stderr(&sem_alvo)
    );
    let duracao = mensageria(&[
        "--database-url",
        "sqlite::memory:",
        "purgar",
        "--retencao",
        "7x",
    ])
    .code(2);
    assert!(
        stderr(&duracao).contains("unknown unit `x`"),
        "{}",
        stderr(&duracao)
    );
    let id = mensageria(&[
        "--database-url",
        "sqlite::memory:",
        "mortas",
        "mostrar",
        "abc",
    ])
    .code(2);
    assert!(
        stderr(&id).contains("invalid value 'abc'"),
        "{}",
        stderr(&id)
    );
}

nos_dois_bancos! {
    async fn sem_schema_diz_quem_deve_migrar(db) {
        for args in [&["status"][..], &["verificar"], &["mortas", "listar"], &["purgar"]] {
            let saida = db.mensageria(args).assert().code(1);
            let erro = stderr(&saida);
            assert_eq!(erro.lines().count(), 1, "{erro}");
            assert!(erro.starts_with("mensageria: the mensageria schema is missing"), "{erro}");
            assert!(erro.contains("mensageria migrar"), "{erro}");
        }
    }
}

/// `--schema` goes into the connection's startup options, where whitespace separates settings:
/// anything but a plain identifier is refused as a bad argument, before connecting.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn schema_que_nao_e_identificador_e_recusado() {
    let db = mensageria_testes::PgIsolado::novo().await;
    let injetado = format!("{}\t-c\tdefault_transaction_read_only=on", db.schema);
    let longo = format!("{}_{}", db.schema, "x".repeat(63 - db.schema.len()));
    assert_eq!(longo.len(), 64);
    for schema in [
        injetado.as_str(),
        &format!("{} -c x=y", db.schema),
        "a,public",
        &longo,
    ] {
        let por_opcao = mensageria(&[
            "--database-url",
            &database_url(),
            "--schema",
            schema,
            "migrar",
        ]);
        let por_ambiente = Command::new(env!("CARGO_BIN_EXE_mensageria"))
            .env_remove("DATABASE_URL")
            .env("MENSAGERIA_SCHEMA", schema)
            .args(["--database-url", &database_url(), "migrar"])
            .assert();
        for saida in [por_opcao, por_ambiente] {
            let saida = saida.code(2);
            let erro = stderr(&saida);
            assert!(erro.contains("--schema"), "{erro}");
            assert!(
                erro.contains("not a schema name: use 1 to 63 ASCII letters, digits, `_` or `$`"),
                "{erro}"
            );
            assert!(saida.get_output().stdout.is_empty());
        }
    }
    // Nothing ran: the schema is still empty.
    let tabelas: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM information_schema.tables WHERE table_schema = $1",
    )
    .bind(&db.schema)
    .fetch_one(&db.pool)
    .await
    .unwrap();
    assert_eq!(tabelas, 0);
    db.descartar().await;
}

/// A schema name of PostgreSQL's full 63 bytes is an identifier like any other.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn schema_de_63_bytes_funciona() {
    let schema = format!("t{}", uuid::Uuid::now_v7().simple()).repeat(2)[..63].to_owned();
    let admin = sqlx::PgPool::connect(&database_url()).await.unwrap();
    sqlx::query(sqlx::AssertSqlSafe(format!("CREATE SCHEMA {schema}")))
        .execute(&admin)
        .await
        .unwrap();
    let migrar = mensageria(&[
        "--database-url",
        &database_url(),
        "--schema",
        &schema,
        "migrar",
    ]);
    assert!(stdout(&migrar.success()).starts_with("created the mensageria tables"));
    mensageria(&[
        "--database-url",
        &database_url(),
        "--schema",
        &schema,
        "verificar",
    ])
    .success();
    let tabelas: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM information_schema.tables WHERE table_schema = $1",
    )
    .bind(&schema)
    .fetch_one(&admin)
    .await
    .unwrap();
    assert!(tabelas > 0);
    sqlx::query(sqlx::AssertSqlSafe(format!("DROP SCHEMA {schema} CASCADE")))
        .execute(&admin)
        .await
        .unwrap();
    admin.close().await;
}

/// A secret anywhere in the URL (userinfo, `sslpassword`, any `*token*`/`*secret*` parameter) is
/// masked in the error that prints the URL.
#[test]
fn segredos_da_url_nao_aparecem_no_erro() {
    let url = "postgres://postgres:segredo0@127.0.0.1:1/postgres?sslmode=disable\
               &sslpassword=segredo1&application_name=cli&auth_token=segredo2&Client_Secret=segredo3";
    let saida = mensageria(&["--database-url", url, "status"]).code(1);
    let erro = stderr(&saida);
    assert!(!erro.contains("segredo"), "{erro}");
    assert!(
        erro.starts_with(
            "mensageria: cannot connect to the database at postgres://postgres:***@127.0.0.1:1/\
             postgres?sslmode=disable&sslpassword=***&application_name=cli&auth_token=***\
             &Client_Secret=***: "
        ),
        "{erro}"
    );
    // Not a URL this command knows (a libpq string, say): echoed with the secret masked too.
    let outro = mensageria(&[
        "--database-url",
        "host=db password='segredo 4' user=app",
        "status",
    ])
    .code(1);
    let erro = stderr(&outro);
    assert!(!erro.contains("segredo"), "{erro}");
    assert!(erro.contains("`host=db password=*** user=app`"), "{erro}");
}

/// `migrar --schema <one that does not exist>`: PostgreSQL's "no schema has been selected to
/// create in" becomes one line that names the schema and the statement that creates it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn migrar_num_schema_inexistente_diz_como_cria_lo() {
    let ausente = format!("mensageria_ausente_{}", uuid::Uuid::now_v7().simple());
    let saida = assert_cmd::Command::new(env!("CARGO_BIN_EXE_mensageria"))
        .env_remove("DATABASE_URL")
        .env_remove("MENSAGERIA_SCHEMA")
        .args([
            "--database-url",
            &database_url(),
            "--schema",
            &ausente,
            "migrar",
        ])
        .assert()
        .code(1);
    let erro = stderr(&saida);
    assert_eq!(erro.lines().count(), 1, "{erro}");
    assert!(erro.contains(&format!("CREATE SCHEMA {ausente}")), "{erro}");
    assert!(!erro.contains("no schema has been selected"), "{erro}");
}

/// A schema-per-app database, `status` run without `--schema`: the tables are not in the
/// connection's search_path. The error must not only suggest `mensageria migrar` (which would
/// create empty tables there) but say that `--schema` points at the app's schema.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sem_schema_no_search_path_sugere_schema() {
    let db = mensageria_testes::PgIsolado::novo().await;
    // An empty schema as the connection's search_path, without --schema.
    let url = format!(
        "{}?options=-c%20search_path%3D{}",
        database_url(),
        db.schema
    );
    let saida = assert_cmd::Command::new(env!("CARGO_BIN_EXE_mensageria"))
        .env_remove("DATABASE_URL")
        .env_remove("MENSAGERIA_SCHEMA")
        .args(["--database-url", &url, "status"])
        .assert()
        .code(1);
    let erro = stderr(&saida);
    assert_eq!(erro.lines().count(), 1, "{erro}");
    assert!(
        erro.starts_with("mensageria: the mensageria schema is missing"),
        "{erro}"
    );
    assert!(erro.contains("--schema"), "{erro}");
    db.descartar().await;
}
