//! `mortas-recebidas`: the receiving side's dead letters — events a broker consumer
//! (mensageria-nats) delivered and a receptor of this schema refused for good, kept in
//! `mensageria_mortas_recebidas` until a human deals with them.
//!
//! Listing, showing and discarding are operations of `mensageria_core::operacoes`. `reenviar`
//! publishes one again to the NATS subject it came from, with a new message id (the stream's
//! duplicate window would drop the old one), then forgets it: every receiving app of the subject
//! gets it again and the natural-key dedup absorbs it where it was applied. One message id may
//! name several rows, one per receiving app that refused it (fan-out), so `mostrar`, `reenviar`
//! and `descartar` take `--app` to pick one.

use mensageria_core::operacoes::{self, MortaRecebida};
use serde::Serialize;
use uuid::Uuid;

use crate::argumentos::AcaoMortasRecebidas;
use crate::conexao::{Conexao, nos_dois};
use crate::confirmacao::confirmar;
use crate::erro::ErroCli;
use crate::saida_formatada::{
    Relatorio, Tabela, imprimir, imprimir_cru, listagem, resumo, rfc3339,
};
use crate::texto_seguro::{escapar, escapar_exceto_quebras};

/// Runs one `mortas-recebidas` action.
pub(crate) async fn executar(
    conexao: &Conexao,
    acao: AcaoMortasRecebidas,
    json: bool,
) -> Result<(), ErroCli> {
    nos_dois!(conexao, pool => mensageria_core::verificar_schema(pool).await?);
    match acao {
        AcaoMortasRecebidas::Listar { app, limite } => {
            listar(conexao, app.as_deref(), limite, json).await
        }
        AcaoMortasRecebidas::Mostrar { id, app, raw } => {
            let morta = buscar(conexao, id, app.as_deref()).await?;
            if raw {
                imprimir_cru(&morta.payload)?;
            } else {
                imprimir(&Recebida::from(morta), json);
            }
            Ok(())
        }
        AcaoMortasRecebidas::Reenviar { id, app, nats } => {
            reenviar(conexao, id, app.as_deref(), &nats, json).await
        }
        AcaoMortasRecebidas::Descartar { id, app, yes } => {
            descartar(conexao, id, app.as_deref(), yes, json).await
        }
    }
}

/// One receiver-side dead letter, in full.
#[derive(Debug, Serialize)]
struct Recebida {
    #[serde(rename = "message_id")]
    id_mensagem: String,
    /// The receiving app whose receptor refused it.
    app: String,
    tipo: String,
    /// Where it came from (`nats:<stream>:<subject>`).
    #[serde(rename = "origin")]
    origem: String,
    /// How many times the broker had delivered it.
    #[serde(rename = "deliveries")]
    entregas: i64,
    /// Why the receptor refused it.
    #[serde(rename = "reason")]
    motivo: String,
    #[serde(rename = "correlation_id")]
    correlacao: Option<String>,
    #[serde(rename = "dead_at")]
    morta_em: String,
    /// The payload as received, as a JSON string (it may not be JSON at all).
    payload: String,
}

impl From<MortaRecebida> for Recebida {
    fn from(m: MortaRecebida) -> Self {
        Self {
            id_mensagem: m.id_mensagem.to_string(),
            app: m.app,
            tipo: m.tipo,
            origem: m.origem,
            entregas: m.entregas,
            motivo: m.motivo,
            correlacao: m.correlacao,
            morta_em: rfc3339(m.morta_em_ms),
            payload: m.payload,
        }
    }
}

impl Relatorio for Recebida {
    /// Every field on one line, escaped; the payload on as many lines as it has, escaped but
    /// for its line feeds (`--raw` prints it unescaped).
    fn humano(&self) -> String {
        format!(
            "message id   {}\napp          {}\ntipo         {}\norigin       {}\ndeliveries   {}\n\
             reason       {}\ncorrelation  {}\ndead since   {}\npayload\n{}\n",
            escapar(&self.id_mensagem),
            escapar(&self.app),
            escapar(&self.tipo),
            escapar(&self.origem),
            self.entregas,
            escapar(&self.motivo),
            escapar(self.correlacao.as_deref().unwrap_or("-")),
            self.morta_em,
            escapar_exceto_quebras(&self.payload),
        )
    }
}

