//! A receiving app for outside clients of the OpenAPI document (`scripts/schemathesis`): three
//! receptores on a SQLite file, served with `mensageria_axum::servir` on 127.0.0.1.
//!
//! - `contrato.fechamento`: a payload deriving `utoipa::ToSchema`, with required fields and a
//!   nested object, keyed by two of them;
//! - `contrato.aviso`: a payload deriving `utoipa::ToSchema` that refuses `{}` and unknown keys,
//!   with enums, a bounded integer, a map, options and a default, in shapes whose derived schema
//!   is as strict as its `Deserialize` (see `Aviso`);
//! - `contrato.cadastro`: convergent (`versao`), with a schema.
//!
//! Each applies by inserting one row into `efeito`. Prints the address it listens on
//! (`127.0.0.1:PORT`) on stdout, then serves until killed.
//!
//! ```text
//! servidor-openapi [PORT] [--banco FILE] [--token TOKEN]
//! ```

use std::collections::BTreeMap;
use std::io::Write;
use std::path::PathBuf;

use clap::Parser;
use mensageria_axum::{Config, Rejeicao, receptor};
use mensageria_core::sqlx::{self, Sqlite, Transaction};
use serde::Deserialize;

#[derive(Parser)]
#[command(about = "mensageria receptores for outside OpenAPI clients")]
struct Argumentos {
    /// The port on 127.0.0.1 (0: any free one).
    #[arg(default_value_t = 0)]
    porta: u16,
    /// The SQLite file (created and migrated); a temporary one when absent.
    #[arg(long)]
    banco: Option<PathBuf>,
    /// The bearer token accepted.
    #[arg(long, env = "MENSAGERIA_TOKEN", default_value = "t0k-de-teste-1234")]
    token: String,
}

/// The closing of a contract.
#[derive(Deserialize, utoipa::ToSchema)]
struct Fechamento {
    /// The issuer.
    cnpj: String,
    /// The contract's key.
    chave: String,
    /// The amount, in cents.
    valor_centavos: i64,
    local: Local,
    /// Free text.
    observacao: Option<String>,
}

/// Where it happened.
#[derive(Deserialize, utoipa::ToSchema)]
struct Local {
    municipio: String,
    uf: String,
}

// Shapes whose schema `utoipa::ToSchema` derives exactly as serde reads them, so that what the
// document calls valid is accepted and what it calls invalid is refused. Left out, because
// their derived schema says otherwise than serde (schemathesis finds each): a `u32` or `u64`
// (format `int32`/`int64`: values serde takes are called invalid), a variant with data of an
// externally tagged enum (its wrapping object is not closed: extra keys are called valid), a
// tuple (no `minItems`), a tuple variant (its items are described as objects), a `char` (no
// length of 1), an integer narrower than 32 bits without `#[schema(maximum = ..)]`.
/// A notice. `{}` is refused (missing fields), and so are unknown keys.
#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct Aviso {
    id: String,
    origem: Origem,
    motivo: Motivo,
    /// From 0 to 255.
    #[schema(maximum = 255)]
    prioridade: u8,
    parcelas: Vec<i64>,
    rotulos: BTreeMap<String, bool>,
    marca: Option<String>,
    #[serde(default)]
    peso_relativo: f64,
    repetido: Repetido,
}

/// Who raised it.
#[derive(Deserialize, utoipa::ToSchema)]
enum Origem {
    Manual,
    Automatica,
}

/// Why, tagged by `tipo`.
#[derive(Deserialize, utoipa::ToSchema)]
#[serde(tag = "tipo", rename_all = "snake_case")]
enum Motivo {
    Nenhum,
    Texto {
        texto: String,
    },
    Codigo {
        numero: i64,
        detalhe: Option<String>,
    },
}

/// How many times it was raised.
#[derive(Deserialize, utoipa::ToSchema)]
struct Repetido(i64);

/// An entity changed; the newest revision wins.
#[derive(Deserialize, utoipa::ToSchema)]
struct Cadastro {
    entidade: i64,
    revisao: i64,
}

async fn registrar(
    tx: &mut Transaction<'_, Sqlite>,
    tipo: &str,
    dado: String,
) -> Result<(), Rejeicao> {
    sqlx::query("INSERT INTO efeito (tipo, dado) VALUES ($1, $2)")
        .bind(tipo)
        .bind(dado)
        .execute(&mut **tx)
        .await?;
    Ok(())
}

#[receptor(tipo = "contrato.fechamento", chave_natural = (evento.cnpj, evento.chave))]
async fn fechar(tx: &mut Transaction<'_, Sqlite>, evento: Fechamento) -> Result<(), Rejeicao> {
    let dado = format!(
        "{} {} {} {}/{} {:?}",
        evento.cnpj,
        evento.chave,
        evento.valor_centavos,
        evento.local.municipio,
        evento.local.uf,
        evento.observacao
    );
    registrar(tx, "contrato.fechamento", dado).await
}

#[receptor(tipo = "contrato.aviso", chave_natural = evento.id)]
async fn avisar(tx: &mut Transaction<'_, Sqlite>, evento: Aviso) -> Result<(), Rejeicao> {
    let origem = match evento.origem {
        Origem::Manual => "manual",
        Origem::Automatica => "automatica",
    };
    let motivo = match evento.motivo {
        Motivo::Nenhum => "nenhum".to_owned(),
        Motivo::Texto { texto } => texto,
        Motivo::Codigo { numero, detalhe } => format!("{numero} {detalhe:?}"),
    };
    let dado = format!(
        "{} {origem} {motivo} {} {:?} {:?} {:?} {} {}",
        evento.id,
        evento.prioridade,
        evento.parcelas,
        evento.rotulos,
        evento.marca,
        evento.peso_relativo,
        evento.repetido.0
    );
    registrar(tx, "contrato.aviso", dado).await
}

#[receptor(tipo = "contrato.cadastro", chave_natural = evento.entidade, versao = evento.revisao)]
async fn cadastrar(tx: &mut Transaction<'_, Sqlite>, evento: Cadastro) -> Result<(), Rejeicao> {
    registrar(
        tx,
        "contrato.cadastro",
        format!("{} {}", evento.entidade, evento.revisao),
    )
    .await
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let argumentos = Argumentos::parse();
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();

    let (_temporario, caminho) = match argumentos.banco {
        Some(caminho) => (None, caminho),
        None => {
            let dir = tempfile::tempdir()?;
            let caminho = dir.path().join("servidor-openapi.db");
            (Some(dir), caminho)
        }
    };
    let pool = mensageria_core::banco::sqlite::abrir(&caminho).await?;
    mensageria_core::migrar(&pool).await?;
    sqlx::query(
        "CREATE TABLE IF NOT EXISTS efeito (id INTEGER PRIMARY KEY, tipo TEXT NOT NULL, dado TEXT NOT NULL)",
    )
    .execute(&pool)
    .await?;

    let app = mensageria_axum::router(pool, Config::new("receptor", [argumentos.token]))?;
    let ouvinte = tokio::net::TcpListener::bind(("127.0.0.1", argumentos.porta)).await?;
    let endereco = ouvinte.local_addr()?;
    let mut saida = std::io::stdout().lock();
    writeln!(saida, "{endereco}")?;
    saida.flush()?;
    drop(saida);
    mensageria_axum::servir(ouvinte, app).await?;
    Ok(())
}
