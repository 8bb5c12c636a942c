//! `docs/observabilidade/` against the metrics mensageria describes, emits and renders.
//!
//! The alert rules (`alertas.yml`) and the Grafana dashboard (`painel.json`) may name only series
//! that the exporter mensageria ships with renders for a metric `metricas::descrever()` describes,
//! with the quantiles it renders and the labels the guide's *Metrics* table gives
//! (`docs/guide/src/observing.md`); that table, `descrever()` and the `counter!` / `gauge!` / `histogram!` calls of the crates' sources
//! must list the same metrics with the same kinds. A renamed metric, a quantile that is not
//! rendered, a rule without `for:` or a severity, a dashboard that is not JSON fail here, not in an
//! operator's Prometheus.
//!
//! Where the names come from: `descrever()` runs against a recorder of this file that keeps only
//! the descriptions, installed for the call alone (`metrics::with_local_recorder`), because the
//! Prometheus recorder renders the metrics that were recorded, never those merely described.
//! Each described metric then gets one sample in a local `PrometheusRecorder` (never installed
//! globally) rendered twice: as the default exporter does (histograms as summaries) and with
//! buckets (`set_buckets`). A series the docs name must be in one of the two renders.
//!
//! No YAML parser is in the lock file, so `alertas.yml` gets a structural check of its lines
//! (groups, rules, each rule's keys); its PromQL is for `promtool check rules`.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use mensageria_axum::metricas;
use metrics::{Counter, Gauge, Histogram, Key, KeyName, Metadata, Recorder, SharedString, Unit};
use metrics_exporter_prometheus::PrometheusBuilder;
use serde_json::Value;

const PREFIXO: &str = "mensageria_";

/// The crates whose sources emit mensageria's metrics.
const FONTES: [&str; 3] = [
    "mensageria-core/src",
    "mensageria-axum/src",
    "mensageria-nats/src",
];

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Especie {
    Contador,
    Medidor,
    Histograma,
}

impl Especie {
    /// The kind as the guide's table spells it.
    fn no_leia_me(self) -> &'static str {
        match self {
            Self::Contador => "counter",
            Self::Medidor => "gauge",
            Self::Histograma => "histogram",
        }
    }
}

/// A recorder that keeps the names and kinds described to it and records nothing.
#[derive(Default)]
struct Descricoes(Mutex<BTreeMap<String, Especie>>);

impl Descricoes {
    fn anotar(&self, nome: KeyName, especie: Especie) {
        let anterior = self
            .0
            .lock()
            .unwrap()
            .insert(nome.as_str().to_owned(), especie);
        assert!(
            anterior.is_none(),
            "descrever() describes {} twice",
            nome.as_str()
        );
    }
}

impl Recorder for Descricoes {
    fn describe_counter(&self, nome: KeyName, _: Option<Unit>, _: SharedString) {
        self.anotar(nome, Especie::Contador);
    }
    fn describe_gauge(&self, nome: KeyName, _: Option<Unit>, _: SharedString) {
        self.anotar(nome, Especie::Medidor);
    }
    fn describe_histogram(&self, nome: KeyName, _: Option<Unit>, _: SharedString) {
        self.anotar(nome, Especie::Histograma);
    }
    fn register_counter(&self, _: &Key, _: &Metadata<'_>) -> Counter {
        Counter::noop()
    }
    fn register_gauge(&self, _: &Key, _: &Metadata<'_>) -> Gauge {
        Gauge::noop()
    }
    fn register_histogram(&self, _: &Key, _: &Metadata<'_>) -> Histogram {
        Histogram::noop()
    }
}

/// What the docs are checked against.
struct Modelo {
    /// `descrever()`'s metrics and their kinds.
    descritas: BTreeMap<String, Especie>,
    /// Every series name of both renders, with the label pairs of its lines
    /// (`quantile="0.99"`, `le="1"`).
    series: BTreeMap<String, BTreeSet<String>>,
    /// The guide's *Metrics* table: name → (kind as written, labels).
    leia_me: BTreeMap<String, (String, BTreeSet<String>)>,
}

