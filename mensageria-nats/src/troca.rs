//! Leaving a server through which JetStream no longer answers.
//!
//! The NATS client changes server only when its connection breaks. A node cut from the rest of
//! its cluster (a partition, a dead link between racks) keeps its clients' connections open and
//! answers their pings, while nothing of JetStream answers through it: publishes wait for a
//! PubAck that never comes, pulls for messages the stream's leader, on the other side, cannot
//! send. Left alone, an app on that node stops until the partition heals. After
//! [`SILENCIO`] of that, the publisher and the consumer ask their client to reconnect; the client
//! picks a server of its pool at random ([`crate::conectar`]), again while it picks the silent
//! one (up to [`TENTATIVAS`] times), and the app follows the majority. Only on a cluster: a
//! single server has nowhere else to send the app.

use std::sync::{Arc, Mutex};

use tokio::time::{Duration, Instant};

/// How long JetStream must stay silent through a server before the client leaves it: longer
/// than a healthy round trip under load, shorter than a stream's leader election (4–9 s on
/// nats-server 2.9), which a client on the minority side would otherwise wait out and beyond.
pub(crate) const SILENCIO: Duration = Duration::from_secs(3);

/// The least time between two changes of server by one publisher or consumer: the new server
/// gets time to prove itself, and a cluster that is electing a leader everywhere costs a
/// reconnect every few seconds, not a storm.
const INTERVALO: Duration = Duration::from_secs(5);

/// How many reconnects one change of server may take: each lands on a random server of the
/// pool, the silent one and the ones left before included (1 in 3 on three nodes, each).
const TENTATIVAS: usize = 5;

/// How long one reconnect may take before the next is asked for.
const RECONEXAO: Duration = Duration::from_secs(2);

/// How long a server left for its silence is avoided: a reconnect that lands on it again is
/// asked for again (a partition lasts longer than an election).
const EVITAR: Duration = Duration::from_secs(60);

/// What a publisher or a consumer remembers of its changes of server (shared by its clones and
/// lanes): when it last asked for one, and the servers it left, with when.
#[derive(Clone, Debug, Default)]
pub(crate) struct Troca {
    estado: Arc<Mutex<Estado>>,
}

#[derive(Debug, Default)]
struct Estado {
    ultima: Option<Instant>,
    deixados: Vec<(String, Instant)>,
}

impl Troca {
    /// JetStream has not answered through `cliente` since `desde`: once that lasts
    /// [`SILENCIO`], asks the client to reconnect (at most once per [`INTERVALO`]); whether it
    /// asked.
    pub(crate) async fn sem_resposta(&self, cliente: &async_nats::Client, desde: Instant) -> bool {
        // A single server has no other to go to: a reconnect would only drop what is in
        // flight (an ack lost is a redelivery after the ack wait).
        if desde.elapsed() < SILENCIO || cliente.server_info().cluster.is_none() {
            return false;
        }
        let silente = cliente.server_info().server_name;
        let evitados: Vec<String> = {
            let mut estado = self.estado.lock().expect("the changes of server");
            if estado
                .ultima
                .is_some_and(|quando| quando.elapsed() < INTERVALO)
            {
                return false;
            }
            estado.ultima = Some(Instant::now());
            estado
                .deixados
                .retain(|(nome, quando)| quando.elapsed() < EVITAR && *nome != silente);
            estado.deixados.push((silente.clone(), Instant::now()));
            estado
                .deixados
                .iter()
                .map(|(nome, _)| nome.clone())
                .collect()
        };
        tracing::warn!(
            server = %silente,
            silent_for = ?desde.elapsed(),
            "mensageria nats: JetStream does not answer through this server (cut from its \
             cluster's majority?); reconnecting to another server of the pool"
        );
        metrics::counter!("mensageria_nats_server_changes_total").increment(1);
        for _ in 0..TENTATIVAS {
            if !reconectar(cliente).await {
                return false;
            }
            if !evitados.contains(&cliente.server_info().server_name) {
                return true;
            }
        }
        false
    }
}

/// Asks `cliente` to reconnect and waits (up to [`RECONEXAO`]) until it has; whether it has.
async fn reconectar(cliente: &async_nats::Client) -> bool {
    use std::sync::atomic::Ordering;
    let estatisticas = cliente.statistics();
    let antes = estatisticas.connects.load(Ordering::Relaxed);
    if cliente.force_reconnect().await.is_err() {
        return false;
    }
    let limite = Instant::now() + RECONEXAO;
    while Instant::now() < limite {
        if estatisticas.connects.load(Ordering::Relaxed) > antes {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    false
}