/// The receiver-side dead letter `id` (of `app`, when given).
async fn buscar(conexao: &Conexao, id: Uuid, app: Option<&str>) -> Result<MortaRecebida, ErroCli> {
    Ok(nos_dois!(conexao, pool => operacoes::buscar_morta_recebida(pool, id, app).await?))
}

/// `mortas-recebidas listar`.
#[derive(Debug, Serialize)]
struct Lista {
    /// Receiver-side dead letters matching the filter (all of them, not just those listed).
    total: i64,
    #[serde(rename = "received_dead_letters")]
    mortas: Vec<ItemDaLista>,
}

/// One line of `mortas-recebidas listar`: [`Recebida`] without its payload and correlation id.
#[derive(Debug, Serialize)]
struct ItemDaLista {
    #[serde(rename = "message_id")]
    id_mensagem: String,
    app: String,
    tipo: String,
    #[serde(rename = "origin")]
    origem: String,
    #[serde(rename = "deliveries")]
    entregas: i64,
    #[serde(rename = "dead_at")]
    morta_em: String,
    #[serde(rename = "reason")]
    motivo: String,
}

impl Relatorio for Lista {
    fn humano(&self) -> String {
        let mut tabela = Tabela::new([
            "message id",
            "app",
            "tipo",
            "deliveries",
            "dead at",
            "reason",
        ]);
        for m in &self.mortas {
            tabela.linha([
                m.id_mensagem.clone(),
                m.app.clone(),
                m.tipo.clone(),
                m.entregas.to_string(),
                m.morta_em.clone(),
                m.motivo.clone(),
            ]);
        }
        listagem(
            &tabela,
            self.mortas.len(),
            self.total,
            "no receiver-side dead letters",
        )
    }
}

async fn listar(
    conexao: &Conexao,
    app: Option<&str>,
    limite: i64,
    json: bool,
) -> Result<(), ErroCli> {
    let (mortas, contagem) = nos_dois!(conexao, pool => (
        operacoes::mortas_recebidas(pool, app, limite).await?,
        operacoes::mortas_recebidas_por_tipo(pool).await?,
    ));
    let total = contagem
        .iter()
        .filter(|c| app.is_none_or(|a| a == c.app))
        .map(|c| c.mortas)
        .sum::<i64>()
        // A row kept between the two reads: the total never says less than what is listed.
        .max(mortas.len() as i64);
    let mortas = mortas
        .into_iter()
        .map(|m| ItemDaLista {
            id_mensagem: m.id_mensagem.to_string(),
            app: m.app,
            tipo: m.tipo,
            origem: m.origem,
            entregas: m.entregas,
            morta_em: rfc3339(m.morta_em_ms),
            motivo: m.motivo,
        })
        .collect();
    imprimir(&Lista { total, mortas }, json);
    Ok(())
}

/// What `mortas-recebidas reenviar` did.
#[derive(Debug, Serialize)]
struct Reenviada {
    /// The dead letter's message id.
    #[serde(rename = "replayed")]
    reenviada: String,
    /// The id the message was published with now.
    #[serde(rename = "new_message_id")]
    nova: String,
    app: String,
    tipo: String,
    subject: String,
    /// Its sequence in the stream.
    #[serde(rename = "stream_sequence")]
    sequencia: u64,
    /// Its ordering key, for a message of an ordered lane: then every dead letter of the key
    /// was published again, in the key's order (`key_replayed`), and each is forgotten by the
    /// receiving app when it applies it.
    #[serde(rename = "ordering_key", skip_serializing_if = "Option::is_none")]
    chave_ordem: Option<String>,
    #[serde(rename = "key_replayed", skip_serializing_if = "Vec::is_empty")]
    da_chave: Vec<Republicada>,
}

/// One dead letter of an ordered key published again.
#[derive(Debug, Serialize)]
struct Republicada {
    #[serde(rename = "replayed")]
    reenviada: String,
    #[serde(rename = "new_message_id")]
    nova: String,
    tipo: String,
    #[serde(rename = "stream_sequence")]
    sequencia: u64,
}

