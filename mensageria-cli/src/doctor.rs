//! `doctor`: what will silently go wrong on a (shared) schema, found before it does.
//!
//! Problems (exit 1): the schema is missing, too old for this build, or has a failed
//! migration; rows of a tipo that no live app claims (orphans: no relay will ever move them); a
//! tipo claimed by two live apps (competing consumers); a dead app (none of its relay instances
//! alive, its latest ones gone without a graceful stop), or, for relays that record no
//! instances (older than schema version 2), an app that stopped refreshing `mensageria_apps`; a
//! dedup retention not longer than the senders' redelivery horizon; and, against the limits an
//! operator passes (`--max-dead-letters` and the like), what the relays and the receiving side
//! left behind. The database does not record the retention, so that check needs `--retencao`
//! and is reported as skipped without it.
//!
//! An app whose instances all stopped gracefully is reported as stopped, in a note: that is not
//! a problem by itself (a deploy stops apps), but rows of its tipos left in the saída still are
//! (orphans), unless another live app claims those tipos. See [`crate::apps`] for how the states
//! are told apart.

use mensageria_core::configuracao::exigir_retencao;
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};

use crate::apps::{self, EstadoApp, EstadoInstancia, VERSAO_DAS_INSTANCIAS};
use crate::argumentos::{ArgsDoctor, horizonte_padrao};
use crate::conexao::{Conexao, nos_dois};
use crate::duracao::{humana, humana_ms};
use crate::erro::ErroCli;
use crate::saida_formatada::{Relatorio, imprimir};
use crate::schema::versao_esperada;
use crate::texto_seguro::escapar;
use mensageria_core::operacoes;

/// What doctor found.
#[derive(Debug, Serialize)]
struct Diagnostico {
    /// No problem found.
    #[serde(rename = "healthy")]
    saudavel: bool,
    /// The schema version applied and the one this build needs.
    #[serde(rename = "applied_version")]
    versao_aplicada: Option<i64>,
    #[serde(rename = "expected_version")]
    versao_esperada: i64,
    #[serde(rename = "problems")]
    problemas: Vec<Problema>,
    /// What was checked fine, or not checked and why.
    #[serde(rename = "notes")]
    notas: Vec<String>,
    /// Every app found on the schema and its state (`mensageria apps listar` tells more).
    apps: Vec<EstadoDoApp>,
}

/// One app in the diagnosis.
#[derive(Debug, Serialize)]
struct EstadoDoApp {
    app: String,
    /// alive, stopped, dead or silent (see `mensageria apps listar --help`).
    #[serde(rename = "state")]
    estado: EstadoApp,
    /// How long ago its freshest heartbeat was.
    #[serde(rename = "last_heartbeat_ago_ms")]
    visto_ha_ms: Option<i64>,
}

/// One problem.
#[derive(Debug, Serialize)]
struct Problema {
    /// A stable code for scripts.
    #[serde(rename = "code")]
    codigo: Codigo,
    /// The tipo concerned, if one (`null` otherwise: the keys are always there for scripts).
    tipo: Option<String>,
    /// The apps concerned (may be empty).
    apps: Vec<String>,
    /// What is wrong and what to do.
    #[serde(rename = "message")]
    mensagem: String,
}

/// The kinds of problem.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
enum Codigo {
    #[serde(rename = "schema-missing")]
    SchemaAusente,
    #[serde(rename = "schema-outdated")]
    SchemaDesatualizado,
    #[serde(rename = "migration-failed")]
    MigracaoFalhou,
    #[serde(rename = "orphans")]
    Orfas,
    #[serde(rename = "competing-consumers")]
    Concorrentes,
    /// A relay that records no instances stopped refreshing `mensageria_apps`.
    #[serde(rename = "app-silent")]
    AppParado,
    /// None of the app's instances is alive and its latest did not stop gracefully.
    #[serde(rename = "app-dead")]
    AppMorto,
    #[serde(rename = "retention-too-short")]
    RetencaoCurta,
    /// More dead letters than `--max-dead-letters`.
    #[serde(rename = "dead-letters")]
    Mortas,
    /// More receiver-side dead letters of one receiving app and tipo than `--max-dead-letters`.
    #[serde(rename = "received-dead-letters")]
    MortasRecebidas,
    /// A message older than `--max-pending-age` in the saída.
    #[serde(rename = "pending-too-old")]
    PendenteVelha,
    /// A message attempted more than `--max-attempts` times.
    #[serde(rename = "too-many-attempts")]
    TentativasDemais,
    /// Rows held behind their ordering key's head of another tipo that will not move on its
    /// own (no live app claims its tipo, or it is a dead letter).
    #[serde(rename = "held-by-other-tipo")]
    RetidasPorOutroTipo,
    /// Dedup records from before they had an app, of a tipo several receiving apps receive on
    /// this schema: which app applied which key is not known until an operator says so.
    #[serde(rename = "unowned-dedup-records")]
    RecebidasSemDono,
    /// A registered receiving app has not said it runs for over a minute.
    #[serde(rename = "receiver-silent")]
    ReceptorSilencioso,
    /// A JetStream consumer's oldest unsettled message has waited over half the stream's
    /// max_age: past it the stream deletes it, applied or not.
    #[serde(rename = "consumer-near-expiry")]
    ConsumidorPertoDeExpirar,
    /// `--fluxo`: the stream could not be read, or its topology record is missing or drifted.
    #[serde(rename = "stream-topology")]
    TopologiaDoFluxo,
    /// `--fluxo`: messages on an ordered lane no durable consumes.
    #[serde(rename = "lane-unconsumed")]
    FaixaSemConsumidor,
    /// `--fluxo`: messages of a tipo no receiving app consumes.
    #[serde(rename = "tipo-unconsumed")]
    TipoSemConsumidor,
}

