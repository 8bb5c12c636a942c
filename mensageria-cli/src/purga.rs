//! `purgar`: deletes the receptores' dedup records older than the retention, in batches (one
//! short statement each, through `mensageria_core::operacoes::purgar_recebidas`), and refuses a
//! retention that a late redelivery could outlive.

use mensageria_core::configuracao::exigir_retencao;
use std::num::NonZeroU32;
use std::time::Duration;

use mensageria_core::operacoes;
use serde::Serialize;

use crate::argumentos::{ArgsPurgar, horizonte_padrao};
use crate::conexao::{Conexao, nos_dois};
use crate::duracao::humana;
use crate::erro::ErroCli;
use crate::saida_formatada::{Relatorio, imprimir};

/// What `purgar` changed.
#[derive(Debug, Serialize)]
struct Purga {
    /// Dedup records deleted.
    #[serde(rename = "deleted")]
    apagadas: u64,
    /// Statements run.
    #[serde(rename = "batches")]
    lotes: u64,
    /// The batch size.
    #[serde(rename = "batch_size")]
    lote: i64,
    /// The retention, in seconds: records older than this were deleted.
    #[serde(rename = "retention_s")]
    retencao_s: u64,
    /// Only this receiving app's records, if one was named.
    app: Option<String>,
}

impl Relatorio for Purga {
    fn humano(&self) -> String {
        let retencao = humana(Duration::from_secs(self.retencao_s));
        let de = self
            .app
            .as_deref()
            .map(|app| format!(" of app {app}"))
            .unwrap_or_default();
        if self.apagadas == 0 {
            return format!("no dedup record{de} older than {retencao}: nothing purged");
        }
        format!(
            "purged {} dedup record(s){de} older than {retencao} from mensageria_recebidas \
             ({} batch(es) of up to {})",
            self.apagadas, self.lotes, self.lote
        )
    }
}

/// Purges and reports.
pub(crate) async fn executar(
    conexao: &Conexao,
    args: ArgsPurgar,
    json: bool,
) -> Result<(), ErroCli> {
    nos_dois!(conexao, pool => mensageria_core::verificar_schema(pool).await?);
    let horizonte = args.horizonte.unwrap_or_else(horizonte_padrao);
    exigir_retencao(args.retencao, horizonte).map_err(|_| ErroCli::RetencaoCurta {
        retencao: args.retencao,
        horizonte,
    })?;
    // A JetStream durable created anew replays its stream from the start: records younger than
    // the stream's max_age must stay (the receiving apps' consumers record it).
    if let Some((max_age_ms, app)) =
        crate::doctor::fluxo_mais_longo_que(conexao, args.app.as_deref(), args.retencao).await?
    {
        return Err(ErroCli::RetencaoCurtaParaOFluxo {
            retencao: args.retencao,
            max_age: crate::doctor::max_age_legivel(max_age_ms),
            app,
        });
    }
    // clap keeps `--lote` at 1 or more; beyond u32 it is capped (a batch that large is one).
    let lote = u32::try_from(args.lote)
        .ok()
        .and_then(NonZeroU32::new)
        .unwrap_or(NonZeroU32::MAX);
    let purga = nos_dois!(conexao, pool => {
        operacoes::purgar_recebidas(pool, args.app.as_deref(), args.retencao, lote).await?
    });
    imprimir(
        &Purga {
            apagadas: purga.apagadas,
            lotes: purga.lotes,
            lote: args.lote,
            retencao_s: args.retencao.as_secs(),
            app: args.app,
        },
        json,
    );
    Ok(())
}
