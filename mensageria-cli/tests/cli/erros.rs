//! A database that is down, a URL of an unknown kind, a schema that is not there, bad
//! arguments: one clear line, a non-zero exit, never a panic.

use assert_cmd::Command;
use mensageria_testes::nos_dois_bancos;

use crate::comum::{Alvo, stderr};

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