impl Relatorio for Diagnostico {
    fn humano(&self) -> String {
        let mut texto = String::new();
        // The messages name tipos and apps as the apps wrote them in the database.
        for p in &self.problemas {
            texto.push_str(&format!("PROBLEM  {}\n", escapar(&p.mensagem)));
        }
        for n in &self.notas {
            texto.push_str(&format!("note     {}\n", escapar(n)));
        }
        if self.saudavel {
            texto.push_str("healthy: no problem found\n");
        } else {
            texto.push_str(&format!("{} problem(s) found\n", self.problemas.len()));
        }
        texto
    }
}

/// Runs every check, prints the diagnosis, returns whether it is healthy.
pub(crate) async fn executar(
    conexao: &Conexao,
    args: ArgsDoctor,
    json: bool,
) -> Result<bool, ErroCli> {
    let esperada = nos_dois!(conexao, pool => versao_esperada(pool));
    let mut d = Diagnostico {
        saudavel: true,
        versao_aplicada: None,
        versao_esperada: esperada,
        problemas: Vec::new(),
        notas: Vec::new(),
        apps: Vec::new(),
    };
    let aplicada = nos_dois!(conexao, pool => operacoes::versao_aplicada(pool).await?);
    d.versao_aplicada = aplicada;
    match aplicada {
        None => {
            // The table may exist with only failed migrations in it: say that, not "missing".
            let falhas = migracoes_falhas(conexao).await.unwrap_or_default();
            if !falhas.is_empty() {
                d.problemas.push(problema_migracao_falhou(&falhas));
                return Ok(concluir(d, json));
            }
            d.problemas.push(Problema {
                codigo: Codigo::SchemaAusente,
                tipo: None,
                apps: Vec::new(),
                mensagem: "no mensageria schema here (no `_mensageria_migrations` table in the \
                           search_path): the app that owns the schema must run `mensageria migrar` \
                           (or `mensageria_core::migrar`); nothing else was checked"
                    .into(),
            });
            return Ok(concluir(d, json));
        }
        Some(v) if v < esperada => d.problemas.push(Problema {
            codigo: Codigo::SchemaDesatualizado,
            tipo: None,
            apps: Vec::new(),
            mensagem: format!(
                "schema at version {v} but this build needs {esperada}: upgrade and redeploy the \
                 owning app (or run `mensageria migrar`) before the others"
            ),
        }),
        Some(v) if v > esperada => d.notas.push(format!(
            "schema at version {v} is newer than this CLI knows ({esperada}): upgrade the CLI"
        )),
        Some(v) => d
            .notas
            .push(format!("schema at version {v}, as this build needs")),
    }
    let falhas = migracoes_falhas(conexao).await?;
    if !falhas.is_empty() {
        d.problemas.push(problema_migracao_falhou(&falhas));
    }

    let com_instancias = aplicada.is_some_and(|v| v >= VERSAO_DAS_INSTANCIAS);
    let claimants = verificar_apps(conexao, &args, com_instancias, &mut d).await?;
    verificar_limites(conexao, &args, &claimants, &mut d).await?;
    if aplicada.is_some_and(|v| v >= VERSAO_DAS_MORTAS_RECEBIDAS) {
        verificar_mortas_recebidas(conexao, &args, &mut d).await?;
    }
    let por_app = match conexao {
        Conexao::Postgres(_) => VERSAO_DAS_RECEBIDAS_POR_APP_PG,
        Conexao::Sqlite(_) => VERSAO_DAS_RECEBIDAS_POR_APP_SQLITE,
    };
    if aplicada.is_some_and(|v| v >= por_app) {
        verificar_recebidas_sem_dono(conexao, &mut d).await?;
        verificar_receptores(conexao, &args, &mut d).await?;
    }
    verificar_retidas(conexao, &claimants, &mut d).await?;
    let stream_longo = match (aplicada.is_some_and(|v| v >= por_app), args.retencao) {
        (true, Some(retencao)) => fluxo_mais_longo_que(conexao, None, retencao).await?,
        _ => None,
    };
    verificar_retencao(&args, stream_longo, &mut d);
    if let Some(fluxo) = &args.fluxo {
        verificar_fluxo(&args.nats, fluxo, &mut d).await;
    }
    Ok(concluir(d, json))
}

