//! `status`: per tipo, what waits in the saída, what is in flight, how old the oldest message
//! is, how many attempts the rows have had, how many dead letters there are (the relays', and
//! the receiving side's: events a broker consumer's receptor refused), and which app claims the
//! tipo.

use std::collections::BTreeMap;

use serde::Serialize;

use mensageria_core::operacoes;

use crate::conexao::{Conexao, nos_dois};
use crate::duracao::humana_ms;
use crate::erro::ErroCli;
use crate::saida_formatada::{Relatorio, Tabela, imprimir, rfc3339};

/// The attempts histogram's buckets (the relay dead-letters after 25 attempts by default).
const FAIXAS: [(&str, i64, i64); 6] = [
    ("0", 0, 0),
    ("1", 1, 1),
    ("2-4", 2, 4),
    ("5-9", 5, 9),
    ("10-24", 10, 24),
    ("25+", 25, i64::MAX),
];

/// The whole report.
#[derive(Debug, Serialize)]
struct Status {
    tipos: Vec<StatusDoTipo>,
    /// The receiving apps registered on this schema (`mensageria_receptores`), with a JetStream
    /// consumer's lag as it last measured it.
    receivers: Vec<Recebedor>,
}

/// A receiving app's registration of one tipo and transport.
#[derive(Debug, Serialize)]
pub(crate) struct Recebedor {
    pub(crate) app: String,
    pub(crate) tipo: String,
    /// `http` (a router's receptor) or `nats` (a JetStream consumer).
    pub(crate) transport: String,
    /// When it last said it runs (every 15 s over HTTP, every check through JetStream).
    pub(crate) last_seen_ago_ms: i64,
    /// More than a minute without a word: the app (or its consumer) is not running.
    pub(crate) silent: bool,
    /// JetStream only: messages waiting for it in the stream.
    pub(crate) pending: Option<i64>,
    /// JetStream only: delivered to it and not settled yet.
    pub(crate) in_flight: Option<i64>,
    /// JetStream only: delivered more than once.
    pub(crate) redelivered: Option<i64>,
    /// JetStream only: the oldest message it has not settled, its age.
    pub(crate) oldest_age_ms: Option<i64>,
    /// JetStream only: the stream's max_age (past it a message is deleted, applied or not).
    pub(crate) max_age_ms: Option<i64>,
    /// JetStream only: the oldest unsettled message has waited over half the max_age.
    pub(crate) near_expiry: bool,
}

/// A receiving app silent this long is not running (it says so every 15 s at most).
pub(crate) const RECEPTOR_SILENCIOSO_MS: i64 = 60_000;

impl Recebedor {
    pub(crate) fn de(r: operacoes::ReceptorDoApp) -> Self {
        let consumo = r.consumo;
        Self {
            silent: r.visto_ha_ms > RECEPTOR_SILENCIOSO_MS,
            app: r.app,
            tipo: r.tipo,
            transport: r.transporte,
            last_seen_ago_ms: r.visto_ha_ms,
            pending: consumo.map(|c| c.pendentes),
            in_flight: consumo.map(|c| c.em_voo),
            redelivered: consumo.map(|c| c.reentregues),
            oldest_age_ms: consumo.map(|c| c.mais_antiga_ms),
            max_age_ms: consumo.map(|c| c.max_age_ms),
            near_expiry: consumo
                .is_some_and(|c| c.max_age_ms > 0 && c.mais_antiga_ms * 2 > c.max_age_ms),
        }
    }
}

