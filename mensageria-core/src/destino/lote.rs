//! Group commit over HTTP: the deliveries of one route that start together leave in one request
//! to the receptor's batch route (`POST {url}/lote`), and each gets its own outcome back.
//!
//! Nothing waits to fill a batch, and no delivery waits for another request to come back. The
//! first delivery of a route opens a batch and yields to the runtime a few times (microseconds,
//! no timer): the deliveries the relay started in the same claim join it meanwhile. Then the
//! batch closes: alone, its one event goes on the single route (as without batches: same
//! latency, same CloudEvents request); with company, all go in one request to the batch route,
//! up to [`Destino::com_lote_maximo`] events. At low rates every delivery goes alone; under load
//! a claim of 64 due rows becomes a request or two.
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
    /// The receptor has no batch route: one request per event from now on.
    sem_rota_de_lote: AtomicBool,
}

/// How many times the opener of a batch yields before closing it.
const CESSOES: usize = 4;

/// Closes the batch its opener opened, also when the opener's future is dropped while it
/// yields: what joined is sent anyway.
struct Abertura {
    destino: Destino,
    rota: String,
    lote: Aberto,
}

impl Abertura {
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
                runtime.spawn(async move { destino.enviar_lote(&rota, juntos).await });
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
    /// Sends one event on `caminho`: alone, or in one request with the deliveries of that route
    /// that start at the same moment.
    pub(super) async fn postar_agrupado(
        &self,
        caminho: &str,
        payload: Box<RawValue>,
        ctx: &ContextoEnvio,
    ) -> Result<(), FalhaEnvio> {
        let Some(agrupador) = self
            .agrupador
            .as_ref()
            .filter(|a| self.lote_maximo > 1 && !a.sem_rota_de_lote.load(Ordering::Relaxed))
        else {
            return self.enviar_um(caminho, payload.get().as_bytes(), ctx).await;
        };
        // Join the open batch of this route, or open one.
        let lote = {
            let mut abertos = agrupador.abertos.lock().expect("open batches");
            match abertos.get(caminho) {
                Some(aberto) => {
                    let (resposta, espera) = oneshot::channel();
                    let mut juntos = aberto.lock().expect("open batch");
                    juntos.push(Pendente {
                        ctx: ctx.clone(),
                        payload,
                        resposta,
                    });
                    // Full (the opener counts as one): the next delivery opens another.
                    if juntos.len() + 1 >= self.lote_maximo {
                        drop(juntos);
                        abertos.remove(caminho);
                    }
                    Err(espera)
                }
                None => {
                    let aberto = Aberto::default();
                    abertos.insert(caminho.to_owned(), Arc::clone(&aberto));
                    Ok((payload, aberto))
                }
            }
        };
        let (payload, aberto) = match lote {
            Ok(aberto) => aberto,
            Err(espera) => {
                return espera.await.unwrap_or_else(|_| {
                    Err(FalhaEnvio::temporaria(
                        "the batch this delivery joined was dropped before it was answered",
                    ))
                });
            }
        };
        let abertura = Abertura {
            destino: self.clone(),
            rota: caminho.to_owned(),
            lote: aberto,
        };
        for _ in 0..CESSOES {
            tokio::task::yield_now().await;
        }
        let mut juntos = abertura.fechar();
        drop(abertura);
        if juntos.is_empty() {
            return self.enviar_um(caminho, payload.get().as_bytes(), ctx).await;
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
        tokio::spawn(async move { destino.enviar_lote(&rota, juntos).await });
        espera.await.unwrap_or_else(|_| {
            Err(FalhaEnvio::temporaria(
                "the batch of this delivery was dropped before it was answered",
            ))
        })
    }

    /// Sends `lote` and answers every delivery in it: the deliveries that gave up meanwhile
    /// (their relay's send timeout) are left out, and a batch over [`LIMITE_CORPO_LOTE`] bytes
    /// goes in several requests.
    async fn enviar_lote(&self, rota: &str, mut lote: Vec<Pendente>) {
        lote.retain(|pendente| !pendente.resposta.is_closed());
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
