//! The receiving path without a transport: decode, key, dedup record and effect in one
//! transaction, an outcome per event. The HTTP routes (`receber.rs` for one event, `lote.rs`
//! for a batch) and a broker consumer (`mensageria-nats`) are doors to it, never copies of it.
//!
//! A batch is applied in rounds of distinct keys, each one transaction with one dedup statement;
//! at a round's first failure the round is rolled back and its other events are applied again
//! one savepoint each, so the receptor's function runs at most twice per event, whatever fails
//! (see `lote.rs` for the rule and its figures).

use std::any::Any;
use std::collections::HashMap;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::time::Duration;

use futures_util::FutureExt;
use mensageria_core::correlacao;
use mensageria_core::operacoes::{self, Recebida};
use mensageria_core::rastreamento::ContextoRastreamento;
use mensageria_core::sqlx::{Acquire, Pool, Transaction};
use serde::Deserialize;
use serde_json::value::RawValue;
use tracing::Instrument;
use uuid::Uuid;

use crate::admissao::Admissao;
use crate::desfecho::Desfecho;
use crate::receber::{Resultado, aplicar_em, id_aceitavel, indisponivel};
use crate::{Receptor, Rejeicao};

/// One event as a transport hands it over: its message id (the relay's `x-request-id`, a
/// broker message's id), the correlation id in force when it was enqueued, and the payload, as
/// the single route would get it as its body.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Entrada<'a> {
    /// The message id.
    pub id: Uuid,
    /// The correlation id it was enqueued with, if any.
    #[serde(default)]
    pub correlacao: Option<String>,
    /// The W3C `traceparent` it was enqueued under, if any: the event's span continues that
    /// trace (feature `otel`). An invalid one is ignored.
    #[serde(default)]
    pub traceparent: Option<String>,
    /// Its `tracestate`, if any.
    #[serde(default)]
    pub tracestate: Option<String>,
    /// The payload (JSON).
    #[serde(borrow)]
    pub payload: &'a RawValue,
}

impl Entrada<'_> {
    /// Its trace context, if it carries a valid one.
    pub fn rastreamento(&self) -> Option<ContextoRastreamento> {
        ContextoRastreamento::new(self.traceparent.as_deref()?, self.tracestate.as_deref())
    }
}

/// What a transport does with one event's outcome: the rule the relay applies to a receptor's
/// HTTP answers (2xx: delivered; 4xx: dead letter; 5xx: retry), from the same outcome table.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Veredito {
    /// Applied, or a duplicate (a no-op): acknowledge it.
    Confirmar {
        /// `applied` or `duplicate`.
        codigo: &'static str,
    },
    /// It can never be applied as it is (a payload that does not decode, a key that cannot be
    /// built, the receptor's permanent rejection): keep it as a dead letter, do not retry.
    Rejeitar {
        /// The stable code (`invalid_payload`, `invalid_key`, `rejected`, …).
        codigo: &'static str,
        /// For the operator.
        motivo: String,
    },
    /// Try again later: a temporary refusal, a panic, the database.
    Adiar {
        /// The stable code (`temporary`, `panic`, `database`).
        codigo: &'static str,
        /// For the operator.
        motivo: String,
        /// How long the receptor (or the database) asked to wait, if it said.
        tentar_apos: Option<Duration>,
    },
}

impl Veredito {
    fn de(desfecho: &Desfecho) -> Self {
        let caso = desfecho.caso();
        let codigo = caso.codigo();
        let motivo = || desfecho.mensagem().unwrap_or_default();
        let status = caso.status();
        if status.is_success() {
            Self::Confirmar { codigo }
        } else if status.is_client_error() {
            Self::Rejeitar {
                codigo,
                motivo: motivo(),
            }
        } else {
            let tentar_apos = match desfecho {
                Desfecho::Temporario { tentar_apos, .. } => *tentar_apos,
                Desfecho::BancoIndisponivel | Desfecho::Ocupado => Some(Duration::from_secs(1)),
                _ => None,
            };
            Self::Adiar {
                codigo,
                motivo: motivo(),
                tentar_apos,
            }
        }
    }
}

