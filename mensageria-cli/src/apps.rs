//! `apps`: the apps whose relays run on this schema — each with the tipos it claims, its relay
//! instances and their state, its last heartbeat and the rows of its tipos waiting in the saída —
//! and `apps remover`, which forgets a retired app.
//!
//! Two tables say who runs: `mensageria_apps` (per app and tipo, refreshed by the app's relay
//! every 15 s: which app claims which tipo) and, from schema version 2 on,
//! `mensageria_instancias` (one row per relay instance, a process of an app, with a heartbeat
//! every `lease / 4`, the time `parada_em` it stopped gracefully and the time `recuperada_em` a
//! sibling took its rows back). An instance is:
//!
//! - **stopped** when it recorded a graceful shutdown;
//! - **taken over** when a sibling of the same app found it dead and took its rows back;
//! - **alive** when its last heartbeat is younger than its own dead-after period (`lease / 2`, 3 s
//!   by default) or than [`PISO_DE_VIDA_MS`], whichever is longer;
//! - **dead** otherwise: no heartbeat, no graceful stop, nobody took over.
//!
//! An app is **alive** when one of its instances is; otherwise **dead** when one of its latest
//! instances is dead (an instance stops counting once a newer instance of the app started after
//! its last heartbeat: it is *replaced*, its leases expire on their own), **stopped** when its
//! latest instances stopped gracefully (or were taken over), and **dead** when there is nothing
//! else to go by. An app with no instance rows (a relay older than schema version 2) is judged
//! by `mensageria_apps` alone, as before: **alive** while it refreshes it, **silent** when it
//! has not for longer than the given period (stopped or dead: such a relay cannot say which).

use std::collections::BTreeMap;
use std::time::Duration;

use mensageria_core::operacoes::{self, Instancia, Reivindicacao};
use serde::Serialize;

use crate::argumentos::AcaoApps;
use crate::conexao::{Conexao, nos_dois};
use crate::confirmacao::confirmar;
use crate::duracao::{humana, humana_ms};
use crate::erro::ErroCli;
use crate::saida_formatada::{Relatorio, Tabela, imprimir, rfc3339};
use crate::texto_seguro::escapar;

/// The schema version that added `mensageria_instancias`.
pub(crate) const VERSAO_DAS_INSTANCIAS: i64 = 2;

/// The shortest silence after which an instance counts as dead, whatever its own dead-after
/// period (`mensageria_core::operacoes::PISO_DE_VIDA`, which `remover_app` applies too).
pub(crate) const PISO_DE_VIDA_MS: i64 = operacoes::PISO_DE_VIDA.as_millis() as i64;

/// How long an app whose relay records no instances may go without refreshing
/// `mensageria_apps` (every 15 s) before `apps` calls it silent: doctor's default
/// `--parado-apos`.
pub(crate) const SILENCIO_PADRAO: Duration = Duration::from_secs(60);

/// The state of one relay instance.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub(crate) enum EstadoInstancia {
    /// Heart-beating.
    #[serde(rename = "alive")]
    Viva,
    /// Stopped gracefully.
    #[serde(rename = "stopped")]
    Parada,
    /// No heartbeat for longer than its dead-after period, no graceful stop, nobody took over.
    #[serde(rename = "dead")]
    Morta,
    /// Found dead by a sibling of the same app, which took its rows back.
    #[serde(rename = "taken-over")]
    Recuperada,
}

impl EstadoInstancia {
    /// How people read it.
    fn nome(self) -> &'static str {
        match self {
            Self::Viva => "alive",
            Self::Parada => "stopped",
            Self::Morta => "dead",
            Self::Recuperada => "taken over",
        }
    }
}

/// The state of an app, from its instances (or from `mensageria_apps` for old relays).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub(crate) enum EstadoApp {
    /// One of its instances is alive (old relays: it refreshes `mensageria_apps`).
    #[serde(rename = "alive")]
    Vivo,
    /// Its latest instances stopped gracefully.
    #[serde(rename = "stopped")]
    Parado,
    /// None of its instances is alive and its latest did not stop gracefully.
    #[serde(rename = "dead")]
    Morto,
    /// A relay that records no instances (older than schema version 2) stopped refreshing
    /// `mensageria_apps`: stopped or dead, it cannot say which.
    #[serde(rename = "silent")]
    Silencioso,
}