/// `--fluxo`: what `mensageria_nats::diagnosticar` finds, as problems (a single replica is a
/// note: right for a laptop).
async fn verificar_fluxo(nats: &str, fluxo: &str, d: &mut Diagnostico) {
    let achados = match mensageria_nats::conectar(nats, "mensageria-doctor").await {
        Ok(js) => mensageria_nats::diagnosticar(&js, fluxo).await,
        Err(erro) => Err(erro),
    };
    let achados = match achados {
        Ok(achados) => achados,
        Err(erro) => {
            d.problemas.push(Problema {
                codigo: Codigo::TopologiaDoFluxo,
                tipo: None,
                apps: Vec::new(),
                mensagem: format!("stream `{fluxo}` could not be checked: {erro}"),
            });
            return;
        }
    };
    if achados.iter().all(|a| a.codigo == "stream-single-replica") {
        d.notas.push(format!(
            "stream `{fluxo}`: topology record agrees, every lane and tipo with messages is consumed"
        ));
    }
    for achado in achados {
        let codigo = match achado.codigo {
            "stream-single-replica" => {
                d.notas.push(achado.mensagem);
                continue;
            }
            "lane-unconsumed" => Codigo::FaixaSemConsumidor,
            "tipo-unconsumed" => Codigo::TipoSemConsumidor,
            _ => Codigo::TopologiaDoFluxo,
        };
        d.problemas.push(Problema {
            codigo,
            tipo: None,
            apps: Vec::new(),
            mensagem: achado.mensagem,
        });
    }
}

fn concluir(mut d: Diagnostico, json: bool) -> bool {
    d.saudavel = d.problemas.is_empty();
    imprimir(&d, json);
    d.saudavel
}

/// Versions recorded with `success = false`.
async fn migracoes_falhas(conexao: &Conexao) -> Result<Vec<i64>, ErroCli> {
    Ok(nos_dois!(conexao, pool => operacoes::migracoes_falhas(pool).await?))
}

fn problema_migracao_falhou(falhas: &[i64]) -> Problema {
    Problema {
        codigo: Codigo::MigracaoFalhou,
        tipo: None,
        apps: Vec::new(),
        mensagem: format!(
            "migration(s) {falhas:?} are recorded as failed in `_mensageria_migrations`: fix the \
             schema by hand and rerun `mensageria migrar`"
        ),
    }
}

/// Dead, silent and stopped apps, competing consumers and orphans, from `mensageria_apps`,
/// `mensageria_instancias` (when the schema has it) and the saída.
async fn verificar_apps(
    conexao: &Conexao,
    args: &ArgsDoctor,
    com_instancias: bool,
    d: &mut Diagnostico,
) -> Result<Vivos, ErroCli> {
    let limite_ms = i64::try_from(args.parado_apos.as_millis()).unwrap_or(i64::MAX);
    let apps = apps::panorama(conexao, limite_ms, com_instancias).await?;
    for a in &apps {
        julgar_app(a, args, d);
    }
    let reivindicacoes = Reivindicacoes::das(&apps, limite_ms);
    verificar_concorrentes(&reivindicacoes.vivos, d);
    let fila = nos_dois!(conexao, pool => operacoes::fila(pool).await?);
    let orfas = verificar_orfas(&fila, &reivindicacoes, d);
    if orfas == 0 {
        d.notas.push(format!(
            "{} app(s) registered, {} tipo(s) claimed; every pending row has a live claimant",
            apps.len(),
            reivindicacoes.todos.len()
        ));
    }
    Ok(reivindicacoes.vivos_por_tipo())
}

/// Lists app `a` in the diagnosis with its state: a silent or dead app is a problem, a stopped
/// one a note, a live one nothing more.
fn julgar_app(a: &apps::App, args: &ArgsDoctor, d: &mut Diagnostico) {
    d.apps.push(EstadoDoApp {
        app: a.app.clone(),
        estado: a.estado,
        visto_ha_ms: a.visto_ha_ms,
    });
    let nome = &a.app;
    let ha = humana_ms(a.visto_ha_ms.unwrap_or(0));
    match a.estado {
        EstadoApp::Vivo => {}
        EstadoApp::Silencioso => d.problemas.push(Problema {
            codigo: Codigo::AppParado,
            tipo: None,
            apps: vec![nome.clone()],
            mensagem: format!(
                "app `{nome}` stopped heart-beating {ha} ago (relays beat every 15 s; stopped \
                 means over {}): its relay is down or disabled, so its tipos are not \
                 delivered (it predates relay instances, so a graceful stop cannot be told \
                 from a crash); if the app was retired, `mensageria apps remover {nome}`",
                humana(args.parado_apos)
            ),
        }),
        EstadoApp::Morto => d.problemas.push(problema_app_morto(a, &ha)),
        EstadoApp::Parado => d.notas.push(format!(
            "app `{nome}` is stopped: its relay instances shut down gracefully (last \
             heartbeat {ha} ago); not a problem by itself; if it was retired, `mensageria \
             apps remover {nome}` forgets it"
        )),
    }
}

