//! `mortas`: the dead letters — messages the relay gave up on, kept until a human replays or
//! discards them.
//!
//! Replaying goes through mensageria-core's own `Banco::reenfileirar_mortas` (the row returns to
//! the saída with its message id, payload and correlation id, attempts reset to 0 and its age
//! counted from the replay); the owning app's relay then delivers it like any other row.

use std::io::Write;

use mensageria_core::Banco;
use serde::Serialize;
use sqlx::AssertSqlSafe;
use uuid::Uuid;

use crate::argumentos::{AcaoMortas, AlvoReenfileirar};
use crate::conexao::{Conexao, nos_dois};
use crate::confirmacao::confirmar;
use crate::duracao::humana_ms;
use crate::erro::ErroCli;
use crate::saida_formatada::{Relatorio, Tabela, imprimir, resumo};
use crate::tabelas::rfc3339;
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
                imprimir_payload_cru(&morta)?;
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
    id_mensagem: String,
    tipo: String,
    tentativas: i64,
    ultimo_erro: String,
    /// The app whose relay dead-lettered it.
    app: Option<String>,
    correlacao: Option<String>,
    criada_em: String,
    morta_em: String,
    morta_ha_ms: i64,
    /// The payload byte for byte as enqueued (no key reordering, no number rounding).
    payload: Box<serde_json::value::RawValue>,
}

impl Relatorio for Morta {
    /// Every field on one line, escaped; the payload on as many lines as it has, escaped but
    /// for its line feeds (`--raw` prints it unescaped).
    fn humano(&self) -> String {
        let payload = escapar_exceto_quebras(self.payload.get());
        format!(
            "id_mensagem  {}\ntipo         {}\nattempts     {}\nlast error   {}\napp          {}\n\
             correlation  {}\ncreated      {}\ndead since   {} ({} ago)\npayload\n{payload}\n",
            escapar(&self.id_mensagem),
            escapar(&self.tipo),
            self.tentativas,
            escapar(&self.ultimo_erro),
            escapar(self.app.as_deref().unwrap_or("-")),
            escapar(self.correlacao.as_deref().unwrap_or("-")),
            self.criada_em,
            self.morta_em,
            humana_ms(self.morta_ha_ms),
        )
    }
}

/// `mortas mostrar --raw`: the payload alone, byte for byte as enqueued, then a line feed;
/// nothing escaped (for `> arquivo` or `| jq`).
fn imprimir_payload_cru(morta: &Morta) -> Result<(), ErroCli> {
    let mut saida = std::io::stdout().lock();
    saida.write_all(morta.payload.get().as_bytes())?;
    saida.write_all(b"\n")?;
    saida.flush()?;
    Ok(())
}