impl EstadoApp {
    /// How people read it.
    pub(crate) fn nome(self) -> &'static str {
        match self {
            Self::Vivo => "alive",
            Self::Parado => "stopped",
            Self::Morto => "dead",
            Self::Silencioso => "silent",
        }
    }
}

/// One app as `apps listar` shows it (and doctor judges it). JSON keys are English and stable.
#[derive(Debug, Serialize)]
pub(crate) struct App {
    /// Its name (its relay's `Config::app`).
    pub(crate) app: String,
    /// alive, stopped, dead or silent.
    #[serde(rename = "state")]
    pub(crate) estado: EstadoApp,
    /// How long ago its freshest heartbeat was (its instances'; for old relays, its
    /// `mensageria_apps` rows').
    #[serde(rename = "last_heartbeat_ago_ms")]
    pub(crate) visto_ha_ms: Option<i64>,
    /// When, RFC 3339.
    #[serde(rename = "last_heartbeat_at")]
    pub(crate) visto_em: Option<String>,
    /// Rows of its tipos in the saída (not delivered yet, leased or not).
    #[serde(rename = "pending")]
    pub(crate) pendentes: i64,
    /// The tipos it claims.
    pub(crate) tipos: Vec<TipoDoApp>,
    /// Its relay instances, newest heartbeat first (empty for relays older than schema
    /// version 2).
    #[serde(rename = "instances")]
    pub(crate) instancias: Vec<InstanciaDoApp>,
    /// Instances `apps listar` left out of `instances`: they ended (stopped, taken over, or
    /// dead and replaced) over a day ago (`OCULTAR_APOS_MS`) (`--all` shows them).
    #[serde(rename = "hidden_instances")]
    pub(crate) ocultas: usize,
}

/// `apps listar` hides the instances that ended longer ago than this, unless `--all`.
const OCULTAR_APOS_MS: i64 = 86_400_000;

impl App {
    /// Leaves out of `instancias` those that ended over a day ago (the state was judged with
    /// them already); counts them in `ocultas`.
    fn ocultar_encerradas(&mut self) {
        let antes = self.instancias.len();
        self.instancias.retain(|i| {
            let encerrada = matches!(
                i.estado,
                EstadoInstancia::Parada | EstadoInstancia::Recuperada
            ) || (i.estado == EstadoInstancia::Morta && i.substituida);
            !(encerrada && i.visto_ha_ms > OCULTAR_APOS_MS)
        });
        self.ocultas = antes - self.instancias.len();
    }
}

/// A tipo an app claims (a row of `mensageria_apps`).
#[derive(Debug, Serialize)]
pub(crate) struct TipoDoApp {
    pub(crate) tipo: String,
    /// Rows of the tipo in the saída.
    #[serde(rename = "pending")]
    pub(crate) pendentes: i64,
    /// How long ago the app's relay last refreshed its claim on the tipo.
    #[serde(rename = "last_seen_ago_ms")]
    pub(crate) visto_ha_ms: i64,
    /// When, RFC 3339.
    #[serde(rename = "last_seen_at")]
    pub(crate) visto_em: String,
}

/// One relay instance of an app (a row of `mensageria_instancias`).
#[derive(Debug, Serialize)]
pub(crate) struct InstanciaDoApp {
    /// Its id, `app@name`, as `mensageria_saida.lease_dono` names it.
    #[serde(rename = "instance")]
    pub(crate) instancia: String,
    /// alive, stopped, dead or taken-over.
    #[serde(rename = "state")]
    pub(crate) estado: EstadoInstancia,
    /// Dead, but a newer instance of the app started after its last heartbeat: it no longer
    /// decides the app's state.
    #[serde(rename = "replaced")]
    pub(crate) substituida: bool,
    #[serde(rename = "started_at")]
    pub(crate) iniciada_em: String,
    #[serde(rename = "last_heartbeat_at")]
    pub(crate) visto_em: String,
    #[serde(rename = "last_heartbeat_ago_ms")]
    pub(crate) visto_ha_ms: i64,
    /// Its own dead-after period (its siblings take it for dead after this long without a
    /// heartbeat; `apps` and doctor wait at least 10 s).
    #[serde(rename = "dead_after_ms")]
    pub(crate) morta_apos_ms: i64,
    #[serde(rename = "stopped_at")]
    pub(crate) parada_em: Option<String>,
    #[serde(rename = "taken_over_at")]
    pub(crate) recuperada_em: Option<String>,
    /// Rows of the saída it holds leased right now.
    #[serde(rename = "in_flight")]
    pub(crate) em_voo: i64,
}