fn raiz() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("tests/ sits in the workspace")
        .to_path_buf()
}

fn ler(relativo: &str) -> String {
    let caminho = raiz().join(relativo);
    std::fs::read_to_string(&caminho).unwrap_or_else(|e| panic!("{}: {e}", caminho.display()))
}

fn descritas() -> BTreeMap<String, Especie> {
    let descricoes = Descricoes::default();
    metrics::with_local_recorder(&descricoes, metricas::descrever);
    let descritas = descricoes.0.into_inner().unwrap();
    assert!(
        descritas.len() >= 10 && descritas.contains_key("mensageria_delivered_total"),
        "descrever() described only {descritas:?}"
    );
    descritas
}

/// One sample of each described metric in a local recorder built by `construtor`, rendered.
fn renderizar(descritas: &BTreeMap<String, Especie>, construtor: PrometheusBuilder) -> String {
    let gravador = construtor.build_recorder();
    metrics::with_local_recorder(&gravador, || {
        metricas::descrever();
        for (nome, especie) in descritas {
            match especie {
                Especie::Contador => metrics::counter!(nome.clone()).increment(1),
                Especie::Medidor => metrics::gauge!(nome.clone()).set(1.0),
                Especie::Histograma => metrics::histogram!(nome.clone()).record(1.0),
            }
        }
    });
    let texto = gravador.handle().render();
    for nome in descritas.keys() {
        assert!(
            texto.contains(&format!("# HELP {nome} ")),
            "no HELP line for {nome} in:\n{texto}"
        );
    }
    texto
}

/// Series names of a render in the text format, each with the label pairs of its lines.
fn series(texto: &str, em: &mut BTreeMap<String, BTreeSet<String>>) {
    for linha in texto
        .lines()
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
    {
        let fim = linha.find(['{', ' ']).unwrap_or(linha.len());
        let rotulos = em.entry(linha[..fim].to_owned()).or_default();
        if let Some(bloco) = linha[fim..]
            .strip_prefix('{')
            .and_then(|r| r.split('}').next())
        {
            rotulos.extend(bloco.split(',').map(|par| par.trim().to_owned()));
        }
    }
}

/// The guide's *Metrics* table, and whether the section links `docs/observabilidade/`.
fn tabela_do_leia_me() -> (BTreeMap<String, (String, BTreeSet<String>)>, bool) {
    let leia_me = ler("docs/guide/src/observing.md");
    let inicio = leia_me
        .find("\n## Metrics\n")
        .expect("docs/guide/src/observing.md has a \"## Metrics\" section");
    let secao = &leia_me[inicio + 1..];
    let secao = &secao[..secao[1..].find("\n## ").map_or(secao.len(), |f| f + 1)];
    let mut tabela = BTreeMap::new();
    for linha in secao.lines().filter(|l| l.starts_with("| `mensageria_")) {
        let celulas: Vec<&str> = linha.split('|').map(str::trim).collect();
        assert!(
            celulas.len() >= 5,
            "docs/guide/src/observing.md, Metrics: a short row: {linha}"
        );
        let nome = celulas[1].trim_matches('`').to_owned();
        let especie = celulas[2].trim_end_matches('¹').to_owned();
        // The labels are the cell's `quoted` words outside parentheses (those inside are values).
        let mut fora = String::new();
        let mut profundidade = 0_u32;
        for c in celulas[3].chars() {
            match c {
                '(' => profundidade += 1,
                ')' => profundidade = profundidade.saturating_sub(1),
                _ if profundidade == 0 => fora.push(c),
                _ => {}
            }
        }
        let rotulos = fora
            .split('`')
            .skip(1)
            .step_by(2)
            .map(str::to_owned)
            .collect();
        assert!(
            tabela.insert(nome.clone(), (especie, rotulos)).is_none(),
            "docs/guide/src/observing.md, Metrics: {nome} has two rows"
        );
    }
    (tabela, secao.contains("docs/observabilidade/"))
}

