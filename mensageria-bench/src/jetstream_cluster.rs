//! 12. JetStream on a three-node cluster (three nats-server processes on loopback ports, routed,
//!     each with a store of its own, started here and stopped by PID): section 5's end-to-end run
//!     on a one-replica and a three-replica stream of the same cluster, in turn within each
//!     repetition (what replication costs per event), and scale-out on the three-replica stream:
//!     2 sending relays × 3 receiving apps × 2 consumers each. Lost and twice are counted per app
//!     and asserted 0.

use crate::Parametros;
use crate::estatistica::mediana;
use crate::jetstream::{Bancada, Forma, Rodada};
use crate::relatorio::{Relatorio, fmt};

#[path = "../../tests/src/nats/cluster.rs"]
#[allow(dead_code, unreachable_pub)]
// the harness serves the tests too: its fault injection, its `pub`
mod cluster;

const SECAO: &str = "JetStream cluster";

const FORMAS: [(&str, Forma); 3] = [
    (
        "R1 stream, 1 relay → 1 app",
        Forma {
            replicas: 1,
            relays: 1,
            apps: 1,
            por_app: 1,
        },
    ),
    (
        "R3 stream, 1 relay → 1 app",
        Forma {
            replicas: 3,
            relays: 1,
            apps: 1,
            por_app: 1,
        },
    ),
    (
        "R3 stream, 2 relays → 3 apps × 2 consumers",
        Forma {
            replicas: 3,
            relays: 2,
            apps: 3,
            por_app: 2,
        },
    ),
];

pub(crate) async fn medir(rel: &mut Relatorio, p: &Parametros) {
    println!("12. JetStream on a three-node cluster: R1 vs R3, and scale-out 2 x 3 x 2");
    let cluster = cluster::Cluster::iniciar().await;
    let b = Bancada::montar_em(3, &cluster.urls()).await;
    let mut series: [Vec<Rodada>; 3] = Default::default();
    for repeticao in 0..p.repeticoes {
        for passo in 0..FORMAS.len() {
            let n = (repeticao + passo) % FORMAS.len();
            let (nome, forma) = FORMAS[n];
            let rodada = b.rodada_em(forma, p.duracao, false).await;
            println!(
                "    {nome}: {} events, {} msg/s, lost {}, twice {}",
                rodada.eventos,
                fmt(rodada.entregues),
                rodada.perdidos,
                rodada.duas_vezes
            );
            series[n].push(rodada);
        }
    }
    b.descartar().await;
    drop(cluster);
    let mut entregues = [0.0; 3];
    for (n, rodadas) in series.iter().enumerate() {
        let (nome, forma) = FORMAS[n];
        let (perdidos, duas_vezes, eventos) = rodadas.iter().fold((0, 0, 0), |(p, d, e), r| {
            (p + r.perdidos, d + r.duas_vezes, e + r.eventos)
        });
        assert_eq!(
            (perdidos, duas_vezes),
            (0, 0),
            "{nome}: every app applies every event once"
        );
        entregues[n] = rel.medir(
            SECAO,
            format!("{nome}: delivered, every effect committed in each app"),
            rodadas.iter().map(|r| r.entregues).collect(),
            "msg/s",
        );
        rel.medir(
            SECAO,
            format!(
                "{nome}: events not yet applied when the producers stopped (the most of one app)"
            ),
            rodadas.iter().map(|r| r.pendentes).collect(),
            "events",
        );
        for (parte, f) in [
            (
                "this process",
                (|c: &crate::ambiente::Cpu| c.proprio) as fn(&_) -> f64,
            ),
            ("PostgreSQL", |c| c.postgres),
            ("nats-server (3 nodes)", |c| c.nats),
        ] {
            rel.medir(
                SECAO,
                format!("{nome}: CPU per event, {parte}"),
                rodadas.iter().map(|r| f(&r.cpu)).collect(),
                "µs",
            );
        }
        println!(
            "  {nome}: {eventos} events × {} apps: lost 0, twice 0",
            forma.apps
        );
    }
    let razoes: Vec<f64> = series[1]
        .iter()
        .zip(&series[0])
        .map(|(r3, r1)| r3.entregues / r1.entregues)
        .collect();
    let razao = mediana(&razoes);
    rel.medir(SECAO, "R3 / R1 delivered, per repetition", razoes, "×");
    let nats = |n: usize| mediana(&series[n].iter().map(|r| r.cpu.nats).collect::<Vec<_>>());
    rel.meta(
        "JetStream end to end on an R3 stream ≥ 0.8 × on an R1 stream (same cluster, same run)",
        format!(
            "{razao:.2}× ({} vs {} msg/s); nats-server CPU per event {} vs {} µs",
            fmt(entregues[1]),
            fmt(entregues[0]),
            fmt(nats(1)),
            fmt(nats(0))
        ),
        razao >= 0.8,
    );
    rel.meta(
        "scale-out on R3: 2 relays × 3 receiving apps × 2 consumers, each app applies every event",
        format!(
            "{} msg/s per app, lost 0, twice 0 ({} events × 3 apps)",
            fmt(entregues[2]),
            series[2].iter().map(|r| r.eventos).sum::<i64>()
        ),
        true,
    );
}