/// How long an instance may go without a heartbeat and still count as alive.
fn tolerancia_ms(morta_apos_ms: i64) -> i64 {
    morta_apos_ms.max(PISO_DE_VIDA_MS)
}

/// The state of one instance (see the module's documentation).
fn estado_da_instancia(i: &Instancia) -> EstadoInstancia {
    if i.parada_em_ms.is_some() {
        EstadoInstancia::Parada
    } else if i.recuperada_em_ms.is_some() {
        EstadoInstancia::Recuperada
    } else if i.visto_ha_ms <= tolerancia_ms(i.morta_apos_ms) {
        EstadoInstancia::Viva
    } else {
        EstadoInstancia::Morta
    }
}

/// The state of an app that has instance rows, from their states.
fn estado_pelas_instancias(instancias: &[InstanciaDoApp]) -> EstadoApp {
    let atuais = || instancias.iter().filter(|i| !i.substituida);
    if instancias.iter().any(|i| i.estado == EstadoInstancia::Viva) {
        EstadoApp::Vivo
    } else if atuais().any(|i| i.estado == EstadoInstancia::Morta) {
        EstadoApp::Morto
    } else if atuais().any(|i| i.estado == EstadoInstancia::Parada) {
        EstadoApp::Parado
    } else {
        // Only instances taken over (or replaced): nothing says it stopped gracefully.
        EstadoApp::Morto
    }
}

/// Every app that appears in `mensageria_apps` or `mensageria_instancias`, by name.
/// `silencio_ms` judges apps without instance rows; `com_instancias` is false on a schema older
/// than [`VERSAO_DAS_INSTANCIAS`] (no such table).
pub(crate) async fn panorama(
    conexao: &Conexao,
    silencio_ms: i64,
    com_instancias: bool,
) -> Result<Vec<App>, ErroCli> {
    let (fila, reivindicacoes, instancias) = nos_dois!(conexao, pool => {
        let fila = operacoes::fila(pool).await?;
        let reivindicacoes = operacoes::reivindicacoes(pool).await?;
        let instancias = if com_instancias {
            operacoes::instancias(pool).await?
        } else {
            Vec::new()
        };
        (fila, reivindicacoes, instancias)
    });
    let pendentes: BTreeMap<String, i64> = fila.into_iter().map(|f| (f.tipo, f.total)).collect();
    let mut por_app: BTreeMap<String, (Vec<Reivindicacao>, Vec<Instancia>)> = BTreeMap::new();
    for r in reivindicacoes {
        por_app.entry(r.app.clone()).or_default().0.push(r);
    }
    for i in instancias {
        por_app.entry(i.app.clone()).or_default().1.push(i);
    }
    Ok(por_app
        .into_iter()
        .map(|(app, (reivindicacoes, instancias))| {
            montar(app, reivindicacoes, instancias, &pendentes, silencio_ms)
        })
        .collect())
}

/// One app from its rows.
fn montar(
    app: String,
    mut reivindicacoes: Vec<Reivindicacao>,
    instancias: Vec<Instancia>,
    pendentes: &BTreeMap<String, i64>,
    silencio_ms: i64,
) -> App {
    reivindicacoes.sort_by(|a, b| a.tipo.cmp(&b.tipo));
    let tipos: Vec<TipoDoApp> = reivindicacoes
        .iter()
        .map(|r| TipoDoApp {
            tipo: r.tipo.clone(),
            pendentes: pendentes.get(&r.tipo).copied().unwrap_or(0),
            visto_ha_ms: r.visto_ha_ms.max(0),
            visto_em: rfc3339(r.visto_em_ms),
        })
        .collect();
    let vistas: Vec<InstanciaDoApp> = instancias
        .iter()
        .map(|i| {
            let estado = estado_da_instancia(i);
            InstanciaDoApp {
                instancia: i.instancia.clone(),
                estado,
                substituida: estado == EstadoInstancia::Morta
                    && instancias
                        .iter()
                        .any(|outra| outra.iniciada_em_ms > i.visto_em_ms),
                iniciada_em: rfc3339(i.iniciada_em_ms),
                visto_em: rfc3339(i.visto_em_ms),
                visto_ha_ms: i.visto_ha_ms.max(0),
                morta_apos_ms: i.morta_apos_ms,
                parada_em: i.parada_em_ms.map(rfc3339),
                recuperada_em: i.recuperada_em_ms.map(rfc3339),
                em_voo: i.em_voo,
            }
        })
        .collect();
    // The freshest heartbeat: the instances' when there are any, else the claims'.
    let mais_recente = if instancias.is_empty() {
        reivindicacoes
            .iter()
            .map(|r| (r.visto_ha_ms, r.visto_em_ms))
            .min()
    } else {
        instancias
            .iter()
            .map(|i| (i.visto_ha_ms, i.visto_em_ms))
            .min()
    };
    let estado = if vistas.is_empty() {
        match mais_recente {
            Some((ha, _)) if ha <= silencio_ms => EstadoApp::Vivo,
            _ => EstadoApp::Silencioso,
        }
    } else {
        estado_pelas_instancias(&vistas)
    };
    App {
        app,
        estado,
        visto_ha_ms: mais_recente.map(|(ha, _)| ha.max(0)),
        visto_em: mais_recente.map(|(_, em)| rfc3339(em)),
        pendentes: tipos.iter().map(|t| t.pendentes).sum(),
        tipos,
        instancias: vistas,
        ocultas: 0,
    }
}

