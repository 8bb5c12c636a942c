//! Group commit over HTTP: the deliveries of one route that start together leave in one request
//! to the receptor's batch route (`POST {url}/lote`), and each gets its own outcome back.
//!
//! The first delivery of a route opens a batch and yields to the runtime a few times
//! (microseconds, no timer): the deliveries the relay started in the same claim join it
//! meanwhile. If the route is busy (a batch request of it is out), the batch stays open until
//! that request is answered, at most 10 ms ([`ocupacao`]): under load the events of the next
//! claims join it too. An idle route never waits. Then the batch closes: alone, its one event
//! goes on the single route (as without batches: same latency, same CloudEvents request); with
//! company, all go in one request to the batch route, up to the route's current limit. At low
//! rates every delivery goes alone; under load a claim of 128 due rows against a fast receptor
//! becomes a request or two.
//!
//! **Batches are sized to what the receptor takes** ([`limite`]). The receptor applies a batch's
//! events one after the other, so a batch of 64 against a receptor that takes 250 ms per event
//! would run for 16 s, past the 10 s timeout, and serialize what single requests would have
//! applied in parallel. Each route therefore has a limit, measured from its answers: the events
//! that fit a twentieth of the timeout (500 ms by default) at the pace of the last answer,
//! starting at 2, lowered at once when an answer is slower (a timeout included), raised to at
//! most twice the answered batch when it is faster, never above [`Destino::com_lote_maximo`].
//! A slow receptor gets one or two events per request, as many requests at once as the relay
//! has deliveries in flight; a fast one gets full batches after a few answers. A batch that
//! times out anyway is every event's temporary failure (the receptor may still apply it), and
//! its redelivery leaves in batches a twentieth of its size at most, never in the same batch.
//! The first batch request of a route is its probe (does the batch route exist, how long do its
//! events take): until it is answered, the route's deliveries that would open another batch
//! wait for that answer, but at most the budget since it left (500 ms by default); past that
//! they go alone, on the single route, so that waiting never eats the time of their own request.
//! A single request does not answer for the batch route: a probe whose opener went alone gives
//! the probe back, and the next batch is the probe.
//!
//! A receptor without the batch route (an older mensageria, or anything answering 404 or 405
//! there) is remembered: from then on this destination sends one request per event. A batch
//! refused as a whole for what it is (400, 413, 415, 422: no single event's fault) is sent again
//! one event per request, so each event gets its own verdict. A whole-batch failure that may
//! pass (5xx, timeout, connection refused, 401, a 2xx that is not a batch answer) is every
//! event's temporary failure.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use reqwest::Url;
use reqwest::header::{AUTHORIZATION, CONTENT_TYPE};
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use tokio::sync::oneshot;
use uuid::Uuid;

use super::{
    Destino, causas, citar, classificar, descrever_corpo, ler_limitado, recusar_redirecionamento,
    sem_credenciais, tentar_apos,
};
use crate::enviador::{ContextoEnvio, FalhaEnvio};

mod limite;
mod ocupacao;

/// How much of a batch's answer is read.
const LIMITE_RESPOSTA_LOTE: usize = 1024 * 1024;

/// The largest batch body this side builds (the receptor's default limit is 4 MiB).
const LIMITE_CORPO_LOTE: usize = 2 * 1024 * 1024;

/// One delivery in a batch, waiting for its outcome.
struct Pendente {
    ctx: ContextoEnvio,
    payload: Box<RawValue>,
    resposta: oneshot::Sender<Result<(), FalhaEnvio>>,
}

/// A batch being collected: deliveries join it until its opener closes it.
type Aberto = Arc<Mutex<Vec<Pendente>>>;

/// The batches open on a destination's routes, shared by its clones.
#[derive(Default)]
pub(super) struct Agrupador {
    abertos: Mutex<HashMap<String, Aberto>>,
    /// How many events a batch of each route may carry now.
    limites: limite::Limites,
    /// The receptor has no batch route: one request per event from now on.
    sem_rota_de_lote: AtomicBool,
    /// The batch requests out on each route (a new batch lingers while there are enough).
    ocupacoes: ocupacao::Ocupacoes,
}

/// How many times the opener of a batch yields before closing it.
const CESSOES: usize = 4;

/// Closes the batch its opener opened, also when the opener's future is dropped while it
/// yields: what joined is sent anyway.
struct Abertura {
    destino: Destino,
    rota: String,
    lote: Aberto,
    /// The route's probe, when this batch is it.
    sonda: Option<limite::Sondagem>,
}

