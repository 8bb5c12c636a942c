//! Group commit over HTTP: the deliveries of one route that are in flight at the same time leave
//! in one request to the receptor's batch route (`POST {url}/lote`), and each gets its own
//! outcome back.
//!
//! Nothing waits to fill a batch. A delivery that finds its route idle leaves at once, alone, on
//! the single route (as without batches: same latency, same CloudEvents request). Deliveries
//! that arrive while a request of their route is out queue up and leave together as soon as it
//! returns, up to [`Destino::com_lote_maximo`] events per request. So batches form only under
//! load, and grow with it: with 64 deliveries in flight, most of them ride a shared request.
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
use std::time::Duration;

use reqwest::Url;
use reqwest::header::{AUTHORIZATION, CONTENT_TYPE};
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use tokio::sync::oneshot;
use uuid::Uuid;

use super::{
    Destino, causas, citar, classificar, ler_limitado, recusar_redirecionamento, sem_credenciais,
    tentar_apos,
};
use crate::{ContextoEnvio, FalhaEnvio};

/// How much of a batch's answer is read.
const LIMITE_RESPOSTA_LOTE: usize = 1024 * 1024;

/// The largest batch body this side builds (the receptor's default limit is 4 MiB).
const LIMITE_CORPO_LOTE: usize = 2 * 1024 * 1024;

/// One delivery waiting for its route's next request.
struct Pendente {
    ctx: ContextoEnvio,
    payload: Box<RawValue>,
    resposta: oneshot::Sender<Result<(), FalhaEnvio>>,
}

/// The queues of a destination's routes, shared by its clones.
#[derive(Default)]
pub(super) struct Agrupador {
    filas: Mutex<HashMap<String, Fila>>,
    /// The receptor has no batch route: one request per event from now on.
    sem_rota_de_lote: AtomicBool,
}

#[derive(Default)]
struct Fila {
    pendentes: Vec<Pendente>,
    /// A request of this route is out.
    ocupada: bool,
}

/// The right to send on an idle route; dropping it hands the route to what queued meanwhile.
struct Vez {
    destino: Destino,
    rota: String,
}

impl Drop for Vez {
    fn drop(&mut self) {
        self.destino.liberar(std::mem::take(&mut self.rota));
    }
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
    /// Whether this destination sends batches now.
    fn agrupa(&self) -> bool {
        self.lote_maximo > 1
            && self
                .agrupador
                .as_ref()
                .is_some_and(|a| !a.sem_rota_de_lote.load(Ordering::Relaxed))
    }

    /// Sends one event on `caminho`: alone at once when the route is idle, otherwise with
    /// whatever else queued behind the request that is out.
    pub(super) async fn postar_agrupado(
        &self,
        caminho: &str,
        payload: Box<RawValue>,
        ctx: &ContextoEnvio,
    ) -> Result<(), FalhaEnvio> {
        let Some(agrupador) = self.agrupador.as_ref().filter(|_| self.agrupa()) else {
            return self.enviar_um(caminho, payload.get().as_bytes(), ctx).await;
        };
        let espera = {
            let mut filas = agrupador.filas.lock().expect("batch queues");
            let fila = filas.entry(caminho.to_owned()).or_default();
            if fila.ocupada {
                let (resposta, espera) = oneshot::channel();
                fila.pendentes.push(Pendente {
                    ctx: ctx.clone(),
                    payload,
                    resposta,
                });
                Err(espera)
            } else {
                fila.ocupada = true;
                Ok(payload)
            }
        };
        match espera {
            Ok(payload) => {
                let _vez = Vez {
                    destino: self.clone(),
                    rota: caminho.to_owned(),
                };
                self.enviar_um(caminho, payload.get().as_bytes(), ctx).await
            }
            Err(espera) => espera.await.unwrap_or_else(|_| {
                Err(FalhaEnvio::temporaria(
                    "the batch this delivery was queued in was dropped before it was sent",
                ))
            }),
        }
    }

    /// The request that held `rota` is done: the route goes idle, or what queued meanwhile leaves
    /// in batches, from a task of its own, until the queue is empty.
    fn liberar(&self, rota: String) {
        let Some(lote) = self.proximo_lote(&rota) else {
            return;
        };
        match tokio::runtime::Handle::try_current() {
            Ok(runtime) => {
                let destino = self.clone();
                runtime.spawn(async move {
                    let mut lote = lote;
                    loop {
                        destino.enviar_lote(&rota, lote).await;
                        match destino.proximo_lote(&rota) {
                            Some(proximo) => lote = proximo,
                            None => return,
                        }
                    }
                });
            }
            Err(_) => {
                for pendente in lote {
                    let _ = pendente.resposta.send(Err(FalhaEnvio::temporaria(
                        "no async runtime left to send this batch",
                    )));
                }
                while let Some(lote) = self.proximo_lote(&rota) {
                    drop(lote);
                }
            }
        }
    }

