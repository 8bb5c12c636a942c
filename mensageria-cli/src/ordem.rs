//! `ordem mostrar <key>`: one ordering key's queue, saída and dead letters, in the key's order.
//!
//! The first message is the key's head: every later one waits until it leaves the saída (and,
//! under the relay's default policy, until a dead head is replayed or discarded). Ordering keys
//! are shared by every tipo and app of the schema, so the head may be another app's message:
//! the report names its tipo, the apps that claim it and its state, which is what an operator
//! needs to act (`mortas reenfileirar`/`descartar`, start the owning app, or fix the keys).

use std::collections::BTreeMap;

use mensageria_core::operacoes::{self, PosicaoNaChave};
use serde::Serialize;

use crate::argumentos::AcaoOrdem;
use crate::conexao::{Conexao, nos_dois};
use crate::duracao::humana_ms;
use crate::erro::ErroCli;
use crate::saida_formatada::{Relatorio, Tabela, imprimir, resumo};
use crate::texto_seguro::escapar;

/// A claim refreshed within this long counts as a live claimant (relays refresh every 15 s;
/// `doctor --parado-apos` has the same default).
const CLAIM_FRESCO_MS: i64 = 60_000;

/// Runs one `ordem` action.
pub(crate) async fn executar(
    conexao: &Conexao,
    acao: AcaoOrdem,
    json: bool,
) -> Result<(), ErroCli> {
    let AcaoOrdem::Mostrar { chave, limite } = acao;
    let (fila, reivindicacoes) = nos_dois!(conexao, pool => {
        mensageria_core::verificar_schema(pool).await?;
        (
            operacoes::fila_da_chave(pool, &chave, limite).await?,
            operacoes::reivindicacoes(pool).await?,
        )
    });
    let mut donos: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for r in reivindicacoes
        .into_iter()
        .filter(|r| r.visto_ha_ms <= CLAIM_FRESCO_MS)
    {
        donos.entry(r.tipo).or_default().push(r.app);
    }
    let cabeca = fila.posicoes.first().map(|p| p.id_mensagem.to_string());
    let mensagens = fila
        .posicoes
        .iter()
        .enumerate()
        .map(|(i, p)| Posicao::de(i, p, cabeca.as_deref(), &donos))
        .collect();
    imprimir(
        &Fila {
            chave,
            total: fila.total,
            cabeca,
            mensagens,
        },
        json,
    );
    Ok(())
}

/// The report.
#[derive(Debug, Serialize)]
struct Fila {
    #[serde(rename = "key")]
    chave: String,
    /// Messages of the key, saída and dead letters (all of them, not only those listed).
    total: i64,
    /// The head's message id (`null`: the key has no message).
    #[serde(rename = "head")]
    cabeca: Option<String>,
    #[serde(rename = "messages")]
    mensagens: Vec<Posicao>,
}

/// One message of the key.
#[derive(Debug, Serialize)]
struct Posicao {
    /// 1 for the head.
    #[serde(rename = "position")]
    posicao: usize,
    /// Its place in the key's order (`seq_ordem`).
    #[serde(rename = "sequence")]
    sequencia: i64,
    #[serde(rename = "message_id")]
    id_mensagem: String,
    tipo: String,
    /// `saida` or `dead_letters`.
    #[serde(rename = "where")]
    onde: &'static str,
    /// `in-flight`, `due`, `retrying` (the head), `waiting` (behind the head) or `dead`.
    #[serde(rename = "state")]
    estado: &'static str,
    #[serde(rename = "attempts")]
    tentativas: i64,
    /// The head it waits for (`null` for the head itself).
    #[serde(rename = "held_by")]
    retida_por: Option<String>,
    /// The apps whose relay claims its tipo (claims refreshed within the last minute).
    #[serde(rename = "claimed_by")]
    donos: Vec<String>,
    /// The relay instance that leased it last.
    #[serde(rename = "leased_by")]
    lease_dono: Option<String>,
    /// Ms until its next attempt (negative: due; `null` for a dead letter).
    #[serde(rename = "next_attempt_in_ms")]
    proxima_em_ms: Option<i64>,
    #[serde(rename = "age_ms")]
    idade_ms: i64,
    #[serde(rename = "last_error")]
    ultimo_erro: Option<String>,
    /// The app whose relay dead-lettered it (dead letters only).
    app: Option<String>,
}

impl Posicao {
    fn de(
        indice: usize,
        p: &PosicaoNaChave,
        cabeca: Option<&str>,
        donos: &BTreeMap<String, Vec<String>>,
    ) -> Self {
        let estado = match (indice, p.morta, p.em_voo) {
            (_, true, _) => "dead",
            (_, false, true) => "in-flight",
            (0, ..) if p.proxima_em_ms.is_some_and(|ms| ms > 0) => "retrying",
            (0, ..) => "due",
            _ => "waiting",
        };
        Self {
            posicao: indice + 1,
            sequencia: p.seq_ordem,
            id_mensagem: p.id_mensagem.to_string(),
            tipo: p.tipo.clone(),
            onde: if p.morta { "dead_letters" } else { "saida" },
            estado,
            tentativas: p.tentativas,
            retida_por: cabeca.filter(|_| indice > 0).map(str::to_owned),
            donos: donos.get(&p.tipo).cloned().unwrap_or_default(),
            lease_dono: p.lease_dono.clone(),
            proxima_em_ms: p.proxima_em_ms,
            idade_ms: p.idade_ms,
            ultimo_erro: p.ultimo_erro.clone(),
            app: p.app.clone(),
        }
    }
}

impl Relatorio for Fila {
    fn humano(&self) -> String {
        let chave = escapar(&self.chave);
        let Some(cabeca) = self.mensagens.first() else {
            return format!(
                "no message with ordering key `{chave}` in the saída or the dead letters"
            );
        };
        let quem = if cabeca.donos.is_empty() {
            "claimed by no live app".to_owned()
        } else {
            format!("claimed by {}", cabeca.donos.join(", "))
        };
        let mut texto = format!(
            "ordering key `{chave}`: {} message(s); head: {} {} of tipo `{}` ({}, {} \
             attempt(s)), {}\n",
            self.total,
            if cabeca.onde == "saida" {
                "message"
            } else {
                "dead letter"
            },
            cabeca.id_mensagem,
            escapar(&cabeca.tipo),
            cabeca.estado,
            cabeca.tentativas,
            escapar(&quem),
        );
        let mut tabela = Tabela::new([
            "#",
            "seq",
            "message id",
            "tipo",
            "state",
            "attempts",
            "claimed by",
            "next attempt",
            "last error",
        ]);
        for m in &self.mensagens {
            let proxima = match m.proxima_em_ms {
                Some(ms) if ms > 0 => format!("in {}", humana_ms(ms)),
                Some(_) => "due".to_owned(),
                None => "-".to_owned(),
            };
            tabela.linha([
                m.posicao.to_string(),
                m.sequencia.to_string(),
                m.id_mensagem.clone(),
                m.tipo.clone(),
                m.estado.to_owned(),
                m.tentativas.to_string(),
                if m.donos.is_empty() {
                    "-".to_owned()
                } else {
                    m.donos.join(", ")
                },
                proxima,
                resumo(m.ultimo_erro.as_deref().unwrap_or("-"), 60),
            ]);
        }
        texto.push_str(&tabela.texto());
        if (self.mensagens.len() as i64) < self.total {
            texto.push_str(&format!(
                "({} of {} shown; use --limite to see more)\n",
                self.mensagens.len(),
                self.total
            ));
        }
        texto
    }
}