impl Abertura {
    /// Whether the batch still takes deliveries (a delivery that filled it closed it).
    fn aberta(&self) -> bool {
        self.destino.agrupador.as_ref().is_some_and(|agrupador| {
            agrupador
                .abertos
                .lock()
                .expect("open batches")
                .get(&self.rota)
                .is_some_and(|aberto| Arc::ptr_eq(aberto, &self.lote))
        })
    }

    /// Closes the batch to newcomers and takes what joined it.
    fn fechar(&self) -> Vec<Pendente> {
        if let Some(agrupador) = &self.destino.agrupador {
            let mut abertos = agrupador.abertos.lock().expect("open batches");
            if abertos
                .get(&self.rota)
                .is_some_and(|aberto| Arc::ptr_eq(aberto, &self.lote))
            {
                abertos.remove(&self.rota);
            }
        }
        std::mem::take(&mut *self.lote.lock().expect("open batch"))
    }
}

impl Drop for Abertura {
    fn drop(&mut self) {
        let juntos = self.fechar();
        if juntos.is_empty() {
            return;
        }
        match tokio::runtime::Handle::try_current() {
            Ok(runtime) => {
                let (destino, rota) = (self.destino.clone(), std::mem::take(&mut self.rota));
                let sonda = self.sonda.take();
                runtime.spawn(async move { destino.enviar_lote(&rota, juntos, sonda).await });
            }
            Err(_) => {
                for pendente in juntos {
                    let _ = pendente.resposta.send(Err(FalhaEnvio::temporaria(
                        "no async runtime left to send this batch",
                    )));
                }
            }
        }
    }
}

/// Where a delivery stands on its route.
enum Entrada {
    /// One request of its own, on the single route.
    Sozinho(Box<RawValue>),
    /// In an open batch, waiting for its outcome.
    Juntou(oneshot::Receiver<Result<(), FalhaEnvio>>),
    /// The opener of a new batch (the route's probe, with its token).
    Abriu(Box<RawValue>, Aberto, Option<limite::Sondagem>),
    /// Not yet: the route's probe is out; wait for its answer (at most this long).
    Esperar(Box<RawValue>, tokio::sync::futures::OwnedNotified, Duration),
}

/// The body of a batch request.
#[derive(Serialize)]
struct PedidoLote<'a> {
    eventos: Vec<EventoLote<'a>>,
}

#[derive(Serialize)]
struct EventoLote<'a> {
    id: Uuid,
    correlacao: String,
    /// Each event's own trace context: a batch carries as many traces as it has events. Left
    /// out when there is none, so a receptor of a version before it never sees the field.
    #[serde(skip_serializing_if = "Option::is_none")]
    traceparent: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tracestate: Option<&'a str>,
    payload: &'a RawValue,
}

/// The answer of the batch route.
#[derive(Deserialize)]
struct RespostaLote {
    resultados: Vec<ResultadoLote>,
}

#[derive(Deserialize)]
struct ResultadoLote {
    id: Uuid,
    resultado: String,
    #[serde(default)]
    mensagem: Option<String>,
    #[serde(default)]
    retry_after_s: Option<u64>,
}

impl Destino {
    /// Sends one event on `caminho`: alone, or in one request with the deliveries of that route
    /// that start at the same moment.
    pub(super) async fn postar_agrupado(
        &self,
        caminho: &str,
        mut payload: Box<RawValue>,
        ctx: &ContextoEnvio,
    ) -> Result<(), FalhaEnvio> {
        loop {
            let Some(agrupador) = self
                .agrupador
                .as_ref()
                .filter(|a| self.lote_maximo > 1 && !a.sem_rota_de_lote.load(Ordering::Relaxed))
            else {
                return self.enviar_um(caminho, payload.get().as_bytes(), ctx).await;
            };
            match self.entrar(agrupador, caminho, payload, ctx) {
                Entrada::Sozinho(payload) => {
                    return self.enviar_um_medido(caminho, &payload, ctx).await;
                }
                Entrada::Juntou(espera) => {
                    return espera.await.unwrap_or_else(|_| {
                        Err(FalhaEnvio::temporaria(
                            "the batch this delivery joined was dropped before it was answered",
                        ))
                    });
                }
                Entrada::Abriu(payload, aberto, sonda) => {
                    return self.conduzir(caminho, payload, (aberto, sonda), ctx).await;
                }
                Entrada::Esperar(devolvido, avisado, prazo) => {
                    let _ = tokio::time::timeout(prazo, avisado).await;
                    payload = devolvido;
                }
            }
        }
    }