/// The problem of dead app `a`, last seen `ha` ago, naming its dead instances that no newer
/// one replaced.
fn problema_app_morto(a: &apps::App, ha: &str) -> Problema {
    let nome = &a.app;
    let mortas: Vec<&str> = a
        .instancias
        .iter()
        .filter(|i| i.estado == EstadoInstancia::Morta && !i.substituida)
        .map(|i| i.instancia.as_str())
        .collect();
    let quais = if mortas.is_empty() {
        String::new()
    } else {
        format!("; dead: {}", mortas.join(", "))
    };
    Problema {
        codigo: Codigo::AppMorto,
        tipo: None,
        apps: vec![nome.clone()],
        mensagem: format!(
            "app `{nome}` is dead: none of its relay instances is alive and its \
             latest did not stop gracefully (last heartbeat {ha} ago{quais}): it \
             crashed or was killed, so its tipos are not delivered; start it again, \
             or, if it was retired, `mensageria apps remover {nome}`"
        ),
    }
}

/// Who claims each tipo, from the apps' `mensageria_apps` rows.
struct Reivindicacoes<'a> {
    /// Per tipo, the live apps that claim it now.
    vivos: BTreeMap<&'a str, BTreeSet<&'a str>>,
    /// Per tipo, every app with a row for it, live or not.
    todos: BTreeMap<&'a str, BTreeSet<&'a str>>,
    /// Per (tipo, app), the app's state as an orphans message tells it.
    por_que: BTreeMap<(&'a str, &'a str), String>,
}

impl<'a> Reivindicacoes<'a> {
    /// Sorts the (app, tipo) rows of `apps`; a claim not refreshed within `limite_ms` is stale.
    ///
    /// Live claimants are judged per (app, tipo) row, not per app: a relay refreshes only the
    /// tipos it still sends, so a tipo dropped in a redeploy keeps a stale row that must not
    /// count as a live claimant (its rows would be orphans reported as healthy). And only for
    /// apps that are alive: the rows of a stopped or dead app refresh no more.
    fn das(apps: &'a [apps::App], limite_ms: i64) -> Self {
        let mut r = Self {
            vivos: BTreeMap::new(),
            todos: BTreeMap::new(),
            por_que: BTreeMap::new(),
        };
        for a in apps {
            for t in &a.tipos {
                r.todos.entry(&t.tipo).or_default().insert(&a.app);
                let em_dia = t.visto_ha_ms <= limite_ms;
                if a.estado == EstadoApp::Vivo && em_dia {
                    r.vivos.entry(&t.tipo).or_default().insert(&a.app);
                }
                let estado = match a.estado {
                    EstadoApp::Vivo => format!(
                        "alive, but it has not claimed the tipo for {}",
                        humana_ms(t.visto_ha_ms)
                    ),
                    EstadoApp::Silencioso => "not heart-beating".to_owned(),
                    outro => outro.nome().to_owned(),
                };
                r.por_que.insert((&t.tipo, &a.app), estado);
            }
        }
        r
    }

    /// The live claimants, owned, for the checks that follow.
    fn vivos_por_tipo(self) -> Vivos {
        self.vivos
            .into_iter()
            .map(|(tipo, apps)| {
                let apps = apps.into_iter().map(str::to_owned).collect();
                (tipo.to_owned(), apps)
            })
            .collect()
    }
}

/// A tipo claimed by more than one live app: competing consumers on one saída.
fn verificar_concorrentes(vivos: &BTreeMap<&str, BTreeSet<&str>>, d: &mut Diagnostico) {
    for (tipo, donos) in vivos {
        if donos.len() > 1 {
            let lista: Vec<String> = donos.iter().map(|a| format!("`{a}`")).collect();
            d.problemas.push(Problema {
                codigo: Codigo::Concorrentes,
                tipo: Some((*tipo).to_owned()),
                apps: donos.iter().map(|a| (*a).to_owned()).collect(),
                mensagem: format!(
                    "tipo `{tipo}` is claimed by {} live apps ({}): competing consumers on one \
                     saída; a tipo must have one sender, remove its enviador from all apps but one",
                    donos.len(),
                    lista.join(", ")
                ),
            });
        }
    }
}

/// Rows in the saída of a tipo no live app claims: a problem per such tipo. Returns how many.
fn verificar_orfas(
    fila: &[operacoes::FilaDoTipo],
    reivindicacoes: &Reivindicacoes<'_>,
    d: &mut Diagnostico,
) -> usize {
    let mut orfas = 0;
    for fila in fila {
        if reivindicacoes.vivos.contains_key(fila.tipo.as_str()) {
            continue;
        }
        orfas += 1;
        d.problemas.push(problema_orfas(fila, reivindicacoes));
    }
    orfas
}