/// The dead letter `id`, or [`ErroCli::MortaNaoEncontrada`].
async fn buscar(conexao: &Conexao, id: Uuid) -> Result<Morta, ErroCli> {
    let d = conexao.dialeto();
    let sql = format!(
        "SELECT {id}, tipo, CAST(tentativas AS BIGINT), ultimo_erro, app, correlacao, {criada}, \
             {morta}, CAST({agora} - {morta} AS BIGINT), {payload} \
         FROM mensageria_mortas WHERE id_mensagem = {param}",
        id = d.texto("id_mensagem"),
        criada = d.ms("criada_em"),
        morta = d.ms("morta_em"),
        agora = d.agora_ms(),
        payload = d.texto("payload"),
        param = d.uuid("$1"),
    );
    type Linha = (
        String,
        String,
        i64,
        String,
        Option<String>,
        Option<String>,
        i64,
        i64,
        i64,
        String,
    );
    let linha: Option<Linha> = nos_dois!(conexao, pool => {
        sqlx::query_as(AssertSqlSafe(sql)).bind(id.to_string()).fetch_optional(pool).await?
    });
    let Some((
        id_mensagem,
        tipo,
        tentativas,
        ultimo_erro,
        app,
        correlacao,
        criada,
        morta,
        ha,
        payload,
    )) = linha
    else {
        return Err(ErroCli::MortaNaoEncontrada { id });
    };
    Ok(Morta {
        id_mensagem,
        tipo,
        tentativas,
        ultimo_erro,
        app,
        correlacao,
        criada_em: rfc3339(criada),
        morta_em: rfc3339(morta),
        morta_ha_ms: ha.max(0),
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
    mortas: Vec<ItemDaLista>,
}

/// One line of `mortas listar`.
#[derive(Debug, Serialize)]
struct ItemDaLista {
    id_mensagem: String,
    tipo: String,
    tentativas: i64,
    app: Option<String>,
    morta_em: String,
    morta_ha_ms: i64,
    ultimo_erro: String,
}

impl Relatorio for Lista {
    fn humano(&self) -> String {
        if self.total == 0 {
            return "no dead letters".into();
        }
        let mut tabela = Tabela::new([
            "id_mensagem",
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
        let mut texto = tabela.texto();
        if (self.mortas.len() as i64) < self.total {
            texto.push_str(&format!(
                "({} of {} shown; use --limite to see more)\n",
                self.mortas.len(),
                self.total
            ));
        }
        texto
    }
}

async fn listar(
    conexao: &Conexao,
    tipo: Option<&str>,
    limite: i64,
    json: bool,
) -> Result<(), ErroCli> {
    let d = conexao.dialeto();
    let filtro = "(CAST($1 AS TEXT) IS NULL OR tipo = $1)";
    let sql = format!(
        "SELECT {id}, tipo, CAST(tentativas AS BIGINT), app, {morta}, \
             CAST({agora} - {morta} AS BIGINT), ultimo_erro \
         FROM mensageria_mortas WHERE {filtro} ORDER BY morta_em DESC, id_mensagem LIMIT $2",
        id = d.texto("id_mensagem"),
        morta = d.ms("morta_em"),
        agora = d.agora_ms(),
    );
    let contar = format!("SELECT CAST(count(*) AS BIGINT) FROM mensageria_mortas WHERE {filtro}");
    type Linha = (String, String, i64, Option<String>, i64, i64, String);
    let (linhas, total): (Vec<Linha>, i64) = nos_dois!(conexao, pool => {
        let linhas = sqlx::query_as(AssertSqlSafe(sql))
            .bind(tipo)
            .bind(limite.max(0))
            .fetch_all(pool)
            .await?;
        let total = sqlx::query_scalar(AssertSqlSafe(contar)).bind(tipo).fetch_one(pool).await?;
        (linhas, total)
    });
    let mortas = linhas
        .into_iter()
        .map(
            |(id_mensagem, tipo, tentativas, app, morta, ha, ultimo_erro)| ItemDaLista {
                id_mensagem,
                tipo,
                tentativas,
                app,
                morta_em: rfc3339(morta),
                morta_ha_ms: ha.max(0),
                ultimo_erro,
            },
        )
        .collect();
    imprimir(&Lista { total, mortas }, json);
    Ok(())
}

/// What `mortas reenfileirar` changed.
#[derive(Debug, Serialize)]
struct Reenfileiradas {
    /// Dead letters moved back to the saída.
    reenfileiradas: u64,
    /// The one asked for, if one.
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
    let movidas = nos_dois!(conexao, pool => {
        Banco::reenfileirar_mortas(pool, alvo.id, tipo.as_deref()).await?
    });
    if let (Some(id), 0) = (alvo.id, movidas) {
        return Err(ErroCli::MortaNaoEncontrada { id });
    }
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
        return Err(ErroCli::NaoConfirmado {
            resposta: "s",
            opcao: "--yes",
        });
    }
    let sql = format!(
        "DELETE FROM mensageria_mortas WHERE id_mensagem = {}",
        conexao.dialeto().uuid("$1")
    );
    let apagadas = nos_dois!(conexao, pool => {
        sqlx::query(AssertSqlSafe(sql)).bind(id.to_string()).execute(pool).await?.rows_affected()
    });
    if apagadas == 0 {
        // Replayed or discarded by someone else meanwhile.
        return Err(ErroCli::MortaNaoEncontrada { id });
    }
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
        "discard dead letter {} of tipo `{}` (last error: {})? It cannot be replayed afterwards. [s/N] ",
        escapar(&morta.id_mensagem),
        escapar(&morta.tipo),
        resumo(&morta.ultimo_erro, 80)
    ))
}