    /// Joins the open batch of `caminho`, or opens one, or says to go alone or to wait for the
    /// route's first answer.
    fn entrar(
        &self,
        agrupador: &Agrupador,
        caminho: &str,
        payload: Box<RawValue>,
        ctx: &ContextoEnvio,
    ) -> Entrada {
        let limite = agrupador.limites.atual(caminho, self.lote_maximo);
        if limite <= 1 {
            return Entrada::Sozinho(payload);
        }
        let mut abertos = agrupador.abertos.lock().expect("open batches");
        if let Some(aberto) = abertos.get(caminho) {
            let (resposta, espera) = oneshot::channel();
            let mut juntos = aberto.lock().expect("open batch");
            juntos.push(Pendente {
                ctx: ctx.clone(),
                payload,
                resposta,
            });
            // Full (the opener counts as one): the next delivery opens another.
            if juntos.len() + 1 >= limite {
                drop(juntos);
                abertos.remove(caminho);
                // Its opener may be lingering for a busy route: full, it leaves now.
                agrupador.ocupacoes.de(caminho).avisar();
            }
            return Entrada::Juntou(espera);
        }
        match agrupador
            .limites
            .abrir(caminho, self.lote_maximo, self.tempo_limite)
        {
            limite::Abrir::Sim(limite, _) if limite <= 1 => Entrada::Sozinho(payload),
            limite::Abrir::Sim(_, sonda) => {
                let aberto = Aberto::default();
                abertos.insert(caminho.to_owned(), Arc::clone(&aberto));
                Entrada::Abriu(payload, aberto, sonda)
            }
            limite::Abrir::Esperar(avisado, prazo) => Entrada::Esperar(payload, avisado, prazo),
            limite::Abrir::Sozinho => Entrada::Sozinho(payload),
        }
    }

    /// The opener of a batch: lets the deliveries started with it join, closes the batch and
    /// sends it (alone on the single route when nobody joined: then a probe is given back
    /// before, so that the route's next batch probes it).
    async fn conduzir(
        &self,
        caminho: &str,
        payload: Box<RawValue>,
        (aberto, sonda): (Aberto, Option<limite::Sondagem>),
        ctx: &ContextoEnvio,
    ) -> Result<(), FalhaEnvio> {
        let mut abertura = Abertura {
            destino: self.clone(),
            rota: caminho.to_owned(),
            lote: aberto,
            sonda,
        };
        for _ in 0..CESSOES {
            tokio::task::yield_now().await;
        }
        if let (Some(agrupador), None) = (&self.agrupador, &abertura.sonda) {
            // While the receptor is busy with earlier batches of this route, what arrives
            // meanwhile joins this one (see `ocupacao`); a probe never waits.
            let ate = tokio::time::Instant::now() + ocupacao::ESPERA_MAXIMA;
            let ocupacao = agrupador.ocupacoes.de(caminho);
            ocupacao.esperar_vez(ate, || abertura.aberta()).await;
        }
        let mut juntos = abertura.fechar();
        let sonda = abertura.sonda.take();
        drop(abertura);
        if juntos.is_empty() {
            drop(sonda);
            return self.enviar_um_medido(caminho, &payload, ctx).await;
        }
        // In a task of its own, so that this delivery's timeout does not cut the others' request.
        let (resposta, espera) = oneshot::channel();
        juntos.insert(
            0,
            Pendente {
                ctx: ctx.clone(),
                payload,
                resposta,
            },
        );
        let (destino, rota) = (self.clone(), caminho.to_owned());
        tokio::spawn(async move { destino.enviar_lote(&rota, juntos, sonda).await });
        espera.await.unwrap_or_else(|_| {
            Err(FalhaEnvio::temporaria(
                "the batch of this delivery was dropped before it was answered",
            ))
        })
    }

    /// One request on the single route, its time recorded in the route's batch limit.
    async fn enviar_um_medido(
        &self,
        rota: &str,
        payload: &RawValue,
        ctx: &ContextoEnvio,
    ) -> Result<(), FalhaEnvio> {
        let inicio = Instant::now();
        let desfecho = self.enviar_um(rota, payload.get().as_bytes(), ctx).await;
        self.observar(rota, 1, inicio.elapsed(), false);
        desfecho
    }

