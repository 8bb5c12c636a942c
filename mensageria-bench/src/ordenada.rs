//! 11. Ordered delivery end to end (keys × steps per second), on both transports: 40 keys × 50
//!     steps enqueued step-major in one transaction, then delivered by a relay with library
//!     defaults over HTTP (to a receptor router) and over JetStream (to a `Consumidor`), each
//!     applying a one-INSERT effect stamped with `clock_timestamp()`. Counted until every step is
//!     applied; checked: every step once, every key in order. Beside each, in the same
//!     repetition, the same relay paced by its poll alone (`com_acordar_no_processo(false)`):
//!     what a key's advance costs when the next step waits for the next poll; and the defaults
//!     with one poison key (key 0's receptor refuses every step, temporarily, forever): the
//!     other 39 keys' steps per second, against the clean run's, is the share of throughput a
//!     poison key leaves the others.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use mensageria_axum::{Rejeicao, receptor};
use mensageria_core::relay::{Config as ConfigRelay, Relay};
use mensageria_core::{ContextoEnvio, Destino, FalhaEnvio, enfileirar_ordenado, enviador};
use mensageria_nats::async_nats::{self, jetstream};
use mensageria_nats::{ConfigConsumidor, Consumidor, Fluxo, Publicador};
use serde::{Deserialize, Serialize};
use sqlx::{PgPool, Postgres, Transaction};

use crate::Parametros;
use crate::ambiente::Pg;
use crate::carga::{TOKEN, esperar, servir};
use crate::relatorio::{Relatorio, fmt};

const CHAVES: i64 = 40;
const PASSOS: i64 = 50;

/// One step of an entity, over HTTP.
#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct PassoHttp {
    chave: i64,
    passo: i64,
}

#[enviador(tipo = "bench.passo", ordem = evento.chave)]
async fn enviar_passo(evento: PassoHttp, ctx: &ContextoEnvio) -> Result<(), FalhaEnvio> {
    ctx.exigir::<Destino>()?.postar(&evento, ctx).await
}

#[receptor(tipo = "bench.passo", chave_natural = (evento.chave, evento.passo))]
async fn receber_passo(
    tx: &mut Transaction<'_, Postgres>,
    evento: PassoHttp,
) -> Result<(), Rejeicao> {
    aplicar(tx, evento.chave, evento.passo).await
}

/// One step of an entity, over JetStream.
#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct PassoNats {
    chave: i64,
    passo: i64,
}

#[enviador(tipo = "bench.passo-nats", ordem = evento.chave)]
async fn publicar_passo(evento: PassoNats, ctx: &ContextoEnvio) -> Result<(), FalhaEnvio> {
    ctx.exigir::<Publicador>()?.publicar(&evento, ctx).await
}

#[receptor(tipo = "bench.passo-nats", chave_natural = (evento.chave, evento.passo))]
async fn receber_passo_nats(
    tx: &mut Transaction<'_, Postgres>,
    evento: PassoNats,
) -> Result<(), Rejeicao> {
    aplicar(tx, evento.chave, evento.passo).await
}

/// While set, key 0's receptor refuses every step (temporarily): a poison key.
static VENENO: AtomicBool = AtomicBool::new(false);