fn modelo() -> Modelo {
    let descritas = descritas();
    let mut series_ = BTreeMap::new();
    series(
        &renderizar(&descritas, PrometheusBuilder::new()),
        &mut series_,
    );
    let com_baldes = PrometheusBuilder::new()
        .set_buckets(&[0.1, 1.0, 60.0])
        .unwrap();
    series(&renderizar(&descritas, com_baldes), &mut series_);
    Modelo {
        descritas,
        series: series_,
        leia_me: tabela_do_leia_me().0,
    }
}

/// One metric name in a text: in a rule's expression, a panel's query, a comment.
#[derive(Debug)]
struct Referencia<'a> {
    nome: String,
    /// The matchers right after the name, without the braces (`quantile="0.99", tipo=~"$tipo"`).
    seletor: Option<&'a str>,
    /// The text before the name, to see which function it is in.
    antes: &'a str,
    /// Spelled inside a regular expression over names (`{__name__=~"mensageria_(a|b)_total"}`),
    /// expanded here: no selector of its own.
    em_regex: bool,
}

fn caractere_de_nome(c: char) -> bool {
    c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_'
}

/// Every `mensageria_*` name in `texto`; an alternation `mensageria_(a|b)_total` is expanded,
/// any other regular expression over names is an error (this test could not check it).
fn referencias<'a>(texto: &'a str, erros: &mut Vec<String>) -> Vec<Referencia<'a>> {
    let mut achadas = Vec::new();
    for (i, _) in texto.match_indices(PREFIXO) {
        let antes = &texto[..i];
        if antes
            .chars()
            .next_back()
            .is_some_and(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':')
        {
            continue;
        }
        let resto = &texto[i + PREFIXO.len()..];
        let cabeca_fim = resto.find(|c| !caractere_de_nome(c)).unwrap_or(resto.len());
        let (cabeca, depois) = resto.split_at(cabeca_fim);
        let (nomes, depois, em_regex) = match depois.strip_prefix('(') {
            Some(dentro) => {
                let Some(fecha) = dentro.find(')') else {
                    erros.push(format!("an unclosed group after {PREFIXO}{cabeca}"));
                    continue;
                };
                let sufixo_fim = dentro[fecha + 1..]
                    .find(|c| !caractere_de_nome(c))
                    .map_or(dentro.len(), |f| fecha + 1 + f);
                let sufixo = &dentro[fecha + 1..sufixo_fim];
                let nomes = dentro[..fecha]
                    .split('|')
                    .map(|alternativa| format!("{PREFIXO}{cabeca}{alternativa}{sufixo}"))
                    .collect();
                (nomes, &dentro[sufixo_fim..], true)
            }
            None => (vec![format!("{PREFIXO}{cabeca}")], depois, false),
        };
        if depois.starts_with(".*") || depois.starts_with(".+") || depois.starts_with('(') {
            erros.push(format!(
                "`{PREFIXO}{cabeca}{}…` is a regular expression over metric names this test \
                 cannot check: spell the names out, or as one (a|b) alternation",
                depois.chars().take(12).collect::<String>()
            ));
            continue;
        }
        let seletor = depois
            .strip_prefix('{')
            .filter(|_| !em_regex)
            .and_then(|r| r.find('}').map(|f| &r[..f]));
        for nome in nomes {
            if nome.ends_with('_') || nome.len() == PREFIXO.len() {
                erros.push(format!("`{nome}` is not a metric name"));
                continue;
            }
            achadas.push(Referencia {
                nome,
                seletor,
                antes,
                em_regex,
            });
        }
    }
    achadas
}

