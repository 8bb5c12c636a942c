//! `mortas`: the dead letters — messages the relay gave up on, kept until a human replays or
//! discards them.
//!
//! Every action is an operation of `mensageria_core::operacoes`. Replaying
//! (`reenfileirar_morta`, `reenfileirar_mortas`) returns the row to the saída with its message
//! id, payload and correlation id, attempts reset to 0 and its age counted from the replay; the
//! owning app's relay then delivers it like any other row.

use mensageria_core::operacoes;
use serde::Serialize;
use uuid::Uuid;

use crate::argumentos::{AcaoMortas, AlvoReenfileirar};
use crate::conexao::{Conexao, nos_dois};
use crate::confirmacao::confirmar;
use crate::duracao::humana_ms;
use crate::erro::ErroCli;
use crate::saida_formatada::{
    Relatorio, Tabela, imprimir, imprimir_cru, listagem, resumo, rfc3339,
};
use crate::texto_seguro::{escapar, escapar_exceto_quebras};

/// Runs one `mortas` action.
pub(crate) async fn executar(
    conexao: &Conexao,
    acao: AcaoMortas,
    json: bool,
) -> Result<(), ErroCli> {
    nos_dois!(conexao, pool => mensageria_core::verificar_schema(pool).await?);
    match acao {
        AcaoMortas::Listar { tipo, limite } => listar(conexao, tipo.as_deref(), limite, json).await,
        AcaoMortas::Mostrar { id, raw } => {
            let morta = buscar(conexao, id).await?;
            if raw {
                imprimir_cru(morta.payload.get())?;
            } else {
                imprimir(&morta, json);
            }
            Ok(())
        }
        AcaoMortas::Reenfileirar(alvo) => reenfileirar(conexao, alvo, json).await,
        AcaoMortas::Descartar { id, yes } => descartar(conexao, id, yes, json).await,
    }
}

/// One dead letter, in full.
#[derive(Debug, Serialize)]
struct Morta {
    #[serde(rename = "message_id")]
    id_mensagem: String,
    tipo: String,
    #[serde(rename = "attempts")]
    tentativas: i64,
    #[serde(rename = "last_error")]
    ultimo_erro: String,
    /// The app whose relay dead-lettered it.
    app: Option<String>,
    #[serde(rename = "correlation_id")]
    correlacao: Option<String>,
    #[serde(rename = "created_at")]
    criada_em: String,
    #[serde(rename = "dead_at")]
    morta_em: String,
    #[serde(rename = "dead_ago_ms")]
    morta_ha_ms: i64,
    /// The W3C `traceparent` it was enqueued under: its trace in the tracing backend.
    traceparent: Option<String>,
    /// The payload byte for byte as enqueued (no key reordering, no number rounding).
    payload: Box<serde_json::value::RawValue>,
}

impl Relatorio for Morta {
    /// Every field on one line, escaped; the payload on as many lines as it has, escaped but
    /// for its line feeds (`--raw` prints it unescaped).
    fn humano(&self) -> String {
        let payload = escapar_exceto_quebras(self.payload.get());
        format!(
            "message id   {}\ntipo         {}\nattempts     {}\nlast error   {}\napp          {}\n\
             correlation  {}\ntrace        {}\ncreated      {}\ndead since   {} ({} ago)\n\
             payload\n{payload}\n",
            escapar(&self.id_mensagem),
            escapar(&self.tipo),
            self.tentativas,
            escapar(&self.ultimo_erro),
            escapar(self.app.as_deref().unwrap_or("-")),
            escapar(self.correlacao.as_deref().unwrap_or("-")),
            // The trace id: what the tracing backend is searched by.
            self.traceparent
                .as_deref()
                .and_then(|t| t.get(3..35))
                .map_or(std::borrow::Cow::Borrowed("-"), escapar),
            self.criada_em,
            self.morta_em,
            humana_ms(self.morta_ha_ms),
        )
    }
}

