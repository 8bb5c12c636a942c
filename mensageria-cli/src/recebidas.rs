//! `recebidas`: the receptores' dedup records per receiving app and tipo, the receiving apps
//! registered on the schema, and giving unowned records (from before the records had an app) to
//! their owners (`mensageria_core::operacoes::adotar_recebidas`).

use std::num::NonZeroU32;

use mensageria_core::operacoes::{self, RecebidasDoApp, ReceptorDoApp};
use serde::Serialize;

use crate::argumentos::AcaoRecebidas;
use crate::conexao::{Conexao, nos_dois};
use crate::confirmacao::confirmar;
use crate::duracao::humana_ms;
use crate::erro::ErroCli;
use crate::saida_formatada::{Relatorio, Tabela, imprimir};
use crate::texto_seguro::escapar;

/// How an unowned record's app shows in a table.
const SEM_DONO: &str = "(unowned)";

/// What `recebidas listar` prints.
#[derive(Debug, Serialize)]
struct Listagem {
    /// Dedup records per app and tipo; `app` empty for unowned ones.
    records: Vec<Registros>,
    /// The receiving apps registered on this schema.
    receivers: Vec<Registrado>,
}

#[derive(Debug, Serialize)]
struct Registros {
    app: String,
    tipo: String,
    records: i64,
    newest_ago_ms: i64,
}

#[derive(Debug, Serialize)]
struct Registrado {
    app: String,
    tipo: String,
    transport: String,
    last_seen_ago_ms: i64,
}

impl From<RecebidasDoApp> for Registros {
    fn from(r: RecebidasDoApp) -> Self {
        Self {
            app: r.app,
            tipo: r.tipo,
            records: r.registros,
            newest_ago_ms: r.mais_recente_ha_ms,
        }
    }
}

impl From<ReceptorDoApp> for Registrado {
    fn from(r: ReceptorDoApp) -> Self {
        Self {
            app: r.app,
            tipo: r.tipo,
            transport: r.transporte,
            last_seen_ago_ms: r.visto_ha_ms,
        }
    }
}

impl Relatorio for Listagem {
    fn humano(&self) -> String {
        let mut texto = String::new();
        if self.records.is_empty() {
            texto.push_str("no dedup record\n");
        } else {
            let mut t = Tabela::new(["app", "tipo", "records", "newest"]);
            for r in &self.records {
                let app = if r.app.is_empty() { SEM_DONO } else { &r.app };
                t.linha([
                    app.to_owned(),
                    r.tipo.clone(),
                    r.records.to_string(),
                    format!("{} ago", humana_ms(r.newest_ago_ms)),
                ]);
            }
            texto.push_str(&t.texto());
        }
        if self.records.iter().any(|r| r.app.is_empty()) {
            texto.push_str(
                "\nunowned records count as every receiving app's own (no old key is applied \
                 again); give them to their owner(s): mensageria recebidas adotar --app <app>\n",
            );
        }
        texto.push('\n');
        if self.receivers.is_empty() {
            texto.push_str("no receiving app registered (receivers register from schema 10 on)");
        } else {
            let mut t = Tabela::new(["receiving app", "tipo", "transport", "last seen"]);
            for r in &self.receivers {
                t.linha([
                    r.app.clone(),
                    r.tipo.clone(),
                    r.transport.clone(),
                    format!("{} ago", humana_ms(r.last_seen_ago_ms)),
                ]);
            }
            texto.push_str(&t.texto());
        }
        texto
    }
}

/// What `recebidas adotar` did.
#[derive(Debug, Serialize)]
struct Adocao {
    apps: Vec<String>,
    tipo: Option<String>,
    /// Unowned records given.
    adopted: u64,
}

impl Relatorio for Adocao {
    fn humano(&self) -> String {
        let tipo = self
            .tipo
            .as_deref()
            .map(|tipo| format!(" of tipo {tipo}"))
            .unwrap_or_default();
        format!(
            "gave {} unowned dedup record(s){tipo} to {}",
            self.adopted,
            self.apps.join(", ")
        )
    }
}

/// What `recebidas esquecer` did.
#[derive(Debug, Serialize)]
struct Esquecido {
    app: String,
    /// Registrations removed.
    registrations_removed: u64,
}

impl Relatorio for Esquecido {
    fn humano(&self) -> String {
        format!(
            "forgot receiving app {} ({} registration(s)); its dedup records and dead letters stay",
            self.app, self.registrations_removed
        )
    }
}

