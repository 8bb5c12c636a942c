//! Ordered delivery per key (`mensageria_core::ordem`), against real databases and real HTTP:
//!
//! - the claim, one statement at a time, on PostgreSQL and SQLite: only the head of a key is
//!   claimable, while its earlier message is pending, leased or waiting for a retry; keys are
//!   independent; a dead letter blocks its key under `Bloquear` and not under `Seguir`; a replay
//!   goes first; a discard lets the key go;
//! - PostgreSQL: two transactions enqueueing for one key commit in sequence order (the second
//!   waits for the first's commit);
//! - under the fault proxy (lost acks, 503 + Retry-After), with two relay replicas in child
//!   processes and one in this process, one replica SIGKILLed: 200 keys × 20 steps, each key's
//!   steps applied in order, none lost, none applied twice (the fault suite's ledger check);
//! - one poison message: under `Bloquear` its key stops while the others drain, and after the
//!   replay the key drains in order; under `Seguir` the key goes on.
//!
//! The fault scenarios write their rows of `docs/FAULTS.md` as the fault suite does.

use std::collections::{BTreeMap, HashSet};
use std::ops::Range;
use std::path::PathBuf;
use std::sync::{LazyLock, Mutex};
use std::time::Duration;

use mensageria_axum::{Rejeicao, receptor};
use mensageria_core::ordem::OrdemAposMorta;
use mensageria_core::relay::{Config, Relay};
use mensageria_core::teste::reivindicacao::{self, Pedido, Reivindicada};
use mensageria_core::teste::{ModoProxy, ProxyDeFalhas};
use mensageria_core::{Banco, Destino, enfileirar, enfileirar_ordenado, operacoes};
use mensageria_testes::faltas::{
    Bancada, FalhaResposta, Filho, Lado, Linha, produzir_com, verificar,
};
use mensageria_testes::{PgIsolado, esperar_valor, nos_dois_bancos};
use sqlx::{PgPool, Postgres, Transaction};
use tokio::time::Instant;

#[path = "comum/ordem_passo.rs"]
mod ordem_passo;

use ordem_passo::Passo;

const TOKEN: &str = "faltas-token-de-teste";
const APP_ORDEM: &str = env!("CARGO_BIN_EXE_app-ordem");
const DRENAR: Duration = Duration::from_secs(45);

/// Ledger numbers the receptor rejects for good while listed (each test uses its own keys).
static VENENO: LazyLock<Mutex<HashSet<i64>>> = LazyLock::new(Mutex::default);

/// What the receptor applied, in the order it committed (one key's steps never run
/// concurrently, so the serial order of one key is its commit order).
const TABELA_ORDEM: &str = "CREATE TABLE ordem_aplicada \
     (id BIGSERIAL PRIMARY KEY, chave BIGINT NOT NULL, passo BIGINT NOT NULL)";

