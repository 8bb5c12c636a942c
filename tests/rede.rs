//! Network faults between real hosts (issue 27): the relay, the receiving app and PostgreSQL
//! each run in a network namespace of a lab ([`mensageria_testes::rede`]), and the faults
//! happen to packets: partitions where TCP connections stay open and silent, a one-way
//! partition, a link that flaps. Every scenario produces its events while the fault is on,
//! heals it, waits for the saída to drain, and checks the fault suite's ledger ([`verificar`]):
//! lost 0, unexpected 0, applied twice 0. It also reports how long draining took after the heal
//! and what the relays and the receptor logged about the fault.
//!
//! It needs root and `ip netns`, and each scenario takes the machine for 10–30 s, so every test
//! is `#[ignore]`d in the parallel suite; `scripts/test` runs them alone afterwards:
//!
//! ```text
//! cargo test -p mensageria-testes --all-features --test rede -- --ignored --test-threads=1 --nocapture
//! ```
//!
//! Without root or `ip netns` each test prints why it did not run (`SKIPPED …`) and passes,
//! unless `MENSAGERIA_TESTE_REDE_EXIGIDA=1` (set by `scripts/test` once it found the machine
//! able), which turns the skip into a failure. By hand, `MENSAGERIA_TESTE_REDE_EVENTOS` (100)
//! and `MENSAGERIA_TESTE_REDE_CONCORRENCIA` (128) size the loss-and-delay scenario, and
//! `MENSAGERIA_TESTE_REDE_PARTICAO_PG_S` (10) the relay ↔ PostgreSQL partition. The soak
//! (`soak_com_nemeses`) cycles through all six nemeses while two relays deliver
//! `MENSAGERIA_TESTE_REDE_SOAK_MENSAGENS` events (2,000 in the suite, a million by hand), seeded by
//! `MENSAGERIA_TESTE_REDE_SOAK_SEMENTE` (57). Each row goes to `target/tmp/rede/` with the
//! processes' logs; `docs/FAULTS.md` gives the figures. `MENSAGERIA_REDE_MANTER=1` keeps each lab's
//! directory (`/tmp/mrede-*`: every process's whole log, PostgreSQL's too) until the next run.

#[path = "comum/evento_rede.rs"]
mod evento_rede;

use std::path::PathBuf;
use std::time::Duration;

use evento_rede::EventoRede;
use mensageria_core::{ContextoEnvio, FalhaEnvio, enviador};
use mensageria_testes::faltas::{Linha, TABELAS, produzir_com, tabela};
use mensageria_testes::rede::{Lab, Maquina, PORTA_RECEPTOR, Processo, Pulo, ResumoDeLog, pular};
use sqlx::PgPool;
use tokio::task::JoinHandle;
use tokio::time::Instant;

const APP: &str = env!("CARGO_BIN_EXE_app-rede");

/// Give up when the saída has not drained this long after the heal.
const DRENAR: Duration = Duration::from_secs(90);

/// More WARN/ERROR lines of mensageria's own than this per second of a scenario, from one
/// process, is a storm: the library logs a failing destination once per cool-down and a failed
/// delivery once per attempt (which backs off), never in a loop (the runs log 1–2 per second).
const TEMPESTADE_POR_SEGUNDO: f64 = 5.0;

/// INFO lines that say something about a fault (besides every WARN and ERROR).
const INFO_RELEVANTE: &[&str] = &[
    "the database is back",
    "lease lost before settling",
    "took back the rows",
    "instance name is free",
];

#[enviador(tipo = "rede.evento")]
async fn nao_enviar(_evento: EventoRede, _ctx: &ContextoEnvio) -> Result<(), FalhaEnvio> {
    Err(FalhaEnvio::temporaria(
        "rede.evento is delivered by the lab's relays",
    ))
}

/// How a scenario's apps are set up.
struct Ajustes {
    /// Each request is held this long before it reaches the receptor.
    atraso: Duration,
    /// Each receptor transaction stays open this long after its effect (the rest of its work).
    trabalho: Duration,
    /// The relay's HTTP timeout (its send timeout is 500 ms more).
    envio: Duration,
    /// The relay's deliveries in flight at once.
    concorrencia: usize,
    /// The relay's lease.
    lease: Duration,
}

impl Default for Ajustes {
    fn default() -> Self {
        Self {
            atraso: Duration::ZERO,
            trabalho: Duration::ZERO,
            envio: Duration::from_secs(2),
            concorrencia: 16,
            lease: Duration::from_secs(2),
        }
    }
}

/// One lab at a time: each takes the machine's cores, and its timings are the figures.
static VEZ: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// One scenario's lab: the receiving app, the relays, the control pool (Unix socket).
/// Fields drop in order: the processes, then the lab (namespaces, PostgreSQL), then the turn.
struct Cena {
    relays: Vec<Processo>,
    receptor: Processo,
    pool: PgPool,
    lab: Lab,
    nome: &'static str,
    semente: u64,
    inicio: Instant,
    _vez: tokio::sync::MutexGuard<'static, ()>,
}