impl Relatorio for Reenviada {
    fn humano(&self) -> String {
        if let Some(chave) = &self.chave_ordem {
            return format!(
                "published the {} receiver-side dead letter(s) of ordering key `{}` of app `{}` \
                 again, in the key's order ({}): the app applies them in turn and forgets each \
                 when applied; one refused again holds the key again, as before",
                self.da_chave.len(),
                escapar(chave),
                escapar(&self.app),
                self.da_chave
                    .iter()
                    .map(|r| format!(
                        "{} as {} (sequence {})",
                        escapar(&r.reenviada),
                        r.nova,
                        r.sequencia
                    ))
                    .collect::<Vec<_>>()
                    .join(", ")
            );
        }
        format!(
            "published receiver-side dead letter {} of app `{}` again to `{}` as message {} \
             (stream sequence {}), and forgot it here: each receiving app of the subject gets \
             it; if it is refused again it comes back to `mortas-recebidas listar`",
            escapar(&self.reenviada),
            escapar(&self.app),
            escapar(&self.subject),
            self.nova,
            self.sequencia
        )
    }
}

/// The subject a dead letter came from, if it can be published there again.
fn assunto_de(morta: &MortaRecebida) -> Result<String, ErroCli> {
    morta
        .origem
        .strip_prefix("nats:")
        .and_then(|resto| resto.split_once(':'))
        .map(|(_, assunto)| assunto.to_owned())
        .filter(|_| !morta.motivo.starts_with("possibly_expired"))
        .ok_or_else(|| ErroCli::Reenvio {
            motivo: if morta.motivo.starts_with("possibly_expired") {
                "it records messages the stream deleted before they were delivered: they are \
                 gone from the stream; replay those events from their source, then `descartar` it"
                    .to_owned()
            } else {
                format!(
                    "it did not come through NATS (origin `{}`)",
                    escapar(&morta.origem)
                )
            },
        })
}

async fn reenviar(
    conexao: &Conexao,
    id: Uuid,
    app: Option<&str>,
    nats: &str,
    json: bool,
) -> Result<(), ErroCli> {
    let morta = buscar(conexao, id, app).await?;
    let assunto = assunto_de(&morta)?;
    // Credentials in the URLs reach the client, never a message.
    let js = mensageria_nats::conectar(nats, "mensageria-cli")
        .await
        .map_err(|erro| ErroCli::Reenvio {
            motivo: erro.to_string(),
        })?;
    if let Some(chave) = morta.chave_ordem.clone() {
        // The key's dead letters go together, in the key's order, the first one first; the
        // receiving app forgets each as it applies it (a later one stays held until then).
        let da_chave = nos_dois!(conexao, pool => operacoes::mortas_recebidas_da_chave(pool, &morta.app, &chave).await?);
        let mut republicadas = Vec::with_capacity(da_chave.len());
        for outra in &da_chave {
            let nova = Uuid::now_v7();
            let sequencia = publicar_de_novo(&js, &assunto_de(outra)?, outra, nova).await?;
            republicadas.push(Republicada {
                reenviada: outra.id_mensagem.to_string(),
                nova: nova.to_string(),
                tipo: outra.tipo.clone(),
                sequencia,
            });
        }
        let primeira = republicadas
            .first()
            .map_or((String::new(), 0), |r| (r.nova.clone(), r.sequencia));
        imprimir(
            &Reenviada {
                reenviada: id.to_string(),
                nova: primeira.0,
                app: morta.app,
                tipo: morta.tipo,
                subject: assunto,
                sequencia: primeira.1,
                chave_ordem: Some(chave),
                da_chave: republicadas,
            },
            json,
        );
        return Ok(());
    }
    let nova = Uuid::now_v7();
    let sequencia = publicar_de_novo(&js, &assunto, &morta, nova).await?;
    // Published: it is in the stream again. Forgotten here only now, so a failure above keeps it.
    nos_dois!(conexao, pool => operacoes::descartar_morta_recebida(pool, &morta.app, id).await?);
    imprimir(
        &Reenviada {
            reenviada: id.to_string(),
            nova: nova.to_string(),
            app: morta.app,
            tipo: morta.tipo,
            subject: assunto,
            sequencia,
            chave_ordem: None,
            da_chave: Vec::new(),
        },
        json,
    );
    Ok(())
}