#[receptor(tipo = "ordem.passo", chave_natural = (evento.chave, evento.passo))]
async fn aplicar_passo(tx: &mut Transaction<'_, Postgres>, evento: Passo) -> Result<(), Rejeicao> {
    if VENENO.lock().unwrap().contains(&evento.n) {
        return Err(Rejeicao::permanente("poison: this step cannot be applied"));
    }
    sqlx::query("INSERT INTO efeito (n) VALUES ($1)")
        .bind(evento.n)
        .execute(&mut **tx)
        .await?;
    sqlx::query("INSERT INTO ordem_aplicada (chave, passo) VALUES ($1, $2)")
        .bind(evento.chave)
        .bind(evento.passo)
        .execute(&mut **tx)
        .await?;
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// The claim, statement by statement, on both backends.

fn pedido<'a>(tipos: &'a [&'a str], token: i64, bloquear: bool) -> Pedido<'a> {
    Pedido {
        tipos,
        pisos_ms: &[0],
        lote: 100,
        lease_ms: 60_000,
        dono: "ordem",
        token,
        bloquear_apos_morta: bloquear,
    }
}

/// Claims what is claimable now; returns `(chave, passo)` of each row, sorted, and the rows.
async fn reivindicar<DB: Banco>(
    pool: &sqlx::Pool<DB>,
    token: i64,
    bloquear: bool,
) -> (Vec<(i64, i64)>, Vec<Reivindicada>) {
    let tipos = ["ordem.passo"];
    let linhas = reivindicacao::reivindicar(pool, pedido(&tipos, token, bloquear))
        .await
        .unwrap();
    let mut passos: Vec<(i64, i64)> = linhas
        .iter()
        .map(|l| {
            let p: Passo = serde_json::from_str(&l.payload).unwrap();
            (p.chave, p.passo)
        })
        .collect();
    passos.sort();
    (passos, linhas)
}

fn achar(linhas: &[Reivindicada], chave: i64, passo: i64) -> &Reivindicada {
    linhas
        .iter()
        .find(|l| {
            let p: Passo = serde_json::from_str(&l.payload).unwrap();
            (p.chave, p.passo) == (chave, passo)
        })
        .unwrap()
}

nos_dois_bancos! {
    async fn so_a_cabeca_da_chave_e_reivindicavel(db) {
        mensageria_core::migrar(&db.pool).await.unwrap();
        // Key 1: steps 0, 1, 2 (the attribute's key); key 2: step 0 with the key given at the
        // call, which wins ("1" → "2").
        for passo in 0..3 {
            enfileirar(&db.pool, &Passo::new(1, passo)).await.unwrap();
        }
        enfileirar_ordenado(&db.pool, &Passo::new(1, 9), "2").await.unwrap();
        let (vistas, linhas) = reivindicar(&db.pool, 1, true).await;
        assert_eq!(vistas, [(1, 0), (1, 9)], "only the heads of keys 1 and 2");
        // Step 0 leased (in flight): step 1 waits.
        assert!(reivindicar(&db.pool, 2, true).await.0.is_empty());
        // Step 0 scheduled for a retry that is due at once: still the head, step 1 still waits.
        let zero = achar(&linhas, 1, 0);
        assert!(reivindicacao::reagendar(&db.pool, zero.id, 1, 0, "503", true).await.unwrap());
        let (vistas, linhas) = reivindicar(&db.pool, 3, true).await;
        assert_eq!(vistas, [(1, 0)], "the retried head comes back, not its successor");
        // Delivered: step 1 becomes the head.
        let zero = achar(&linhas, 1, 0);
        assert_eq!(reivindicacao::confirmar_lote(&db.pool, &[(zero.id, 3)]).await.unwrap(), [zero.id]);
        let (vistas, linhas) = reivindicar(&db.pool, 4, true).await;
        assert_eq!(vistas, [(1, 1)]);
        // Step 1 dies: under Bloquear step 2 waits, under Seguir it goes.
        let um = achar(&linhas, 1, 1);
        assert!(reivindicacao::matar(&db.pool, um.id, 4, "422", "ordem").await.unwrap());
        assert!(reivindicar(&db.pool, 5, true).await.0.is_empty(), "a dead step blocks its key");
        let morta = operacoes::listar_mortas(&db.pool, None, 10).await.unwrap().mortas[0].id_mensagem;
        // The replay takes its sequence back: it goes before step 2.
        operacoes::reenfileirar_morta(&db.pool, morta).await.unwrap();
        let (vistas, linhas) = reivindicar(&db.pool, 6, true).await;
        assert_eq!(vistas, [(1, 1)], "the replayed step is the head again");
        // It dies again and is discarded: the key goes on.
        let um = achar(&linhas, 1, 1);
        assert!(reivindicacao::matar(&db.pool, um.id, 6, "422", "ordem").await.unwrap());
        let (vistas, _) = reivindicar(&db.pool, 7, false).await;
        assert_eq!(vistas, [(1, 2)], "under Seguir the next step goes");
        operacoes::descartar_morta(&db.pool, morta).await.unwrap();
        let restantes: i64 = sqlx::query_scalar("SELECT count(*) FROM mensageria_mortas")
            .fetch_one(&db.pool)
            .await
            .unwrap();
        assert_eq!(restantes, 0);
    }
}

nos_dois_bancos! {
    async fn chave_invalida_nao_grava_nada(db) {
        mensageria_core::migrar(&db.pool).await.unwrap();
        let longa = "x".repeat(1025);
        // Blank, control characters (a NUL used to come back as the database's own error text,
        // ESC/CR/LF were stored and reached every log and terminal that printed the key), too
        // long: each refused with the typed error, before any row is written.
        let recusadas = [
            ("", "blank"),
            ("   ", "blank"),
            ("\t\n", "blank"),
            ("pedido:\x1b[31m42", "control character"),
            ("pedido:42\r\nINFO forged", "control character"),
            ("pedido:\n42", "control character"),
            ("pedido:\u{0}42", "control character"),
            ("pedido:\u{7f}", "control character"),
            ("pedido:\u{9b}31m", "control character"),
            (longa.as_str(), "over 1024 bytes"),
        ];
        for (chave, motivo) in recusadas {
            let erro = enfileirar_ordenado(&db.pool, &Passo::new(1, 0), chave).await.unwrap_err();
            assert!(
                matches!(&erro, mensageria_core::Erro::ChaveOrdemInvalida { motivo: m, .. } if m.contains(motivo)),
                "{chave:?}: {erro}"
            );
            assert!(erro.to_string().contains("ordering key"), "{erro}");
        }
        // Inner spaces and any printable Unicode are keys like any other.
        for chave in ["pedido 42", "pedido:ação-ü", " pedido:7 "] {
            enfileirar_ordenado(&db.pool, &Passo::new(1, 0), chave).await.unwrap();
        }
        sqlx::query("DELETE FROM mensageria_saida").execute(&db.pool).await.unwrap();
        let linhas: i64 = sqlx::query_scalar("SELECT count(*) FROM mensageria_saida")
            .fetch_one(&db.pool)
            .await
            .unwrap();
        assert_eq!(linhas, 0);
    }
}

/// Without the key's advisory lock, the second transaction would take its sequence and commit
/// while the first (with the smaller sequence) is still open: the relay could deliver the later
/// step first. With it, the second waits for the first's commit.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_serializa_enfileiramentos_da_mesma_chave() {
    let db = PgIsolado::novo().await;
    mensageria_core::migrar(&db.pool).await.unwrap();
    let mut primeira = db.pool.begin().await.unwrap();
    let id_primeira = enfileirar(&mut *primeira, &Passo::new(7, 0)).await.unwrap();
    let pool = db.pool.clone();
    let segunda = tokio::spawn(async move {
        let mut tx = pool.begin().await.unwrap();
        let id = enfileirar(&mut *tx, &Passo::new(7, 1)).await.unwrap();
        tx.commit().await.unwrap();
        id
    });
    // Another key does not wait.
    tokio::time::timeout(
        Duration::from_secs(5),
        enfileirar(&db.pool, &Passo::new(8, 0)),
    )
    .await
    .expect("an enqueue of another key waited for the open transaction")
    .unwrap();
    let mut segunda = segunda;
    assert!(
        tokio::time::timeout(Duration::from_millis(500), &mut segunda)
            .await
            .is_err(),
        "the second enqueue of key 7 did not wait for the first's commit"
    );
    primeira.commit().await.unwrap();
    let id_segunda = tokio::time::timeout(Duration::from_secs(5), segunda)
        .await
        .expect("the second enqueue finishes once the first commits")
        .unwrap();
    let seq = async |id: uuid::Uuid| -> i64 {
        sqlx::query_scalar("SELECT seq_ordem FROM mensageria_saida WHERE id_mensagem = $1")
            .bind(id)
            .fetch_one(&db.pool)
            .await
            .unwrap()
    };
    assert!(seq(id_primeira).await < seq(id_segunda).await);
    db.descartar().await;
}

// ---------------------------------------------------------------------------------------------
// Under faults, end to end.

/// One scenario: its schema, the receptor behind the counting layer and the proxy.
struct Cenario {
    nome: &'static str,
    semente: u64,
    pg: PgIsolado,
    lado: Lado,
    proxy: ProxyDeFalhas,
}

impl Cenario {
    async fn novo(nome: &'static str, semente: u64) -> Self {
        let Bancada {
            pg, lado, proxy, ..
        } = Bancada::montar(semente, TOKEN, TABELA_ORDEM).await;
        Self {
            nome,
            semente,
            pg,
            lado,
            proxy,
        }
    }

    /// The child replicas' fast settings (`tests/bin/app_filho.rs`), for the relay in this
    /// process, with `politica` for dead letters.
    fn relay(&self, pool: PgPool, politica: OrdemAposMorta) -> Relay<Postgres> {
        let config = Config::new("app-ordem")
            .com_intervalo(Duration::from_millis(50))
            .com_backoff(Duration::from_millis(20), Duration::from_millis(200))
            .com_lease(Duration::from_secs(2))
            .com_tempo_limite_envio(Duration::from_secs(1))
            .com_lote(16)
            .com_concorrencia(8)
            .com_intervalo_registro(Duration::from_millis(500))
            .com_max_tentativas(1000)
            .com_ordem_apos_morta(politica);
        let destino = Destino::new(&self.proxy.url())
            .unwrap()
            .com_token(TOKEN)
            .com_tempo_limite(Duration::from_millis(800));
        Relay::new(pool, config).recurso(destino)
    }

    /// Enqueues `passos` steps of every key in `chaves`, each with its ledger row, from 4
    /// concurrent senders (each key's steps in order, by one sender). Returns the attempts.
    async fn produzir(&self, chaves: Range<i64>, passos: i64, veneno: fn(i64) -> bool) -> u64 {
        let tarefas: Vec<_> = (0..4)
            .map(|cliente| {
                let (pool, chaves) = (self.pg.pool.clone(), chaves.clone());
                tokio::spawn(async move {
                    let mut tentadas = 0;
                    for passo in 0..passos {
                        for chave in chaves.clone().filter(|c| c % 4 == cliente) {
                            let evento = Passo::new(chave, passo);
                            tentadas += 1;
                            produzir_com(&pool, evento.n, veneno(evento.n), &evento)
                                .await
                                .unwrap();
                        }
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

    async fn contar(&self, sql: &'static str) -> i64 {
        sqlx::query_scalar(sql)
            .fetch_one(&self.pg.pool)
            .await
            .unwrap()
    }

    async fn aplicadas(&self) -> i64 {
        self.contar("SELECT count(DISTINCT n) FROM efeito").await
    }

    /// Waits for an empty saída; returns how long it took.
    async fn drenar(&self) -> Duration {
        let inicio = Instant::now();
        esperar_valor(
            &format!("{}: an empty saída", self.nome),
            DRENAR,
            Duration::from_millis(20),
            || self.contar("SELECT count(*) FROM mensageria_saida"),
            |&n| n == 0,
        )
        .await;
        inicio.elapsed()
    }

    /// Per key, the steps the receptor applied, in the order it applied them.
    async fn aplicadas_por_chave(&self) -> BTreeMap<i64, Vec<i64>> {
        let linhas: Vec<(i64, i64)> =
            sqlx::query_as("SELECT chave, passo FROM ordem_aplicada ORDER BY id")
                .fetch_all(&self.pg.pool)
                .await
                .unwrap();
        let mut por_chave: BTreeMap<i64, Vec<i64>> = BTreeMap::new();
        for (chave, passo) in linhas {
            por_chave.entry(chave).or_default().push(passo);
        }
        por_chave
    }

    /// The keys whose applied steps are not strictly increasing.
    async fn fora_de_ordem(&self) -> Vec<(i64, Vec<i64>)> {
        self.aplicadas_por_chave()
            .await
            .into_iter()
            .filter(|(_, passos)| passos.windows(2).any(|par| par[0] >= par[1]))
            .collect()
    }

    /// Closes the way in, checks the ledger, writes and asserts the row; drops the schema.
    async fn concluir(
        self,
        descricao: &str,
        tentadas: u64,
        drenagem: Duration,
        evidencias: Vec<String>,
    ) -> Linha {
        let perdidas = self.proxy.contagem().respostas_perdidas;
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
        let mut evidencias = evidencias;
        if perdidas > 0 {
            evidencias.push(format!("{perdidas} responses lost by the proxy"));
        }
        if self.lado.injetadas() > 0 {
            evidencias.push(format!("{} answers refused (503)", self.lado.injetadas()));
        }
        linha.observacao = evidencias.join("; ");
        linha.gravar(&PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("faltas"));
        self.pg.descartar().await;
        linha.afirmar();
        linha
    }
}

fn nenhum(_: i64) -> bool {
    false
}

/// 200 keys × 20 steps through lost acks (10%) and 503 + Retry-After (5%), three replicas (two
/// child processes and this one), one child SIGKILLed with deliveries in flight (its rows come
/// back when its siblings see it dead or its leases end): every key's steps applied in order.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ordem_por_chave_sob_falhas_replicas_e_sigkill() {
    const CHAVES: Range<i64> = 1000..1200;
    const PASSOS: i64 = 20;
    let c = Cenario::novo("ordem_por_chave_sob_falhas_replicas_e_sigkill", 41).await;
    c.proxy.modo(ModoProxy::PerderResposta { fracao: 0.1 });
    c.lado.falhar(FalhaResposta::Recusar {
        fracao: 0.05,
        status_429: false,
    });
    let vitima = Filho::iniciar(APP_ORDEM, &c.pg.schema, &c.proxy.url()).await;
    let irma = Filho::iniciar(APP_ORDEM, &c.pg.schema, &c.proxy.url()).await;
    let relay = c
        .relay(c.pg.outro_pool(4).await, OrdemAposMorta::Bloquear)
        .spawn()
        .unwrap();
    let tentadas = c.produzir(CHAVES, PASSOS, nenhum).await;
    esperar_valor(
        "a third of the steps applied",
        DRENAR,
        Duration::from_millis(5),
        || c.aplicadas(),
        |&n| n >= tentadas as i64 / 3,
    )
    .await;
    let em_voo = c
        .contar("SELECT count(*) FROM mensageria_saida WHERE lease_token IS NOT NULL")
        .await;
    vitima.matar();
    esperar_valor(
        "every step applied",
        DRENAR,
        Duration::from_millis(20),
        || c.aplicadas(),
        |&n| n >= tentadas as i64,
    )
    .await;
    c.proxy.modo(ModoProxy::Passar);
    c.lado.falhar(FalhaResposta::Nenhuma);
    let drenagem = c.drenar().await;
    relay.shutdown(Duration::from_secs(5)).await;
    drop(irma);
    let fora_de_ordem = c.fora_de_ordem().await;
    let por_chave = c.aplicadas_por_chave().await;
    let linha = c
        .concluir(
            "ordered by key: 200 keys × 20 steps, 10% of acks lost, 5% answered 503 + \
             Retry-After, 3 replicas, one SIGKILLed mid-run",
            tentadas,
            drenagem,
            vec![format!(
                "{} keys out of order; 1 SIGKILL with {em_voo} rows leased",
                fora_de_ordem.len()
            )],
        )
        .await;
    assert!(
        fora_de_ordem.is_empty(),
        "steps applied out of order: {fora_de_ordem:?}"
    );
    assert_eq!(por_chave.len(), CHAVES.count());
    assert!(
        por_chave
            .values()
            .all(|passos| *passos == (0..PASSOS).collect::<Vec<_>>())
    );
    assert!(
        linha.entregas_duplicadas > 0,
        "the faults caused no redelivery: {linha:#?}"
    );
}

/// Key 3's step 1 is poison. Under `Bloquear` its later steps are never delivered while it is
/// dead, the other keys drain; once the receptor accepts it, the replay puts it back first and
/// the key drains in order.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn veneno_bloqueia_so_a_sua_chave() {
    const VENENOSO: i64 = 3001;
    let c = Cenario::novo("veneno_bloqueia_so_a_sua_chave", 42).await;
    VENENO.lock().unwrap().insert(VENENOSO);
    let relay = c
        .relay(c.pg.outro_pool(4).await, OrdemAposMorta::Bloquear)
        .spawn()
        .unwrap();
    let tentadas = c.produzir(0..20, 5, nenhum).await;
    // Everything but key 3's steps 1..4 applied, step 1 dead, steps 2..4 waiting.
    esperar_valor(
        "the other keys drained and the poison dead",
        DRENAR,
        Duration::from_millis(20),
        || async {
            (
                c.aplicadas().await,
                c.contar("SELECT count(*) FROM mensageria_mortas").await,
                c.contar("SELECT count(*) FROM mensageria_saida").await,
            )
        },
        |&estado| estado == (96, 1, 3),
    )
    .await;
    relay.shutdown(Duration::from_secs(5)).await;
    // A round now claims nothing: the key is blocked, not merely slow.
    let rodada = c
        .relay(c.pg.outro_pool(2).await, OrdemAposMorta::Bloquear)
        .rodada()
        .await
        .unwrap();
    assert_eq!(rodada.reivindicadas, 0, "{rodada:?}");
    let bloqueadas: Vec<uuid::Uuid> =
        sqlx::query_scalar("SELECT id_mensagem FROM razao WHERE n IN (3002, 3003, 3004)")
            .fetch_all(&c.pg.pool)
            .await
            .unwrap();
    let entregas = c.lado.entregas.total();
    assert_eq!(bloqueadas.len(), 3);
    for id in &bloqueadas {
        assert_eq!(
            c.lado.entregas.de(&id.to_string()),
            0,
            "a step behind the dead one reached the receptor"
        );
    }
    // The operator fixes the receptor and replays: the key drains in order.
    VENENO.lock().unwrap().remove(&VENENOSO);
    let morta = operacoes::listar_mortas(&c.pg.pool, None, 10)
        .await
        .unwrap()
        .mortas[0]
        .id_mensagem;
    operacoes::reenfileirar_morta(&c.pg.pool, morta)
        .await
        .unwrap();
    let cura = Instant::now();
    let relay = c
        .relay(c.pg.outro_pool(4).await, OrdemAposMorta::Bloquear)
        .spawn()
        .unwrap();
    c.drenar().await;
    let drenagem = cura.elapsed();
    relay.shutdown(Duration::from_secs(5)).await;
    let por_chave = c.aplicadas_por_chave().await;
    assert_eq!(por_chave[&3], [0, 1, 2, 3, 4]);
    assert!(c.fora_de_ordem().await.is_empty());
    c.concluir(
        "ordered by key, policy Bloquear: key 3's step 1 poison; replayed once the receptor accepts it",
        tentadas,
        drenagem,
        vec![format!(
            "while dead: 3 later steps of its key held (0 deliveries), the 19 other keys \
             drained ({entregas} deliveries); after the replay key 3 applied 0,1,2,3,4"
        )],
    )
    .await;
}

/// The same poison under `Seguir`: key 3 goes on without its step 1, which stays dead.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn veneno_com_seguir_deixa_a_chave_andar() {
    const VENENOSO: i64 = 103_001;
    let c = Cenario::novo("veneno_com_seguir_deixa_a_chave_andar", 43).await;
    VENENO.lock().unwrap().insert(VENENOSO);
    let relay = c
        .relay(c.pg.outro_pool(4).await, OrdemAposMorta::Seguir)
        .spawn()
        .unwrap();
    let tentadas = c.produzir(100..120, 5, |n| n == VENENOSO).await;
    let drenagem = c.drenar().await;
    relay.shutdown(Duration::from_secs(5)).await;
    let por_chave = c.aplicadas_por_chave().await;
    assert_eq!(por_chave[&103], [0, 2, 3, 4]);
    assert!(c.fora_de_ordem().await.is_empty());
    c.concluir(
        "ordered by key, policy Seguir: key 103's step 1 poison; the key goes on without it",
        tentadas,
        drenagem,
        vec!["key 103 applied 0,2,3,4; its step 1 dead".to_owned()],
    )
    .await;
    VENENO.lock().unwrap().remove(&VENENOSO);
}

/// The head check stays a probe: on an ordered backlog of 100k rows (5,000 keys × 20 steps)
/// the claim walks the queue's index and checks each candidate with one probe of the
/// `(chave_ordem, seq_ordem)` indexes, never a scan of the saída or the dead letters.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plano_da_reivindicacao_ordenada_sonda_os_indices() {
    let db = PgIsolado::novo().await;
    mensageria_core::migrar(&db.pool).await.unwrap();
    sqlx::query(
        "INSERT INTO mensageria_saida \
             (id_mensagem, tipo, payload, proxima_tentativa_em, chave_ordem, seq_ordem) \
         SELECT gen_random_uuid(), 'ordem.passo', '{}', \
                now() - interval '1 minute' + g * interval '1 microsecond', \
                ((g - 1) % 5000)::text, (g - 1) / 5000 \
         FROM generate_series(1, 100000) g",
    )
    .execute(&db.pool)
    .await
    .unwrap();
    sqlx::query("ANALYZE mensageria_saida")
        .execute(&db.pool)
        .await
        .unwrap();
    let plano: Vec<String> = sqlx::query_scalar(sqlx::AssertSqlSafe(format!(
        "EXPLAIN {}",
        reivindicacao::SQL_REIVINDICAR
    )))
    .persistent(false)
    .bind(vec!["ordem.passo".to_owned()])
    .bind(64_i64)
    .bind(1000_i64)
    .bind("r")
    .bind(1_i64)
    .bind(vec![0_i64])
    .bind(true)
    .fetch_all(&db.pool)
    .await
    .unwrap();
    let plano = plano.join("\n");
    for indice in [
        "mensageria_saida_fila",
        "mensageria_saida_ordem",
        "mensageria_mortas_ordem",
    ] {
        assert!(plano.contains(indice), "{indice} not used:\n{plano}");
    }
    assert!(!plano.contains("Seq Scan"), "{plano}");
    assert!(!plano.contains("Sort"), "{plano}");
    db.descartar().await;
}