/// The label names of a selector's matchers.
fn rotulos_do_seletor(seletor: &str) -> Vec<&str> {
    seletor
        .split(',')
        .map(str::trim)
        .filter(|m| !m.is_empty())
        .map(|m| m.split(['=', '!']).next().unwrap_or(m).trim())
        .collect()
}

impl Modelo {
    /// The described metric a series name belongs to: itself, or a histogram's `_sum`, `_count`
    /// or `_bucket`.
    fn base<'a>(&self, nome: &'a str) -> Option<&'a str> {
        if self.descritas.contains_key(nome) {
            return Some(nome);
        }
        ["_sum", "_count", "_bucket"].iter().find_map(|sufixo| {
            let base = nome.strip_suffix(sufixo)?;
            (self.descritas.get(base) == Some(&Especie::Histograma)).then_some(base)
        })
    }

    /// Checks every name of `texto`; returns the described metrics it names. `filtro_tipo`: a
    /// metric labelled `tipo` must be filtered by the dashboard's `$tipo` variable.
    fn conferir(
        &self,
        origem: &str,
        texto: &str,
        filtro_tipo: bool,
        erros: &mut Vec<String>,
    ) -> BTreeSet<String> {
        let mut citadas = BTreeSet::new();
        let mut problemas = Vec::new();
        for r in referencias(texto, &mut problemas) {
            let Some(base) = self.base(&r.nome) else {
                problemas.push(format!(
                    "`{}` is not a metric metricas::descrever() describes (nor a histogram's \
                     _sum/_count/_bucket); it describes {:?}",
                    r.nome,
                    self.descritas.keys().collect::<Vec<_>>()
                ));
                continue;
            };
            citadas.insert(base.to_owned());
            if !self.series.contains_key(&r.nome) {
                problemas.push(format!(
                    "`{}` is not a series the exporter renders (as summaries or with buckets)",
                    r.nome
                ));
            }
            let rendidos = self.series.get(&r.nome).cloned().unwrap_or_default();
            let especie = self.descritas[base];
            let seletor = r.seletor.unwrap_or("");
            let quantil = seletor
                .split(',')
                .map(str::trim)
                .find(|m| m.starts_with("quantile"));
            match quantil {
                Some(_) if especie != Especie::Histograma || r.nome != base => {
                    problemas.push(format!(
                        "`{}` has no quantile label (only a summary's own name has)",
                        r.nome
                    ))
                }
                Some(q) if !rendidos.contains(q) => problemas.push(format!(
                    "`{}{{{q}}}` is not rendered; its quantiles: {:?}",
                    r.nome,
                    rendidos
                        .iter()
                        .filter(|p| p.starts_with("quantile"))
                        .collect::<Vec<_>>()
                )),
                None if especie == Especie::Histograma && r.nome == base && !r.em_regex => {
                    problemas.push(format!(
                        "`{}` without a quantile=\"…\" matcher mixes every quantile of the \
                         summary: pick one, or use _sum/_count",
                        r.nome
                    ));
                }
                _ => {}
            }
            let funcao = r.antes.trim_end();
            if especie == Especie::Medidor
                && ["rate(", "irate(", "increase("]
                    .iter()
                    .any(|f| funcao.ends_with(f))
            {
                problemas.push(format!(
                    "`{}` is a gauge: rate()/increase() of it means nothing",
                    r.nome
                ));
            }
            let (_, rotulos) = self.leia_me.get(base).cloned().unwrap_or_default();
            for rotulo in rotulos_do_seletor(seletor) {
                if !["quantile", "le"].contains(&rotulo) && !rotulos.contains(rotulo) {
                    problemas.push(format!(
                        "`{}` has no label `{rotulo}` (docs/guide/src/observing.md, Metrics: {rotulos:?})",
                        r.nome
                    ));
                }
            }
            if filtro_tipo
                && !r.em_regex
                && rotulos.contains("tipo")
                && !seletor.contains("tipo=~\"$tipo\"")
            {
                problemas.push(format!(
                    "`{}` is not filtered by the dashboard's variable (tipo=~\"$tipo\")",
                    r.nome
                ));
            }
        }
        erros.extend(problemas.into_iter().map(|p| format!("{origem}: {p}")));
        citadas
    }
}