/// The problem of the orphan rows of `fila`'s tipo, naming the apps that claimed it and why
/// they do not deliver it now.
fn problema_orfas(fila: &operacoes::FilaDoTipo, reivindicacoes: &Reivindicacoes<'_>) -> Problema {
    let antigos: Vec<String> = reivindicacoes
        .todos
        .get(fila.tipo.as_str())
        .map(|a| a.iter().map(|a| (*a).to_owned()).collect())
        .unwrap_or_default();
    let quem = if antigos.is_empty() {
        "no app has ever claimed it".to_owned()
    } else {
        let lista: Vec<String> = antigos
            .iter()
            .map(|app| {
                let estado = reivindicacoes
                    .por_que
                    .get(&(fila.tipo.as_str(), app.as_str()))
                    .map(String::as_str)
                    .unwrap_or("-");
                format!("`{app}` ({estado})")
            })
            .collect();
        format!(
            "only apps that do not deliver it now claim it: {}",
            lista.join(", ")
        )
    };
    Problema {
        codigo: Codigo::Orfas,
        tipo: Some(fila.tipo.clone()),
        apps: antigos,
        mensagem: format!(
            "{} row(s) of tipo `{}` wait in the saída (oldest {} old) and no live app claims \
             the tipo ({quem}): they will never be delivered until an app with its enviador \
             runs a relay on this schema",
            fila.total,
            fila.tipo,
            humana_ms(fila.idade_mais_antiga_ms)
        ),
    }
}

/// Per tipo, the live apps that claim it (what [`verificar_apps`] found).
type Vivos = BTreeMap<String, Vec<String>>;

/// The live claimants of `tipo`, for a problem's `apps`.
fn donos(vivos: &Vivos, tipo: &str) -> Vec<String> {
    vivos.get(tipo).cloned().unwrap_or_default()
}

/// What the relays left behind, against the operator's limits: dead letters, the oldest
/// message's age and the most attempts, per tipo. A breached limit is a problem; without a
/// limit the figure is a note (a deploy pipeline passes the limits).
async fn verificar_limites(
    conexao: &Conexao,
    args: &ArgsDoctor,
    vivos: &Vivos,
    d: &mut Diagnostico,
) -> Result<(), ErroCli> {
    let (mortas, fila, tentativas) = nos_dois!(conexao, pool => (
        operacoes::mortas_por_tipo(pool).await?,
        operacoes::fila(pool).await?,
        operacoes::tentativas(pool).await?,
    ));
    verificar_mortas(&mortas, args, d);
    verificar_idade_pendente(&fila, args, vivos, d);
    verificar_tentativas(&tentativas, args, vivos, d);
    Ok(())
}

/// The relays' dead letters against `--max-dead-letters`: a problem per tipo over it, or, with
/// no limit, a note of the total.
fn verificar_mortas(mortas: &[operacoes::MortasDoTipo], args: &ArgsDoctor, d: &mut Diagnostico) {
    let total: i64 = mortas.iter().map(|m| m.mortas).sum();
    match args.max_dead_letters {
        None if total > 0 => d.notas.push(format!(
            "{total} dead letter(s) on the schema (`mensageria mortas listar`); \
             --max-dead-letters 0 makes any a problem"
        )),
        None => {}
        Some(limite) => {
            for m in mortas.iter().filter(|m| m.mortas > limite) {
                d.problemas.push(Problema {
                    codigo: Codigo::Mortas,
                    tipo: Some(m.tipo.clone()),
                    apps: Vec::new(),
                    mensagem: format!(
                        "{} dead letter(s) of tipo `{}`, over the limit of {limite}: the relay \
                         gave up on them; see why with `mensageria mortas listar --tipo {}`, \
                         then replay (`mortas reenfileirar`) or discard them",
                        m.mortas, m.tipo, m.tipo
                    ),
                });
            }
        }
    }
}

/// The age of the oldest message of each tipo in the saída against `--max-pending-age`: a
/// problem per tipo over it, or, with no limit, a note of the oldest of all.
fn verificar_idade_pendente(
    fila: &[operacoes::FilaDoTipo],
    args: &ArgsDoctor,
    vivos: &Vivos,
    d: &mut Diagnostico,
) {
    let mais_velha = fila.iter().max_by_key(|f| f.idade_mais_antiga_ms);
    match (args.max_pending_age, mais_velha) {
        (None, Some(f)) => d.notas.push(format!(
            "oldest message in the saída: {} old (tipo `{}`); --max-pending-age makes an older \
             one a problem",
            humana_ms(f.idade_mais_antiga_ms),
            f.tipo
        )),
        (Some(limite), _) => {
            let limite_ms = i64::try_from(limite.as_millis()).unwrap_or(i64::MAX);
            for f in fila.iter().filter(|f| f.idade_mais_antiga_ms > limite_ms) {
                d.problemas.push(Problema {
                    codigo: Codigo::PendenteVelha,
                    tipo: Some(f.tipo.clone()),
                    apps: donos(vivos, &f.tipo),
                    mensagem: format!(
                        "the oldest message of tipo `{}` has waited {} in the saída, over the \
                         limit of {}: its destination is refusing, redirecting or unreachable, \
                         or nothing delivers the tipo (`mensageria status`, the relay's WARN \
                         lines)",
                        f.tipo,
                        humana_ms(f.idade_mais_antiga_ms),
                        humana(limite)
                    ),
                });
            }
        }
        (None, None) => {}
    }
}

