//! 12. Memory over a long run: a receiving app alone and a relay alone, each a process of its
//!     own (this binary started again with `--papel`), library defaults, delivering `backlog`
//!     events (1M in a full run) over HTTP. This process only feeds the saída (in chunks, so the
//!     backlog stays under two tenths of the run) and samples both processes' resident memory
//!     (`VmRSS`) and CPU from `/proc`: their RSS after the first tenth of the events (warm-up)
//!     and at the end must be within 10% of each other.

use std::io::{BufRead as _, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use mensageria_core::Destino;
use mensageria_core::relay::{Config, Relay};
use sqlx::PgPool;

use crate::Parametros;
use crate::ambiente::{Pg, rss_kib_de, segundos_de_cpu};
use crate::carga::{TOKEN, contar, servir};
use crate::relatorio::{Relatorio, fmt};

/// What a process started with `--papel` runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum Papel {
    /// The receiving app: the receptor router (library defaults, pool of 16) on a free port of
    /// 127.0.0.1; prints `url <base>` on its first line.
    Receptor,
    /// The sending app's relay (library defaults, pool of 8) posting to `--url`.
    Relay,
}

/// Runs `papel` on `esquema` until standard input closes (the parent went away or is done).
pub(crate) async fn rodar_papel(papel: Papel, esquema: String, url: Option<String>) {
    let pg = Pg { schema: esquema };
    let parar = tokio::task::spawn_blocking(|| {
        let mut linha = String::new();
        while std::io::stdin().read_line(&mut linha).is_ok_and(|n| n > 0) {}
    });
    match papel {
        Papel::Receptor => {
            let app = mensageria_axum::router(
                pg.pool(16).await,
                mensageria_axum::Config::new("bench", [TOKEN]),
            )
            .expect("receptor router");
            println!("url {}", servir(app).await);
            let _ = parar.await;
        }
        Papel::Relay => {
            let url = url.expect("--url: the receptor's base URL");
            let destino = Destino::new(&url).expect("URL").com_token(TOKEN);
            let relay = Relay::new(pg.pool(8).await, Config::new("bench"))
                .recurso(destino)
                .spawn()
                .expect("relay");
            let _ = parar.await;
            relay.shutdown(Duration::from_secs(5)).await;
        }
    }
}

/// A child process of this binary in one role; killed when dropped.
struct Processo {
    filho: Child,
    pid: String,
}

impl Processo {
    fn iniciar(papel: &str, esquema: &str, url: Option<&str>) -> Self {
        let mut comando = Command::new(std::env::current_exe().expect("this binary's path"));
        comando.args(["--papel", papel, "--esquema", esquema]);
        if let Some(url) = url {
            comando.args(["--url", url]);
        }
        let filho = comando
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("start this binary again in a role");
        let pid = filho.id().to_string();
        Self { filho, pid }
    }

    /// The first line the process printed.
    fn primeira_linha(&mut self) -> String {
        let saida = self.filho.stdout.take().expect("piped stdout");
        let mut linha = String::new();
        BufReader::new(saida)
            .read_line(&mut linha)
            .expect("read the child's first line");
        linha.trim().to_owned()
    }

    fn rss_mib(&self) -> f64 {
        rss_kib_de(&self.pid) as f64 / 1024.0
    }

    fn cpu_s(&self) -> f64 {
        segundos_de_cpu(&self.pid).unwrap_or(0.0)
    }
}