/// One rule of `alertas.yml`, as its lines give it.
#[derive(Debug, Default)]
struct Regra {
    nome: String,
    linha: usize,
    /// `expr`, `for`, `labels.severity`, `annotations.summary`...: the inline value, or a block
    /// scalar's lines joined.
    chaves: BTreeMap<String, String>,
}

const CHAVES_DA_REGRA: [&str; 5] = ["expr", "for", "labels", "annotations", "keep_firing_for"];
const BLOCOS: [&str; 6] = ["|", "|-", "|+", ">", ">-", ">+"];

/// The rules of a Prometheus rules file, read line by line: `groups:`, `- name:` and `rules:` of
/// each group, `- alert:` and the rule's keys, one level under `labels:` and `annotations:`, block
/// scalars (`|`, `>-`). Anything else is an error.
fn regras(texto: &str, erros: &mut Vec<String>) -> Vec<Regra> {
    let mut regras: Vec<Regra> = Vec::new();
    let mut viu_grupos = false;
    // The indentation of the current rule's keys, of the open labels/annotations section's keys
    // (with its name), and of the open block scalar's key (with the key it fills).
    let mut chaves_em: Option<usize> = None;
    let mut secao: Option<(String, Option<usize>)> = None;
    let mut bloco: Option<(String, usize)> = None;
    for (n, linha) in texto.lines().enumerate().map(|(n, l)| (n + 1, l)) {
        if linha.contains('\t') {
            erros.push(format!("alertas.yml:{n}: a tab (YAML indents with spaces)"));
        }
        let recuo = linha.len() - linha.trim_start().len();
        let conteudo = linha.trim();
        if let Some((chave, recuo_da_chave)) = &bloco {
            if conteudo.is_empty() || recuo > *recuo_da_chave {
                let regra = regras.last_mut().expect("a block belongs to a rule");
                let valor = regra.chaves.entry(chave.clone()).or_default();
                valor.push_str(conteudo);
                valor.push('\n');
                continue;
            }
            bloco = None;
        }
        if conteudo.is_empty() || conteudo.starts_with('#') {
            continue;
        }
        let erro =
            |e: &mut Vec<String>, o_que: &str| e.push(format!("alertas.yml:{n}: {o_que}: {linha}"));
        if !viu_grupos {
            if linha != "groups:" {
                erro(erros, "the file must start with `groups:`");
            }
            viu_grupos = true;
            continue;
        }
        if let Some(nome) = conteudo.strip_prefix("- name:") {
            if nome.trim().is_empty() {
                erro(erros, "a group without a name");
            }
            (chaves_em, secao) = (None, None);
            continue;
        }
        if conteudo == "rules:" {
            continue;
        }
        if let Some(nome) = conteudo.strip_prefix("- alert:") {
            regras.push(Regra {
                nome: nome.trim().to_owned(),
                linha: n,
                ..Regra::default()
            });
            (chaves_em, secao) = (Some(recuo + 2), None);
            continue;
        }
        let (Some(recuo_da_regra), Some(regra)) = (chaves_em, regras.last_mut()) else {
            erro(erros, "a line outside any `- alert:` rule");
            continue;
        };
        let Some((chave, valor)) = conteudo.split_once(':') else {
            erro(erros, "not a `key: value` line");
            continue;
        };
        let (chave, valor) = (chave.trim(), valor.trim());
        let caminho = if recuo == recuo_da_regra {
            if !CHAVES_DA_REGRA.contains(&chave) {
                erro(erros, "not a key of an alerting rule");
            }
            secao = ["labels", "annotations"]
                .contains(&chave)
                .then(|| (chave.to_owned(), None));
            chave.to_owned()
        } else if let Some((nome_da_secao, recuo_da_secao)) = secao.as_mut()
            && recuo > recuo_da_regra
            && *recuo_da_secao.get_or_insert(recuo) == recuo
        {
            format!("{nome_da_secao}.{chave}")
        } else {
            erro(erros, "indented unlike the rule's keys");
            continue;
        };
        if BLOCOS.contains(&valor) {
            bloco = Some((caminho, recuo));
        } else if !valor.is_empty() {
            regra.chaves.insert(caminho, valor.to_owned());
        }
    }
    regras
}