/// Runs one `apps` action.
pub(crate) async fn executar(conexao: &Conexao, acao: AcaoApps, json: bool) -> Result<(), ErroCli> {
    nos_dois!(conexao, pool => mensageria_core::verificar_schema(pool).await?);
    let silencio_ms = i64::try_from(SILENCIO_PADRAO.as_millis()).unwrap_or(i64::MAX);
    match acao {
        AcaoApps::Listar { all } => {
            let mut apps = panorama(conexao, silencio_ms, true).await?;
            if !all {
                apps.iter_mut().for_each(App::ocultar_encerradas);
            }
            let receivers = nos_dois!(conexao, pool => operacoes::receptores(pool).await?)
                .into_iter()
                .map(crate::status::Recebedor::de)
                .collect();
            imprimir(&Lista { apps, receivers }, json);
            Ok(())
        }
        AcaoApps::Remover { app, yes } => remover(conexao, app, yes, silencio_ms, json).await,
    }
}

/// `apps listar`.
#[derive(Debug, Serialize)]
struct Lista {
    apps: Vec<App>,
    /// The receiving apps registered (pure receivers included), as `status` shows them.
    receivers: Vec<crate::status::Recebedor>,
}

impl Relatorio for Lista {
    /// The relays' apps, one line per instance (the app's own columns on its first line only),
    /// then the receiving apps.
    fn humano(&self) -> String {
        let mut texto = self.tabela_dos_relays();
        if !self.receivers.is_empty() {
            texto.push_str("\n\n");
            texto.push_str(&crate::status::tabela_dos_recebedores(&self.receivers));
        }
        texto
    }
}

impl Lista {
    fn tabela_dos_relays(&self) -> String {
        if self.apps.is_empty() {
            return "no app registered: no relay has run on this schema (or every app was removed)"
                .into();
        }
        let mut tabela = Tabela::new([
            "app",
            "state",
            "pending",
            "tipos",
            "instance",
            "instance state",
            "last heartbeat",
        ]);
        for a in &self.apps {
            let tipos: Vec<&str> = a.tipos.iter().map(|t| t.tipo.as_str()).collect();
            let colunas_do_app = [
                a.app.clone(),
                a.estado.nome().to_owned(),
                a.pendentes.to_string(),
                if tipos.is_empty() {
                    "-".to_owned()
                } else {
                    tipos.join(", ")
                },
            ];
            if a.instancias.is_empty() && a.ocultas > 0 {
                tabela.linha(
                    colunas_do_app.into_iter().chain([
                        format!("- ({} hidden)", a.ocultas),
                        "-".to_owned(),
                        a.visto_ha_ms
                            .map(|ha| format!("{} ago", humana_ms(ha)))
                            .unwrap_or_else(|| "-".into()),
                    ]),
                );
                continue;
            }
            if a.instancias.is_empty() {
                let visto = a
                    .visto_ha_ms
                    .map(|ha| format!("{} ago", humana_ms(ha)))
                    .unwrap_or_else(|| "-".into());
                tabela.linha(colunas_do_app.into_iter().chain([
                    "- (old relay)".to_owned(),
                    "-".to_owned(),
                    visto,
                ]));
                continue;
            }
            let mut colunas_do_app = Some(colunas_do_app);
            for i in &a.instancias {
                let estado = if i.substituida {
                    format!("{} (replaced)", i.estado.nome())
                } else {
                    i.estado.nome().to_owned()
                };
                let primeiras = colunas_do_app
                    .take()
                    .unwrap_or_else(|| std::array::from_fn(|_| String::new()));
                tabela.linha(primeiras.into_iter().chain([
                    i.instancia.clone(),
                    estado,
                    format!("{} ago", humana_ms(i.visto_ha_ms)),
                ]));
            }
        }
        let mut texto = tabela.texto();
        let ocultas: usize = self.apps.iter().map(|a| a.ocultas).sum();
        if ocultas > 0 {
            texto.push_str(&format!(
                "({ocultas} instance(s) that ended over a day ago hidden; --all shows them)\n"
            ));
        }
        texto
    }
}

