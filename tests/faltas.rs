//! Proof under faults: every scenario injects a fault between real parts (a relay, an Axum
//! receptor on 127.0.0.1, PostgreSQL), heals it, drains, and checks the ground truth: nothing
//! committed was lost, nothing applied twice, nothing applied that was not committed, and the
//! dead letters are exactly the poison messages. Each scenario writes its row of the fault
//! matrix to `target/tmp/faltas/`; `cargo run -p mensageria-testes --bin matriz-de-faltas`
//! turns them into `docs/FAULTS.md`.

use std::collections::HashMap;
use std::ops::Range;
use std::path::PathBuf;
use std::sync::{LazyLock, Mutex};
use std::time::Duration;

use mensageria_axum::{Rejeicao, receptor};
use mensageria_core::relay::{Config, Relay, RelayHandle};
use mensageria_core::teste::{ModoProxy, ProxyDeFalhas};
use mensageria_core::{ContextoEnvio, Destino, FalhaEnvio, enfileirar, enviador};
use mensageria_testes::faltas::{
    Bancada, FalhaResposta, Filho, Lado, Linha, OutroHost, produzir_com, verificar,
};
use mensageria_testes::{PgIsolado, esperar_valor};
use serde::{Deserialize, Serialize};
use sqlx::{PgPool, Postgres, Transaction};
use tokio::time::Instant;

const TOKEN: &str = "faltas-token-de-teste";

#[derive(Debug, Clone, Serialize, Deserialize)]
struct Evento {
    cenario: String,
    n: i64,
    veneno: bool,
}

#[enviador(tipo = "faltas.evento")]
async fn enviar(evento: Evento, ctx: &ContextoEnvio) -> Result<(), FalhaEnvio> {
    ctx.exigir::<Destino>()?.postar(&evento, ctx).await
}

/// Faults inside the user's receptor code, per scenario: after the dedup record was inserted,
/// in the same transaction.
#[derive(Clone, Copy, Default)]
struct FalhaNoReceptor {
    /// Panics before the effect.
    panico_antes: f64,
    /// Writes the effect, then panics (both roll back).
    panico_depois: f64,
    /// Returns a temporary rejection (503).
    temporaria: f64,
}

/// Per scenario: its faults, their seeded generator, and how many were injected.
type Falhas = HashMap<String, (FalhaNoReceptor, fastrand::Rng, u64)>;

static FALHAS: LazyLock<Mutex<Falhas>> = LazyLock::new(Mutex::default);

fn sortear(cenario: &str) -> (bool, bool, bool) {
    let mut falhas = FALHAS.lock().unwrap();
    let Some((f, rng, injetadas)) = falhas.get_mut(cenario) else {
        return (false, false, false);
    };
    let sorteio = (
        rng.f64() < f.panico_antes,
        rng.f64() < f.panico_depois,
        rng.f64() < f.temporaria,
    );
    if sorteio.0 || sorteio.1 || sorteio.2 {
        *injetadas += 1;
    }
    sorteio
}

#[receptor(tipo = "faltas.evento", chave_natural = evento.n)]
async fn aplicar(tx: &mut Transaction<'_, Postgres>, evento: Evento) -> Result<(), Rejeicao> {
    if evento.veneno {
        return Err(Rejeicao::permanente(
            "poison: this event can never be applied",
        ));
    }
    let (antes, depois, temporaria) = sortear(&evento.cenario);
    if temporaria {
        return Err(Rejeicao::temporaria("injected temporary failure"));
    }
    if antes {
        panic!("injected panic between the dedup insert and the effect");
    }
    sqlx::query("INSERT INTO efeito (n) VALUES ($1)")
        .bind(evento.n)
        .execute(&mut **tx)
        .await?;
    if depois {
        panic!("injected panic after the effect, before the commit");
    }
    Ok(())
}

/// One scenario: its own schema, receptor, proxy between relay and receptor, and seed.
struct Cenario {
    nome: &'static str,
    semente: u64,
    pg: PgIsolado,
    lado: Lado,
    proxy: ProxyDeFalhas,
    url_receptor: String,
}

impl Cenario {
    async fn novo(nome: &'static str, semente: u64) -> Self {
        let Bancada {
            pg,
            lado,
            proxy,
            endereco,
        } = Bancada::montar(semente, TOKEN, "").await;
        Self {
            nome,
            semente,
            pg,
            lado,
            proxy,
            url_receptor: format!("http://{endereco}"),
        }
    }

    /// A fault proxy of this scenario's own (seeded like it) in front of the machine's
    /// PostgreSQL, and a pool of `conexoes` to the scenario's schema through it: a relay's
    /// database that can be refused or frozen while the rest of the scenario's is not.
    async fn banco_por_proxy(&self, conexoes: u32) -> (ProxyDeFalhas, PgPool) {
        let pg: std::net::SocketAddr = "127.0.0.1:5432".parse().unwrap();
        let proxy = ProxyDeFalhas::iniciar(pg, self.semente).await.unwrap();
        let pool = self.pg.pool_via(proxy.endereco(), conexoes).await;
        (proxy, pool)
    }

    fn falhar_no_receptor(&self, falha: FalhaNoReceptor) {
        FALHAS.lock().unwrap().insert(
            self.nome.to_owned(),
            (falha, fastrand::Rng::with_seed(self.semente), 0),
        );
    }