/// `erro`, or, when it says no relay's dead letter has `id` and a receiving app keeps one,
/// [`ErroCli::MortaDoLadoQueRecebe`]: where that id lives.
async fn onde_esta(conexao: &Conexao, id: Uuid, erro: ErroCli) -> ErroCli {
    if !matches!(erro, ErroCli::MortaNaoEncontrada { .. }) {
        return erro;
    }
    let recebida =
        nos_dois!(conexao, pool => operacoes::buscar_morta_recebida(pool, id, None).await);
    let apps = match recebida {
        Ok(morta) => vec![morta.app],
        Err(operacoes::ErroOperacao::MortaRecebidaAmbigua { apps, .. }) => apps,
        Err(_) => Vec::new(),
    };
    if apps.is_empty() {
        erro
    } else {
        ErroCli::MortaDoLadoQueRecebe { id, apps }
    }
}

/// The dead letter `id`, or [`ErroCli::MortaNaoEncontrada`] (or where it lives instead).
async fn buscar(conexao: &Conexao, id: Uuid) -> Result<Morta, ErroCli> {
    let morta = nos_dois!(conexao, pool => operacoes::buscar_morta(pool, id).await);
    let morta = match morta {
        Ok(morta) => morta,
        Err(erro) => return Err(onde_esta(conexao, id, ErroCli::from(erro)).await),
    };
    let payload = morta.payload;
    Ok(Morta {
        id_mensagem: morta.id_mensagem.to_string(),
        tipo: morta.tipo,
        tentativas: morta.tentativas,
        ultimo_erro: morta.ultimo_erro,
        app: morta.app,
        correlacao: morta.correlacao,
        criada_em: rfc3339(morta.criada_em_ms),
        morta_em: rfc3339(morta.morta_em_ms),
        morta_ha_ms: morta.morta_ha_ms,
        traceparent: morta.traceparent,
        payload: serde_json::value::RawValue::from_string(payload.clone()).unwrap_or_else(|_| {
            // Not JSON (cannot happen for rows the saída wrote): show it as a JSON string.
            serde_json::value::to_raw_value(&payload).expect("a string serializes")
        }),
    })
}

/// `mortas listar`.
#[derive(Debug, Serialize)]
struct Lista {
    /// Dead letters matching the filter (all of them, not just those listed).
    total: i64,
    #[serde(rename = "dead_letters")]
    mortas: Vec<ItemDaLista>,
}

/// One line of `mortas listar`.
#[derive(Debug, Serialize)]
struct ItemDaLista {
    #[serde(rename = "message_id")]
    id_mensagem: String,
    tipo: String,
    #[serde(rename = "attempts")]
    tentativas: i64,
    app: Option<String>,
    #[serde(rename = "dead_at")]
    morta_em: String,
    #[serde(rename = "dead_ago_ms")]
    morta_ha_ms: i64,
    #[serde(rename = "last_error")]
    ultimo_erro: String,
}

impl Relatorio for Lista {
    fn humano(&self) -> String {
        let mut tabela = Tabela::new([
            "message id",
            "tipo",
            "attempts",
            "app",
            "dead for",
            "last error",
        ]);
        for m in &self.mortas {
            tabela.linha([
                m.id_mensagem.clone(),
                m.tipo.clone(),
                m.tentativas.to_string(),
                m.app.clone().unwrap_or_else(|| "-".into()),
                humana_ms(m.morta_ha_ms),
                resumo(&m.ultimo_erro, 60),
            ]);
        }
        listagem(&tabela, self.mortas.len(), self.total, "no dead letters")
    }
}

async fn listar(
    conexao: &Conexao,
    tipo: Option<&str>,
    limite: i64,
    json: bool,
) -> Result<(), ErroCli> {
    let pagina = nos_dois!(conexao, pool => operacoes::listar_mortas(pool, tipo, limite).await?);
    let mortas = pagina
        .mortas
        .into_iter()
        .map(|m| ItemDaLista {
            id_mensagem: m.id_mensagem.to_string(),
            tipo: m.tipo,
            tentativas: m.tentativas,
            app: m.app,
            morta_em: rfc3339(m.morta_em_ms),
            morta_ha_ms: m.morta_ha_ms,
            ultimo_erro: m.ultimo_erro,
        })
        .collect();
    let total = pagina.total;
    imprimir(&Lista { total, mortas }, json);
    Ok(())
}