/// A Prometheus duration of one unit (`30s`, `10m`, `1h`).
fn duracao(texto: &str) -> bool {
    let unidade = texto.trim_start_matches(|c: char| c.is_ascii_digit());
    unidade.len() < texto.len() && ["ms", "s", "m", "h", "d", "w", "y"].contains(&unidade)
}

fn falhar_se(erros: &[String]) {
    assert!(erros.is_empty(), "\n{}", erros.join("\n"));
}

#[test]
fn as_regras_de_alerta_citam_series_renderizadas_e_tem_for_severidade_e_anotacoes() {
    let modelo = modelo();
    let texto = ler("docs/observabilidade/alertas.yml");
    let mut erros = Vec::new();

    let regras = regras(&texto, &mut erros);
    assert!(
        regras.len() >= 6,
        "alertas.yml: only {} rules",
        regras.len()
    );
    let (mut nomes, mut citadas) = (BTreeSet::new(), BTreeSet::new());
    for regra in &regras {
        let onde = format!("alertas.yml:{} {}", regra.linha, regra.nome);
        let chave = |k: &str| regra.chaves.get(k).map(|v| v.trim()).unwrap_or("");
        if !regra.nome.starts_with("Mensageria") || !nomes.insert(regra.nome.clone()) {
            erros.push(format!(
                "{onde}: names start with Mensageria and are unique"
            ));
        }
        if !chave("expr").contains(PREFIXO) {
            erros.push(format!("{onde}: no expr over a mensageria metric"));
        }
        if !duracao(chave("for")) {
            erros.push(format!(
                "{onde}: `for:` must be a duration, is {:?}",
                chave("for")
            ));
        }
        if !["warning", "critical"].contains(&chave("labels.severity")) {
            erros.push(format!(
                "{onde}: labels.severity must be warning or critical"
            ));
        }
        for anotacao in ["annotations.summary", "annotations.description"] {
            if chave(anotacao).len() < 20 {
                erros.push(format!(
                    "{onde}: {anotacao} must tell the operator something"
                ));
            }
        }
        let da_regra = modelo.conferir(&onde, chave("expr"), false, &mut erros);
        if da_regra.is_empty() {
            erros.push(format!("{onde}: its expr names no described metric"));
        }
        citadas.extend(da_regra);
    }
    // The comments too: the alternatives for bucketed histograms (histogram_quantile over _bucket).
    for (n, linha) in texto.lines().enumerate() {
        if let Some(comentario) = linha.trim_start().strip_prefix('#') {
            let onde = format!("alertas.yml:{}, a comment", n + 1);
            modelo.conferir(&onde, comentario, false, &mut erros);
        }
    }
    for numero in [
        "mensageria_effect_lag_seconds",
        "mensageria_backlog_oldest_age_seconds",
    ] {
        if !citadas.contains(numero) {
            erros.push(format!(
                "alertas.yml: no rule on {numero}, one of the two numbers"
            ));
        }
    }
    let leia_me = ler("docs/observabilidade/README.md");
    for nome in &nomes {
        if !leia_me.contains(&format!("`{nome}`")) {
            erros.push(format!(
                "docs/observabilidade/README.md does not list `{nome}`"
            ));
        }
    }
    falhar_se(&erros);
}