/// One tipo's line.
#[derive(Debug, Default, Serialize)]
struct StatusDoTipo {
    tipo: String,
    /// Rows waiting for a relay (due or scheduled for a retry), not leased right now.
    #[serde(rename = "pending")]
    pendentes: i64,
    /// Rows leased right now: a relay is delivering them.
    #[serde(rename = "in_flight")]
    em_voo: i64,
    /// Rows of an ordering key waiting behind a dead letter of their key (held back under the
    /// relay's default policy until the letter is replayed or discarded).
    #[serde(rename = "blocked")]
    atras_de_morta: i64,
    /// Rows of an ordering key waiting behind the key's head when that head is a row of another
    /// tipo (another app's, perhaps): ordering keys are shared by every tipo and app of the
    /// schema. `mensageria doctor` names the head's tipo, `mensageria ordem mostrar` the key.
    #[serde(rename = "held")]
    atras_de_outro_tipo: i64,
    /// Age of the oldest message of the tipo still in the saída (pending or in flight).
    #[serde(rename = "oldest_age_ms")]
    idade_mais_antiga_ms: Option<i64>,
    /// Rows of the saída per number of attempts so far (empty buckets left out).
    #[serde(rename = "attempts")]
    tentativas: Vec<Faixa>,
    /// Dead letters of the tipo.
    #[serde(rename = "dead")]
    mortas: i64,
    /// Events of the tipo a broker consumer's receptor refused for good, every receiving app's
    /// (`mensageria mortas-recebidas listar`).
    #[serde(rename = "received_dead")]
    mortas_recebidas: i64,
    /// The apps whose relay claims the tipo, and when each was last seen.
    #[serde(rename = "claimed_by")]
    apps: Vec<AppDoTipo>,
}

/// One bucket of the attempts histogram.
#[derive(Debug, Serialize)]
struct Faixa {
    #[serde(rename = "range")]
    faixa: &'static str,
    #[serde(rename = "messages")]
    mensagens: i64,
}

/// An app claiming a tipo.
#[derive(Debug, Serialize)]
struct AppDoTipo {
    app: String,
    #[serde(rename = "last_seen_ago_ms")]
    visto_ha_ms: i64,
    #[serde(rename = "last_seen_at")]
    visto_em: String,
}

impl Relatorio for Status {
    fn humano(&self) -> String {
        if self.tipos.is_empty() && self.receivers.is_empty() {
            return "nothing to show: the saída, the dead letters (both sides') and the app \
                    registrations are empty"
                .into();
        }
        let mut texto = self.tabela_dos_tipos();
        if !self.receivers.is_empty() {
            texto.push_str("\n\n");
            texto.push_str(&tabela_dos_recebedores(&self.receivers));
        }
        texto
    }
}

/// The receiving apps' table (`status`; `!` marks a silent app or a consumer near expiry).
pub(crate) fn tabela_dos_recebedores(recebedores: &[Recebedor]) -> String {
    let mut tabela = Tabela::new([
        "receiving app",
        "tipo",
        "transport",
        "last seen",
        "waiting",
        "in flight",
        "redelivered",
        "oldest",
        "max age",
    ]);
    let numero = |n: Option<i64>| n.map_or_else(|| "-".to_owned(), |n| n.to_string());
    let duracao = |n: Option<i64>| n.map_or_else(|| "-".to_owned(), humana_ms);
    for r in recebedores {
        let silencio = if r.silent { " !" } else { "" };
        let expira = if r.near_expiry { " !" } else { "" };
        tabela.linha([
            r.app.clone(),
            r.tipo.clone(),
            r.transport.clone(),
            format!("{} ago{silencio}", humana_ms(r.last_seen_ago_ms)),
            numero(r.pending),
            numero(r.in_flight),
            numero(r.redelivered),
            format!("{}{expira}", duracao(r.oldest_age_ms)),
            duracao(r.max_age_ms),
        ]);
    }
    tabela.texto()
}