/// The largest payload a transport hands over, as the HTTP route's default body limit.
const LIMITE_PAYLOAD: usize = 1024 * 1024;

/// Applies `entradas`, events of `R`'s tipo received by app `app` (whose dedup records they
/// are checked against and written to), through the one receiving path (the same rounds,
/// dedup and effect transactions as the HTTP batch route), and says for each, in order, what the
/// transport must do with it. For a broker consumer; an HTTP app mounts the routes instead.
///
/// ```no_run
/// # async fn f<R: mensageria_axum::Receptor>(pool: mensageria_core::sqlx::Pool<R::Banco>) {
/// use mensageria_axum::recepcao::{self, Entrada, Veredito};
/// use mensageria_core::serde_json::value::RawValue;
///
/// let payload = RawValue::from_string(r#"{"n": 1}"#.to_owned()).unwrap();
/// let entradas = [Entrada {
///     id: mensageria_core::uuid::Uuid::now_v7(),
///     correlacao: None,
///     traceparent: None,
///     tracestate: None,
///     payload: &payload,
/// }];
/// for veredito in recepcao::aplicar::<R>(&pool, "estoque", &entradas).await {
///     match veredito {
///         Veredito::Confirmar { .. } => { /* ack */ }
///         Veredito::Rejeitar { motivo, .. } => { /* dead letter, never retried */ }
///         Veredito::Adiar { tentar_apos, .. } => { /* redeliver later */ }
///         _ => {}
///     }
/// }
/// # }
/// ```
#[doc(alias("consume", "handle"))]
pub async fn aplicar<R: Receptor>(
    pool: &Pool<R::Banco>,
    app: &str,
    entradas: &[Entrada<'_>],
) -> Vec<Veredito> {
    let span = tracing::info_span!(
        "mensageria.receptor.lote",
        app,
        tipo = R::TIPO,
        eventos = entradas.len()
    );
    aplicar_lote::<R>(pool, app, LIMITE_PAYLOAD, entradas, None)
        .instrument(span)
        .await
        .iter()
        .map(|desfecho| {
            desfecho.contar(app, R::TIPO);
            Veredito::de(desfecho)
        })
        .collect()
}

/// What [`aplicar`] returns, boxed, for a receptor found by tipo at run time.
pub type Aplicacao<'a> = Pin<Box<dyn Future<Output = Vec<Veredito>> + Send + 'a>>;

/// For generated code ([`ReceptorRegistrado::aplicar`](crate::receptor::ReceptorRegistrado)):
/// [`aplicar`] for `R`, if `pool` is a `Pool` of `R`'s backend.
#[doc(hidden)]
pub fn aplicar_dinamico<'a, R: Receptor>(
    pool: &'a dyn Any,
    app: &'a str,
    entradas: &'a [Entrada<'a>],
) -> Option<Aplicacao<'a>> {
    let pool = pool.downcast_ref::<Pool<R::Banco>>()?;
    Some(Box::pin(aplicar::<R>(pool, app, entradas)))
}

/// What [`reaplicar_mortas_recebidas`] did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Reaplicacao {
    /// Applied now (or found applied: a duplicate) and removed from the dead letters.
    pub aplicadas: usize,
    /// Refused again for good, or failed temporarily: still in the dead letters.
    pub mantidas: usize,
    /// Of a tipo this binary has no receptor for on this backend: left untouched.
    pub sem_receptor: usize,
}