#[test]
fn o_painel_e_json_do_grafana_e_cobre_cada_metrica_com_series_renderizadas() {
    let modelo = modelo();
    let painel: Value = serde_json::from_str(&ler("docs/observabilidade/painel.json"))
        .expect("painel.json is JSON");
    let mut erros = Vec::new();
    assert!(
        painel["schemaVersion"].as_u64().is_some_and(|v| v >= 36),
        "painel.json: schemaVersion {}",
        painel["schemaVersion"]
    );
    assert!(painel["title"].as_str().is_some_and(|t| !t.is_empty()));
    assert!(painel["uid"].as_str().is_some_and(|t| !t.is_empty()));

    let variaveis = painel["templating"]["list"]
        .as_array()
        .expect("painel.json: templating.list");
    let variavel = |nome: &str| {
        variaveis
            .iter()
            .find(|v| v["name"] == nome)
            .unwrap_or_else(|| panic!("painel.json: no `{nome}` variable"))
    };
    let fonte = variavel("datasource");
    assert_eq!(
        (&fonte["type"], &fonte["query"]),
        (&Value::from("datasource"), &Value::from("prometheus"))
    );
    let tipo = variavel("tipo");
    let consulta = tipo["query"].as_str().expect("tipo's query is a string");
    assert!(
        tipo["type"] == "query"
            && consulta.starts_with("label_values(")
            && consulta.ends_with(", tipo)"),
        "painel.json: the tipo variable: {tipo}"
    );
    modelo.conferir("painel.json, variable tipo", consulta, false, &mut erros);

    let paineis = painel["panels"].as_array().expect("painel.json: panels");
    assert!(paineis.len() >= 6, "painel.json: {} panels", paineis.len());
    let mut ids = BTreeSet::new();
    let mut citadas = BTreeSet::new();
    for p in paineis {
        let titulo = p["title"].as_str().unwrap_or("");
        let onde = format!("painel.json, panel {titulo:?}");
        if titulo.is_empty() || !ids.insert(p["id"].as_u64()) || p["id"].is_null() {
            erros.push(format!("{onde}: a title and a unique id"));
        }
        let grade = &p["gridPos"];
        if !(grade["w"].as_u64() > Some(0) && grade["h"].as_u64() > Some(0)) {
            erros.push(format!("{onde}: gridPos {grade}"));
        }
        let alvos = p["targets"].as_array().map(Vec::as_slice).unwrap_or(&[]);
        if alvos.is_empty() {
            erros.push(format!("{onde}: no targets"));
        }
        for alvo in std::iter::once(p).chain(alvos) {
            if alvo["datasource"]["uid"] != "${datasource}" {
                erros.push(format!(
                    "{onde}: datasource {} (not ${{datasource}})",
                    alvo["datasource"]
                ));
            }
        }
        for alvo in alvos {
            let expr = alvo["expr"].as_str().unwrap_or("");
            let achadas = modelo.conferir(&onde, expr, true, &mut erros);
            if achadas.is_empty() {
                erros.push(format!(
                    "{onde}: a target names no described metric: {expr:?}"
                ));
            }
            citadas.extend(achadas);
        }
    }
    for nome in modelo.descritas.keys() {
        if !citadas.contains(nome) {
            erros.push(format!("painel.json: no panel shows {nome}"));
        }
    }
    falhar_se(&erros);
}

/// `counter!("mensageria_…"`, `gauge!(…`, `histogram!(…` calls with a literal name in `fonte`.
fn chamadas(fonte: &str) -> Vec<(String, Especie)> {
    let mut achadas = Vec::new();
    for (macro_, especie) in [
        ("counter!(", Especie::Contador),
        ("gauge!(", Especie::Medidor),
        ("histogram!(", Especie::Histograma),
    ] {
        for (i, _) in fonte.match_indices(macro_) {
            let antes = fonte[..i].chars().next_back();
            if antes.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_') {
                continue; // describe_counter!( and the like
            }
            let argumentos = fonte[i + macro_.len()..].trim_start();
            if let Some(nome) = argumentos
                .strip_prefix('"')
                .and_then(|r| r.split('"').next())
                .filter(|n| n.starts_with(PREFIXO))
            {
                achadas.push((nome.to_owned(), especie));
            }
        }
    }
    achadas
}