/// The receiving apps registered for `tipo` (any transport), each once, by name.
pub(crate) fn apps_que_recebem<'a>(
    receptores: &'a [ReceptorDoApp],
    tipo: &str,
) -> std::collections::BTreeSet<&'a str> {
    receptores
        .iter()
        .filter(|r| r.tipo == tipo)
        .map(|r| r.app.as_str())
        .collect()
}

/// Refuses to give unowned records away when a registered receiving app of their tipo is not
/// among `apps`: it would lose them, and apply those old keys again on a redelivery or a replay.
async fn exigir_todos_os_receptores(
    conexao: &Conexao,
    apps: &[String],
    tipo: Option<&str>,
) -> Result<(), ErroCli> {
    let (registros, receptores) = nos_dois!(conexao, pool => (
        operacoes::recebidas_por_app(pool).await?,
        operacoes::receptores(pool).await?,
    ));
    for sem_dono in registros
        .iter()
        .filter(|r| r.app.is_empty() && tipo.is_none_or(|tipo| tipo == r.tipo))
    {
        let faltam: Vec<String> = apps_que_recebem(&receptores, &sem_dono.tipo)
            .into_iter()
            .filter(|app| !apps.iter().any(|nomeado| nomeado == app))
            .map(str::to_owned)
            .collect();
        if !faltam.is_empty() {
            return Err(ErroCli::AdocaoIncompleta {
                tipo: sem_dono.tipo.clone(),
                faltam,
            });
        }
    }
    Ok(())
}

/// Runs `recebidas ...`.
pub(crate) async fn executar(
    conexao: &Conexao,
    acao: AcaoRecebidas,
    json: bool,
) -> Result<(), ErroCli> {
    nos_dois!(conexao, pool => mensageria_core::verificar_schema(pool).await?);
    match acao {
        AcaoRecebidas::Listar => {
            let (registros, receptores) = nos_dois!(conexao, pool => (
                operacoes::recebidas_por_app(pool).await?,
                operacoes::receptores(pool).await?,
            ));
            imprimir(
                &Listagem {
                    records: registros.into_iter().map(Registros::from).collect(),
                    receivers: receptores.into_iter().map(Registrado::from).collect(),
                },
                json,
            );
        }
        AcaoRecebidas::Adotar {
            apps,
            tipo,
            lote,
            so_estes,
            yes,
        } => {
            for app in &apps {
                mensageria_core::configuracao::exigir_nome_de_app(app)
                    .map_err(mensageria_core::Erro::from)?;
            }
            if !so_estes {
                exigir_todos_os_receptores(conexao, &apps, tipo.as_deref()).await?;
            }
            if !yes {
                let de = tipo
                    .as_deref()
                    .map(|tipo| format!(" of tipo {}", escapar(tipo)))
                    .unwrap_or_default();
                let pergunta = format!(
                    "give every unowned dedup record{de} to {} (each becomes a record of every app \
                     named)? [y/N] ",
                    escapar(&apps.join(", "))
                );
                if !confirmar(&pergunta)? {
                    return Err(ErroCli::NaoConfirmado { opcao: "--yes" });
                }
            }
            let lote = u32::try_from(lote)
                .ok()
                .and_then(NonZeroU32::new)
                .unwrap_or(NonZeroU32::MAX);
            let nomes: Vec<&str> = apps.iter().map(String::as_str).collect();
            let adotadas = nos_dois!(conexao, pool => {
                operacoes::adotar_recebidas(pool, &nomes, tipo.as_deref(), lote).await?
            });
            imprimir(
                &Adocao {
                    apps,
                    tipo,
                    adopted: adotadas,
                },
                json,
            );
        }
        AcaoRecebidas::Esquecer { app, yes } => {
            let pergunta = format!(
                "forget receiving app {}'s registrations (its dedup records stay)? [y/N] ",
                escapar(&app)
            );
            if !yes && !confirmar(&pergunta)? {
                return Err(ErroCli::NaoConfirmado { opcao: "--yes" });
            }
            let removidas =
                nos_dois!(conexao, pool => operacoes::esquecer_receptor(pool, &app).await?);
            imprimir(
                &Esquecido {
                    app,
                    registrations_removed: removidas,
                },
                json,
            );
        }
    }
    Ok(())
}