/// Publishes `morta`'s payload to `assunto` as message `nova`; its stream sequence. A dead
/// letter of an ordered lane keeps its key (`ce-partitionkey`) and its place in it
/// (`Mensageria-Sequencia-Original`).
async fn publicar_de_novo(
    js: &mensageria_nats::async_nats::jetstream::Context,
    assunto: &str,
    morta: &MortaRecebida,
    nova: Uuid,
) -> Result<u64, ErroCli> {
    let falha = |motivo: String| ErroCli::Reenvio { motivo };
    let mut cabecalhos = mensageria_nats::async_nats::HeaderMap::new();
    cabecalhos.insert("Nats-Msg-Id", nova.to_string().as_str());
    cabecalhos.insert("ce-id", nova.to_string().as_str());
    cabecalhos.insert("ce-type", morta.tipo.as_str());
    cabecalhos.insert(
        mensageria_nats::cabecalhos::REENVIO_DE,
        morta.id_mensagem.to_string().as_str(),
    );
    if let (Some(chave), Some(sequencia)) = (&morta.chave_ordem, morta.sequencia) {
        cabecalhos.insert(mensageria_nats::cabecalhos::CHAVE_DE_ORDEM, chave.as_str());
        cabecalhos.insert(
            mensageria_nats::cabecalhos::SEQUENCIA_ORIGINAL,
            sequencia.to_string().as_str(),
        );
    }
    for (nome, valor) in [
        ("x-correlation-id", &morta.correlacao),
        ("traceparent", &morta.traceparent),
        ("tracestate", &morta.tracestate),
    ] {
        if let Some(valor) = valor {
            cabecalhos.insert(nome, valor.as_str());
        }
    }
    let ack = js
        .publish_with_headers(assunto.to_owned(), cabecalhos, morta.payload.clone().into())
        .await
        .map_err(|erro| falha(format!("publishing to `{assunto}` failed: {erro}")))?
        .await
        .map_err(|erro| {
            falha(format!(
                "no stream took it on `{assunto}` ({erro}); is the stream there?"
            ))
        })?;
    if ack.duplicate {
        return Err(falha(format!(
            "the stream `{}` answered duplicate for the new id {nova}; nothing was published",
            ack.stream
        )));
    }
    Ok(ack.sequence)
}

/// What `mortas-recebidas descartar` changed.
#[derive(Debug, Serialize)]
struct Descartada {
    #[serde(rename = "discarded")]
    descartada: String,
    app: String,
    tipo: String,
}

impl Relatorio for Descartada {
    fn humano(&self) -> String {
        format!(
            "discarded receiver-side dead letter {} of app `{}`, tipo `{}`: it is gone for good",
            escapar(&self.descartada),
            escapar(&self.app),
            escapar(&self.tipo)
        )
    }
}

async fn descartar(
    conexao: &Conexao,
    id: Uuid,
    app: Option<&str>,
    yes: bool,
    json: bool,
) -> Result<(), ErroCli> {
    // Resolves the app (or refuses an id two apps keep) before asking anything.
    let morta = buscar(conexao, id, app).await?;
    if !yes && !confirmar_descarte(&morta)? {
        return Err(ErroCli::NaoConfirmado { opcao: "--yes" });
    }
    // Discarded by someone else meanwhile: `MortaRecebidaNaoEncontrada`.
    nos_dois!(conexao, pool => operacoes::descartar_morta_recebida(pool, &morta.app, id).await?);
    imprimir(
        &Descartada {
            descartada: morta.id_mensagem.to_string(),
            app: morta.app,
            tipo: morta.tipo,
        },
        json,
    );
    Ok(())
}

/// Asks on stderr, reads the answer from stdin (see [`confirmar`]).
fn confirmar_descarte(morta: &MortaRecebida) -> Result<bool, ErroCli> {
    confirmar(&format!(
        "discard receiver-side dead letter {} of app `{}`, tipo `{}` (reason: {})? It is deleted \
         for good. [y/N] ",
        morta.id_mensagem,
        escapar(&morta.app),
        escapar(&morta.tipo),
        resumo(&morta.motivo, 80)
    ))
}