/// What `apps remover` changed.
#[derive(Debug, Serialize)]
struct Removido {
    app: String,
    /// Its state when it was removed.
    #[serde(rename = "state")]
    estado: EstadoApp,
    /// Rows deleted from `mensageria_instancias`.
    #[serde(rename = "instances_removed")]
    instancias: u64,
    /// Rows deleted from `mensageria_apps` (one per tipo it claimed).
    #[serde(rename = "registrations_removed")]
    registros: u64,
    /// Rows of its tipos still in the saída (untouched).
    #[serde(rename = "pending")]
    pendentes: i64,
}

impl Relatorio for Removido {
    fn humano(&self) -> String {
        let mut texto = format!(
            "removed app `{}` (it was {}): deleted {} instance row(s) from mensageria_instancias \
             and {} tipo registration(s) from mensageria_apps; the saída and the dead letters \
             were not touched",
            escapar(&self.app),
            self.estado.nome(),
            self.instancias,
            self.registros
        );
        if self.pendentes > 0 {
            texto.push_str(&format!(
                "\n{} row(s) of its tipos still wait in the saída: unless another app claims those \
                 tipos, nothing delivers them (`mensageria doctor` reports them as orphans)",
                self.pendentes
            ));
        }
        texto
    }
}

/// `apps remover`: refuses while the app is alive, asks unless `--yes`, then deletes its rows
/// from `mensageria_instancias` and `mensageria_apps` in one transaction (and only the instance
/// rows that are still not alive at that moment: an instance that came back meanwhile makes it
/// refuse and change nothing).
async fn remover(
    conexao: &Conexao,
    app: String,
    sim: bool,
    silencio_ms: i64,
    json: bool,
) -> Result<(), ErroCli> {
    let Some(alvo) = panorama(conexao, silencio_ms, true)
        .await?
        .into_iter()
        .find(|a| a.app == app)
    else {
        return Err(ErroCli::AppDesconhecido { app });
    };
    if alvo.estado == EstadoApp::Vivo {
        return Err(ErroCli::AppVivo {
            detalhe: por_que_vivo(&alvo),
            app,
        });
    }
    if !sim && !confirmar(&pergunta(&alvo))? {
        return Err(ErroCli::NaoConfirmado { opcao: "--yes" });
    }

    let removido =
        nos_dois!(conexao, pool => operacoes::remover_app(pool, &app).await).map_err(|erro| {
            match erro {
                operacoes::ErroOperacao::AppVivo { instancias, .. } => ErroCli::AppVivo {
                    detalhe: format!("instance(s) {} came alive meanwhile", instancias.join(", ")),
                    app: app.clone(),
                },
                outro => ErroCli::from(outro),
            }
        })?;
    let (instancias, registros) = (removido.instancias, removido.registros);
    imprimir(
        &Removido {
            app,
            estado: alvo.estado,
            instancias,
            registros,
            pendentes: alvo.pendentes,
        },
        json,
    );
    Ok(())
}

/// Why an alive app cannot be removed, for the error message.
fn por_que_vivo(app: &App) -> String {
    let vivas: Vec<String> = app
        .instancias
        .iter()
        .filter(|i| i.estado == EstadoInstancia::Viva)
        .map(|i| {
            format!(
                "{} heart-beat {} ago",
                i.instancia,
                humana_ms(i.visto_ha_ms)
            )
        })
        .collect();
    if vivas.is_empty() {
        format!(
            "its relay, older than schema version {VERSAO_DAS_INSTANCIAS} and recording no \
             instances, refreshed mensageria_apps {} ago; it counts as gone after {} of silence",
            humana_ms(app.visto_ha_ms.unwrap_or(0)),
            humana(SILENCIO_PADRAO)
        )
    } else {
        format!("instance(s) {}", vivas.join(", "))
    }
}

