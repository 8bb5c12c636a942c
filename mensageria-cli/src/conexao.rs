//! The database a command talks to: PostgreSQL or SQLite, chosen by the URL. Every command
//! then calls the generic operations of `mensageria_core::operacoes` with its pool: the CLI
//! holds no SQL.

use std::str::FromStr;
use std::time::Duration;

use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use sqlx::sqlite::{SqliteConnectOptions, SqlitePoolOptions};
use sqlx::{ConnectOptions, Connection, PgPool, SqlitePool};

use crate::erro::ErroCli;

/// How long connecting may take before the command gives up with one line.
const PRAZO_CONEXAO: Duration = Duration::from_secs(5);

/// An open pool on either backend.
pub(crate) enum Conexao {
    /// PostgreSQL, its `search_path` set to `--schema` when given.
    Postgres(PgPool),
    /// A SQLite file.
    Sqlite(SqlitePool),
}

/// Runs the same body with the pool of whichever backend `$conexao` holds; the body is
/// type-checked once per backend, so it can call mensageria-core's generic API without naming
/// the backend.
macro_rules! nos_dois {
    ($conexao:expr, $pool:ident => $corpo:expr) => {
        match $conexao {
            $crate::conexao::Conexao::Postgres($pool) => $corpo,
            $crate::conexao::Conexao::Sqlite($pool) => $corpo,
        }
    };
}
pub(crate) use nos_dois;

/// Where to connect, as given on the command line.
pub(crate) struct Destino<'a> {
    /// `--database-url`.
    pub(crate) url: &'a str,
    /// `--schema` (PostgreSQL only).
    pub(crate) schema: Option<&'a str>,
    /// Create the SQLite file if it does not exist (only `migrar` does).
    pub(crate) criar: bool,
}

impl Conexao {
    /// Connects at once, so an unreachable database is reported before any work starts.
    pub(crate) async fn abrir(destino: Destino<'_>) -> Result<Self, ErroCli> {
        let url = destino.url;
        let falhou = |fonte| ErroCli::Conexao {
            url: sem_senha(url),
            fonte,
        };
        if url.starts_with("postgres://") || url.starts_with("postgresql://") {
            let mut opcoes = PgConnectOptions::from_str(url).map_err(falhou)?;
            if let Some(schema) = destino.schema {
                opcoes = opcoes.options([("search_path", schema)]);
            }
            sondar(&opcoes).await.map_err(falhou)?;
            let pool = PgPoolOptions::new()
                .max_connections(2)
                .acquire_timeout(PRAZO_CONEXAO)
                .connect_lazy_with(opcoes);
            Ok(Self::Postgres(pool))
        } else if url.starts_with("sqlite:") {
            let opcoes = SqliteConnectOptions::from_str(url)
                .map_err(falhou)?
                .create_if_missing(destino.criar)
                .busy_timeout(PRAZO_CONEXAO);
            sondar(&opcoes).await.map_err(falhou)?;
            let pool = SqlitePoolOptions::new()
                .max_connections(2)
                .acquire_timeout(PRAZO_CONEXAO)
                .connect_lazy_with(opcoes);
            Ok(Self::Sqlite(pool))
        } else {
            Err(ErroCli::UrlInvalida {
                url: sem_senha(url),
            })
        }
    }

    /// Closes the pool (waits for its connections to end cleanly).
    pub(crate) async fn fechar(self) {
        nos_dois!(self, pool => pool.close().await)
    }
}

/// Opens and closes one connection, so the reason it fails (refused, unknown host, bad
/// password, no such file) is the one reported, not a pool timeout.
async fn sondar<O>(opcoes: &O) -> Result<(), sqlx::Error>
where
    O: ConnectOptions,
    O::Connection: Sized,
{
    match tokio::time::timeout(PRAZO_CONEXAO, opcoes.connect()).await {
        Ok(conexao) => conexao?.close().await,
        Err(_) => Err(sqlx::Error::PoolTimedOut),
    }
}

/// `--schema`: an unquoted SQL identifier (`[A-Za-z_][A-Za-z0-9_$]*`, at most 63 bytes, what
/// PostgreSQL keeps of a name), checked before connecting. It goes into the connection's startup
/// options, where whitespace separates settings: `alvo<TAB>-c<TAB>default_transaction_read_only=on`
/// would set a second one. Empty (or blank, as an empty `MENSAGERIA_SCHEMA` is) means not given.
pub(crate) fn analisar_schema(texto: &str) -> Result<String, String> {
    if texto.trim().is_empty() {
        return Ok(String::new());
    }
    let mut caracteres = texto.chars();
    let inicio_valido = caracteres
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_');
    let resto_valido = caracteres.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '$');
    if inicio_valido && resto_valido && texto.len() <= TAMANHO_MAXIMO_DE_NOME {
        Ok(texto.to_owned())
    } else {
        Err(format!(
            "not a schema name: use 1 to {TAMANHO_MAXIMO_DE_NOME} ASCII letters, digits, `_` or \
             `$`, starting with a letter or `_` (an unquoted SQL identifier; no spaces, tabs or \
             quotes)"
        ))
    }
}