/// What `mortas reenfileirar` changed.
#[derive(Debug, Serialize)]
struct Reenfileiradas {
    /// Dead letters moved back to the saída.
    #[serde(rename = "requeued")]
    reenfileiradas: u64,
    /// The one asked for, if one.
    #[serde(rename = "message_id")]
    id_mensagem: Option<Uuid>,
    /// The tipo asked for, if one.
    tipo: Option<String>,
}

impl Relatorio for Reenfileiradas {
    fn humano(&self) -> String {
        let quais = match (&self.id_mensagem, &self.tipo) {
            (Some(id), _) => format!("dead letter {id}"),
            (None, Some(tipo)) => {
                format!(
                    "{} dead letter(s) of tipo `{}`",
                    self.reenfileiradas,
                    escapar(tipo)
                )
            }
            (None, None) => format!("{} dead letter(s)", self.reenfileiradas),
        };
        if self.reenfileiradas == 0 {
            return format!(
                "nothing to re-enqueue: no {}",
                quais.trim_start_matches("0 ")
            );
        }
        format!(
            "re-enqueued {quais} into the saída, attempts reset to 0; the relay of the app that \
             sends the tipo delivers them at its next round"
        )
    }
}

async fn reenfileirar(
    conexao: &Conexao,
    alvo: AlvoReenfileirar,
    json: bool,
) -> Result<(), ErroCli> {
    let tipo = if alvo.todas { None } else { alvo.tipo };
    let movidas = match alvo.id {
        Some(id) => {
            let feito = nos_dois!(conexao, pool => operacoes::reenfileirar_morta(pool, id).await);
            if let Err(erro) = feito {
                return Err(onde_esta(conexao, id, ErroCli::from(erro)).await);
            }
            1
        }
        None => nos_dois!(conexao, pool => {
            operacoes::reenfileirar_mortas(pool, tipo.as_deref()).await?
        }),
    };
    imprimir(
        &Reenfileiradas {
            reenfileiradas: movidas,
            id_mensagem: alvo.id,
            tipo,
        },
        json,
    );
    Ok(())
}

/// What `mortas descartar` changed.
#[derive(Debug, Serialize)]
struct Descartada {
    #[serde(rename = "discarded")]
    descartada: String,
    tipo: String,
}

impl Relatorio for Descartada {
    fn humano(&self) -> String {
        format!(
            "discarded dead letter {} of tipo `{}`: it is gone for good",
            escapar(&self.descartada),
            escapar(&self.tipo)
        )
    }
}

async fn descartar(conexao: &Conexao, id: Uuid, yes: bool, json: bool) -> Result<(), ErroCli> {
    let morta = buscar(conexao, id).await?;
    if !yes && !confirmar_descarte(&morta)? {
        return Err(ErroCli::NaoConfirmado { opcao: "--yes" });
    }
    // Replayed or discarded by someone else meanwhile: `MortaNaoEncontrada`.
    nos_dois!(conexao, pool => operacoes::descartar_morta(pool, id).await?);
    imprimir(
        &Descartada {
            descartada: morta.id_mensagem,
            tipo: morta.tipo,
        },
        json,
    );
    Ok(())
}

/// Asks on stderr, reads the answer from stdin (see [`confirmar`]).
fn confirmar_descarte(morta: &Morta) -> Result<bool, ErroCli> {
    confirmar(&format!(
        "discard dead letter {} of tipo `{}` (last error: {})? It cannot be replayed afterwards. [y/N] ",
        escapar(&morta.id_mensagem),
        escapar(&morta.tipo),
        resumo(&morta.ultimo_erro, 80)
    ))
}