/// The confirmation question of `apps remover`.
fn pergunta(app: &App) -> String {
    let tipos: Vec<String> = app
        .tipos
        .iter()
        .map(|t| escapar(&t.tipo).into_owned())
        .collect();
    format!(
        "remove app `{}` ({}; {} instance row(s); tipos: {}) from mensageria_apps and \
         mensageria_instancias? The saída and the dead letters are not touched. [y/N] ",
        escapar(&app.app),
        app.estado.nome(),
        app.instancias.len(),
        if tipos.is_empty() {
            "-".to_owned()
        } else {
            tipos.join(", ")
        }
    )
}

#[cfg(test)]
mod testes {
    use super::*;

    fn instancia(nome: &str, iniciada: i64, visto: i64, ha: i64) -> Instancia {
        Instancia::new(nome, "a", iniciada, visto, ha, 3_000)
    }

    fn estado(instancias: Vec<Instancia>) -> EstadoApp {
        montar("a".into(), Vec::new(), instancias, &BTreeMap::new(), 60_000).estado
    }

    #[test]
    fn o_estado_da_instancia() {
        let mut i = instancia("a@1", 0, 100_000, 9_000);
        assert_eq!(estado_da_instancia(&i), EstadoInstancia::Viva, "the floor");
        i.visto_ha_ms = 11_000;
        assert_eq!(estado_da_instancia(&i), EstadoInstancia::Morta);
        i.morta_apos_ms = 20_000;
        assert_eq!(
            estado_da_instancia(&i),
            EstadoInstancia::Viva,
            "its own period"
        );
        i.recuperada_em_ms = Some(1);
        assert_eq!(estado_da_instancia(&i), EstadoInstancia::Recuperada);
        i.parada_em_ms = Some(1);
        assert_eq!(estado_da_instancia(&i), EstadoInstancia::Parada);
    }

    #[test]
    fn o_estado_do_app() {
        let parada = |nome, iniciada, visto| {
            let mut i = instancia(nome, iniciada, visto, 3_600_000);
            i.parada_em_ms = Some(visto);
            i
        };
        let morta = |nome, iniciada, visto| instancia(nome, iniciada, visto, 3_600_000);
        let viva = |nome, iniciada, visto| instancia(nome, iniciada, visto, 1_000);
        let recuperada = |nome, iniciada, visto| {
            let mut i = instancia(nome, iniciada, visto, 3_600_000);
            i.recuperada_em_ms = Some(visto + 3_000);
            i
        };
        assert_eq!(estado(vec![parada("a@1", 0, 10)]), EstadoApp::Parado);
        assert_eq!(estado(vec![morta("a@1", 0, 10)]), EstadoApp::Morto);
        // One crashed while its sibling stopped: dead.
        assert_eq!(
            estado(vec![parada("a@1", 0, 20), morta("a@2", 0, 10)]),
            EstadoApp::Morto
        );
        // A crash long ago, replaced by an instance that later stopped gracefully: stopped.
        assert_eq!(
            estado(vec![morta("a@1", 0, 10), parada("a@2", 50, 100)]),
            EstadoApp::Parado
        );
        // Taken over by a sibling that later stopped: stopped.
        assert_eq!(
            estado(vec![recuperada("a@1", 0, 10), parada("a@2", 0, 100)]),
            EstadoApp::Parado
        );
        assert_eq!(estado(vec![recuperada("a@1", 0, 10)]), EstadoApp::Morto);
        // Any live instance makes the app alive.
        assert_eq!(
            estado(vec![morta("a@1", 0, 10), viva("a@2", 0, 100)]),
            EstadoApp::Vivo
        );
    }

    #[test]
    fn sem_instancias_vale_o_registro() {
        let reivindicacao = |ha| Reivindicacao::new("a", "t", 0, ha);
        let app = |ha| {
            montar(
                "a".into(),
                vec![reivindicacao(ha)],
                Vec::new(),
                &BTreeMap::new(),
                60_000,
            )
        };
        assert_eq!(app(59_000).estado, EstadoApp::Vivo);
        assert_eq!(app(61_000).estado, EstadoApp::Silencioso);
    }
}