/// PostgreSQL's `NAMEDATALEN - 1`: the longest identifier it keeps whole.
const TAMANHO_MAXIMO_DE_NOME: usize = 63;

/// The URL (or whatever was given as one) with every secret in it replaced by `***`, fit for
/// messages: the password of `user:password@`, and the value of every query parameter whose
/// name says it holds a secret (`password`, `sslpassword`, `auth_token`, `client_secret`, …; see
/// [`nome_secreto`]). When in doubt it hides too much rather than too little: a password with an
/// unencoded `@`, `/` or `?` in it is still hidden whole.
pub(crate) fn sem_senha(url: &str) -> String {
    let Some((esquema, resto)) = url.split_once("://") else {
        if url.starts_with("sqlite:") {
            // A path: no credentials, and `:`/`@`/`=` in it are not separators.
            return url.to_owned();
        }
        // Not a URL at all; perhaps a libpq string (`host=db password=…`).
        return sem_segredo_em_palavras_chave(url);
    };
    let resto = sem_segredo_na_consulta(resto);
    if esquema.starts_with("sqlite") {
        return format!("{esquema}://{resto}");
    }
    // The userinfo ends at the last `@`: a password may hold `@` (and `/`, `?`) unencoded.
    let Some((credenciais, servidor)) = resto.rsplit_once('@') else {
        return format!("{esquema}://{resto}");
    };
    match credenciais.split_once(':') {
        Some((usuario, _)) => format!("{esquema}://{usuario}:***@{servidor}"),
        None => format!("{esquema}://{resto}"),
    }
}

/// Whether a connection parameter named `nome` holds a secret: its name, percent-decoded (as
/// sqlx reads it), contains `password`, `passwd`, `secret` or `token`, in any case.
fn nome_secreto(nome: &str) -> bool {
    let nome = decodificar_percentuais(nome).to_ascii_lowercase();
    ["password", "passwd", "secret", "token"]
        .iter()
        .any(|palavra| nome.contains(palavra))
}

/// `?nome=valor&…` with the value of every secret parameter masked.
fn sem_segredo_na_consulta(url: &str) -> String {
    let Some((base, consulta)) = url.split_once('?') else {
        return url.to_owned();
    };
    let partes: Vec<String> = consulta
        .split('&')
        .map(|parte| match parte.split_once('=') {
            Some((nome, _)) if nome_secreto(nome) => format!("{nome}=***"),
            _ => parte.to_owned(),
        })
        .collect();
    format!("{base}?{}", partes.join("&"))
}

/// A libpq keyword/value string (`host=db password='a b'`) with the value of every secret
/// keyword masked; a quoted value is masked to its closing quote.
fn sem_segredo_em_palavras_chave(texto: &str) -> String {
    let mut saida = String::with_capacity(texto.len());
    let mut resto = texto;
    while !resto.is_empty() {
        let espacos = resto.len() - resto.trim_start().len();
        saida.push_str(&resto[..espacos]);
        resto = &resto[espacos..];
        // `nome=valor`, with optional spaces around the `=`.
        let igual = resto
            .find('=')
            .filter(|&i| !resto[..i].trim_end().contains(char::is_whitespace));
        let Some(igual) = igual else {
            // Just a word: copy it, but for what comes before an `@` (`user:password@host`
            // without the `//`).
            let fim = resto.find(char::is_whitespace).unwrap_or(resto.len());
            match resto[..fim].rsplit_once('@') {
                Some((_, servidor)) => saida.push_str(&format!("***@{servidor}")),
                None => saida.push_str(&resto[..fim]),
            }
            resto = &resto[fim..];
            continue;
        };
        let nome = resto[..igual].trim_end();
        let valor = resto[igual + 1..].trim_start();
        let fim = fim_do_valor(valor);
        saida.push_str(&resto[..resto.len() - valor.len()]);
        if nome_secreto(nome) {
            saida.push_str("***");
        } else {
            saida.push_str(&valor[..fim]);
        }
        resto = &valor[fim..];
    }
    saida
}

/// Where a libpq value starting `valor` ends: at its closing quote (a `\'` does not close) or
/// at the first whitespace.
fn fim_do_valor(valor: &str) -> usize {
    let Some(citado) = valor.strip_prefix('\'') else {
        return valor.find(char::is_whitespace).unwrap_or(valor.len());
    };
    let mut escapado = false;
    for (i, c) in citado.char_indices() {
        match c {
            _ if escapado => escapado = false,
            '\\' => escapado = true,
            '\'' => return 1 + i + 1,
            _ => {}
        }
    }
    valor.len()
}