/// The most attempts of a message of each tipo in the saída against `--max-attempts`: a
/// problem per tipo over it (counting its messages over the limit), or, with no limit, a note
/// of the most of all.
fn verificar_tentativas(
    tentativas: &[operacoes::TentativasDoTipo],
    args: &ArgsDoctor,
    vivos: &Vivos,
    d: &mut Diagnostico,
) {
    let mut por_tipo: BTreeMap<&str, i64> = BTreeMap::new();
    for t in tentativas {
        let maximo = por_tipo.entry(&t.tipo).or_default();
        *maximo = (*maximo).max(t.tentativas);
    }
    match args.max_attempts {
        None => {
            if let Some((tipo, maximo)) = por_tipo.iter().max_by_key(|(_, m)| **m) {
                d.notas.push(format!(
                    "most attempts of a message in the saída: {maximo} (tipo `{tipo}`); \
                     --max-attempts makes more a problem"
                ));
            }
        }
        Some(limite) => {
            for (tipo, maximo) in por_tipo.iter().filter(|(_, m)| **m > limite) {
                let linhas: i64 = tentativas
                    .iter()
                    .filter(|t| t.tipo == *tipo && t.tentativas > limite)
                    .map(|t| t.mensagens)
                    .sum();
                d.problemas.push(Problema {
                    codigo: Codigo::TentativasDemais,
                    tipo: Some((*tipo).to_owned()),
                    apps: donos(vivos, tipo),
                    mensagem: format!(
                        "{linhas} message(s) of tipo `{tipo}` attempted more than {limite} times \
                         (at most {maximo}): every attempt failed; the relay's WARN lines and \
                         `mensageria status` say why"
                    ),
                });
            }
        }
    }
}

/// The schema version that brought `mensageria_mortas_recebidas`.
const VERSAO_DAS_MORTAS_RECEBIDAS: i64 = 4;

/// The receiving apps' registrations: one silent for over a minute is not running (events for
/// it wait: in its durable through JetStream, in the senders' saídas over HTTP); a JetStream
/// consumer whose oldest unsettled message has waited over half the stream's max_age is about
/// to lose it; with `--max-pending-age`, a consumer's oldest message is judged as the saída's.
async fn verificar_receptores(
    conexao: &Conexao,
    args: &ArgsDoctor,
    d: &mut Diagnostico,
) -> Result<(), ErroCli> {
    let receptores = nos_dois!(conexao, pool => operacoes::receptores(pool).await?);
    for r in receptores.into_iter().map(crate::status::Recebedor::de) {
        if r.silent {
            d.problemas.push(Problema {
                codigo: Codigo::ReceptorSilencioso,
                tipo: Some(r.tipo.clone()),
                apps: vec![r.app.clone()],
                mensagem: format!(
                    "receiving app `{}` has not said it receives `{}` ({}) for {}: it is not \
                     running, and events for it wait{}; start it, or, if it was retired, \
                     `mensageria recebidas esquecer --app {}`",
                    r.app,
                    r.tipo,
                    r.transport,
                    humana_ms(r.last_seen_ago_ms),
                    if r.transport == "nats" {
                        format!(
                            " in its durable consumer (last seen with {} waiting, the oldest {} old)",
                            r.pending.unwrap_or(0),
                            humana_ms(r.oldest_age_ms.unwrap_or(0))
                        )
                    } else {
                        " in the senders' saídas".to_owned()
                    },
                    r.app
                ),
            });
        }
        if r.near_expiry {
            d.problemas.push(Problema {
                codigo: Codigo::ConsumidorPertoDeExpirar,
                tipo: Some(r.tipo.clone()),
                apps: vec![r.app.clone()],
                mensagem: format!(
                    "receiving app `{}`'s oldest unsettled `{}` message has waited {}, over half \
                     the stream's max_age ({}): past it the stream deletes it, applied or not; \
                     see why in the app's log ({} in flight, {} redelivered)",
                    r.app,
                    r.tipo,
                    humana_ms(r.oldest_age_ms.unwrap_or(0)),
                    humana_ms(r.max_age_ms.unwrap_or(0)),
                    r.in_flight.unwrap_or(0),
                    r.redelivered.unwrap_or(0)
                ),
            });
        }
        if let (Some(limite), Some(idade)) = (args.max_pending_age, r.oldest_age_ms)
            && idade > i64::try_from(limite.as_millis()).unwrap_or(i64::MAX)
        {
            d.problemas.push(Problema {
                codigo: Codigo::PendenteVelha,
                tipo: Some(r.tipo.clone()),
                apps: vec![r.app.clone()],
                mensagem: format!(
                    "receiving app `{}`'s JetStream consumer has a `{}` message unsettled for {}, \
                     over --max-pending-age {} ({} waiting, {} in flight)",
                    r.app,
                    r.tipo,
                    humana_ms(idade),
                    humana(limite),
                    r.pending.unwrap_or(0),
                    r.in_flight.unwrap_or(0)
                ),
            });
        }
    }
    Ok(())
}

/// The schema versions from which dedup records have an app and receiving apps register.
const VERSAO_DAS_RECEBIDAS_POR_APP_PG: i64 = 10;
const VERSAO_DAS_RECEBIDAS_POR_APP_SQLITE: i64 = 6;