/// Replays the receiving side's dead letters of `app` (those a broker consumer kept, see
/// `mensageria-nats`) through the receptores of this binary, after the cause was fixed: each
/// goes through the one receiving path like a fresh delivery, and leaves the dead letters only
/// once applied (or found applied). A crash in between replays it again as a duplicate. Call it
/// from the receiving app (an admin endpoint, a start-up flag): the CLI lists and discards
/// them, but only the app has the receptores. The dead letters of an ordered key (held behind
/// the first one, under `OrdemAposMorta::Bloquear`) are replayed in the key's order, up to the
/// first that is refused again.
///
/// ```no_run
/// # async fn f<DB: mensageria_core::Banco>(pool: mensageria_core::sqlx::Pool<DB>) -> Result<(), mensageria_core::Erro> {
/// let feito = mensageria_axum::recepcao::reaplicar_mortas_recebidas(&pool, "estoque", 100).await?;
/// println!("{} applied, {} still refused", feito.aplicadas, feito.mantidas);
/// # Ok(()) }
/// ```
#[doc(alias("replay", "dead letter"))]
pub async fn reaplicar_mortas_recebidas<DB: mensageria_core::Banco>(
    pool: &Pool<DB>,
    app: &str,
    limite: i64,
) -> Result<Reaplicacao, mensageria_core::Erro> {
    let mut feito = Reaplicacao::default();
    let mut chaves_vistas = std::collections::HashSet::new();
    for morta in operacoes::mortas_recebidas(pool, Some(app), limite).await? {
        let Some(chave) = morta.chave_ordem.clone() else {
            reaplicar_uma(pool, app, &morta, &mut feito).await?;
            continue;
        };
        // An ordered key's dead letters go in the key's order, and stop at the first that is
        // still refused: the later ones stay held behind it.
        if !chaves_vistas.insert(chave.clone()) {
            continue;
        }
        let da_chave = operacoes::mortas_recebidas_da_chave(pool, app, &chave).await?;
        let dela = reaplicar_em_ordem(pool, app, &da_chave).await?;
        feito.aplicadas += dela.aplicadas;
        feito.mantidas += dela.mantidas;
        feito.sem_receptor += dela.sem_receptor;
    }
    Ok(feito)
}

/// Replays the dead letters of `app` with ordering key `chave` in the key's order, up to the
/// first refused again (the rest stay held behind it): what a JetStream consumer does by itself,
/// with a backoff, for a key whose message it parked after temporary failures.
pub async fn reaplicar_chave<DB: mensageria_core::Banco>(
    pool: &Pool<DB>,
    app: &str,
    chave: &str,
) -> Result<Reaplicacao, mensageria_core::Erro> {
    let da_chave = operacoes::mortas_recebidas_da_chave(pool, app, chave).await?;
    reaplicar_em_ordem(pool, app, &da_chave).await
}

/// [`reaplicar_chave`] on a key's dead letters already read
/// ([`operacoes::mortas_recebidas_da_chave`]), in their order.
pub async fn reaplicar_em_ordem<DB: mensageria_core::Banco>(
    pool: &Pool<DB>,
    app: &str,
    da_chave: &[operacoes::MortaRecebida],
) -> Result<Reaplicacao, mensageria_core::Erro> {
    let mut feito = Reaplicacao::default();
    for (posicao, morta) in da_chave.iter().enumerate() {
        if !reaplicar_uma(pool, app, morta, &mut feito).await? {
            feito.mantidas += da_chave.len() - posicao - 1;
            break;
        }
    }
    Ok(feito)
}