impl Drop for Processo {
    fn drop(&mut self) {
        drop(self.filho.stdin.take()); // asks it to stop
        let fim = Instant::now() + Duration::from_secs(10);
        while Instant::now() < fim {
            if matches!(self.filho.try_wait(), Ok(Some(_))) {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.filho.kill();
        let _ = self.filho.wait();
    }
}

/// Adds `quantas` rows of `bench.evento` to the saída, numbered from `primeiro`.
async fn semear_eventos(pool: &PgPool, primeiro: i64, quantas: i64) {
    sqlx::query(
        "INSERT INTO mensageria_saida (id_mensagem, tipo, payload, proxima_tentativa_em) \
         SELECT gen_random_uuid(), 'bench.evento', \
                json_build_object('n', g, 'cnpj', '12345678000195', \
                                  'chave', '3524' || lpad(g::text, 40, '0')), \
                now() \
         FROM generate_series($1::bigint, $1::bigint + $2 - 1) AS g",
    )
    .bind(primeiro)
    .bind(quantas)
    .execute(pool)
    .await
    .expect("feed the saída");
}

/// One process's figures at a point of the run.
#[derive(Clone, Copy, Default)]
struct Amostra {
    receptor_mib: f64,
    relay_mib: f64,
}

/// What the run measured.
struct Longa {
    aquecido: Amostra,
    fim: Amostra,
    pico: Amostra,
    por_segundo: f64,
    /// CPU per event, µs: the receiving app's process, the relay's.
    cpu_receptor: f64,
    cpu_relay: f64,
}

async fn rodar(total: i64) -> Longa {
    let pg = Pg::novo().await;
    let pool = pg.pool(2).await;
    let mut receptor = Processo::iniciar("receptor", &pg.schema, None);
    let url = receptor
        .primeira_linha()
        .strip_prefix("url ")
        .expect("the receptor prints its URL first")
        .to_owned();
    let relay = Processo::iniciar("relay", &pg.schema, Some(&url));
    let pedaco = (total / 10).max(1);
    let aquecimento = total / 10;
    let (mut semeadas, mut aquecido, mut pico) = (0_i64, None, Amostra::default());
    let cpu_antes = (receptor.cpu_s(), relay.cpu_s());
    let inicio = Instant::now();
    loop {
        let aplicadas = contar(&pool, "SELECT count(*) FROM efeito").await;
        if semeadas < total && semeadas - aplicadas < pedaco {
            let quantas = pedaco.min(total - semeadas);
            semear_eventos(&pool, semeadas + 1, quantas).await;
            semeadas += quantas;
        }
        let agora = Amostra {
            receptor_mib: receptor.rss_mib(),
            relay_mib: relay.rss_mib(),
        };
        pico.receptor_mib = pico.receptor_mib.max(agora.receptor_mib);
        pico.relay_mib = pico.relay_mib.max(agora.relay_mib);
        if aquecido.is_none() && aplicadas >= aquecimento {
            aquecido = Some(agora);
        }
        if aplicadas >= total {
            break;
        }
        assert!(
            inicio.elapsed() < Duration::from_secs(1800),
            "the long run did not deliver {total} events within 30 min ({aplicadas} applied)"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let segundos = inicio.elapsed().as_secs_f64();
    let fim = Amostra {
        receptor_mib: receptor.rss_mib(),
        relay_mib: relay.rss_mib(),
    };
    let cpu = |depois: f64, antes: f64| (depois - antes) * 1e6 / total as f64;
    let (cpu_receptor, cpu_relay) = (
        cpu(receptor.cpu_s(), cpu_antes.0),
        cpu(relay.cpu_s(), cpu_antes.1),
    );
    drop(relay);
    drop(receptor);
    let aplicadas = contar(&pool, "SELECT count(DISTINCT n) FROM efeito").await;
    assert_eq!(aplicadas, total, "every event applied once");
    pool.close().await;
    pg.descartar().await;
    Longa {
        aquecido: aquecido.expect("the warm-up point is reached before the end"),
        fim,
        pico,
        por_segundo: total as f64 / segundos,
        cpu_receptor,
        cpu_relay,
    }
}

pub(crate) async fn medir(rel: &mut Relatorio, p: &Parametros) {
    println!("12. memory over a long run");
    let total = p.backlog;
    let l = rodar(total).await;
    let secao = "memory";
    let depois =
        |quem: &str, quantas: i64| format!("{quem}: RSS after {} events", fmt(quantas as f64));
    let aquecimento = total / 10;
    for (quem, aquecido, fim, pico) in [
        (
            "receiving app (receptor, pool of 16)",
            l.aquecido.receptor_mib,
            l.fim.receptor_mib,
            l.pico.receptor_mib,
        ),
        (
            "relay (pool of 8)",
            l.aquecido.relay_mib,
            l.fim.relay_mib,
            l.pico.relay_mib,
        ),
    ] {
        rel.medir(secao, depois(quem, aquecimento), vec![aquecido], "MiB");
        rel.medir(secao, depois(quem, total), vec![fim], "MiB");
        rel.medir(secao, format!("{quem}: peak RSS"), vec![pico], "MiB");
        rel.meta(
            format!(
                "{quem}: RSS after {} events within 10% of its value after the first {}",
                fmt(total as f64),
                fmt(aquecimento as f64)
            ),
            format!(
                "{fim:.1} vs {aquecido:.1} MiB ({:+.1}%; peak {pico:.1})",
                (fim / aquecido - 1.0) * 100.0
            ),
            fim <= aquecido * 1.10,
        );
    }
    rel.medir(
        secao,
        "delivered, relay and receiving app in processes of their own",
        vec![l.por_segundo],
        "msg/s",
    );
    rel.medir(
        secao,
        "CPU per event, the receiving app's process",
        vec![l.cpu_receptor],
        "µs",
    );
    rel.medir(
        secao,
        "CPU per event, the relay's process",
        vec![l.cpu_relay],
        "µs",
    );
    rel.nota("Memory: the receiving app (mensageria_axum::router, pool of 16) and the relay (library defaults, pool of 8, Destino::new(url).com_token(..)) each run as a process of their own, this binary started again with `--papel`; the bench process feeds the saída in chunks of a tenth of the run (SQL, as if producers had enqueued) and reads each process's VmRSS and CPU from /proc every 500 ms. Warm-up is the first tenth of the events; the effect table is checked for every event applied once.");
}