impl Cena {
    /// A lab with the receiving app and one relay per `(host, instance name)`, set up as
    /// `ajustes` says; `None` (and a message saying why) when this machine cannot run the lab.
    async fn nova(
        nome: &'static str,
        semente: u64,
        ajustes: Ajustes,
        relays: &[(Maquina, &str)],
    ) -> Option<Cena> {
        let vez = VEZ.lock().await;
        let lab = match Lab::montar() {
            Ok(lab) => lab,
            Err(pulo) => {
                pular(nome, &pulo);
                return None;
            }
        };
        let pool = lab.pool_de_controle(8).await;
        mensageria_core::migrar(&pool).await.unwrap();
        sqlx::raw_sql(TABELAS).execute(&pool).await.unwrap();
        let receptor = lab
            .iniciar(
                Maquina::Receptor,
                "recv",
                APP,
                "receptor",
                &[
                    ("DATABASE_URL", lab.url_pg()),
                    (
                        "REDE_ESCUTAR",
                        format!("{}:{PORTA_RECEPTOR}", lab.ip(Maquina::Receptor)),
                    ),
                    ("REDE_CONTROLE", lab.socket_pg().display().to_string()),
                    ("REDE_ATRASO_MS", ajustes.atraso.as_millis().to_string()),
                    ("REDE_EFEITO_MS", ajustes.trabalho.as_millis().to_string()),
                ],
            )
            .await;
        let mut processos = Vec::new();
        for &(maquina, instancia) in relays {
            processos.push(
                lab.iniciar(
                    maquina,
                    instancia,
                    APP,
                    "relay",
                    &[
                        ("DATABASE_URL", lab.url_pg()),
                        ("REDE_DESTINO", lab.url_receptor()),
                        ("MENSAGERIA_INSTANCE", instancia.to_owned()),
                        ("REDE_ENVIO_MS", ajustes.envio.as_millis().to_string()),
                        ("REDE_CONCORRENCIA", ajustes.concorrencia.to_string()),
                        ("REDE_LEASE_MS", ajustes.lease.as_millis().to_string()),
                    ],
                )
                .await,
            );
        }
        Some(Cena {
            relays: processos,
            receptor,
            pool,
            lab,
            nome,
            semente,
            inicio: Instant::now(),
            _vez: vez,
        })
    }

    /// Producers, in the background: events `faixa`, each a ledger row and its enqueue in one
    /// transaction (through the Unix socket, outside the faults), spread evenly over `duracao`.
    /// The task returns the attempts.
    fn produzir_ao_longo(&self, faixa: std::ops::Range<i64>, duracao: Duration) -> JoinHandle<u64> {
        let pool = self.pool.clone();
        let passo = duracao / u32::try_from(faixa.end - faixa.start).unwrap().max(1);
        tokio::spawn(async move {
            let inicio = Instant::now();
            let mut tentadas = 0;
            for (i, n) in faixa.enumerate() {
                tokio::time::sleep_until(inicio + passo * i as u32).await;
                tentadas += 1;
                produzir_com(&pool, n, false, &EventoRede { n })
                    .await
                    .expect("commit an event (Unix socket)");
            }
            tentadas
        })
    }

    async fn contar(&self, sql: &'static str) -> i64 {
        sqlx::query_scalar(sql).fetch_one(&self.pool).await.unwrap()
    }

    async fn aplicadas(&self) -> i64 {
        self.contar("SELECT count(DISTINCT n) FROM efeito").await
    }

    async fn pendentes(&self) -> i64 {
        pendentes_em(&self.pool).await
    }