/// Replays one dead letter; whether it was applied (and forgotten).
async fn reaplicar_uma<DB: mensageria_core::Banco>(
    pool: &Pool<DB>,
    app: &str,
    morta: &operacoes::MortaRecebida,
    feito: &mut Reaplicacao,
) -> Result<bool, mensageria_core::Erro> {
    let receptor = crate::registrados()
        .filter(|registrado| registrado.tipo == morta.tipo)
        .find(|registrado| (registrado.aplicar)(pool as &dyn Any, app, &[]).is_some());
    let payload = serde_json::from_str::<&RawValue>(&morta.payload);
    let (Some(receptor), Ok(payload)) = (receptor, payload) else {
        feito.sem_receptor += usize::from(receptor.is_none());
        feito.mantidas += usize::from(receptor.is_some());
        return Ok(false);
    };
    let entradas = [Entrada {
        id: morta.id_mensagem,
        correlacao: morta.correlacao.clone(),
        // The replay continues the trace the event arrived in.
        traceparent: morta.traceparent.clone(),
        tracestate: morta.tracestate.clone(),
        payload,
    }];
    let Some(aplicacao) = (receptor.aplicar)(pool as &dyn Any, app, &entradas) else {
        return Ok(false);
    };
    if let Some(Veredito::Confirmar { .. }) = aplicacao.await.pop() {
        match operacoes::descartar_morta_recebida(pool, app, morta.id_mensagem).await {
            // Gone already: a sibling replica, or the replay through the stream, applied it too.
            Ok(()) | Err(operacoes::ErroOperacao::MortaRecebidaNaoEncontrada { .. }) => {}
            Err(erro) => return Err(erro.into()),
        }
        feito.aplicadas += 1;
        Ok(true)
    } else {
        feito.mantidas += 1;
        Ok(false)
    }
}

/// One event of the batch that decoded and has a key: waiting for its round.
struct Pronto<R: Receptor> {
    /// Its position in the batch.
    posicao: usize,
    chave: String,
    versao: Option<i64>,
    /// Decoded once up front; decoded again from the body if its round has to be applied again
    /// after its function ran.
    evento: Option<R::Evento>,
}

