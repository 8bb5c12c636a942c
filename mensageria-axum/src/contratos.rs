//! An app's contracts ([`mensageria_core::contratos`]): every tipo this binary sends
//! (`#[enviador]`) and receives (`#[receptor]`), written to a directory the team commits, and
//! checked against it inside `cargo test`, so an incompatible change fails the build that makes
//! it.
//!
//! ```no_run
//! // tests/contratos.rs of an app: fails when a payload changes in a way the committed
//! // contracts' readers cannot read (or a new receptor cannot read the old messages).
//! #[test]
//! fn contratos_compativeis() {
//!     mensageria_axum::contratos::verificar(concat!(env!("CARGO_MANIFEST_DIR"), "/contratos"))
//!         .unwrap_or_else(|erro| panic!("{erro}"));
//! }
//! ```
//!
//! The first run writes the directory; a compatible change is written when the test runs with
//! `MENSAGERIA_CONTRATOS=escrever` (review the diff and commit it); an incompatible one is
//! refused even then. To ship one deliberately (a tipo nobody reads yet), set the tipo's
//! `"compatibilidade"` to `"NONE"` in its file, or send a new tipo (`pedido.criado.v2`) with both
//! receptores during the migration (see the guide's contracts chapter).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use mensageria_core::contratos::{self, Contrato, ErroContrato, Lado, Problema};
use mensageria_core::registro::Registro;

/// Every tipo this binary sends or receives, with its contract, in the order of the tipos.
pub fn do_app() -> Vec<Contrato> {
    let mut por_tipo: BTreeMap<&str, Contrato> = BTreeMap::new();
    let vazio = |tipo: &str| Contrato {
        tipo: tipo.to_owned(),
        compatibilidade: Default::default(),
        envio: None,
        recepcao: None,
    };
    for enviador in Registro::global().enviadores() {
        let contrato = por_tipo
            .entry(enviador.tipo)
            .or_insert_with(|| vazio(enviador.tipo));
        contrato.envio.get_or_insert_with(|| Lado {
            tipo_rust: enviador.tipo_rust.to_owned(),
            chave_de_ordem: enviador.chave_de_ordem.map(str::to_owned),
            esquema: (enviador.esquema)(),
            ..Lado::default()
        });
    }
    for receptor in crate::registrados() {
        let contrato = por_tipo
            .entry(receptor.tipo)
            .or_insert_with(|| vazio(receptor.tipo));
        contrato.recepcao.get_or_insert_with(|| {
            let esquema = (receptor.esquema)();
            Lado {
                tipo_rust: receptor.tipo_rust.to_owned(),
                chave_natural: Some(receptor.chave_natural.to_owned()),
                versao: receptor.versao.map(str::to_owned),
                esquema: esquema
                    .esquema
                    .map(|raiz| contratos::esquema_json(&raiz, &esquema.componentes)),
                ..Lado::default()
            }
        });
    }
    por_tipo.into_values().collect()
}

/// Writes this binary's contracts to `dir` ([`contratos::escrever_diretorio`]: one file per tipo,
/// each tipo's mode kept from the file already there).
pub fn escrever(dir: impl AsRef<Path>) -> Result<(), ErroContrato> {
    contratos::escrever_diretorio(dir.as_ref(), &do_app())
}

/// Why [`verificar`] failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ErroVerificacao {
    /// The committed contracts could not be read or written.
    #[error(transparent)]
    Arquivo(#[from] ErroContrato),
    /// The change is incompatible: one line per problem.
    #[error(
        "the contracts in {} and this build's are incompatible:\n{}\nkeep the old shape \
         (an optional field, `#[serde(default)]`, a new tipo for a new shape), or, if no reader \
         is left behind, set the tipo's \"compatibilidade\" to \"NONE\" in its file",
        dir.display(),
        linhas(problemas)
    )]
    Incompativel {
        /// The committed directory.
        dir: PathBuf,
        /// Every problem.
        problemas: Vec<Problema>,
    },
    /// Compatible, but not what is committed: the snapshot must be written and committed.
    #[error(
        "this build's contracts differ from {} ({}), compatibly: run the test with \
         MENSAGERIA_CONTRATOS=escrever, review the diff and commit it",
        dir.display(),
        tipos.join(", ")
    )]
    Desatualizado {
        /// The committed directory.
        dir: PathBuf,
        /// The tipos whose contract changed, appeared or went.
        tipos: Vec<String>,
    },
    /// There was no committed directory: it was written.
    #[error("no contracts in {}: written now; review and commit them", dir.display())]
    Novo {
        /// The directory written.
        dir: PathBuf,
    },
}

fn linhas(problemas: &[Problema]) -> String {
    problemas
        .iter()
        .map(|p| format!("  {p}"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Checks this binary's contracts against the ones committed in `dir`: `Ok` when they are the
/// same; an error naming each incompatible change (under each tipo's mode), or saying that a
/// compatible change must be written (`MENSAGERIA_CONTRATOS=escrever`) and committed.
pub fn verificar(dir: impl AsRef<Path>) -> Result<(), ErroVerificacao> {
    let dir = dir.as_ref();
    let escrever_agora = std::env::var("MENSAGERIA_CONTRATOS").is_ok_and(|v| v == "escrever");
    if !dir.exists() {
        escrever(dir)?;
        return Err(ErroVerificacao::Novo {
            dir: dir.to_owned(),
        });
    }
    let antigos = contratos::ler_diretorio(dir)?;
    let novos = do_app();
    verificar_contra(dir, &antigos, &novos, escrever_agora)
}

/// [`verificar`] of `novos` against `antigos` (the contracts in `dir`), writing `novos` to `dir`
/// when they are compatible, differ, and `escrever_agora`.
pub fn verificar_contra(
    dir: &Path,
    antigos: &[Contrato],
    novos: &[Contrato],
    escrever_agora: bool,
) -> Result<(), ErroVerificacao> {
    let problemas = contratos::comparar(antigos, novos);
    if !problemas.is_empty() {
        return Err(ErroVerificacao::Incompativel {
            dir: dir.to_owned(),
            problemas,
        });
    }
    let texto = |c: &[Contrato]| -> BTreeMap<String, String> {
        c.iter()
            .map(|c| (c.tipo.clone(), contratos::texto(&sem_modo(c))))
            .collect()
    };
    let (antes, agora) = (texto(antigos), texto(novos));
    let mudaram: Vec<String> = antes
        .keys()
        .chain(agora.keys())
        .filter(|tipo| antes.get(*tipo) != agora.get(*tipo))
        .cloned()
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .collect();
    if mudaram.is_empty() {
        return Ok(());
    }
    if escrever_agora {
        contratos::escrever_diretorio(dir, novos)?;
        return Ok(());
    }
    Err(ErroVerificacao::Desatualizado {
        dir: dir.to_owned(),
        tipos: mudaram,
    })
}

/// `contrato` without its mode: the mode is the committed file's, never the build's.
fn sem_modo(contrato: &Contrato) -> Contrato {
    Contrato {
        compatibilidade: Default::default(),
        ..contrato.clone()
    }
}