    /// Fast settings so that a scenario drains in seconds: polling 50 ms, backoff 20–200 ms,
    /// lease 2 s, send timeout 1 s.
    fn config(&self, app: &str) -> Config {
        Config::new(app)
            .com_intervalo(Duration::from_millis(50))
            .com_backoff(Duration::from_millis(20), Duration::from_millis(200))
            .com_lease(Duration::from_secs(2))
            .com_tempo_limite_envio(Duration::from_secs(1))
            .com_lote(32)
            .com_concorrencia(8)
            .com_max_tentativas(1000)
    }

    fn destino(&self) -> Destino {
        Destino::new(&self.proxy.url())
            .unwrap()
            .com_token(TOKEN)
            .com_tempo_limite(Duration::from_millis(800))
    }

    fn relay(&self, pool: PgPool, config: Config) -> Relay<Postgres> {
        Relay::new(pool, config).recurso(self.destino())
    }

    /// Producers: each message is a ledger row and its enqueue in one transaction. Returns the
    /// attempts; failures (a cut connection) are expected in some scenarios.
    async fn produzir(
        &self,
        pool: &PgPool,
        faixa: Range<i64>,
        clientes: i64,
        veneno: fn(i64) -> bool,
    ) -> u64 {
        let tarefas: Vec<_> = (0..clientes)
            .map(|c| {
                let (pool, cenario) = (pool.clone(), self.nome.to_owned());
                let faixa = faixa.clone();
                tokio::spawn(async move {
                    let mut tentadas = 0;
                    for n in faixa.filter(|n| n % clientes == c) {
                        tentadas += 1;
                        let _ = produzir_um(&pool, &cenario, n, veneno(n)).await;
                    }
                    tentadas
                })
            })
            .collect();
        let mut tentadas = 0;
        for tarefa in tarefas {
            tentadas += tarefa.await.unwrap();
        }
        tentadas
    }

    async fn pendentes(&self) -> i64 {
        sqlx::query_scalar("SELECT count(*) FROM mensageria_saida")
            .fetch_one(&self.pg.pool)
            .await
            .unwrap()
    }

    /// Rows of the saída leased right now (a relay is delivering them).
    async fn em_voo(&self) -> i64 {
        sqlx::query_scalar("SELECT count(*) FROM mensageria_saida WHERE lease_token IS NOT NULL")
            .fetch_one(&self.pg.pool)
            .await
            .unwrap()
    }