    /// Waits until at least `alvo` events were applied.
    async fn esperar_aplicadas(&self, alvo: i64, limite: Duration) {
        let inicio = Instant::now();
        while self.aplicadas().await < alvo {
            assert!(
                inicio.elapsed() < limite,
                "{}: {alvo} events not applied within {limite:?}",
                self.nome
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Waits for an empty saída; returns how long it took.
    async fn drenar(&self) -> Duration {
        self.drenar_em(DRENAR).await
    }

    /// Waits for an empty saída, failing after `limite`; returns how long it took.
    async fn drenar_em(&self, limite: Duration) -> Duration {
        let inicio = Instant::now();
        while self.pendentes().await > 0 {
            assert!(
                inicio.elapsed() < limite,
                "{}: the saída did not drain within {limite:?} of the heal ({} left)",
                self.nome,
                self.pendentes().await
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        inicio.elapsed()
    }

    /// Receptor transactions open right now, as PostgreSQL sees them.
    async fn transacoes_do_receptor(&self) -> i64 {
        let sql = format!(
            "SELECT count(*) FROM pg_stat_activity WHERE client_addr = '{}' \
             AND xact_start IS NOT NULL",
            self.lab.ip(Maquina::Receptor)
        );
        sqlx::query_scalar(sqlx::AssertSqlSafe(sql))
            .fetch_one(&self.pool)
            .await
            .unwrap()
    }

    /// Waits (polling, no pause) until the receptor has a transaction open; false after
    /// `limite` without one.
    async fn esperar_transacao_do_receptor(&self, limite: Duration) -> bool {
        let inicio = Instant::now();
        while inicio.elapsed() < limite {
            if self.transacoes_do_receptor().await > 0 {
                return true;
            }
        }
        false
    }

    /// Deliveries that reached the receptor so far.
    async fn entregas(&mut self) -> u64 {
        self.receptor
            .pedir("contar", Duration::from_secs(10))
            .await
            .parse()
            .expect("a count of deliveries")
    }

    /// What each process logged about the faults so far.
    fn logs(&self) -> Vec<ResumoDeLog> {
        self.relays
            .iter()
            .chain(std::iter::once(&self.receptor))
            .map(|p| p.resumo_do_log(INFO_RELEVANTE))
            .collect()
    }

    /// Stops the relays (nothing can arrive late), checks the ledger through the receiving
    /// app, records the row in `target/tmp/rede/`, prints it with the logs, and asserts it.
    async fn concluir(
        mut self,
        descricao: &str,
        tentadas: u64,
        drenagem: Duration,
        mut evidencias: Vec<String>,
    ) -> (Linha, Vec<ResumoDeLog>) {
        for relay in &mut self.relays {
            relay.matar();
        }
        let pedido = serde_json::json!({
            "cenario": self.nome,
            "descricao": descricao,
            "tentadas": tentadas,
            "semente": self.semente,
            "drenagem_ms": drenagem.as_millis() as u64,
        });
        let resposta = self
            .receptor
            .pedir(&format!("verificar {pedido}"), Duration::from_secs(60))
            .await;
        let mut linha: Linha = serde_json::from_str(&resposta).unwrap_or_else(|erro| {
            panic!("a matrix row from the receiving app ({erro}): {resposta}")
        });
        let logs = self.logs();
        let dir = dir_das_linhas();
        let contagens: Vec<String> = logs
            .iter()
            .map(|l| format!("{} {}", l.nome, l.avisos()))
            .collect();
        evidencias.push(format!("WARN/ERROR lines: {}", contagens.join(", ")));
        linha.observacao = evidencias.join("; ");
        linha.gravar(&dir);
        println!("{}", tabela(std::slice::from_ref(&linha)));
        for log in &logs {
            println!("  {}", log.texto());
        }
        linha.afirmar();
        let segundos = self.inicio.elapsed().as_secs_f64();
        for log in &logs {
            assert!(
                log.avisos_da_biblioteca() as f64 <= TEMPESTADE_POR_SEGUNDO * segundos,
                "a log storm ({segundos:.0} s): one line per failure expected: {}",
                log.texto()
            );
        }
        (linha, logs)
    }
}

/// Rows in the saída (delivered rows leave it).
async fn pendentes_em(pool: &PgPool) -> i64 {
    sqlx::query_scalar("SELECT count(*) FROM mensageria_saida")
        .fetch_one(pool)
        .await
        .unwrap()
}

/// Where the rows and the processes' logs are kept (`target/tmp/rede/`).
fn dir_das_linhas() -> PathBuf {
    PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("rede")
}

impl Drop for Cena {
    /// Keeps the processes' logs beside the row (the lab's directory goes with the lab), also
    /// when the scenario failed.
    fn drop(&mut self) {
        let dir = dir_das_linhas();
        let _ = std::fs::create_dir_all(&dir);
        for processo in self.relays.iter().chain(std::iter::once(&self.receptor)) {
            let copia = dir.join(format!("{}.{}.log", self.nome, processo.nome()));
            let _ = std::fs::copy(processo.log(), &copia);
        }
    }
}

/// `Some(cena)` or return: the lab cannot run here (the reason is printed).
macro_rules! cena {
    ($($arg:expr),* $(,)?) => {
        match Cena::nova($($arg),*).await {
            Some(cena) => cena,
            None => return,
        }
    };
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs root and network namespaces; scripts/test runs it alone"]
async fn particao_relay_receptor_por_20_s() {
    let mut c = cena!(
        "rede_particao_relay_receptor_por_20_s",
        51,
        Ajustes::default(),
        &[(Maquina::Relay1, "r1")],
    );
    // Warm-up: the relay's connections to the receptor are open when the partition comes.
    let mut tentadas = c.produzir_ao_longo(0..20, Duration::ZERO).await.unwrap();
    c.esperar_aplicadas(20, Duration::from_secs(30)).await;
    let antes = c.entregas().await;
    c.lab.separar(Maquina::Relay1, Maquina::Receptor);
    let corte = Instant::now();
    tentadas += c
        .produzir_ao_longo(20..320, Duration::from_secs(5))
        .await
        .unwrap();
    tokio::time::sleep_until(corte + Duration::from_secs(20)).await;
    let durante = c.entregas().await - antes;
    let avisos_durante: u64 = c.logs().iter().map(ResumoDeLog::avisos_da_biblioteca).sum();
    c.lab.curar();
    let drenagem = c.drenar().await;
    let (linha, _) = c
        .concluir(
            "relay ↔ receptor partitioned both ways for 20 s (packets dropped in the router; \
             connections open and silent), 300 events committed meanwhile",
            tentadas,
            drenagem,
            vec![format!(
                "{durante} deliveries reached the receptor during the partition; \
                 {avisos_durante} WARN/ERROR lines of mensageria's during it"
            )],
        )
        .await;
    assert_eq!(durante, 0, "nothing crosses a partition");
    assert!(
        drenagem <= Duration::from_secs(10),
        "drained {drenagem:?} after the heal: {linha:#?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs root and network namespaces; scripts/test runs it alone"]
async fn particao_de_mao_unica_respostas_perdidas() {
    // Each request held 100 ms before the receptor, so that some are in flight at any moment.
    let mut c = cena!(
        "rede_particao_de_mao_unica_respostas_perdidas",
        52,
        Ajustes {
            atraso: Duration::from_millis(100),
            ..Ajustes::default()
        },
        &[(Maquina::Relay1, "r1")],
    );
    let produtores = c.produzir_ao_longo(0..300, Duration::from_secs(6));
    c.esperar_aplicadas(20, Duration::from_secs(30)).await;
    // Requests still reach the receptor (which applies them and answers), its answers and
    // acknowledgements to the relay are dropped: the lost ack, at the packet level.
    let antes = c.entregas().await;
    c.lab.cortar(Maquina::Receptor, Maquina::Relay1);
    let corte = Instant::now();
    let tentadas = produtores.await.unwrap();
    tokio::time::sleep_until(corte + Duration::from_secs(10)).await;
    let durante = c.entregas().await - antes;
    c.lab.curar();
    let drenagem = c.drenar().await;
    let (linha, _) = c
        .concluir(
            "one-way partition for 10 s: the relay's packets reach the receptor, the \
             receptor's (answers, TCP acks) are dropped; 300 events committed from 1 s before",
            tentadas,
            drenagem,
            vec![format!(
                "{durante} deliveries reached the receptor (and were applied or found \
                 duplicate) while its answers were dropped"
            )],
        )
        .await;
    assert!(
        durante > 0,
        "no request crossed the one-way partition: {linha:#?}"
    );
    assert!(
        linha.entregas_duplicadas > 0,
        "the lost answers caused no redelivery: {linha:#?}"
    );
    assert!(
        drenagem <= Duration::from_secs(15),
        "drained {drenagem:?} after the heal: {linha:#?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs root and network namespaces; scripts/test runs it alone"]
async fn particao_relay_postgres_com_entregas_em_voo() {
    // Two replicas of the app on two hosts; each request held 300 ms before the receptor, so
    // that r1 holds deliveries in flight when its database goes away.
    let c = cena!(
        "rede_particao_relay_postgres_com_entregas_em_voo",
        53,
        Ajustes {
            atraso: Duration::from_millis(300),
            ..Ajustes::default()
        },
        &[(Maquina::Relay1, "r1"), (Maquina::Relay2, "r2")],
    );
    let produtores = c.produzir_ao_longo(0..300, Duration::from_secs(8));
    let inicio = Instant::now();
    let mut de_r1 = Vec::new();
    while de_r1.len() < 6 {
        assert!(
            inicio.elapsed() < Duration::from_secs(30),
            "r1 never held 6 deliveries in flight"
        );
        de_r1 = sqlx::query_scalar::<_, i64>(
            "SELECT (payload->>'n')::int8 FROM mensageria_saida WHERE lease_dono = 'app-rede@r1'",
        )
        .fetch_all(&c.pool)
        .await
        .unwrap();
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    // 10 s in the suite; longer by hand (`MENSAGERIA_TESTE_REDE_PARTICAO_PG_S`).
    let particao = Duration::from_secs(
        std::env::var("MENSAGERIA_TESTE_REDE_PARTICAO_PG_S")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(10),
    );
    c.lab.separar(Maquina::Relay1, Maquina::Banco);
    let corte = Instant::now();
    // r2 takes r1's rows back once r1's heartbeat is half a lease (1 s) old, and delivers them
    // again; r1's own deliveries of them reach the receptor too, but it cannot settle them.
    let tentadas = produtores.await.unwrap();
    tokio::time::sleep_until(corte + particao).await;
    let retomadas: i64 =
        sqlx::query_scalar("SELECT count(DISTINCT n) FROM efeito WHERE n = ANY($1)")
            .bind(&de_r1)
            .fetch_one(&c.pool)
            .await
            .unwrap();
    let pendentes_na_cura = c.pendentes().await;
    let cura_no_banco: chrono::DateTime<chrono::Utc> = sqlx::query_scalar("SELECT now()")
        .fetch_one(&c.pool)
        .await
        .unwrap();
    c.lab.curar();
    let cura = Instant::now();
    let drenagem = c.drenar().await;
    // r1 waits on connections that were silent for the whole partition: its late settlements
    // and its heartbeat land when TCP retransmits after the heal.
    let mut cercadas = 0;
    let mut batimento = None;
    while cura.elapsed() < Duration::from_secs(180) && (cercadas == 0 || batimento.is_none()) {
        cercadas = c.relays[0]
            .resumo_do_log(INFO_RELEVANTE)
            .contar("lease lost before settling");
        if batimento.is_none() {
            let visto: i64 = sqlx::query_scalar(
                "SELECT count(*) FROM mensageria_instancias \
                 WHERE instancia = 'app-rede@r1' AND visto_em > $1",
            )
            .bind(cura_no_banco)
            .fetch_one(&c.pool)
            .await
            .unwrap();
            if visto > 0 {
                batimento = Some(cura.elapsed());
            }
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let cercadas_em = cura.elapsed();
    // r1 delivers again: it leases some of 100 more events.
    let mais = c.produzir_ao_longo(300..400, Duration::from_secs(2));
    let mut r1_voltou = false;
    let inicio = Instant::now();
    while !r1_voltou && inicio.elapsed() < Duration::from_secs(10) {
        r1_voltou = c
            .contar("SELECT count(*) FROM mensageria_saida WHERE lease_dono = 'app-rede@r1'")
            .await
            > 0;
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    let tentadas = tentadas + mais.await.unwrap();
    c.drenar().await;
    let (linha, logs) = c
        .concluir(
            &format!(
                "relay r1 ↔ PostgreSQL partitioned both ways for {particao:?} while r1 holds \
                 deliveries in flight (lease 2 s); sibling r2 on another host takes them back; \
                 300 events committed meanwhile, 100 more after the heal"
            ),
            tentadas,
            drenagem,
            vec![
                format!(
                    "r1 held {} rows at the cut; {retomadas} of them applied during the \
                     partition; {pendentes_na_cura} rows pending at the heal",
                    de_r1.len()
                ),
                format!(
                    "r1's heartbeat back {:.1?} after the heal, its late settlements fenced: \
                     {cercadas} (by {cercadas_em:.1?}); r1 claimed again after: {}",
                    batimento.unwrap_or_default(),
                    if r1_voltou { "yes" } else { "NO" }
                ),
            ],
        )
        .await;
    let r2 = &logs[1];
    assert!(
        batimento.is_some(),
        "r1's heartbeat never came back: {}",
        logs[0].texto()
    );
    assert!(
        r1_voltou,
        "r1 never claimed again after the heal: {}",
        logs[0].texto()
    );
    assert_eq!(
        retomadas,
        de_r1.len() as i64,
        "r2 applied r1's rows during the partition: {linha:#?}"
    );
    assert!(
        r2.contar("took back the rows") > 0,
        "r2 took r1's rows back: {}",
        r2.texto()
    );
    assert!(
        cercadas > 0,
        "r1's late settlements were fenced: {}",
        logs[0].texto()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs root and network namespaces; scripts/test runs it alone"]
async fn particao_receptor_postgres_no_meio_da_transacao() {
    // Each receptor transaction stays open 50 ms after its effect (the rest of its work).
    let c = cena!(
        "rede_particao_receptor_postgres_no_meio_da_transacao",
        54,
        Ajustes {
            trabalho: Duration::from_millis(50),
            ..Ajustes::default()
        },
        &[(Maquina::Relay1, "r1")],
    );
    let produtores = c.produzir_ao_longo(0..300, Duration::from_secs(6));
    c.esperar_aplicadas(20, Duration::from_secs(30)).await;
    // Cut the moment the receptor has a transaction open (its dedup record and effect written
    // or on their way, the commit not yet).
    assert!(
        c.esperar_transacao_do_receptor(Duration::from_secs(30))
            .await,
        "the receptor never had a transaction open"
    );
    c.lab.separar(Maquina::Receptor, Maquina::Banco);
    let corte = Instant::now();
    // What PostgreSQL saw open at the cut (it hears nothing more from those connections).
    let abertas = c.transacoes_do_receptor().await;
    let tentadas = produtores.await.unwrap();
    tokio::time::sleep_until(corte + Duration::from_secs(10)).await;
    let antes_da_cura = c.aplicadas().await;
    c.lab.curar();
    let drenagem = c.drenar().await;
    let (linha, _) = c
        .concluir(
            "receptor ↔ PostgreSQL partitioned both ways for 10 s, cut while a receptor \
             transaction is open; 300 events committed from 1 s before",
            tentadas,
            drenagem,
            vec![format!(
                "{abertas} receptor transactions open at the cut; {antes_da_cura} events \
                 applied by the heal"
            )],
        )
        .await;
    assert!(
        abertas > 0,
        "no receptor transaction was open at the cut: {linha:#?}"
    );
    assert!(
        drenagem <= Duration::from_secs(30),
        "drained {drenagem:?} after the heal: {linha:#?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs root and network namespaces; scripts/test runs it alone"]
async fn enlace_do_receptor_intermitente() {
    let c = cena!(
        "rede_enlace_do_receptor_intermitente",
        56,
        Ajustes::default(),
        &[(Maquina::Relay1, "r1")],
    );
    let produtores = c.produzir_ao_longo(0..300, Duration::from_secs(17));
    c.esperar_aplicadas(10, Duration::from_secs(30)).await;
    // The receiving host's link (to the relay and to PostgreSQL alike) goes down for 2 s and
    // up for 2 s, five times; the producers stop in the middle of the last drop.
    let mut quedas = 0;
    for vez in 0..5 {
        c.lab.derrubar(Maquina::Receptor);
        quedas += 1;
        tokio::time::sleep(Duration::from_secs(2)).await;
        c.lab.levantar(Maquina::Receptor);
        if vez < 4 {
            tokio::time::sleep(Duration::from_secs(2)).await;
        }
    }
    let drenagem = c.drenar().await;
    let tentadas = produtores.await.unwrap();
    let (linha, _) = c
        .concluir(
            "the receiving host's link flaps: down 2 s, up 2 s, five times, while 300 events \
             are committed over the first 17 s",
            tentadas,
            drenagem,
            vec![format!("{quedas} link drops")],
        )
        .await;
    assert!(
        drenagem <= Duration::from_secs(30),
        "drained {drenagem:?} after the link settled: {linha:#?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs root and network namespaces; scripts/test runs it alone"]
async fn perda_atraso_e_reordenacao_em_todos_os_enlaces() {
    let nome = "rede_perda_atraso_e_reordenacao_em_todos_os_enlaces";
    // Settings for a slow network: a lost segment costs a retransmission timeout of 200 ms or
    // more (several in a row back off), so a 10 s send timeout, and the library's lease (6 s)
    // and deliveries in flight (128; `MENSAGERIA_TESTE_REDE_CONCORRENCIA` to change).
    let ajustes = Ajustes {
        envio: Duration::from_secs(10),
        lease: Duration::from_secs(6),
        concorrencia: std::env::var("MENSAGERIA_TESTE_REDE_CONCORRENCIA")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(128),
        ..Ajustes::default()
    };
    // 100 events in the suite (the drain runs at the degraded network's pace); more by hand.
    let eventos: i64 = std::env::var("MENSAGERIA_TESTE_REDE_EVENTOS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(100);
    let ajustes_concorrencia = ajustes.concorrencia;
    let c = cena!(nome, 55, ajustes, &[(Maquina::Relay1, "r1")]);
    // Every packet between two hosts (relay ↔ receptor, relay ↔ PostgreSQL, receptor ↔
    // PostgreSQL), both ways: 10% lost, the others delayed 50 ms ± 30 ms, so reordered.
    let atraso = (Duration::from_millis(50), Duration::from_millis(30));
    let mut fio = match c.lab.degradar(0.10, atraso.0, atraso.1, c.semente).await {
        Ok(fio) => fio,
        Err(pulo) => return pular(nome, &pulo),
    };
    let inicio = Instant::now();
    let tentadas = c
        .produzir_ao_longo(0..eventos, Duration::from_secs(10))
        .await
        .unwrap();
    // Drained under the fault: it stays on for the whole run.
    let drenagem = c.drenar().await;
    let duracao = inicio.elapsed();
    let contagem: serde_json::Value =
        serde_json::from_str(&fio.pedir("contar", Duration::from_secs(10)).await)
            .expect("the wire's counts");
    c.lab.normalizar();
    let (recebidos, perdidos, fora_de_ordem) = (
        contagem["recebidos"].as_u64().unwrap_or(0),
        contagem["perdidos"].as_u64().unwrap_or(0),
        contagem["fora_de_ordem"].as_u64().unwrap_or(0),
    );
    let descricao = format!(
        "every link (relay ↔ receptor, relay ↔ PostgreSQL, receptor ↔ PostgreSQL, both ways) \
         loses 10% of packets and delays the others 50 ms ± 30 ms (normal), which reorders \
         them, for the whole run: {eventos} events over 10 s, {} deliveries in flight at most, \
         drained under the fault (drain time from the last commit)",
        ajustes_concorrencia
    );
    let (linha, _) = c
        .concluir(
            &descricao,
            tentadas,
            drenagem,
            vec![format!(
                "{recebidos} packets through the wire, {perdidos} lost ({:.1}%), {fora_de_ordem} \
                 overtaken by a later packet of their flow; the whole run took {duracao:.1?}",
                100.0 * perdidos as f64 / recebidos.max(1) as f64
            )],
        )
        .await;
    assert!(
        perdidos > 0 && fora_de_ordem > 0,
        "the wire lost or reordered nothing: {linha:#?}"
    );
}

/// The soak's nemeses: the six scenarios above, a few seconds each.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Nemese {
    /// Relay ↔ receptor partitioned both ways (one relay or both).
    ParticaoRelayReceptor,
    /// One way: the receptor's packets to one relay (answers, TCP acks) dropped.
    RespostasPerdidas,
    /// One relay ↔ PostgreSQL partitioned both ways; its sibling takes its rows back.
    ParticaoRelayPostgres,
    /// Receptor ↔ PostgreSQL partitioned both ways, cut while a receptor transaction is open.
    ParticaoReceptorPostgres,
    /// Every link loses 10% of packets and delays the others 50 ms ± 30 ms (reordering).
    PerdaAtraso,
    /// One host's link down and up, 0.5–1 s each, for the stretch.
    EnlaceIntermitente,
}

impl Nemese {
    const TODAS: [Nemese; 6] = [
        Nemese::ParticaoRelayReceptor,
        Nemese::RespostasPerdidas,
        Nemese::ParticaoRelayPostgres,
        Nemese::ParticaoReceptorPostgres,
        Nemese::PerdaAtraso,
        Nemese::EnlaceIntermitente,
    ];

    fn nome(self) -> &'static str {
        match self {
            Nemese::ParticaoRelayReceptor => "relay ↔ receptor partition",
            Nemese::RespostasPerdidas => "one-way partition (answers dropped)",
            Nemese::ParticaoRelayPostgres => "relay ↔ PostgreSQL partition",
            Nemese::ParticaoReceptorPostgres => "receptor ↔ PostgreSQL partition",
            Nemese::PerdaAtraso => "loss + delay + reordering",
            Nemese::EnlaceIntermitente => "flapping link",
        }
    }
}

/// What the soak's schedule did.
#[derive(Default)]
struct Injecoes {
    /// Injections by nemesis.
    vezes: std::collections::BTreeMap<Nemese, u32>,
    /// Time under a nemesis.
    sob_falha: Duration,
    /// Receptor ↔ PostgreSQL cuts made while a receptor transaction was open.
    cortes_com_transacao: u32,
    /// Rows the cut relay held (leased) at its relay ↔ PostgreSQL cuts, in all.
    linhas_do_relay_cortado: i64,
    /// Link drops of the flapping nemesis.
    quedas: u32,
    /// The lossy wire's counts, summed: packets through it, lost, overtaken.
    fio: (u64, u64, u64),
    /// The last nemesis injected.
    ultima: Option<Nemese>,
}

impl Injecoes {
    fn texto(&self) -> String {
        let vezes: Vec<String> = Nemese::TODAS
            .iter()
            .map(|n| format!("{} {}", n.nome(), self.vezes.get(n).copied().unwrap_or(0)))
            .collect();
        vezes.join(", ")
    }

    fn completas(&self) -> bool {
        Nemese::TODAS.iter().all(|n| self.vezes.contains_key(n))
    }
}

/// A variable of the environment, or `padrao`.
fn ambiente<T: std::str::FromStr>(nome: &str, padrao: T) -> T {
    std::env::var(nome)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(padrao)
}

/// A process's resident memory, in MiB (0 when it cannot be read).
fn rss_mib(processo: &Processo) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{}/status", processo.pid()));
    status
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|l| l.split_whitespace().next()?.parse::<u64>().ok())
        .unwrap_or(0)
        / 1024
}

/// The soak's producers keep the saída under this many rows: the relays set the pace, and the
/// nemeses always hit deliveries in flight.
const SOAK_TETO: i64 = 4000;

impl Cena {
    /// Producers for the soak: `tarefas` tasks share events `faixa`, spread evenly over at least
    /// `duracao`, each pausing while the saída holds more than [`SOAK_TETO`] rows. The task
    /// returns the attempts.
    fn produzir_contido(
        &self,
        faixa: std::ops::Range<i64>,
        duracao: Duration,
        tarefas: i64,
    ) -> JoinHandle<u64> {
        let passo = duracao / u32::try_from(faixa.end - faixa.start).unwrap().max(1);
        let inicio = Instant::now();
        let produtores: Vec<JoinHandle<u64>> = (0..tarefas)
            .map(|t| {
                let pool = self.pool.clone();
                let faixa = faixa.clone();
                tokio::spawn(async move {
                    let mut tentadas = 0;
                    for n in faixa.clone().skip(t as usize).step_by(tarefas as usize) {
                        tokio::time::sleep_until(inicio + passo * (n - faixa.start) as u32).await;
                        while tentadas % 32 == 0 && pendentes_em(&pool).await > SOAK_TETO {
                            tokio::time::sleep(Duration::from_millis(100)).await;
                        }
                        tentadas += 1;
                        produzir_com(&pool, n, false, &EventoRede { n })
                            .await
                            .expect("commit an event (Unix socket)");
                    }
                    tentadas
                })
            })
            .collect();
        tokio::spawn(async move {
            let mut tentadas = 0;
            for produtor in produtores {
                tentadas += produtor.await.expect("a producer panicked");
            }
            tentadas
        })
    }

    /// Rows the instance `relay` leases now.
    async fn linhas_de(&self, relay: Maquina) -> i64 {
        let dono = if relay == Maquina::Relay1 { "r1" } else { "r2" };
        sqlx::query_scalar("SELECT count(*) FROM mensageria_saida WHERE lease_dono = $1")
            .bind(format!("app-rede@{dono}"))
            .fetch_one(&self.pool)
            .await
            .unwrap()
    }

    /// Injects `nemese` for `duracao` (its choices drawn from `sorte`), then heals it.
    async fn injetar(
        &self,
        nemese: Nemese,
        duracao: Duration,
        sorte: &mut fastrand::Rng,
        injecoes: &mut Injecoes,
    ) -> Result<(), Pulo> {
        let inicio = Instant::now();
        let fim = inicio + duracao;
        let relay = [Maquina::Relay1, Maquina::Relay2][sorte.usize(0..2)];
        match nemese {
            Nemese::ParticaoRelayReceptor => {
                for r in [Maquina::Relay1, Maquina::Relay2] {
                    // One relay, the other one, or both.
                    if r == relay || sorte.bool() {
                        self.lab.separar(r, Maquina::Receptor);
                    }
                }
            }
            Nemese::RespostasPerdidas => self.lab.cortar(Maquina::Receptor, relay),
            Nemese::ParticaoRelayPostgres => {
                // Cut while the relay holds deliveries in flight (waiting up to 2 s for one).
                let mut linhas = self.linhas_de(relay).await;
                while linhas == 0 && inicio.elapsed() < Duration::from_secs(2) {
                    tokio::time::sleep(Duration::from_millis(5)).await;
                    linhas = self.linhas_de(relay).await;
                }
                injecoes.linhas_do_relay_cortado += linhas;
                self.lab.separar(relay, Maquina::Banco);
            }
            Nemese::ParticaoReceptorPostgres => {
                if self
                    .esperar_transacao_do_receptor(Duration::from_secs(2))
                    .await
                {
                    injecoes.cortes_com_transacao += 1;
                }
                self.lab.separar(Maquina::Receptor, Maquina::Banco);
            }
            Nemese::PerdaAtraso => {
                let atraso = (Duration::from_millis(50), Duration::from_millis(30));
                let mut fio = self
                    .lab
                    .degradar(0.10, atraso.0, atraso.1, sorte.u64(..))
                    .await?;
                tokio::time::sleep_until(fim).await;
                let contagem: serde_json::Value =
                    serde_json::from_str(&fio.pedir("contar", Duration::from_secs(10)).await)
                        .expect("the wire's counts");
                self.lab.normalizar();
                let conta = |k: &str| contagem[k].as_u64().unwrap_or(0);
                injecoes.fio.0 += conta("recebidos");
                injecoes.fio.1 += conta("perdidos");
                injecoes.fio.2 += conta("fora_de_ordem");
            }
            Nemese::EnlaceIntermitente => {
                let maquina = Maquina::TODAS[sorte.usize(0..Maquina::TODAS.len())];
                while Instant::now() < fim {
                    self.lab.derrubar(maquina);
                    injecoes.quedas += 1;
                    tokio::time::sleep(Duration::from_millis(sorte.u64(500..=1000))).await;
                    self.lab.levantar(maquina);
                    let pausa = Duration::from_millis(sorte.u64(500..=1000));
                    tokio::time::sleep_until(fim.min(Instant::now() + pausa)).await;
                }
            }
        }
        tokio::time::sleep_until(fim).await;
        self.lab.curar();
        injecoes.sob_falha += inicio.elapsed();
        *injecoes.vezes.entry(nemese).or_default() += 1;
        injecoes.ultima = Some(nemese);
        Ok(())
    }

    /// The soak's schedule: nemeses in seeded rounds (each round every nemesis once, in a
    /// shuffled order), 2–4 s each with 1–2 s healthy gaps between, until the producers are done
    /// and every nemesis ran at least once. Prints the progress every 30 s.
    async fn agenda(
        &self,
        produtores: &JoinHandle<u64>,
        inicio: Instant,
    ) -> Result<Injecoes, Pulo> {
        let mut sorte = fastrand::Rng::with_seed(self.semente);
        let mut injecoes = Injecoes::default();
        let mut rodada = Vec::new();
        let mut relatado = Instant::now();
        loop {
            if rodada.is_empty() {
                rodada = Nemese::TODAS.to_vec();
                sorte.shuffle(&mut rodada);
            }
            let nemese = rodada.pop().expect("a round of nemeses");
            let duracao = Duration::from_millis(sorte.u64(2000..=4000));
            self.injetar(nemese, duracao, &mut sorte, &mut injecoes)
                .await?;
            if produtores.is_finished() && injecoes.completas() {
                return Ok(injecoes);
            }
            tokio::time::sleep(Duration::from_millis(sorte.u64(1000..=2000))).await;
            if relatado.elapsed() >= Duration::from_secs(30) {
                relatado = Instant::now();
                let commitadas = self.contar("SELECT count(*) FROM razao").await;
                println!(
                    "soak {:.0} s: {commitadas} committed, {} pending; injections: {}",
                    inicio.elapsed().as_secs_f64(),
                    self.pendentes().await,
                    injecoes.texto()
                );
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs root and network namespaces; scripts/test runs it alone"]
async fn soak_com_nemeses() {
    let nome = "rede_soak_com_nemeses";
    let mensagens: i64 = ambiente("MENSAGERIA_TESTE_REDE_SOAK_MENSAGENS", 2000);
    let semente = ambiente("MENSAGERIA_TESTE_REDE_SOAK_SEMENTE", 57);
    let c = cena!(
        nome,
        semente,
        Ajustes::default(),
        &[(Maquina::Relay1, "r1"), (Maquina::Relay2, "r2")],
    );
    let processos = || c.relays.iter().chain(std::iter::once(&c.receptor));
    let rss_inicio: Vec<u64> = processos().map(rss_mib).collect();
    let inicio = Instant::now();
    // Spread over at least 25 s (about one round of the schedule); more than a few thousand
    // messages go at the relays' pace.
    let produtores = c.produzir_contido(0..mensagens, Duration::from_secs(25), 4);
    let injecoes = match c.agenda(&produtores, inicio).await {
        Ok(injecoes) => injecoes,
        Err(pulo) => return pular(nome, &pulo),
    };
    // Every nemesis heals itself: the last one just did, and the producers are done.
    let pendentes_na_cura = c.pendentes().await;
    let tentadas = produtores.await.unwrap();
    let drenagem = c.drenar_em(Duration::from_secs(300)).await;
    let duracao = inicio.elapsed();
    let rss: Vec<String> = processos()
        .zip(rss_inicio)
        .map(|(p, antes)| format!("{} {antes}→{} MiB", p.nome(), rss_mib(p)))
        .collect();
    let logs = c.logs();
    let no_log = |i: usize, trecho: &str| logs[i].contar(trecho);
    let (recebidos, perdidos, fora_de_ordem) = injecoes.fio;
    let evidencias = vec![
        format!("injections: {}", injecoes.texto()),
        format!(
            "the last nemesis ({}) healed with {pendentes_na_cura} rows pending",
            injecoes.ultima.map_or("none", Nemese::nome)
        ),
        format!(
            "{:.0} s of {:.0} s under a nemesis; {} of {} receptor ↔ PostgreSQL cuts with a \
             receptor transaction open; the cut relays held {} rows at their cuts; {} link \
             drops; {recebidos} packets through the lossy wire, {perdidos} lost, {fora_de_ordem} \
             overtaken",
            injecoes.sob_falha.as_secs_f64(),
            duracao.as_secs_f64(),
            injecoes.cortes_com_transacao,
            injecoes.vezes[&Nemese::ParticaoReceptorPostgres],
            injecoes.linhas_do_relay_cortado,
            injecoes.quedas,
        ),
        format!(
            "{:.0} msg/s over {:.1?} (first commit to drained); RSS {}",
            mensagens as f64 / duracao.as_secs_f64(),
            duracao,
            rss.join(", ")
        ),
        format!(
            "settlements fenced: r1 {}, r2 {}; rows taken back: r1 {}, r2 {}",
            no_log(0, "lease lost before settling"),
            no_log(1, "lease lost before settling"),
            no_log(0, "took back the rows"),
            no_log(1, "took back the rows"),
        ),
    ];
    let descricao = format!(
        "{mensagens} events by 4 producers (saída held under {SOAK_TETO} rows), while a seeded \
         schedule cycles through the six nemeses above, 2–4 s each with 1–2 s healthy gaps; \
         relays r1 and r2 (two replicas), the receiving app, PostgreSQL, each on a host of its \
         own; drain time from the last heal"
    );
    c.concluir(&descricao, tentadas, drenagem, evidencias).await;
}