impl Status {
    fn tabela_dos_tipos(&self) -> String {
        if self.tipos.is_empty() {
            return "no tipo in the saída, the dead letters or the relays' registrations".into();
        }
        let mut tabela = Tabela::new([
            "tipo",
            "pending",
            "in flight",
            "blocked",
            "held",
            "oldest",
            "attempts",
            "dead",
            "received dead",
            "claimed by",
            "last seen",
        ]);
        for t in &self.tipos {
            let tentativas: Vec<String> = t
                .tentativas
                .iter()
                .map(|f| format!("{}:{}", f.faixa, f.mensagens))
                .collect();
            let apps: Vec<&str> = t.apps.iter().map(|a| a.app.as_str()).collect();
            let vistos: Vec<String> = t
                .apps
                .iter()
                .map(|a| format!("{} ago", humana_ms(a.visto_ha_ms)))
                .collect();
            tabela.linha([
                t.tipo.clone(),
                t.pendentes.to_string(),
                t.em_voo.to_string(),
                t.atras_de_morta.to_string(),
                t.atras_de_outro_tipo.to_string(),
                t.idade_mais_antiga_ms
                    .map(humana_ms)
                    .unwrap_or_else(|| "-".into()),
                or_traco(tentativas.join(" ")),
                t.mortas.to_string(),
                t.mortas_recebidas.to_string(),
                or_traco(apps.join(", ")),
                or_traco(vistos.join(", ")),
            ]);
        }
        tabela.texto()
    }
}

/// The line of `tipo`, created empty on first use.
fn linha<'a>(tipos: &'a mut BTreeMap<String, StatusDoTipo>, tipo: &str) -> &'a mut StatusDoTipo {
    tipos
        .entry(tipo.to_owned())
        .or_insert_with(|| StatusDoTipo {
            tipo: tipo.to_owned(),
            ..StatusDoTipo::default()
        })
}

fn or_traco(texto: String) -> String {
    if texto.is_empty() { "-".into() } else { texto }
}

/// Reads the tables and prints the report.
pub(crate) async fn executar(conexao: &Conexao, json: bool) -> Result<(), ErroCli> {
    let (fila, tentativas, mortas, recebidas, reivindicacoes, retidas, receptores) = nos_dois!(conexao, pool => {
        mensageria_core::verificar_schema(pool).await?;
        (
            operacoes::fila(pool).await?,
            operacoes::tentativas(pool).await?,
            operacoes::mortas_por_tipo(pool).await?,
            operacoes::mortas_recebidas_por_tipo(pool).await?,
            operacoes::reivindicacoes(pool).await?,
            operacoes::retidas(pool).await?,
            operacoes::receptores(pool).await?,
        )
    });
    let mut tipos: BTreeMap<String, StatusDoTipo> = BTreeMap::new();
    for f in fila {
        let t = linha(&mut tipos, &f.tipo);
        t.pendentes = f.total - f.em_voo;
        t.em_voo = f.em_voo;
        t.atras_de_morta = f.atras_de_morta;
        t.idade_mais_antiga_ms = Some(f.idade_mais_antiga_ms.max(0));
    }
    for operacoes::TentativasDoTipo {
        tipo,
        tentativas,
        mensagens,
        ..
    } in tentativas
    {
        let t = linha(&mut tipos, &tipo);
        let Some((faixa, ..)) = FAIXAS
            .iter()
            .find(|(_, de, ate)| (*de..=*ate).contains(&tentativas.max(0)))
        else {
            continue;
        };
        match t.tentativas.iter_mut().find(|f| f.faixa == *faixa) {
            Some(f) => f.mensagens += mensagens,
            None => t.tentativas.push(Faixa { faixa, mensagens }),
        }
    }
    for m in mortas {
        linha(&mut tipos, &m.tipo).mortas = m.mortas;
    }
    for m in recebidas {
        linha(&mut tipos, &m.tipo).mortas_recebidas += m.mortas;
    }
    // Behind a dead letter of another tipo is already BLOCKED: HELD counts saída heads only.
    for r in retidas.into_iter().filter(|r| !r.cabeca_morta) {
        linha(&mut tipos, &r.tipo).atras_de_outro_tipo += r.linhas;
    }
    for r in reivindicacoes {
        linha(&mut tipos, &r.tipo).apps.push(AppDoTipo {
            app: r.app,
            visto_ha_ms: r.visto_ha_ms.max(0),
            visto_em: rfc3339(r.visto_em_ms),
        });
    }
    imprimir(
        &Status {
            tipos: tipos.into_values().collect(),
            receivers: receptores.into_iter().map(Recebedor::de).collect(),
        },
        json,
    );
    Ok(())
}