    /// Records how long a request of `eventos` events on `rota` took, on the batch route or not
    /// (see [`limite`]).
    fn observar(&self, rota: &str, eventos: usize, levou: Duration, do_lote: bool) {
        if let Some(agrupador) = &self.agrupador {
            agrupador.limites.observar(
                rota,
                eventos,
                levou,
                self.tempo_limite,
                self.lote_maximo,
                do_lote,
            );
        }
    }

    /// Sends `lote` and answers every delivery in it: the deliveries that gave up meanwhile
    /// (their relay's send timeout) are left out, and a batch over [`LIMITE_CORPO_LOTE`] bytes
    /// goes in several requests. The route's probe, when this batch is it, is settled by the
    /// first batch request's answer, or given back when none is made.
    async fn enviar_lote(
        &self,
        rota: &str,
        mut lote: Vec<Pendente>,
        sonda: Option<limite::Sondagem>,
    ) {
        lote.retain(|pendente| !pendente.resposta.is_closed());
        if lote.len() < 2 {
            drop(sonda);
        }
        while !lote.is_empty() {
            let mut bytes = 0;
            let cabem = lote
                .iter()
                .take_while(|p| {
                    bytes += p.payload.get().len() + 96;
                    bytes <= LIMITE_CORPO_LOTE
                })
                .count()
                .max(1);
            let resto = lote.split_off(cabem);
            self.enviar_parte(rota, lote).await;
            lote = resto;
        }
    }

    /// One request for `lote` (alone on the single route when it is one event).
    async fn enviar_parte(&self, rota: &str, lote: Vec<Pendente>) {
        if lote.len() == 1 {
            return self.enviar_sozinhos(rota, lote).await;
        }
        let url = self.url_de(&format!("{}/lote", rota.trim_end_matches('/')));
        let exibida = sem_credenciais(&url);
        let inicio = Instant::now();
        let pedido = self
            .agrupador
            .as_ref()
            .map(|a| a.ocupacoes.de(rota).pedido());
        let respostas = self.pedir_lote(&url, &exibida, &lote).await;
        drop(pedido);
        if let (Err(Recusa::SemRota), Some(agrupador)) = (&respostas, &self.agrupador) {
            // Before the observation wakes the deliveries that waited for this answer.
            agrupador.sem_rota_de_lote.store(true, Ordering::Relaxed);
        }
        self.observar(rota, lote.len(), inicio.elapsed(), true);
        match respostas {
            Ok(desfechos) => {
                for (pendente, desfecho) in lote.into_iter().zip(desfechos) {
                    let _ = pendente.resposta.send(desfecho);
                }
            }
            Err(Recusa::SemRota) => {
                tracing::info!(
                    url = %exibida,
                    "mensageria: the receptor has no batch route; one request per event from now on"
                );
                self.enviar_sozinhos(rota, lote).await;
            }
            Err(Recusa::OLote) => self.enviar_sozinhos(rota, lote).await,
            Err(Recusa::Todos(falha)) => {
                for pendente in lote {
                    let _ = pendente.resposta.send(Err(falha.clone()));
                }
            }
        }
    }

    /// Every event of `lote` on the single route, all at once.
    async fn enviar_sozinhos(&self, rota: &str, lote: Vec<Pendente>) {
        let mut envios = tokio::task::JoinSet::new();
        for pendente in lote {
            let (destino, rota) = (self.clone(), rota.to_owned());
            envios.spawn(async move {
                let desfecho = destino
                    .enviar_um_medido(&rota, &pendente.payload, &pendente.ctx)
                    .await;
                let _ = pendente.resposta.send(desfecho);
            });
        }
        while envios.join_next().await.is_some() {}
    }