    /// Up to `lote_maximo` events (and [`LIMITE_CORPO_LOTE`] bytes) of the queue of `rota`, or
    /// `None` (the route goes idle) when nothing is waiting.
    fn proximo_lote(&self, rota: &str) -> Option<Vec<Pendente>> {
        let agrupador = self.agrupador.as_ref()?;
        let mut filas = agrupador.filas.lock().expect("batch queues");
        let fila = filas.get_mut(rota)?;
        if fila.pendentes.is_empty() {
            fila.ocupada = false;
            return None;
        }
        let mut bytes = 0;
        let quantos = fila
            .pendentes
            .iter()
            .take(self.lote_maximo)
            .take_while(|p| {
                bytes += p.payload.get().len() + 96;
                bytes <= LIMITE_CORPO_LOTE
            })
            .count()
            .max(1);
        Some(fila.pendentes.drain(..quantos).collect())
    }

    /// Sends `lote` and answers every delivery in it.
    async fn enviar_lote(&self, rota: &str, lote: Vec<Pendente>) {
        if lote.len() == 1 {
            return self.enviar_sozinhos(rota, lote).await;
        }
        let url = self.url_de(&format!("{}/lote", rota.trim_end_matches('/')));
        let exibida = sem_credenciais(&url);
        match self.pedir_lote(&url, &exibida, &lote).await {
            Ok(desfechos) => {
                for (pendente, desfecho) in lote.into_iter().zip(desfechos) {
                    let _ = pendente.resposta.send(desfecho);
                }
            }
            Err(Recusa::SemRota) => {
                if let Some(agrupador) = &self.agrupador {
                    agrupador.sem_rota_de_lote.store(true, Ordering::Relaxed);
                }
                tracing::info!(
                    url = %exibida,
                    "mensageria: the receptor has no batch route; one request per event from now on"
                );
                self.enviar_sozinhos(rota, lote).await;
            }
            Err(Recusa::OLote) => self.enviar_sozinhos(rota, lote).await,
            Err(Recusa::Todos {
                motivo,
                tentar_apos,
                permanente,
            }) => {
                for pendente in lote {
                    let falha = if permanente {
                        FalhaEnvio::Permanente {
                            motivo: motivo.clone(),
                        }
                    } else {
                        FalhaEnvio::Temporaria {
                            motivo: motivo.clone(),
                            tentar_apos,
                        }
                    };
                    let _ = pendente.resposta.send(Err(falha));
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
                    .enviar_um(&rota, pendente.payload.get().as_bytes(), &pendente.ctx)
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
                    payload: &p.payload,
                })
                .collect(),
        };
        let corpo = serde_json::to_vec(&corpo).map_err(|erro| Recusa::Todos {
            motivo: format!("the batch does not serialize: {erro}"),
            tentar_apos: None,
            permanente: false,
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
        let mut resposta = pedido.send().await.map_err(|erro| Recusa::Todos {
            motivo: format!("POST {exibida} (batch) failed: {}", causas(erro)),
            tentar_apos: None,
            permanente: false,
        })?;
        let status = resposta.status();
        let espera = tentar_apos(&resposta);
        if let Err(falha) = recusar_redirecionamento(&resposta, url, exibida, espera) {
            return Err(Recusa::de(falha));
        }
        match status.as_u16() {
            404 | 405 => return Err(Recusa::SemRota),
            400 | 413 | 415 | 422 => return Err(Recusa::OLote),
            _ => {}
        }
        let corpo = ler_limitado(&mut resposta, LIMITE_RESPOSTA_LOTE)
            .await
            .map_err(|erro| Recusa::Todos {
                motivo: format!(
                    "POST {exibida} (batch) answered {status}, then its body failed: {}",
                    causas(erro)
                ),
                tentar_apos: espera,
                permanente: false,
            })?;
        if !status.is_success() {
            let motivo = format!(
                "POST {exibida} (batch) answered {status}: {}",
                citar(&corpo, 300)
            );
            return Err(Recusa::de(classificar(status, motivo, espera)));
        }
        let resultados = serde_json::from_slice::<RespostaLote>(&corpo)
            .ok()
            .map(|r| r.resultados)
            .filter(|r| {
                r.len() == lote.len()
                    && r.iter().zip(lote).all(|(r, p)| r.id == p.ctx.id_mensagem())
            })
            .ok_or_else(|| Recusa::Todos {
                motivo: format!(
                    "POST {exibida} (batch) answered {status} but not with an outcome for each \
                     event ({}); not a delivery, the rows stay. A proxy or gateway may be in the way",
                    citar(&corpo, 300)
                ),
                tentar_apos: espera,
                permanente: false,
            })?;
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
    Todos {
        motivo: String,
        tentar_apos: Option<Duration>,
        permanente: bool,
    },
}

impl Recusa {
    fn de(falha: FalhaEnvio) -> Self {
        match falha {
            FalhaEnvio::Permanente { motivo } => Recusa::Todos {
                motivo,
                tentar_apos: None,
                permanente: true,
            },
            FalhaEnvio::Temporaria {
                motivo,
                tentar_apos,
            } => Recusa::Todos {
                motivo,
                tentar_apos,
                permanente: false,
            },
        }
    }
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