/// `%XX` decoded (invalid escapes and non-UTF-8 results left as they are): how sqlx reads a
/// parameter name, so `pass%77ord` is recognised as `password`.
fn decodificar_percentuais(texto: &str) -> String {
    let bytes = texto.as_bytes();
    let mut decodificado = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hexa = bytes
            .get(i + 1..i + 3)
            .and_then(|h| std::str::from_utf8(h).ok())
            .and_then(|h| u8::from_str_radix(h, 16).ok());
        match (bytes[i], hexa) {
            (b'%', Some(byte)) => {
                decodificado.push(byte);
                i += 3;
            }
            (byte, _) => {
                decodificado.push(byte);
                i += 1;
            }
        }
    }
    String::from_utf8(decodificado).unwrap_or_else(|_| texto.to_owned())
}

#[cfg(test)]
mod testes {
    use super::{analisar_schema, sem_senha};

    #[test]
    fn esconde_a_senha() {
        assert_eq!(
            sem_senha("postgres://app:segredo@db:5432/x"),
            "postgres://app:***@db:5432/x"
        );
        assert_eq!(
            sem_senha("postgres://postgres@127.0.0.1/x"),
            "postgres://postgres@127.0.0.1/x"
        );
        assert_eq!(sem_senha("sqlite:app.db"), "sqlite:app.db");
        assert_eq!(
            sem_senha("postgres://app@db/x?sslmode=require&password=segredo"),
            "postgres://app@db/x?sslmode=require&password=***"
        );
    }

    #[test]
    fn esconde_a_senha_com_arroba_barra_ou_interrogacao() {
        assert_eq!(
            sem_senha("postgres://app:se@g/r?edo@db/x"),
            "postgres://app:***@db/x"
        );
        assert_eq!(
            sem_senha("postgresql://app:segredo@db/x?sslmode=require"),
            "postgresql://app:***@db/x?sslmode=require"
        );
    }

    #[test]
    fn esconde_todo_parametro_secreto() {
        for nome in [
            "password",
            "PASSWORD",
            "sslpassword",
            "SslPassword",
            "passwd",
            "db_passwd",
            "secret",
            "client_secret",
            "token",
            "auth_token",
            "Access-Token",
            "pass%77ord",
            "ssl%50ASSWORD",
        ] {
            let url =
                format!("postgres://app@db/x?sslmode=require&{nome}=segredo&application_name=a");
            assert_eq!(
                sem_senha(&url),
                format!("postgres://app@db/x?sslmode=require&{nome}=***&application_name=a"),
                "{nome}"
            );
        }
        assert_eq!(
            sem_senha("postgres://app:s1@db/x?sslpassword=s2&auth_token=s3&secret=s4"),
            "postgres://app:***@db/x?sslpassword=***&auth_token=***&secret=***"
        );
        assert_eq!(
            sem_senha("postgres://db/x?sslpassword=a@b&password"),
            "postgres://db/x?sslpassword=***&password"
        );
    }

    #[test]
    fn deixa_o_que_nao_e_segredo() {
        for url in [
            "postgres://app@db/x?sslmode=require&application_name=relay&options=-c%20a%3Db",
            "postgres://app@db/x?sslrootcert=/etc/ca.pem&passfile=/home/app/.pgpass",
            "sqlite:///var/lib/app:1@2.db?mode=rwc",
            "sqlite::memory:",
        ] {
            assert_eq!(sem_senha(url), url);
        }
    }

    #[test]
    fn esconde_segredos_fora_de_uma_url() {
        assert_eq!(
            sem_senha("mysql://root:segredo@localhost/db?auth_token=t"),
            "mysql://root:***@localhost/db?auth_token=***"
        );
        assert_eq!(
            sem_senha("host=db user=app password=segredo dbname=x"),
            "host=db user=app password=*** dbname=x"
        );
        assert_eq!(
            sem_senha("host=db password = 'se gr\\'edo' sslpassword='' port=5432"),
            "host=db password = *** sslpassword=*** port=5432"
        );
        assert_eq!(
            sem_senha("host=db password='sem fim"),
            "host=db password=***"
        );
        assert_eq!(sem_senha("postgres:app:segredo@db/x"), "***@db/x");
    }

    #[test]
    fn schema_e_um_identificador() {
        for nome in ["alvo", "_x", "Teste_1", "a$b", &"a".repeat(63)] {
            assert_eq!(analisar_schema(nome).as_deref(), Ok(nome));
        }
        for vazio in ["", "  "] {
            assert_eq!(analisar_schema(vazio).as_deref(), Ok(""));
        }
        for ruim in [
            "alvo\t-c\tdefault_transaction_read_only=on",
            "alvo -c x=y",
            "alvo,public",
            "\"alvo\"",
            "1alvo",
            "$alvo",
            " alvo",
            "alvo\\ x",
            "alvô",
            &"a".repeat(64),
        ] {
            let erro = analisar_schema(ruim).expect_err(ruim);
            assert!(erro.contains("1 to 63 ASCII letters, digits"), "{erro}");
        }
    }
}