/// Dedup records from before they had an app (`app = ''`). Each receptor counts them as its
/// own, so nothing is applied twice; but when two or more receiving apps are registered for
/// their tipo, the history is ambiguous (before the upgrade each key went to whichever app came
/// first) and an operator must say who owns them: a problem. With one receiving app (or none
/// registered yet) they are a note: give them to it.
async fn verificar_recebidas_sem_dono(
    conexao: &Conexao,
    d: &mut Diagnostico,
) -> Result<(), ErroCli> {
    let (registros, receptores) = nos_dois!(conexao, pool => (
        operacoes::recebidas_por_app(pool).await?,
        operacoes::receptores(pool).await?,
    ));
    for sem_dono in registros.iter().filter(|r| r.app.is_empty()) {
        let apps = crate::recebidas::apps_que_recebem(&receptores, &sem_dono.tipo);
        let nomes: Vec<String> = apps.iter().map(|app| (*app).to_owned()).collect();
        let adotar: String = nomes.iter().map(|app| format!(" --app {app}")).collect();
        if apps.len() >= 2 {
            d.problemas.push(Problema {
                codigo: Codigo::RecebidasSemDono,
                tipo: Some(sem_dono.tipo.clone()),
                apps: nomes.clone(),
                mensagem: format!(
                    "{} dedup record(s) of tipo `{}` were written before dedup records had an \
                     app, and {} receiving apps receive it on this schema ({}): before the \
                     upgrade they split its events between them (each key applied by one); \
                     every app now counts these keys as applied. Decide who owns them and say \
                     so: `mensageria recebidas adotar{adotar} --tipo {}` (the guide's \
                     Upgrading section explains the choice)",
                    sem_dono.registros,
                    sem_dono.tipo,
                    apps.len(),
                    nomes.join(", "),
                    sem_dono.tipo
                ),
            });
        } else {
            let dono = nomes.first().map_or("<app>", String::as_str);
            d.notas.push(format!(
                "{} dedup record(s) of tipo `{}` have no app (written before dedup records had \
                 one): they count as every receiving app's own; give them to their owner with \
                 `mensageria recebidas adotar --app {dono} --tipo {}`",
                sem_dono.registros, sem_dono.tipo, sem_dono.tipo
            ));
        }
    }
    Ok(())
}

/// The receiving side's dead letters (events a broker consumer's receptor refused for good),
/// against `--max-dead-letters`: counted per receiving app and tipo, apart from the relays' (a
/// different party refused them, and they are dealt with differently), under their own code. A
/// pure receiver has no relay dead letters at all, so without this a deploy check with
/// `--max-dead-letters 0` would pass while its consumer piles up refused events.
async fn verificar_mortas_recebidas(
    conexao: &Conexao,
    args: &ArgsDoctor,
    d: &mut Diagnostico,
) -> Result<(), ErroCli> {
    let mortas = nos_dois!(conexao, pool => operacoes::mortas_recebidas_por_tipo(pool).await?);
    let total: i64 = mortas.iter().map(|m| m.mortas).sum();
    match args.max_dead_letters {
        None if total > 0 => {
            let quais: Vec<String> = mortas
                .iter()
                .map(|m| format!("app `{}`, tipo `{}`: {}", m.app, m.tipo, m.mortas))
                .collect();
            d.notas.push(format!(
                "{total} receiver-side dead letter(s) ({}): events a broker consumer's receptor \
                 refused for good (`mensageria mortas-recebidas listar`); --max-dead-letters 0 \
                 makes any a problem",
                quais.join("; ")
            ));
        }
        None => {}
        Some(limite) => {
            for m in mortas.iter().filter(|m| m.mortas > limite) {
                d.problemas.push(Problema {
                    codigo: Codigo::MortasRecebidas,
                    tipo: Some(m.tipo.clone()),
                    apps: vec![m.app.clone()],
                    mensagem: format!(
                        "{} receiver-side dead letter(s) of tipo `{}` kept by app `{}`, over the \
                         limit of {limite}: its receptor refused them for good; see why with \
                         `mensageria mortas-recebidas listar --app {}`, fix the cause, then \
                         replay each (`mortas-recebidas reenviar <id> --app {}`: a new message \
                         id, so the stream's duplicate window does not drop it) or discard it \
                         (`mortas-recebidas descartar`)",
                        m.mortas, m.tipo, m.app, m.app, m.app
                    ),
                });
            }
        }
    }
    Ok(())
}