    /// One batch request; each event's outcome, in order, or why the batch as a whole failed.
    async fn pedir_lote(
        &self,
        url: &Url,
        exibida: &Url,
        lote: &[Pendente],
    ) -> Result<Vec<Result<(), FalhaEnvio>>, Recusa> {
        let corpo = PedidoLote {
            eventos: lote
                .iter()
                .map(|p| EventoLote {
                    id: p.ctx.id_mensagem(),
                    correlacao: p.ctx.correlacao(),
                    traceparent: p.ctx.rastreamento().map(|r| r.traceparent()),
                    tracestate: p.ctx.rastreamento().and_then(|r| r.tracestate()),
                    payload: &p.payload,
                })
                .collect(),
        };
        let corpo = serde_json::to_vec(&corpo).map_err(|erro| {
            Recusa::Todos(FalhaEnvio::temporaria(format!(
                "the batch does not serialize: {erro}"
            )))
        })?;
        let tipo = lote[0].ctx.tipo();
        let mut pedido = self
            .cliente
            .post(url.clone())
            .timeout(self.tempo_limite)
            .header(CONTENT_TYPE, "application/json")
            .header("x-request-id", Uuid::now_v7().to_string())
            .header("x-mensageria-tipo", tipo)
            .body(corpo);
        if let Some(token) = &self.token {
            pedido = pedido.header(AUTHORIZATION, token.clone());
        }
        let mut resposta = pedido.send().await.map_err(|erro| {
            Recusa::Todos(FalhaEnvio::temporaria(format!(
                "POST {exibida} (batch) failed: {}",
                causas(erro)
            )))
        })?;
        let status = resposta.status();
        let espera = tentar_apos(&resposta);
        if let Err(falha) = recusar_redirecionamento(&resposta, url, exibida, espera) {
            return Err(Recusa::Todos(falha));
        }
        match status.as_u16() {
            404 | 405 => return Err(Recusa::SemRota),
            400 | 413 | 415 | 422 => return Err(Recusa::OLote),
            _ => {}
        }
        let corpo = ler_limitado(&mut resposta, LIMITE_RESPOSTA_LOTE)
            .await
            .map_err(|erro| {
                Recusa::Todos(FalhaEnvio::Temporaria {
                    motivo: format!(
                        "POST {exibida} (batch) answered {status}, then its body failed: {}",
                        causas(erro)
                    ),
                    tentar_apos: espera,
                })
            })?;
        if !status.is_success() {
            let tipo_conteudo = resposta
                .headers()
                .get(CONTENT_TYPE)
                .map(|v| citar(v.as_bytes(), 100))
                .unwrap_or_else(|| "none".to_owned());
            let motivo = format!(
                "POST {exibida} (batch) answered {status} {}",
                descrever_corpo(&corpo, &tipo_conteudo)
            );
            return Err(Recusa::Todos(classificar(status, motivo, espera, &corpo)));
        }
        let resultados = serde_json::from_slice::<RespostaLote>(&corpo)
            .ok()
            .map(|r| r.resultados)
            .filter(|r| {
                r.len() == lote.len()
                    && r.iter().zip(lote).all(|(r, p)| r.id == p.ctx.id_mensagem())
            })
            .ok_or_else(|| Recusa::Todos(FalhaEnvio::Temporaria {
                motivo: format!(
                    "POST {exibida} (batch) answered {status} but not with an outcome for each \
                     event ({}); not a delivery, the rows stay. A proxy or gateway may be in the way",
                    citar(&corpo, 300)
                ),
                tentar_apos: espera,
            }))?;
        Ok(resultados.iter().map(|r| desfecho(r, exibida)).collect())
    }
}

/// Why a batch request did not give an outcome per event.
enum Recusa {
    /// 404/405: the receptor has no batch route.
    SemRota,
    /// The batch as such was refused (400, 413, 415, 422): send each event alone.
    OLote,
    /// The same failure for every event.
    Todos(FalhaEnvio),
}

/// What one event's outcome in a batch answer means for the relay.
fn desfecho(resultado: &ResultadoLote, exibida: &Url) -> Result<(), FalhaEnvio> {
    let motivo = || {
        format!(
            "POST {exibida} (batch): `{}`{}",
            citar(resultado.resultado.as_bytes(), 40),
            resultado
                .mensagem
                .as_deref()
                .map(|m| format!(": {}", citar(m.as_bytes(), 300)))
                .unwrap_or_default()
        )
    };
    match resultado.resultado.as_str() {
        "applied" | "duplicate" => Ok(()),
        "invalid_payload" | "invalid_key" | "payload_too_large" | "rejected" => {
            Err(FalhaEnvio::Permanente { motivo: motivo() })
        }
        "busy" => Err(FalhaEnvio::Sobrecarga {
            motivo: motivo(),
            tentar_apos: resultado.retry_after_s.map(Duration::from_secs),
        }),
        _ => Err(FalhaEnvio::Temporaria {
            motivo: motivo(),
            tentar_apos: resultado.retry_after_s.map(Duration::from_secs),
        }),
    }
}

/// The shared queues a new destination starts with.
pub(super) fn novo_agrupador() -> Option<Arc<Agrupador>> {
    Some(Arc::new(Agrupador::default()))
}