/// The outcome of every event of the batch, in its order: the one receiving path, whatever the
/// transport (the HTTP batch route, a broker consumer's fetched batch). With `admissao`, a round
/// that the exhausted pool does not admit is `busy` (with the rounds after it), instead of
/// waiting for the pool's own acquire timeout.
pub(crate) async fn aplicar_lote<R: Receptor>(
    pool: &Pool<R::Banco>,
    app: &str,
    limite_corpo: usize,
    eventos: &[Entrada<'_>],
    admissao: Option<&Admissao>,
) -> Vec<Desfecho> {
    let mut desfechos: Vec<Option<Desfecho>> = eventos.iter().map(|_| None).collect();
    // Rounds: the n-th occurrence of a key goes in round n.
    let mut rodadas: Vec<Vec<Pronto<R>>> = Vec::new();
    let mut ocorrencias: HashMap<String, usize> = HashMap::new();
    for (posicao, evento) in eventos.iter().enumerate() {
        match preparar::<R>(limite_corpo, evento) {
            Err(desfecho) => desfechos[posicao] = Some(desfecho),
            Ok((chave, versao, decodificado)) => {
                let rodada = ocorrencias.entry(chave.clone()).or_insert(0);
                if rodadas.len() <= *rodada {
                    rodadas.push(Vec::new());
                }
                rodadas[*rodada].push(Pronto {
                    posicao,
                    chave,
                    versao,
                    evento: Some(decodificado),
                });
                *rodada += 1;
            }
        }
    }
    let mut ocupado = false;
    for rodada in rodadas {
        let aplicados = if ocupado {
            rodada
                .iter()
                .map(|p| (p.posicao, Desfecho::Ocupado))
                .collect()
        } else {
            aplicar_rodada::<R>(pool, app, eventos, rodada, admissao).await
        };
        for (posicao, desfecho) in aplicados {
            ocupado |= matches!(desfecho, Desfecho::Ocupado);
            desfechos[posicao] = Some(desfecho);
        }
    }
    eventos
        .iter()
        .zip(desfechos)
        .map(|(evento, desfecho)| {
            let desfecho = desfecho.unwrap_or(Desfecho::BancoIndisponivel);
            if matches!(desfecho, Desfecho::Aplicado { .. }) {
                crate::desfecho::atraso_do_efeito(app, R::TIPO, evento.id);
            }
            desfecho
        })
        .collect()
}

/// Decodes one event and builds its key; a refusal is that event's outcome.
fn preparar<R: Receptor>(
    limite: usize,
    evento: &Entrada<'_>,
) -> Result<(String, Option<i64>, R::Evento), Desfecho> {
    if evento.payload.get().len() > limite {
        return Err(Desfecho::CorpoGrandeDemais { limite });
    }
    let decodificado: R::Evento =
        serde_json::from_str(evento.payload.get()).map_err(|falha| Desfecho::PayloadInvalido {
            tipo: R::TIPO,
            falha,
        })?;
    let chave = R::chave_natural(&decodificado).map_err(Desfecho::ChaveInvalida)?;
    let versao = R::versao(&decodificado);
    Ok((chave.como_texto().to_owned(), versao, decodificado))
}

/// One round (distinct keys): one transaction, one dedup statement, the receptor once per new
/// event, one commit. When an event fails, the transaction is rolled back and the round's other
/// events are applied again one savepoint each ([`um_por_um`]): no event's function runs more
/// than twice, whatever fails.
async fn aplicar_rodada<R: Receptor>(
    pool: &Pool<R::Banco>,
    app: &str,
    eventos: &[Entrada<'_>],
    mut vivos: Vec<Pronto<R>>,
    admissao: Option<&Admissao>,
) -> Vec<(usize, Desfecho)> {
    match tentar_rodada::<R>(pool, app, eventos, &mut vivos, admissao).await {
        Tentativa::Commitada(novos) => vivos
            .iter()
            .zip(novos)
            .map(|(pronto, novo)| (pronto.posicao, desfecho_de::<R>(novo)))
            .collect(),
        Tentativa::Falhou {
            indice,
            desfecho,
            novos,
        } => {
            let falhou = vivos.remove(indice);
            let mut novos = novos;
            novos.remove(indice);
            let mut desfechos = um_por_um::<R>(pool, app, eventos, vivos, novos).await;
            desfechos.push((falhou.posicao, desfecho));
            desfechos
        }
        Tentativa::Banco => vivos
            .iter()
            .map(|pronto| (pronto.posicao, Desfecho::BancoIndisponivel))
            .collect(),
        Tentativa::Ocupado => vivos
            .iter()
            .map(|pronto| (pronto.posicao, Desfecho::Ocupado))
            .collect(),
    }
}

/// `applied` for a new event, `duplicate` for one seen before.
fn desfecho_de<R: Receptor>(novo: bool) -> Desfecho {
    if novo {
        Desfecho::Aplicado {
            tipo: R::TIPO,
            id_pedido: String::new(),
        }
    } else {
        Desfecho::Duplicado {
            tipo: R::TIPO,
            id_pedido: String::new(),
        }
    }
}

enum Tentativa {
    /// Committed (or nothing to commit: all duplicates): for each event of the round, whether it
    /// was new (applied).
    Commitada(Vec<bool>),
    /// The event at `indice` of the round failed; everything was rolled back. `novos`: for each
    /// event of the round, whether the dedup statement found it new.
    Falhou {
        indice: usize,
        desfecho: Desfecho,
        novos: Vec<bool>,
    },
    /// The database failed; everything was rolled back.
    Banco,
    /// No connection of the pool within the wait: nothing was done.
    Ocupado,
}

/// One round in one transaction: the dedup records of all its events in one statement, then
/// the function of each new one, then one commit; at the first event that fails, everything is
/// rolled back.
async fn tentar_rodada<R: Receptor>(
    pool: &Pool<R::Banco>,
    app: &str,
    eventos: &[Entrada<'_>],
    vivos: &mut [Pronto<R>],
    admissao: Option<&Admissao>,
) -> Tentativa {
    let recebidas: Vec<Recebida<'_>> = vivos
        .iter()
        .map(|pronto| recebida::<R>(app, eventos, pronto))
        .collect();
    let aberta = match admissao {
        Some(admissao) => admissao.abrir(pool).await,
        None => pool.begin().await.map_err(crate::receber::indisponivel),
    };
    let tx = match aberta {
        Ok(tx) => tx,
        Err(Desfecho::Ocupado) => return Tentativa::Ocupado,
        Err(_) => return Tentativa::Banco,
    };
    let (mut tx, novos) = match registrar_rodada(tx, &recebidas).await {
        Ok(registrada) => registrada,
        Err(falha) => return banco_falhou(falha),
    };
    if !novos.contains(&true) {
        // Every event is a duplicate and nothing was written: no commit to wait for. The
        // rollback is queued and leaves with the connection's release, off this request's path.
        drop(tx);
        return Tentativa::Commitada(novos);
    }
    if let Some((indice, desfecho)) = aplicar_novos::<R>(&mut tx, eventos, vivos, &novos).await {
        drop(tx);
        return Tentativa::Falhou {
            indice,
            desfecho,
            novos,
        };
    }
    match tx.commit().await {
        Ok(()) => Tentativa::Commitada(novos),
        Err(falha) => banco_falhou(falha),
    }
}

/// The database failed during a round: logged, nothing of it applied.
fn banco_falhou(falha: mensageria_core::sqlx::Error) -> Tentativa {
    tracing::error!(error = %falha, "mensageria receptor: database error; nothing of the batch applied");
    Tentativa::Banco
}

/// Writes the dedup records of all of a round's events in one statement, in the round's
/// transaction: the transaction, and for each event whether it is new.
async fn registrar_rodada<DB: mensageria_core::Banco>(
    mut tx: Transaction<'static, DB>,
    recebidas: &[Recebida<'_>],
) -> Result<(Transaction<'static, DB>, Vec<bool>), mensageria_core::sqlx::Error> {
    let novos = operacoes::registrar_recebidas::<DB>(&mut *tx, recebidas).await?;
    Ok((tx, novos))
}

/// Runs the function of each new event of the round in `tx`, in order, until one fails: that
/// event's index in the round and its outcome (logged in its span). `None`: every one ran.
async fn aplicar_novos<R: Receptor>(
    tx: &mut Transaction<'_, R::Banco>,
    eventos: &[Entrada<'_>],
    vivos: &mut [Pronto<R>],
    novos: &[bool],
) -> Option<(usize, Desfecho)> {
    for (indice, (pronto, novo)) in vivos.iter_mut().zip(novos).enumerate() {
        let Some(evento) = pronto.evento.take().filter(|_| *novo) else {
            continue;
        };
        let origem = &eventos[pronto.posicao];
        let span = span_do_evento::<R>(origem, &pronto.chave);
        let Err(falha) = efeito::<R>(tx, origem, evento, span.clone()).await else {
            continue;
        };
        span.in_scope(|| {
            tracing::warn!(
                resultado = falha.caso().codigo(),
                "mensageria receptor: one event of the batch failed; rolled back, the round's \
                 other events are applied again one savepoint each"
            )
        });
        return Some((indice, falha));
    }
    None
}

/// One event's function in the round's transaction, in its `span` and under its correlation
/// id: a refusal or a panic is its outcome.
async fn efeito<R: Receptor>(
    tx: &mut Transaction<'_, R::Banco>,
    origem: &Entrada<'_>,
    evento: R::Evento,
    span: tracing::Span,
) -> Result<(), Desfecho> {
    let efeito = correlacao::com(correlacao_de(origem), R::aplicar(tx, evento));
    match AssertUnwindSafe(efeito.instrument(span))
        .catch_unwind()
        .await
    {
        Ok(Ok(())) => Ok(()),
        Ok(Err(Rejeicao::Permanente { motivo })) => Err(Desfecho::Rejeitado { motivo }),
        Ok(Err(Rejeicao::Temporaria {
            motivo,
            tentar_apos,
        })) => Err(Desfecho::Temporario {
            motivo,
            tentar_apos,
        }),
        Err(_) => Err(Desfecho::Panico),
    }
}

/// After a failure in a round: its other events in one transaction, each in a savepoint of its
/// own through the single route's dedup + effect step ([`aplicar_em`]), so a failing one is
/// rolled back alone and the others are kept; one commit at the end. An event the round's
/// dedup statement found a duplicate is one still (nothing was written for it).
async fn um_por_um<R: Receptor>(
    pool: &Pool<R::Banco>,
    app: &str,
    eventos: &[Entrada<'_>],
    restantes: Vec<Pronto<R>>,
    novos: Vec<bool>,
) -> Vec<(usize, Desfecho)> {
    let mut tx = match pool.begin().await {
        Ok(tx) => tx,
        Err(falha) => {
            indisponivel(falha);
            return restantes
                .iter()
                .map(|pronto| (pronto.posicao, Desfecho::BancoIndisponivel))
                .collect();
        }
    };
    let mut desfechos = Vec::with_capacity(restantes.len());
    for (pronto, novo) in restantes.into_iter().zip(novos) {
        let posicao = pronto.posicao;
        let desfecho = if novo {
            aplicar_um::<R>(&mut tx, app, eventos, pronto).await
        } else {
            desfecho_de::<R>(false)
        };
        desfechos.push((posicao, desfecho));
    }
    if let Err(falha) = tx.commit().await {
        indisponivel(falha);
        for (_, desfecho) in &mut desfechos {
            if matches!(desfecho, Desfecho::Aplicado { .. }) {
                *desfecho = Desfecho::BancoIndisponivel;
            }
        }
    }
    desfechos
}

/// One event of [`um_por_um`], in a savepoint of `tx`.
async fn aplicar_um<R: Receptor>(
    tx: &mut Transaction<'_, R::Banco>,
    app: &str,
    eventos: &[Entrada<'_>],
    mut pronto: Pronto<R>,
) -> Desfecho {
    let origem = &eventos[pronto.posicao];
    let evento = match pronto.evento.take() {
        Some(evento) => evento,
        // Its function ran in the round that was rolled back: decoded again (it decoded then).
        None => match serde_json::from_str(origem.payload.get()) {
            Ok(evento) => evento,
            Err(falha) => {
                return Desfecho::PayloadInvalido {
                    tipo: R::TIPO,
                    falha,
                };
            }
        },
    };
    let ponto = match Acquire::begin(tx).await {
        Ok(ponto) => ponto,
        Err(falha) => return indisponivel(falha),
    };
    let span = span_do_evento::<R>(origem, &pronto.chave);
    let recebida = recebida::<R>(app, eventos, &pronto);
    match aplicar_em::<R>(ponto, recebida, evento, correlacao_de(origem))
        .instrument(span)
        .await
    {
        Ok(Resultado::Aplicado) => desfecho_de::<R>(true),
        Ok(Resultado::Duplicado) => desfecho_de::<R>(false),
        Err(desfecho) => desfecho,
    }
}

/// The dedup record of one event.
fn recebida<'a, R: Receptor>(
    app: &'a str,
    eventos: &[Entrada<'_>],
    pronto: &'a Pronto<R>,
) -> Recebida<'a> {
    Recebida {
        app,
        tipo: R::TIPO,
        chave: &pronto.chave,
        id_mensagem: Some(eventos[pronto.posicao].id),
        versao: pronto.versao,
    }
}

/// The correlation id the event's function runs under: the one it was enqueued with, or its
/// message id.
fn correlacao_de(origem: &Entrada<'_>) -> String {
    origem
        .correlacao
        .clone()
        .filter(|c| id_aceitavel(c))
        .unwrap_or_else(|| origem.id.to_string())
}

/// The span of one event's work (its function and effect): a child of the trace the event was
/// enqueued in, when it carries one, so each event of a batch is attributed to its own trace.
fn span_do_evento<R: Receptor>(origem: &Entrada<'_>, chave: &str) -> tracing::Span {
    let span = tracing::info_span!(
        "mensageria.receptor",
        tipo = R::TIPO,
        id_mensagem = %origem.id,
        chave = %chave,
    );
    if let Some(rastreamento) = origem.rastreamento() {
        rastreamento.continuar(&span);
    }
    span
}