fn arquivos_rs(pasta: &Path, em: &mut Vec<PathBuf>) {
    for entrada in std::fs::read_dir(pasta).unwrap_or_else(|e| panic!("{}: {e}", pasta.display())) {
        let caminho = entrada.unwrap().path();
        if caminho.is_dir() {
            arquivos_rs(&caminho, em);
        } else if caminho.extension().is_some_and(|e| e == "rs") {
            em.push(caminho);
        }
    }
}

/// What the code emits is what `descrever()` describes. Only calls spelling the name as a
/// literal are seen: a name in a constant would show here as described and never emitted.
#[test]
fn o_codigo_emite_exatamente_as_metricas_que_descrever_descreve() {
    let descritas = descritas();
    let mut emitidas: BTreeMap<String, (Especie, String)> = BTreeMap::new();
    let mut erros = Vec::new();
    let mut arquivos = Vec::new();
    for pasta in FONTES {
        arquivos_rs(&raiz().join(pasta), &mut arquivos);
    }
    for arquivo in &arquivos {
        let relativo = arquivo.strip_prefix(raiz()).unwrap().display().to_string();
        for (nome, especie) in chamadas(&std::fs::read_to_string(arquivo).unwrap()) {
            if let Some((antes, onde)) = emitidas.get(&nome)
                && *antes != especie
            {
                erros.push(format!(
                    "{nome}: a {antes:?} in {onde}, a {especie:?} in {relativo}"
                ));
            }
            emitidas.insert(nome, (especie, relativo.clone()));
        }
    }
    assert!(
        emitidas.contains_key("mensageria_delivered_total"),
        "the scan of {FONTES:?} found {emitidas:?}"
    );
    for (nome, (especie, onde)) in &emitidas {
        match descritas.get(nome) {
            None => erros.push(format!(
                "{onde} emits {nome}, which metricas::descrever() does not describe"
            )),
            Some(descrita) if descrita != especie => erros.push(format!(
                "{onde} emits {nome} as a {especie:?}; descrever() describes a {descrita:?}"
            )),
            Some(_) => {}
        }
    }
    for nome in descritas.keys() {
        if !emitidas.contains_key(nome) {
            erros.push(format!(
                "metricas::descrever() describes {nome}, which no counter!/gauge!/histogram! of \
                 {FONTES:?} emits"
            ));
        }
    }
    falhar_se(&erros);
}

#[test]
fn a_tabela_do_leia_me_lista_cada_metrica_descrita_com_seu_tipo() {
    let descritas = descritas();
    let (tabela, liga_observabilidade) = tabela_do_leia_me();
    let mut erros = Vec::new();
    for (nome, especie) in &descritas {
        match tabela.get(nome) {
            None => erros.push(format!("docs/guide/src/observing.md, Metrics: no row for {nome}")),
            Some((escrita, _)) if escrita != especie.no_leia_me() => erros.push(format!(
                "docs/guide/src/observing.md, Metrics: {nome} is a {escrita}; descrever() describes a {}",
                especie.no_leia_me()
            )),
            Some(_) => {}
        }
    }
    for nome in tabela.keys().filter(|n| !descritas.contains_key(*n)) {
        erros.push(format!(
            "docs/guide/src/observing.md, Metrics: {nome} is not described by descrever()"
        ));
    }
    if !liga_observabilidade {
        erros.push(
            "docs/guide/src/observing.md, Metrics: no link to docs/observabilidade/".to_owned(),
        );
    }
    falhar_se(&erros);
}