async fn aplicar(
    tx: &mut Transaction<'_, Postgres>,
    chave: i64,
    passo: i64,
) -> Result<(), Rejeicao> {
    if chave == 0 && VENENO.load(Ordering::Relaxed) {
        return Err(Rejeicao::temporaria("bench: key 0 is poison"));
    }
    sqlx::query("INSERT INTO passo_bench (chave, passo) VALUES ($1, $2)")
        .bind(chave)
        .bind(passo)
        .execute(&mut **tx)
        .await?;
    Ok(())
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Via {
    Http,
    Nats,
}

/// What one run saw.
struct Rodada {
    passos_por_segundo: f64,
    /// The longest wait of a key between two of its steps' effects, in ms.
    maior_pausa_ms: f64,
    fora_de_ordem: i64,
    duas_vezes: i64,
}

/// The sending and the receiving schema, the receptor's URL and the stream.
struct Bancada {
    envio: Pg,
    recepcao: Pg,
    produtor: PgPool,
    efeitos: PgPool,
    url: String,
    js: jetstream::Context,
    fluxo: Fluxo,
}

impl Bancada {
    async fn montar() -> Self {
        let (envio, recepcao) = (Pg::novo().await, Pg::novo().await);
        let efeitos = recepcao.pool(4).await;
        sqlx::query(
            "CREATE TABLE passo_bench (ordem BIGSERIAL PRIMARY KEY, chave BIGINT NOT NULL, \
             passo BIGINT NOT NULL, em TIMESTAMPTZ NOT NULL DEFAULT clock_timestamp())",
        )
        .execute(&efeitos)
        .await
        .expect("effect table");
        let app = mensageria_axum::router(
            recepcao.pool(8).await,
            mensageria_axum::Config::new("bench-ordem", [TOKEN]),
        )
        .expect("receptor router");
        let url = servir(app).await;
        let nats = std::env::var("NATS_URL").unwrap_or_else(|_| "nats://127.0.0.1:4222".into());
        let cliente = async_nats::connect(&nats)
            .await
            .unwrap_or_else(|erro| panic!("nats-server with JetStream at {nats}: {erro}"));
        let js = jetstream::new(cliente);
        let sufixo = uuid::Uuid::now_v7().simple();
        let fluxo = Fluxo::new(format!("BENCHO{sufixo}"), format!("bencho{sufixo}"))
            .expect("stream name")
            .com_replicas(1)
            .garantir(&js)
            .await
            .expect("the run's stream");
        Self {
            produtor: envio.pool(2).await,
            envio,
            recepcao,
            efeitos,
            url,
            js,
            fluxo,
        }
    }

    /// One run; `veneno`: key 0 refused forever, the run counted until the other keys' steps
    /// are applied.
    async fn rodada(&self, via: Via, acordar: bool, veneno: bool) -> Rodada {
        // The steps' natural keys repeat from run to run: their dedup records go too, and what a
        // poison run left (key 0's rows in the saída, its receiving-side dead letters).
        sqlx::query("TRUNCATE passo_bench, mensageria_recebidas, mensageria_mortas_recebidas")
            .execute(&self.efeitos)
            .await
            .expect("truncate");
        sqlx::query("TRUNCATE mensageria_saida, mensageria_mortas")
            .execute(&self.produtor)
            .await
            .expect("truncate the saída");
        VENENO.store(veneno, Ordering::Relaxed);
        let esperados = if veneno {
            (CHAVES - 1) * PASSOS
        } else {
            CHAVES * PASSOS
        };
        let mut tx = self.produtor.begin().await.expect("begin");
        for passo in 0..PASSOS {
            for chave in 0..CHAVES {
                let ordem = format!("bench:{chave}");
                match via {
                    Via::Http => {
                        enfileirar_ordenado(&mut *tx, &PassoHttp { chave, passo }, &ordem).await
                    }
                    Via::Nats => {
                        enfileirar_ordenado(&mut *tx, &PassoNats { chave, passo }, &ordem).await
                    }
                }
                .expect("enqueue");
            }
        }
        tx.commit().await.expect("commit");
        let consumidor = match via {
            Via::Nats => Some(
                Consumidor::new(
                    self.efeitos.clone(),
                    self.js.clone(),
                    self.fluxo.clone(),
                    ConfigConsumidor::new("bench-ordem").com_tipos(["bench.passo-nats"]),
                )
                .spawn()
                .await
                .expect("consumer"),
            ),
            Via::Http => None,
        };
        let config = ConfigRelay::new("bench-ordem").com_acordar_no_processo(acordar);
        let inicio = Instant::now();
        let relay = match via {
            Via::Http => Relay::new(self.envio.pool(4).await, config)
                .recurso(Destino::new(&self.url).expect("URL").com_token(TOKEN))
                .spawn(),
            Via::Nats => Relay::new(self.envio.pool(4).await, config)
                .recurso(Publicador::new(self.js.clone(), &self.fluxo))
                .spawn(),
        }
        .expect("relay");
        let todos = esperar(Duration::from_secs(600), || async {
            sqlx::query_scalar::<_, i64>("SELECT count(*) FROM passo_bench")
                .fetch_one(&self.efeitos)
                .await
                .expect("count")
                >= esperados
        })
        .await;
        let segundos = inicio.elapsed().as_secs_f64();
        assert!(
            todos,
            "every ordered step (but the poison key's) applied within 600 s"
        );
        relay.shutdown(Duration::from_secs(5)).await;
        if let Some(consumidor) = consumidor {
            consumidor.shutdown(Duration::from_secs(5)).await;
        }
        let (fora_de_ordem, duas_vezes, maior_pausa_ms): (i64, i64, f64) = sqlx::query_as(
            "WITH s AS (SELECT chave, passo, em, \
                 lag(passo) OVER (PARTITION BY chave ORDER BY ordem) AS anterior, \
                 lag(em) OVER (PARTITION BY chave ORDER BY ordem) AS antes \
               FROM passo_bench) \
             SELECT count(*) FILTER (WHERE anterior IS NOT NULL AND passo <> anterior + 1), \
                    (SELECT count(*) - count(DISTINCT (chave, passo)) FROM passo_bench), \
                    COALESCE(max(EXTRACT(EPOCH FROM em - antes) * 1000), 0)::float8 \
             FROM s",
        )
        .fetch_one(&self.efeitos)
        .await
        .expect("check the order");
        VENENO.store(false, Ordering::Relaxed);
        Rodada {
            passos_por_segundo: esperados as f64 / segundos,
            maior_pausa_ms,
            fora_de_ordem,
            duas_vezes,
        }
    }

    async fn descartar(self) {
        let _ = self.js.delete_stream(self.fluxo.nome()).await;
        self.produtor.close().await;
        self.efeitos.close().await;
        self.envio.descartar().await;
        self.recepcao.descartar().await;
    }
}

pub(crate) async fn medir(rel: &mut Relatorio, p: &Parametros) {
    println!("11. ordered delivery end to end ({CHAVES} keys x {PASSOS} steps)");
    let bancada = Bancada::montar().await;
    let mut resultados: Vec<(Via, bool, bool, Vec<Rodada>)> = [
        (Via::Http, true, false),
        (Via::Http, false, false),
        (Via::Nats, true, false),
        (Via::Nats, false, false),
        (Via::Http, true, true),
        (Via::Nats, true, true),
    ]
    .into_iter()
    .map(|(via, acordar, veneno)| (via, acordar, veneno, Vec::new()))
    .collect();
    for repeticao in 0..p.repeticoes {
        // The order rotates, so a change of load hits every variant alike.
        for i in 0..resultados.len() {
            let k = (i + repeticao) % resultados.len();
            let (via, acordar, veneno) = (resultados[k].0, resultados[k].1, resultados[k].2);
            let rodada = bancada.rodada(via, acordar, veneno).await;
            resultados[k].3.push(rodada);
        }
    }
    let mut taxas = Vec::new();
    for (via, acordar, veneno, rodadas) in &resultados {
        let nome = format!(
            "{}, {}",
            if *via == Via::Http {
                "HTTP"
            } else {
                "JetStream"
            },
            match (acordar, veneno) {
                (_, true) => "defaults, key 0 poison (the other 39 keys' steps)",
                (true, false) =>
                    "defaults (the next step claimed as soon as the previous one is settled)",
                (false, false) => "paced by the poll (no wake-ups)",
            }
        );
        let taxa = rel.medir(
            "ordered e2e",
            format!("steps/s, {nome}"),
            rodadas.iter().map(|r| r.passos_por_segundo).collect(),
            "steps/s",
        );
        rel.medir(
            "ordered e2e",
            format!("longest pause of a key, {nome}"),
            rodadas.iter().map(|r| r.maior_pausa_ms).collect(),
            "ms",
        );
        let (fora, duas): (i64, i64) = rodadas
            .iter()
            .fold((0, 0), |(f, d), r| (f + r.fora_de_ordem, d + r.duas_vezes));
        assert_eq!((fora, duas), (0, 0), "{nome}: out of order, twice");
        taxas.push(taxa);
    }
    rel.meta(
        format!("ordered throughput over JetStream, {CHAVES} keys: ≥ 5× the 40 steps/s of before"),
        format!(
            "{} steps/s ({:.1}× 40; {:.1}× the poll-paced relay's {} in the same run); HTTP {} \
             ({:.1}× its poll-paced {}); 0 out of order, 0 twice",
            fmt(taxas[2]),
            taxas[2] / 40.0,
            taxas[2] / taxas[3],
            fmt(taxas[3]),
            fmt(taxas[0]),
            taxas[0] / taxas[1],
            fmt(taxas[1])
        ),
        taxas[2] >= 200.0,
    );
    // Per repetition, so each ratio pairs runs seconds apart.
    let razao = |veneno: usize, limpo: usize| -> Vec<f64> {
        resultados[veneno]
            .3
            .iter()
            .zip(&resultados[limpo].3)
            .map(|(v, l)| v.passos_por_segundo / l.passos_por_segundo)
            .collect()
    };
    let http = rel.medir(
        "ordered e2e",
        "poison key: the other keys' steps/s over the clean run's, HTTP",
        razao(4, 0),
        "×",
    );
    let nats = rel.medir(
        "ordered e2e",
        "poison key: the other keys' steps/s over the clean run's, JetStream",
        razao(5, 2),
        "×",
    );
    rel.meta(
        format!("one poison key of {CHAVES} (refused forever, `Bloquear`): the others keep ≥ 0.8× their throughput"),
        format!(
            "JetStream {}× of the clean run ({} vs {} steps/s), HTTP {}× ({} vs {}); every other \
             key in order",
            fmt(nats),
            fmt(taxas[5]),
            fmt(taxas[2]),
            fmt(http),
            fmt(taxas[4]),
            fmt(taxas[0])
        ),
        nats >= 0.8 && http >= 0.8,
    );
    bancada.descartar().await;
}
