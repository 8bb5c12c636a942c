//! `migrar` and `verificar`: the schema through mensageria-core's own API.

use mensageria_core::operacoes;
use serde::Serialize;

use crate::conexao::{Conexao, nos_dois};
use crate::erro::ErroCli;
use crate::saida_formatada::{Relatorio, imprimir};

/// What `migrar` changed.
#[derive(Debug, Serialize)]
struct Migracao {
    /// The version before (`None`: no mensageria tables).
    #[serde(rename = "version_before")]
    antes: Option<i64>,
    /// The version now.
    #[serde(rename = "version_after")]
    depois: i64,
}

impl Relatorio for Migracao {
    fn humano(&self) -> String {
        match self.antes {
            Some(antes) if antes == self.depois => {
                format!("schema already at version {antes}: nothing changed")
            }
            Some(antes) => format!(
                "migrated the mensageria schema from version {antes} to {}",
                self.depois
            ),
            None => format!(
                "created the mensageria tables (schema version {})",
                self.depois
            ),
        }
    }
}

/// Applies the missing migrations and says what changed.
pub(crate) async fn migrar(conexao: &Conexao, json: bool) -> Result<(), ErroCli> {
    let relatorio = nos_dois!(conexao, pool => {
        let antes = operacoes::versao_aplicada(pool).await?;
        mensageria_core::migrar(pool).await?;
        let depois = mensageria_core::verificar_schema(pool).await?.aplicada;
        Migracao { antes, depois }
    });
    imprimir(&relatorio, json);
    Ok(())
}

/// The newest migration this build knows, for `pool`'s backend.
pub(crate) fn versao_esperada<DB: mensageria_core::Banco>(_pool: &sqlx::Pool<DB>) -> i64 {
    operacoes::versao_esperada::<DB>()
}

/// What `verificar` found.
#[derive(Debug, Serialize)]
struct Verificacao {
    /// The newest migration applied.
    #[serde(rename = "applied_version")]
    aplicada: i64,
    /// The newest migration this build knows.
    #[serde(rename = "expected_version")]
    esperada: i64,
}

impl Relatorio for Verificacao {
    fn humano(&self) -> String {
        let mut texto = format!(
            "schema ok: version {} (this build needs {})",
            self.aplicada, self.esperada
        );
        if self.aplicada > self.esperada {
            texto.push_str("; the schema is newer than this CLI: upgrade the CLI");
        }
        texto
    }
}

/// Checks the schema as a non-owner would; fails (exit 1) when it is missing or too old.
pub(crate) async fn verificar(conexao: &Conexao, json: bool) -> Result<(), ErroCli> {
    let versao = nos_dois!(conexao, pool => mensageria_core::verificar_schema(pool).await?);
    imprimir(
        &Verificacao {
            aplicada: versao.aplicada,
            esperada: versao.esperada,
        },
        json,
    );
    Ok(())
}
