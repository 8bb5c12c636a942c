//! The sending app, `emissor`: closes MDF-e and, in the same transaction, enqueues the event.

use mensageria_core::{ContextoEnvio, Destino, FalhaEnvio, enviador};
use serde::{Deserialize, Serialize};

/// The event: an MDF-e was closed. Its natural key is (cnpj, chave_mdfe).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct EncerramentoMdfe {
    /// The issuer.
    pub cnpj: String,
    /// The MDF-e's access key.
    pub chave_mdfe: String,
}

impl EncerramentoMdfe {
    /// The `n`-th event of the demo.
    pub fn numero(n: u64) -> Self {
        Self {
            cnpj: format!("{:014}", 12_345_678_000_000 + n % 7),
            chave_mdfe: format!("41190812345678000190580010{n:018}"),
        }
    }
}

/// The business table the emissor writes in the same transaction as the enqueue.
pub(crate) const TABELA: &str = "CREATE TABLE mdfe (\
     chave TEXT PRIMARY KEY, cnpj TEXT NOT NULL, situacao TEXT NOT NULL)";

/// How the event reaches the fiscal: `POST {destino}/m2m/demo.encerramento`.
#[enviador(tipo = "demo.encerramento")]
async fn enviar_encerramento(
    evento: EncerramentoMdfe,
    ctx: &ContextoEnvio,
) -> Result<(), FalhaEnvio> {
    ctx.exigir::<Destino>()?.postar(&evento, ctx).await
}