    /// Waits for an empty saída; returns how long it took.
    async fn drenar(&self, limite: Duration) -> Duration {
        let inicio = Instant::now();
        while self.pendentes().await > 0 {
            assert!(
                inicio.elapsed() < limite,
                "{}: the saída did not drain within {limite:?} ({} left)",
                self.nome,
                self.pendentes().await
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        inicio.elapsed()
    }

    async fn aplicadas(&self) -> i64 {
        sqlx::query_scalar("SELECT count(DISTINCT n) FROM efeito")
            .fetch_one(&self.pg.pool)
            .await
            .unwrap()
    }

    /// The common shape of a scenario: a relay runs while `mensagens` are produced under the
    /// fault already set; once every message was applied at least once, `curar` heals the
    /// fault, the saída drains, and the row is checked. Asserts that the fault really caused
    /// redeliveries.
    async fn sob_falha_ate_aplicar(
        self,
        descricao: &str,
        mensagens: i64,
        curar: impl FnOnce(&Self),
    ) -> Linha {
        let (relay, tentadas) = self.aplicar_sob_falha(mensagens, curar).await;
        let linha = self
            .drenar_e_concluir(relay, descricao, tentadas, String::new())
            .await;
        assert!(
            linha.entregas_duplicadas > 0,
            "the fault caused no redelivery: {linha:#?}"
        );
        linha
    }

    /// The first half of [`sob_falha_ate_aplicar`](Self::sob_falha_ate_aplicar): a relay runs
    /// while `mensagens` are produced under the fault already set; once every message was
    /// applied at least once (or none is left in the saída: one that left it unapplied is lost,
    /// which the checker then reports), `curar` heals the fault. Returns the running relay and
    /// the attempts.
    async fn aplicar_sob_falha(
        &self,
        mensagens: i64,
        curar: impl FnOnce(&Self),
    ) -> (RelayHandle, u64) {
        let relay = self
            .relay(self.pg.outro_pool(4).await, self.config("emissor"))
            .spawn()
            .unwrap();
        let tentadas = self.produzir(&self.pg.pool, 0..mensagens, 4, nenhum).await;
        let inicio = Instant::now();
        while self.aplicadas().await < tentadas as i64 && self.pendentes().await > 0 {
            assert!(
                inicio.elapsed() < DRENAR,
                "{}: not every message was applied within {DRENAR:?}",
                self.nome
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        curar(self);
        (relay, tentadas)
    }

    /// The faults have healed: drains the saída (timing it from now), stops `relay`
    /// gracefully, then checks the row.
    async fn drenar_e_concluir(
        self,
        relay: RelayHandle,
        descricao: &str,
        tentadas: u64,
        observacao: String,
    ) -> Linha {
        let drenagem = self.drenar(DRENAR).await;
        relay.shutdown(Duration::from_secs(5)).await;
        self.concluir(descricao, tentadas, drenagem, observacao)
            .await
    }

    /// Checks, records and asserts the row; drops the schema.
    async fn concluir(
        self,
        descricao: &str,
        tentadas: u64,
        drenagem: Duration,
        observacao: String,
    ) -> Linha {
        // Close the way in before counting: a request still held by the proxy must not land
        // after the checker counted (verificar then waits for the receptor to be idle).
        let contagem_antes = self.proxy.contagem();
        self.proxy.modo(ModoProxy::Recusar);
        let mut linha = verificar(
            &self.pg.pool,
            &self.lado,
            self.nome,
            descricao,
            tentadas,
            self.semente,
            drenagem,
        )
        .await;
        let mut evidencias: Vec<String> = Vec::new();
        if !observacao.is_empty() {
            evidencias.push(observacao);
        }
        let proxy = contagem_antes;
        if proxy.respostas_perdidas > 0 {
            evidencias.push(format!(
                "{} responses lost by the proxy",
                proxy.respostas_perdidas
            ));
        }
        if proxy.resets > proxy.respostas_perdidas {
            evidencias.push(format!(
                "{} connections reset by the proxy",
                proxy.resets - proxy.respostas_perdidas
            ));
        }
        if self.lado.injetadas() > 0 {
            evidencias.push(format!(
                "{} answers replaced, held or refused",
                self.lado.injetadas()
            ));
        }
        if let Some((_, _, injetadas)) = FALHAS.lock().unwrap().remove(self.nome) {
            evidencias.push(format!("{injetadas} failures inside the receptor"));
        }
        linha.observacao = evidencias.join("; ");
        linha.gravar(&dir_da_matriz());
        self.pg.descartar().await;
        linha.afirmar();
        linha
    }
}

async fn produzir_um(
    pool: &PgPool,
    cenario: &str,
    n: i64,
    veneno: bool,
) -> Result<(), mensageria_core::Erro> {
    let evento = Evento {
        cenario: cenario.to_owned(),
        n,
        veneno,
    };
    produzir_com(pool, n, veneno, &evento).await
}

fn dir_da_matriz() -> PathBuf {
    PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("faltas")
}

fn nenhum(_: i64) -> bool {
    false
}

const DRENAR: Duration = Duration::from_secs(60);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ack_perdido_depois_do_commit() {
    let c = Cenario::novo("ack_perdido_depois_do_commit", 11).await;
    c.proxy.modo(ModoProxy::PerderResposta { fracao: 0.3 });
    let linha = c
        .sob_falha_ate_aplicar(
            "proxy resets 30% of responses after the receptor committed",
            300,
            |c| c.proxy.modo(ModoProxy::Passar),
        )
        .await;
    assert!(
        linha.observacao.contains("responses lost by the proxy"),
        "{linha:#?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn receptor_commita_e_responde_500() {
    let c = Cenario::novo("receptor_commita_e_responde_500", 12).await;
    c.lado.falhar(FalhaResposta::ErroAposCommit(0.3));
    c.sob_falha_ate_aplicar(
        "receptor commits, then 30% of answers replaced by 500",
        300,
        |c| c.lado.falhar(FalhaResposta::Nenhuma),
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn receptor_commita_e_estoura_o_tempo() {
    let c = Cenario::novo("receptor_commita_e_estoura_o_tempo", 13).await;
    let atraso = Duration::from_millis(1500); // past the relay's 1 s send timeout
    c.lado.falhar(FalhaResposta::LentoAposCommit(0.2, atraso));
    c.sob_falha_ate_aplicar(
        "receptor commits, then 20% of answers held past the send timeout",
        200,
        |c| c.lado.falhar(FalhaResposta::Nenhuma),
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn receptor_falha_entre_dedup_e_efeito() {
    let c = Cenario::novo("receptor_falha_entre_dedup_e_efeito", 14).await;
    c.falhar_no_receptor(FalhaNoReceptor {
        panico_antes: 0.1,
        panico_depois: 0.1,
        temporaria: 0.1,
    });
    c.sob_falha_ate_aplicar(
        "user code panics before/after its effect or fails temporarily (10% each), after the dedup insert",
        300,
        |c| {
            if let Some(falha) = FALHAS.lock().unwrap().get_mut(c.nome) {
                falha.0 = FalhaNoReceptor::default();
            }
        },
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn relay_abortado_no_meio_do_lote() {
    let c = Cenario::novo("relay_abortado_no_meio_do_lote", 15).await;
    c.lado
        .falhar(FalhaResposta::Lento(Duration::from_millis(30)));
    let config = c
        .config("emissor")
        .com_lease(Duration::from_millis(700))
        .com_tempo_limite_envio(Duration::from_millis(600));
    let tentadas = c.produzir(&c.pg.pool, 0..300, 4, nenhum).await;
    let mut mortes = 0;
    for terco in 1..=2 {
        let relay = c
            .relay(c.pg.outro_pool(4).await, config.clone())
            .spawn()
            .unwrap();
        esperar_valor(
            &format!("{} messages applied", terco * 100),
            DRENAR,
            Duration::from_millis(5),
            || c.aplicadas(),
            |&n| n >= terco * 100,
        )
        .await;
        relay.abort(); // a crash: claimed rows stay leased until their lease ends
        mortes += 1;
    }
    let cura = Instant::now();
    let relay = c.relay(c.pg.outro_pool(4).await, config).spawn().unwrap();
    c.lado.falhar(FalhaResposta::Nenhuma);
    c.drenar(DRENAR).await;
    let drenagem = cura.elapsed();
    relay.shutdown(Duration::from_secs(5)).await;
    c.concluir(
        "relay task aborted twice mid-batch (in-process crash), restarted",
        tentadas,
        drenagem,
        format!("{mortes} crashes"),
    )
    .await;
}

/// Terminates, every 30 ms, the backends of `aplicacao` in this database.
fn matador(aplicacao: String) -> tokio::task::JoinHandle<u64> {
    tokio::spawn(async move {
        let admin = PgPool::connect(&mensageria_testes::database_url())
            .await
            .unwrap();
        loop {
            let _: Result<i64, _> = sqlx::query_scalar(
                "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE application_name = $1",
            )
            .bind(&aplicacao)
            .fetch_one(&admin)
            .await;
            tokio::time::sleep(Duration::from_millis(30)).await;
        }
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn commit_do_relay_cortado() {
    let c = Cenario::novo("commit_do_relay_cortado", 16).await;
    let nome = format!("relay-{}", c.pg.schema);
    let pool = c.pg.pool_com_nome(4, &nome).await;
    let tentadas = c.produzir(&c.pg.pool, 0..300, 4, nenhum).await;
    let relay = c.relay(pool, c.config("emissor")).spawn().unwrap();
    let matando = matador(nome);
    tokio::time::sleep(Duration::from_secs(2)).await;
    matando.abort();
    c.drenar_e_concluir(relay, "the relay's connections killed (pg_terminate_backend) every 30 ms for 2 s: claims and acks cut",
        tentadas, String::new())
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn commit_do_remetente_cortado() {
    let c = Cenario::novo("commit_do_remetente_cortado", 17).await;
    let nome = format!("produtor-{}", c.pg.schema);
    let produtores = c.pg.pool_com_nome(4, &nome).await;
    let relay = c
        .relay(c.pg.outro_pool(4).await, c.config("emissor"))
        .spawn()
        .unwrap();
    let matando = matador(nome);
    let tentadas = c.produzir(&produtores, 0..400, 4, nenhum).await;
    matando.abort();
    let cura = Instant::now();
    c.drenar(DRENAR).await;
    let drenagem = cura.elapsed();
    relay.shutdown(Duration::from_secs(5)).await;
    // lost = 0 and unexpected = 0 below are the check: every ledger row's message was applied
    // and every effect has its ledger row, so no commit kept one write without the other.
    let linha = c
        .concluir(
            "the senders' connections killed every 30 ms while they commit: business row and message together or neither",
            tentadas,
            drenagem,
            String::new(),
        )
        .await;
    assert!(
        linha.commitadas < linha.tentadas,
        "no commit was cut: {linha:#?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn destino_fora_do_ar_por_muito_tempo() {
    let c = Cenario::novo("destino_fora_do_ar_por_muito_tempo", 18).await;
    c.proxy.modo(ModoProxy::Recusar);
    let relay = c
        .relay(c.pg.outro_pool(4).await, c.config("emissor"))
        .spawn()
        .unwrap();
    let tentadas = c.produzir(&c.pg.pool, 0..300, 4, nenhum).await;
    let antes = c.proxy.contagem().conexoes;
    let fora = Duration::from_secs(5);
    tokio::time::sleep(fora).await;
    let durante = c.proxy.contagem().conexoes - antes;
    c.proxy.modo(ModoProxy::Passar);
    let drenagem = c.drenar(DRENAR).await;
    relay.shutdown(Duration::from_secs(5)).await;
    let por_segundo = durante as f64 / fora.as_secs_f64();
    c.concluir(
        "destination refuses every connection for 5 s with 300 messages due",
        tentadas,
        drenagem,
        format!("{por_segundo:.1} connection attempts/s while down"),
    )
    .await;
    // 300 due messages with a 20–200 ms backoff would be ~1500 attempts/s without the circuit.
    assert!(
        por_segundo < 20.0,
        "retry storm: {por_segundo:.1} attempts/s while down"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn banco_inacessivel_por_um_tempo() {
    let c = Cenario::novo("banco_inacessivel_por_um_tempo", 19).await;
    let (proxy_pg, pool) = c.banco_por_proxy(4).await;
    let relay = c.relay(pool, c.config("emissor")).spawn().unwrap();
    let tentadas = c.produzir(&c.pg.pool, 0..150, 4, nenhum).await;
    proxy_pg.modo(ModoProxy::Recusar);
    let segunda = c.produzir(&c.pg.pool, 150..300, 4, nenhum).await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    let sem_entrega = c.pendentes().await;
    proxy_pg.modo(ModoProxy::Passar);
    c.drenar_e_concluir(
        relay,
        "the relay's database unreachable (connections reset) for 3 s, then back",
        tentadas + segunda,
        format!("{sem_entrega} rows waiting when it came back"),
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn veneno_misturado_e_retry_after() {
    let c = Cenario::novo("veneno_misturado_e_retry_after", 20).await;
    c.lado.falhar(FalhaResposta::Recusar {
        fracao: 0.2,
        status_429: false,
    });
    let relay = c
        .relay(c.pg.outro_pool(4).await, c.config("emissor"))
        .spawn()
        .unwrap();
    let tentadas = c.produzir(&c.pg.pool, 0..150, 4, |n| n % 13 == 0).await;
    c.lado.falhar(FalhaResposta::Recusar {
        fracao: 0.2,
        status_429: true,
    });
    let segunda = c.produzir(&c.pg.pool, 150..300, 4, |n| n % 13 == 0).await;
    let linha = c.drenar_e_concluir(relay, "1 in 13 messages is poison (422); 20% of requests get 503, then 429, with Retry-After: 1",
            tentadas + segunda, String::new())
        .await;
    assert_eq!(linha.mortas, 300 / 13 + 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lease_expira_durante_entrega_lenta() {
    let c = Cenario::novo("lease_expira_durante_entrega_lenta", 21).await;
    let (proxy_pg, pool_a) = c.banco_por_proxy(2).await;
    let lento = c.relay(
        pool_a,
        c.config("emissor")
            .com_lease(Duration::from_millis(800))
            .com_tempo_limite_envio(Duration::from_millis(700)),
    );
    let tentadas = c.produzir(&c.pg.pool, 0..32, 4, nenhum).await;
    // Relay A claims and delivers; its database freezes before it can ack.
    c.lado
        .falhar(FalhaResposta::Lento(Duration::from_millis(300)));
    let rodada_a = tokio::spawn(async move { lento.rodada().await });
    let esperando = Instant::now();
    while (c.lado.entregas.total() as u64) < 1 && esperando.elapsed() < Duration::from_secs(5) {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    proxy_pg.modo(ModoProxy::Buraco);
    c.lado.falhar(FalhaResposta::Nenhuma);
    // A's leases expire; relay B reclaims (new fencing token) and delivers.
    tokio::time::sleep(Duration::from_millis(1200)).await;
    let b = c.relay(c.pg.outro_pool(2).await, c.config("emissor"));
    b.drenar().await.unwrap();
    // A's database comes back: its acks carry the old token and change nothing.
    proxy_pg.modo(ModoProxy::Passar);
    let a = rodada_a.await.unwrap().unwrap();
    let drenagem = c.drenar(DRENAR).await;
    let linha = c
        .concluir(
            "relay A's database freezes after it delivered, past its lease; relay B reclaims; A's late acks are fenced",
            tentadas,
            drenagem,
            format!("A: {} claimed, {} settlements fenced", a.reivindicadas, a.cercadas),
        )
        .await;
    assert!(a.cercadas > 0, "no late ack was fenced: {a:?}");
    assert_eq!(a.entregues, 0, "{a:?}");
    assert!(linha.entregas_duplicadas > 0, "{linha:#?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lotes_sobrepostos_de_duas_replicas_apos_o_lease() {
    let c = Cenario::novo("lotes_sobrepostos_de_duas_replicas_apos_o_lease", 32).await;
    let (proxy_pg, pool_a) = c.banco_por_proxy(2).await;
    // Replica A sends its 64 messages in batches that the receptor's side holds for 1.5 s; its
    // database freezes meanwhile, so it cannot renew its leases (800 ms).
    let a = Relay::new(
        pool_a,
        c.config("emissor")
            .com_lote(64)
            .com_concorrencia(64)
            .com_lease(Duration::from_millis(800))
            .com_tempo_limite_envio(Duration::from_secs(4)),
    )
    .recurso(
        Destino::new(&c.proxy.url())
            .unwrap()
            .com_token(TOKEN)
            .com_tempo_limite(Duration::from_secs(3)),
    );
    let tentadas = c.produzir(&c.pg.pool, 0..64, 4, nenhum).await;
    c.lado
        .falhar(FalhaResposta::Lento(Duration::from_millis(1500)));
    let rodada_a = tokio::spawn(async move { a.rodada().await });
    let esperando = Instant::now();
    while c.em_voo().await < 64 && esperando.elapsed() < Duration::from_secs(5) {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    proxy_pg.modo(ModoProxy::Buraco);
    // The leases expire while A's batches are still on their way; replica B takes the rows
    // back and sends the same events in batches of its own, which reach the receptor while
    // A's are still held.
    tokio::time::sleep(Duration::from_millis(1000)).await;
    c.lado.falhar(FalhaResposta::Nenhuma);
    let b = c.relay(
        c.pg.outro_pool(2).await,
        c.config("emissor").com_lote(64).com_concorrencia(64),
    );
    let rodada_b = b.drenar().await.unwrap();
    // A's batches land (duplicates now) and its database comes back: its settlements carry the
    // old fencing token and change nothing.
    proxy_pg.modo(ModoProxy::Passar);
    let a = rodada_a.await.unwrap().unwrap();
    let drenagem = c.drenar(DRENAR).await;
    let linha = c
        .concluir(
            "replica A's batches are held 1.5 s at the receptor while its database freezes past its lease; replica B reclaims and sends the same events in overlapping batches",
            tentadas,
            drenagem,
            format!(
                "A: {} claimed, {} fenced; B: {} delivered",
                a.reivindicadas, a.cercadas, rodada_b.entregues
            ),
        )
        .await;
    assert!(a.cercadas > 0, "no late settlement of A was fenced: {a:?}");
    assert_eq!(a.entregues, 0, "{a:?}");
    assert_eq!(rodada_b.entregues, 64, "{rodada_b:?}");
    assert!(
        linha.entregas_duplicadas > 0,
        "A's batches reached the receptor too: {linha:#?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn commits_fora_da_ordem_dos_ids() {
    let c = Cenario::novo("commits_fora_da_ordem_dos_ids", 22).await;
    // A short keyset margin so that late commits fall behind the floor and must be found by
    // the periodic full scan.
    let config = c
        .config("emissor")
        .com_piso(Duration::from_millis(50), Duration::from_millis(500));
    let relay = c.relay(c.pg.outro_pool(4).await, config).spawn().unwrap();
    // 20 transactions take their message id first and commit up to 1.5 s later, while 200
    // others commit at once and are delivered (the floor moves past the early ids).
    let lentos: Vec<_> = (0..20i64)
        .map(|i| {
            let (pool, nome) = (c.pg.pool.clone(), c.nome.to_owned());
            tokio::spawn(async move {
                let mut tx = pool.begin().await.unwrap();
                let evento = Evento {
                    cenario: nome,
                    n: 10_000 + i,
                    veneno: false,
                };
                let id = enfileirar(&mut *tx, &evento).await.unwrap();
                sqlx::query("INSERT INTO razao (n, id_mensagem, veneno) VALUES ($1, $2, false)")
                    .bind(10_000 + i)
                    .bind(id)
                    .execute(&mut *tx)
                    .await
                    .unwrap();
                tokio::time::sleep(Duration::from_millis(75 * (i as u64 + 1))).await;
                tx.commit().await.unwrap();
            })
        })
        .collect();
    let tentadas = c.produzir(&c.pg.pool, 0..200, 4, nenhum).await + 20;
    for lento in lentos {
        lento.await.unwrap();
    }
    c.drenar_e_concluir(relay, "20 senders commit up to 1.5 s after taking their id, behind 200 later ids already delivered",
        tentadas, String::new())
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn desligamento_gracioso_no_meio_da_entrega() {
    let c = Cenario::novo("desligamento_gracioso_no_meio_da_entrega", 23).await;
    c.lado
        .falhar(FalhaResposta::Lento(Duration::from_millis(200)));
    let config = c
        .config("emissor")
        .com_lease(Duration::from_secs(30))
        .com_tempo_limite_envio(Duration::from_secs(5));
    let tentadas = c.produzir(&c.pg.pool, 0..200, 4, nenhum).await;
    let relay = c
        .relay(c.pg.outro_pool(4).await, config.clone())
        .spawn()
        .unwrap();
    esperar_valor(
        "20 deliveries",
        DRENAR,
        Duration::from_millis(5),
        || async { c.lado.entregas.total() },
        |&n| n >= 20,
    )
    .await;
    relay.shutdown(Duration::from_secs(5)).await;
    // Nothing is left leased: what was claimed but not delivered went back, due now.
    let presas: i64 =
        sqlx::query_scalar("SELECT count(*) FROM mensageria_saida WHERE lease_token IS NOT NULL")
            .fetch_one(&c.pg.pool)
            .await
            .unwrap();
    assert_eq!(presas, 0, "rows still leased after a graceful shutdown");
    c.lado.falhar(FalhaResposta::Nenhuma);
    let cura = Instant::now();
    let relay = c.relay(c.pg.outro_pool(4).await, config).spawn().unwrap();
    c.drenar(DRENAR).await;
    let drenagem = cura.elapsed();
    relay.shutdown(Duration::from_secs(5)).await;
    // With a 30 s lease, draining in seconds proves the leases were released, not expired.
    assert!(drenagem < Duration::from_secs(20), "{drenagem:?}");
    c.concluir(
        "graceful shutdown while deliveries are in flight (lease 30 s), then a new relay",
        tentadas,
        drenagem,
        String::new(),
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn entradas_hostis_sob_carga() {
    let c = Cenario::novo("entradas_hostis_sob_carga", 24).await;
    let relay = c
        .relay(c.pg.outro_pool(4).await, c.config("emissor"))
        .spawn()
        .unwrap();
    let url = format!("{}/m2m/faltas.evento", c.url_receptor);
    let hostil = tokio::spawn(async move {
        let cliente = reqwest::Client::new();
        let corpos: [(&str, Vec<u8>); 5] = [
            ("Bearer faltas-token", b"{not json".to_vec()),
            (
                "Bearer faltas-token",
                b"{\"cenario\":\"x\",\"n\":\"1; DROP TABLE efeito\",\"veneno\":false}".to_vec(),
            ),
            (
                "Bearer errado",
                b"{\"cenario\":\"x\",\"n\":999999,\"veneno\":false}".to_vec(),
            ),
            ("Bearer faltas-token", "[".repeat(100_000).into_bytes()),
            ("Bearer faltas-token", vec![b' '; 2 * 1024 * 1024]),
        ];
        let mut recusados = 0u64;
        for rodada in 0..40 {
            let (token, corpo) = &corpos[rodada % corpos.len()];
            let status = cliente
                .post(&url)
                .header("authorization", *token)
                .header("content-type", "application/json")
                .body(corpo.clone())
                .send()
                .await
                .map(|r| r.status().as_u16())
                .unwrap_or(0);
            assert!(
                matches!(status, 0 | 400 | 401 | 413 | 422),
                "status {status}"
            );
            recusados += 1;
        }
        recusados
    });
    let tentadas = c.produzir(&c.pg.pool, 0..300, 4, nenhum).await;
    let recusados = hostil.await.unwrap();
    c.drenar_e_concluir(relay, "malformed, hostile, unauthenticated and oversized requests hit the receptor while the relay delivers",
        tentadas, format!("{recusados} hostile requests refused"))
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn conexao_cortada_depois_de_encaminhar() {
    let c = Cenario::novo("conexao_cortada_depois_de_encaminhar", 25).await;
    let relay = c
        .relay(c.pg.outro_pool(4).await, c.config("emissor"))
        .spawn()
        .unwrap();
    let produzindo = {
        let (pool, nome) = (c.pg.pool.clone(), c.nome);
        tokio::spawn(async move {
            let mut tentadas = 0;
            for n in 0..300 {
                tentadas += 1;
                let _ = produzir_um(&pool, nome, n, false).await;
            }
            tentadas
        })
    };
    // Alternate: 100 ms of connections cut right after the request went through, 100 ms clean.
    for _ in 0..15 {
        c.proxy.modo(ModoProxy::CortarAposEncaminhar);
        tokio::time::sleep(Duration::from_millis(100)).await;
        c.proxy.modo(ModoProxy::Passar);
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let tentadas = produzindo.await.unwrap();
    let drenagem = c.drenar(DRENAR).await;
    relay.shutdown(Duration::from_secs(5)).await;
    let resets = c.proxy.contagem().resets;
    c.concluir(
        "connections reset right after the request is forwarded (receptor may or may not commit), on and off for 3 s",
        tentadas,
        drenagem,
        String::new(),
    )
    .await;
    assert!(resets > 0);
}

// Destinations that answer instead of the receptor (DESIGN rule 9): a row leaves the saída
// only on the receptor's own answer. Each message reaches the receptor once, so these scenarios
// expect no redelivery; their evidence is the answers the layer replaced.

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn destino_redireciona_para_outro_host() {
    let c = Cenario::novo("destino_redireciona_para_outro_host", 29).await;
    let outro = OutroHost::iniciar().await;
    c.lado.falhar(FalhaResposta::Redirecionar {
        fracao: 0.3,
        para: outro.endereco,
    });
    let lado = c.lado.clone();
    let (relay, tentadas) = c
        .aplicar_sob_falha(200, |c| c.lado.falhar(FalhaResposta::Nenhuma))
        .await;
    let drenagem = c.drenar(DRENAR).await;
    relay.shutdown(Duration::from_secs(5)).await;
    let seguidos = outro.pedidos();
    c.concluir(
        "30% of requests answered 302/307 to another host (which would answer 200 as a receptor), until every message got through; then fixed",
        tentadas,
        drenagem,
        format!("{seguidos} requests reached the other host"),
    )
    .await;
    assert!(lado.injetadas() > 0, "no redirect was answered");
    assert_eq!(seguidos, 0, "the relay followed a redirect");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gateway_responde_pagina_de_login() {
    let c = Cenario::novo("gateway_responde_pagina_de_login", 30).await;
    c.lado.falhar(FalhaResposta::PaginaDeLogin(0.3));
    let lado = c.lado.clone();
    let (relay, tentadas) = c
        .aplicar_sob_falha(200, |c| c.lado.falhar(FalhaResposta::Nenhuma))
        .await;
    c.drenar_e_concluir(
        relay,
        "a gateway answers 30% of requests 200 text/html (a login page) instead of the receptor, until every message got through; then fixed",
        tentadas,
        String::new(),
    )
    .await;
    assert!(lado.injetadas() > 0, "no login page was answered");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn destino_responde_500_com_corpo_gigante() {
    const CORPO: u64 = 64 * 1024 * 1024;
    let c = Cenario::novo("destino_responde_500_com_corpo_gigante", 31).await;
    c.lado.falhar(FalhaResposta::CorpoGigante(0.3, CORPO));
    let lado = c.lado.clone();
    let (relay, tentadas) = c
        .aplicar_sob_falha(200, |c| c.lado.falhar(FalhaResposta::Nenhuma))
        .await;
    let drenagem = c.drenar(DRENAR).await;
    relay.shutdown(Duration::from_secs(5)).await;
    let respostas = lado.injetadas();
    let feitos = lado
        .bytes_gigantes
        .load(std::sync::atomic::Ordering::Relaxed);
    let por_resposta = feitos / respostas.max(1);
    c.concluir(
        "30% of requests answered 500 with a 64 MiB body streamed chunk by chunk, until every message got through; then fixed",
        tentadas,
        drenagem,
        format!(
            "{} KiB of each 64 MiB body sent on average before the relay hung up",
            por_resposta / 1024
        ),
    )
    .await;
    assert!(respostas > 0, "no huge body was answered");
    // The relay reads 8 KiB and hangs up; what was sent beyond that filled the sockets' buffers
    // meanwhile (a few MiB on loopback). A relay that read the whole body gets all 64 MiB.
    assert!(
        por_resposta < CORPO / 2,
        "the relay read {por_resposta} bytes of each huge body"
    );
}

// Child processes: apps whose relays run in processes of their own (`tests/bin/app_*.rs`).

#[path = "comum/apps_ab.rs"]
mod apps_ab;

use apps_ab::{EventoA, EventoB};

const APP_A: &str = env!("CARGO_BIN_EXE_app-a");
const APP_B: &str = env!("CARGO_BIN_EXE_app-b");

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn relay_morto_com_sigkill() {
    let c = Cenario::novo("relay_morto_com_sigkill", 26).await;
    c.lado
        .falhar(FalhaResposta::Lento(Duration::from_millis(20)));
    let mut tentadas = 0;
    for n in 0..300 {
        tentadas += 1;
        produzir_com(&c.pg.pool, n, false, &EventoA { n })
            .await
            .unwrap();
    }
    let mut mortes = 0;
    for terco in 1..=2 {
        let filho = Filho::iniciar(APP_A, &c.pg.schema, &c.proxy.url()).await;
        esperar_valor(
            &format!("{} messages applied", terco * 100),
            DRENAR,
            Duration::from_millis(5),
            || c.aplicadas(),
            |&n| n >= terco * 100,
        )
        .await;
        filho.matar();
        mortes += 1;
    }
    let cura = Instant::now();
    let filho = Filho::iniciar(APP_A, &c.pg.schema, &c.proxy.url()).await;
    c.drenar(DRENAR).await;
    let drenagem = cura.elapsed();
    drop(filho);
    c.concluir(
        "the relay's process killed with SIGKILL twice mid-batch (lease 2 s), restarted",
        tentadas,
        drenagem,
        format!("{mortes} SIGKILLs"),
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dois_apps_num_schema_com_duas_replicas_cada() {
    let c = Cenario::novo("dois_apps_num_schema_com_duas_replicas_cada", 27).await;
    c.proxy.modo(ModoProxy::PerderResposta { fracao: 0.1 });
    let mut replicas = Vec::new();
    for binario in [APP_A, APP_B, APP_A, APP_B] {
        replicas.push(Filho::iniciar(binario, &c.pg.schema, &c.proxy.url()).await);
    }
    let mut tentadas = 0;
    for n in 0..200 {
        tentadas += 2;
        produzir_com(&c.pg.pool, n, false, &EventoA { n })
            .await
            .unwrap();
        produzir_com(&c.pg.pool, 1000 + n, false, &EventoB { n: 1000 + n })
            .await
            .unwrap();
    }
    esperar_valor(
        &format!("{tentadas} messages applied"),
        DRENAR,
        Duration::from_millis(20),
        || c.aplicadas(),
        |&n| n >= tentadas as i64,
    )
    .await;
    c.proxy.modo(ModoProxy::Passar);
    let drenagem = c.drenar(DRENAR).await;
    drop(replicas);
    let remetentes = c.lado.remetentes.lock().unwrap().clone();
    let apps: Vec<String> =
        sqlx::query_scalar("SELECT DISTINCT app FROM mensageria_apps ORDER BY app")
            .fetch_all(&c.pg.pool)
            .await
            .unwrap();
    let de = |tipo: &str, app: &str| {
        remetentes
            .get(&(tipo.to_owned(), app.to_owned()))
            .copied()
            .unwrap_or(0)
    };
    let linha = c
        .concluir(
            "app-a and app-b share one schema, two replica processes each, 10% of acks lost",
            tentadas,
            drenagem,
            format!(
                "faltas.a: {} deliveries by app-a, {} by app-b; faltas.b: {} by app-b, {} by app-a",
                de("faltas.a", "app-a"),
                de("faltas.a", "app-b"),
                de("faltas.b", "app-b"),
                de("faltas.b", "app-a"),
            ),
        )
        .await;
    assert_eq!(apps, ["app-a", "app-b"]);
    assert_eq!(
        de("faltas.a", "app-b") + de("faltas.b", "app-a"),
        0,
        "{remetentes:?}"
    );
    assert_eq!(
        remetentes.len(),
        2,
        "deliveries from unexpected senders: {remetentes:?}"
    );
    assert!(linha.entregas_duplicadas > 0, "{linha:#?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn desistencia_tardia_nao_enterra_mensagem_reentregue() {
    let c = Cenario::novo("desistencia_tardia_nao_enterra_mensagem_reentregue", 28).await;
    // Relay A: one attempt only; its destination hangs (a blackholed proxy) until its send
    // timeout, so its verdict is "dead letter"; its database freezes before it can write it.
    let (proxy_pg, pool_a) = c.banco_por_proxy(2).await;
    let buraco = ProxyDeFalhas::iniciar(c.proxy.endereco(), 28)
        .await
        .unwrap();
    buraco.modo(ModoProxy::Buraco);
    let a = Relay::new(
        pool_a,
        c.config("emissor")
            .com_max_tentativas(1)
            .com_lease(Duration::from_millis(800))
            .com_tempo_limite_envio(Duration::from_millis(700)),
    )
    .recurso(
        Destino::new(&buraco.url())
            .unwrap()
            .com_token(TOKEN)
            .com_tempo_limite(Duration::from_millis(300)),
    );
    let tentadas = c.produzir(&c.pg.pool, 0..16, 4, nenhum).await;
    let rodada_a = tokio::spawn(async move { a.rodada().await });
    // As soon as A holds the leases, freeze its database.
    let arrendadas = || async {
        sqlx::query_scalar::<_, i64>(
            "SELECT count(*) FROM mensageria_saida WHERE lease_token IS NOT NULL",
        )
        .fetch_one(&c.pg.pool)
        .await
        .unwrap()
    };
    esperar_valor(
        "16 rows leased by relay A",
        DRENAR,
        Duration::from_millis(2),
        arrendadas,
        |&n| n >= 16,
    )
    .await;
    proxy_pg.modo(ModoProxy::Buraco);
    // A's leases expire; relay B reclaims and delivers slowly.
    tokio::time::sleep(Duration::from_millis(1000)).await;
    c.lado
        .falhar(FalhaResposta::Lento(Duration::from_millis(600)));
    let b = c.relay(c.pg.outro_pool(2).await, c.config("emissor"));
    let rodada_b = tokio::spawn(async move { b.drenar().await });
    esperar_valor(
        "16 deliveries by relay B",
        DRENAR,
        Duration::from_millis(2),
        || async { c.lado.entregas.total() },
        |&n| n >= 16,
    )
    .await;
    // While B's deliveries are in flight, A's database comes back and A writes its verdict.
    proxy_pg.modo(ModoProxy::Passar);
    let a = rodada_a.await.unwrap().unwrap();
    rodada_b.await.unwrap().unwrap();
    let drenagem = c.drenar(DRENAR).await;
    let linha = c
        .concluir(
            "relay A gives up (dead letter) after its lease expired, while relay B is redelivering: A's verdict is fenced",
            tentadas,
            drenagem,
            format!("A: {} claimed, {} dead-lettered, {} fenced", a.reivindicadas, a.mortas, a.cercadas),
        )
        .await;
    assert_eq!(a.cercadas, 16, "{a:?}");
    assert_eq!(linha.mortas, 0);
}