/// Rows held behind the head of their ordering key when that head is of another tipo: keys are
/// shared by every tipo and app of the schema, so another app's key with the same text holds
/// ours. A problem when the head will not move on its own (no live app claims its tipo, or it
/// is a dead letter), a note otherwise; either way it names the head's tipo and one key.
async fn verificar_retidas(
    conexao: &Conexao,
    vivos: &Vivos,
    d: &mut Diagnostico,
) -> Result<(), ErroCli> {
    let retidas = nos_dois!(conexao, pool => operacoes::retidas(pool).await?);
    for r in retidas {
        let (tipo, cabeca, chave) = (&r.tipo, &r.tipo_da_cabeca, &r.exemplo);
        let quantas = format!(
            "{} row(s) of tipo `{tipo}` wait behind the head of their ordering key, a {} of tipo \
             `{cabeca}` ({} key(s), e.g. `{chave}`)",
            r.linhas,
            if r.cabeca_morta {
                "dead letter"
            } else {
                "message"
            },
            r.chaves
        );
        let ver = format!(
            "ordering keys are shared by every tipo and app of the schema, so a key text used by \
             two apps orders their messages together; `mensageria ordem mostrar {chave}` shows \
             the key's queue"
        );
        let donos_da_cabeca = donos(vivos, cabeca);
        let mensagem = if r.cabeca_morta {
            format!(
                "{quantas}: the relay's default policy holds a key behind its dead letter until \
                 it is replayed or discarded (`mensageria mortas listar --tipo {cabeca}`); {ver}"
            )
        } else if donos_da_cabeca.is_empty() {
            format!(
                "{quantas}, which no live app claims: they will not move until that message is \
                 delivered or removed; {ver}"
            )
        } else {
            d.notas.push(format!(
                "{quantas}, claimed by {}: they go once it is delivered; {ver}",
                donos_da_cabeca.join(", ")
            ));
            continue;
        };
        d.problemas.push(Problema {
            codigo: Codigo::RetidasPorOutroTipo,
            tipo: Some(tipo.clone()),
            apps: donos(vivos, tipo),
            mensagem,
        });
    }
    Ok(())
}

/// The dedup retention against the senders' redelivery horizon.
/// The longest `max_age` of the streams the receiving apps of this schema consume (`app`'s only,
/// when given), as their consumers last recorded it, in ms (`i64::MAX` for a stream that keeps
/// messages forever, recorded as 0): a durable created anew replays that much history, so dedup
/// records must outlive it too.
pub(crate) async fn maior_max_age_ms(
    conexao: &Conexao,
    app: Option<&str>,
) -> Result<Option<(i64, String)>, ErroCli> {
    let receptores = nos_dois!(conexao, pool => operacoes::receptores(pool).await?);
    Ok(receptores
        .into_iter()
        .filter(|r| app.is_none_or(|app| r.app == app))
        .filter_map(|r| r.consumo.map(|c| (c.max_age_ms, r.app)))
        .map(|(max_age, app)| (if max_age <= 0 { i64::MAX } else { max_age }, app))
        .max_by_key(|(max_age, _)| *max_age))
}

/// The receiving app whose stream keeps messages at least as long as `retencao` (and that
/// `max_age`, in ms), if any: a retention that short lets a replay be applied twice.
pub(crate) async fn fluxo_mais_longo_que(
    conexao: &Conexao,
    app: Option<&str>,
    retencao: std::time::Duration,
) -> Result<Option<(i64, String)>, ErroCli> {
    let retencao_ms = i64::try_from(retencao.as_millis()).unwrap_or(i64::MAX);
    Ok(maior_max_age_ms(conexao, app)
        .await?
        .filter(|(max_age_ms, _)| retencao_ms <= *max_age_ms))
}

/// `max_age` in ms as a person reads it (`unlimited` for a stream that keeps messages forever).
pub(crate) fn max_age_legivel(max_age_ms: i64) -> String {
    if max_age_ms == i64::MAX {
        "unlimited".to_owned()
    } else {
        humana_ms(max_age_ms)
    }
}

fn verificar_retencao(args: &ArgsDoctor, max_age: Option<(i64, String)>, d: &mut Diagnostico) {
    let horizonte = args.horizonte.unwrap_or_else(horizonte_padrao);
    let Some(retencao) = args.retencao else {
        d.notas.push(format!(
            "dedup retention not checked: the database does not record it; pass --retencao (and \
             --horizonte if your senders' differs from the default {})",
            humana(horizonte)
        ));
        return;
    };
    if exigir_retencao(retencao, horizonte).is_err() {
        d.problemas.push(Problema {
            codigo: Codigo::RetencaoCurta,
            tipo: None,
            apps: Vec::new(),
            mensagem: format!(
                "dedup retention ({}) is not longer than the senders' redelivery horizon ({}): a \
                 redelivery arriving after its record was purged would be applied twice; keep \
                 records longer",
                humana(retencao),
                humana(horizonte)
            ),
        });
    } else {
        d.notas.push(format!(
            "dedup retention {} outlives the senders' redelivery horizon {}",
            humana(retencao),
            humana(horizonte)
        ));
    }
    if let Some((max_age_ms, app)) = max_age {
        d.problemas.push(Problema {
            codigo: Codigo::RetencaoCurta,
            tipo: None,
            apps: vec![app.clone()],
            mensagem: format!(
                "dedup retention ({}) is not longer than the max_age of the stream receiving app \
                 `{app}` consumes ({}): a durable created anew (a first start, a deleted durable, \
                 a renamed app) replays the stream from its start, and an event older than the \
                 retention would be applied twice; keep records longer than the stream keeps \
                 messages",
                humana(retencao),
                max_age_legivel(max_age_ms)
            ),
        });
    }
}
