//! The fault suite's ground truth and checker.
//!
//! The sender writes a ledger row (`razao`) in the same transaction as each enqueue; the
//! receptor's effect table (`efeito`) gets one row per application, so an effect applied twice
//! shows up as two rows; a middleware counts every HTTP delivery that reached the receptor.
//! After the faults heal and the system drains, [`verificar`] computes what was lost, applied
//! twice, or applied without having been committed.

use std::collections::{BTreeSet, HashMap};
use std::fmt::Write as _;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::extract::Request;
use axum::http::StatusCode;
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use futures_util::StreamExt as _;
use sqlx::PgPool;

/// The suite's tables, in the scenario's schema.
pub const TABELAS: &str = "CREATE TABLE razao (n BIGINT PRIMARY KEY, id_mensagem UUID NOT NULL, veneno BOOLEAN NOT NULL); \
     CREATE TABLE efeito (id BIGSERIAL PRIMARY KEY, n BIGINT NOT NULL); \
     CREATE INDEX efeito_n ON efeito (n)";

/// A fault scenario's receiving side: a schema of its own (migrated, with [`TABELAS`] and
/// `tabelas_extra`), every receptor of the binary served on 127.0.0.1 behind a counting [`Lado`]
/// (its own pool of 8), and a fault-injecting proxy in front of it.
pub struct Bancada {
    /// The scenario's schema.
    pub pg: crate::PgIsolado,
    /// The receptor's HTTP layer: counts deliveries, injects answers.
    pub lado: Lado,
    /// Between the relay and the receptor.
    pub proxy: mensageria_core::teste::ProxyDeFalhas,
    /// Where the receptor listens, behind the proxy.
    pub endereco: SocketAddr,
}

impl Bancada {
    /// Sets it up, seeded with `semente`; the receptor accepts `token`.
    pub async fn montar(semente: u64, token: &str, tabelas_extra: &str) -> Self {
        let pg = crate::PgIsolado::novo().await;
        mensageria_core::migrar(&pg.pool).await.unwrap();
        sqlx::raw_sql(TABELAS).execute(&pg.pool).await.unwrap();
        if !tabelas_extra.is_empty() {
            sqlx::raw_sql(sqlx::AssertSqlSafe(tabelas_extra.to_owned()))
                .execute(&pg.pool)
                .await
                .unwrap();
        }
        let lado = Lado::new(semente);
        let app = mensageria_axum::router(
            pg.outro_pool(8).await,
            mensageria_axum::Config::new("receptor", [token]),
        )
        .unwrap();
        let ouvinte = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let endereco = ouvinte.local_addr().unwrap();
        let app = lado.envolver(app);
        tokio::spawn(async move { axum::serve(ouvinte, app).await });
        let proxy = mensageria_core::teste::ProxyDeFalhas::iniciar(endereco, semente)
            .await
            .unwrap();
        Self {
            pg,
            lado,
            proxy,
            endereco,
        }
    }
}

/// Every HTTP delivery that reached the receptor, by message id (`x-request-id`).
#[derive(Default)]
pub struct Entregas(Mutex<HashMap<String, u32>>);

impl Entregas {
    /// Total deliveries.
    pub fn total(&self) -> u64 {
        self.0.lock().unwrap().values().map(|&n| u64::from(n)).sum()
    }

    /// Deliveries of one message (by its id).
    pub fn de(&self, id_mensagem: &str) -> u32 {
        self.0
            .lock()
            .unwrap()
            .get(id_mensagem)
            .copied()
            .unwrap_or(0)
    }

    /// The most deliveries any one message got.
    pub fn maximo(&self) -> u32 {
        self.0.lock().unwrap().values().copied().max().unwrap_or(0)
    }
}

/// What the receptor's HTTP layer does after (or instead of) the receptor, for one scenario.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub enum FalhaResposta {
    /// Answers what the receptor answered.
    #[default]
    Nenhuma,
    /// The receptor runs and commits, then a share of answers is replaced by a 500.
    ErroAposCommit(f64),
    /// The receptor runs and commits, then a share of answers is held past the relay's send
    /// timeout.
    LentoAposCommit(f64, Duration),
    /// A share of requests gets 503 + `Retry-After: 1` (or 429 when the flag is set) without
    /// reaching the receptor.
    Recusar {
        /// Share of requests refused.
        fracao: f64,
        /// 429 instead of 503.
        status_429: bool,
    },
    /// Every request waits this long before reaching the receptor.
    Lento(Duration),
    /// A share of requests is answered 302 or 307 (drawn by the seed) with `Location:` the same
    /// path on `para`, without reaching the receptor: a destination that moved, an ingress
    /// sending clients elsewhere.
    Redirecionar {
        /// Share of requests redirected.
        fracao: f64,
        /// The other host (see [`OutroHost`]).
        para: SocketAddr,
    },
    /// A share of requests gets `200 text/html`, a login page, without reaching the receptor:
    /// an SSO gateway in front of it.
    PaginaDeLogin(f64),
    /// A share of requests gets a 500 whose body is this many bytes, made chunk by chunk as it
    /// is sent (never held in memory), without reaching the receptor.
    CorpoGigante(f64, u64),
}

/// What the SSO gateway of [`FalhaResposta::PaginaDeLogin`] answers.
const PAGINA_DE_LOGIN: &str = "<!DOCTYPE html><html><head><title>Sign in</title></head><body>\
     <form method=\"post\" action=\"/login\"><input name=\"user\"><input name=\"password\" \
     type=\"password\"><button>Sign in</button></form></body></html>";

/// The receptor side of one scenario: counts deliveries and applies [`FalhaResposta`].
#[derive(Clone)]
pub struct Lado {
    /// Deliveries counted so far.
    pub entregas: Arc<Entregas>,
    /// Faults the layer injected (answers replaced, held or refused).
    pub injetadas: Arc<std::sync::atomic::AtomicU64>,
    /// Deliveries by `(x-mensageria-tipo, x-app)`: which app sent which tipo.
    pub remetentes: Arc<Mutex<HashMap<(String, String), u64>>>,
    /// Bytes of [`FalhaResposta::CorpoGigante`] bodies actually made, i.e. that the client let
    /// the server send (plus at most one chunk per answer).
    pub bytes_gigantes: Arc<std::sync::atomic::AtomicU64>,
    /// Requests inside the receptor right now.
    em_voo: Arc<std::sync::atomic::AtomicI64>,
    falha: Arc<Mutex<(FalhaResposta, fastrand::Rng)>>,
}

impl Lado {
    /// No fault yet; `semente` seeds the fault's choices.
    pub fn new(semente: u64) -> Self {
        Self {
            entregas: Arc::default(),
            injetadas: Arc::default(),
            remetentes: Arc::default(),
            bytes_gigantes: Arc::default(),
            em_voo: Arc::default(),
            falha: Arc::new(Mutex::new((
                FalhaResposta::Nenhuma,
                fastrand::Rng::with_seed(semente),
            ))),
        }
    }

    /// Switches the fault.
    pub fn falhar(&self, falha: FalhaResposta) {
        self.falha.lock().unwrap().0 = falha;
    }

    /// `app` wrapped in the counting and fault layers.
    pub fn envolver(&self, app: Router) -> Router {
        let lado = self.clone();
        app.layer(middleware::from_fn(
            move |pedido: Request, proximo: Next| {
                let lado = lado.clone();
                async move { lado.atender(pedido, proximo).await }
            },
        ))
    }

    fn sortear(&self, fracao: f64) -> bool {
        let sim = self.falha.lock().unwrap().1.f64() < fracao;
        if sim {
            self.injetadas
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
        sim
    }

    /// Faults injected so far.
    pub fn injetadas(&self) -> u64 {
        self.injetadas.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Waits until no request is inside the receptor (so no late delivery can land after the
    /// checker counted), failing after `limite`.
    pub async fn esperar_quietude(&self, limite: Duration) {
        let fim = tokio::time::Instant::now() + limite;
        while self.em_voo.load(std::sync::atomic::Ordering::SeqCst) > 0 {
            assert!(
                tokio::time::Instant::now() < fim,
                "requests still inside the receptor after {limite:?}"
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    async fn atender(&self, pedido: Request, proximo: Next) -> Response {
        let _em_voo = EmVoo::entrar(&self.em_voo);
        let falha = self.falha.lock().unwrap().0;
        match falha {
            FalhaResposta::Recusar { fracao, status_429 } if self.sortear(fracao) => {
                let status = if status_429 { 429 } else { 503 };
                return (
                    StatusCode::from_u16(status).unwrap(),
                    [("retry-after", "1")],
                    "try later",
                )
                    .into_response();
            }
            FalhaResposta::Redirecionar { fracao, para } if self.sortear(fracao) => {
                let status = if self.falha.lock().unwrap().1.bool() {
                    StatusCode::TEMPORARY_REDIRECT
                } else {
                    StatusCode::FOUND
                };
                let location = format!("http://{para}{}", pedido.uri().path());
                return (status, [("location", location)]).into_response();
            }
            FalhaResposta::PaginaDeLogin(fracao) if self.sortear(fracao) => {
                return (
                    StatusCode::OK,
                    [("content-type", "text/html; charset=utf-8")],
                    PAGINA_DE_LOGIN,
                )
                    .into_response();
            }
            FalhaResposta::CorpoGigante(fracao, bytes) if self.sortear(fracao) => {
                let feitos = Arc::clone(&self.bytes_gigantes);
                let corpo = crate::corpo_gigante(bytes).inspect(move |pedaco| {
                    if let Ok(pedaco) = pedaco {
                        feitos.fetch_add(pedaco.len() as u64, std::sync::atomic::Ordering::Relaxed);
                    }
                });
                return (
                    StatusCode::INTERNAL_SERVER_ERROR,
                    [("content-type", "text/plain")],
                    axum::body::Body::from_stream(corpo),
                )
                    .into_response();
            }
            FalhaResposta::Lento(atraso) => tokio::time::sleep(atraso).await,
            _ => {}
        }
        // A delivery is one event: the request's `x-request-id`, or each event of a batch.
        let (pedido, ids) = ids_das_entregas(pedido).await;
        let remetente = (
            cabecalho(&pedido, "x-mensageria-tipo"),
            cabecalho(&pedido, "x-app"),
        );
        *self
            .remetentes
            .lock()
            .unwrap()
            .entry(remetente)
            .or_default() += ids.len().max(1) as u64;
        for id in ids {
            *self.entregas.0.lock().unwrap().entry(id).or_default() += 1;
        }
        let resposta = proximo.run(pedido).await;
        match falha {
            FalhaResposta::ErroAposCommit(fracao) if self.sortear(fracao) => {
                (StatusCode::INTERNAL_SERVER_ERROR, "lost after commit").into_response()
            }
            FalhaResposta::LentoAposCommit(fracao, atraso) if self.sortear(fracao) => {
                tokio::time::sleep(atraso).await;
                resposta
            }
            _ => resposta,
        }
    }
}

/// The message ids a request delivers: its `x-request-id`, or, on a batch route (`…/lote`),
/// the `id` of each of its events. The request comes back whole.
async fn ids_das_entregas(pedido: Request) -> (Request, Vec<String>) {
    if !pedido.uri().path().ends_with("/lote") {
        let id = pedido
            .headers()
            .get("x-request-id")
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        return (pedido, id.into_iter().collect());
    }
    let (partes, corpo) = pedido.into_parts();
    let bytes = axum::body::to_bytes(corpo, 64 * 1024 * 1024)
        .await
        .unwrap_or_default();
    let ids = serde_json::from_slice::<serde_json::Value>(&bytes)
        .ok()
        .and_then(|lote| {
            lote["eventos"].as_array().map(|eventos| {
                eventos
                    .iter()
                    .filter_map(|e| e["id"].as_str().map(str::to_owned))
                    .collect()
            })
        })
        .unwrap_or_default();
    (
        Request::from_parts(partes, axum::body::Body::from(bytes)),
        ids,
    )
}

/// A second HTTP server on 127.0.0.1, the host a [`FalhaResposta::Redirecionar`] points to. It
/// counts every request (any method, any path) and answers 200 as a receptor of the path's last
/// segment would (`{"resultado":"applied","tipo":…}`), so a relay that followed the redirect
/// would take it for a delivery.
pub struct OutroHost {
    /// Where it listens.
    pub endereco: SocketAddr,
    pedidos: Arc<std::sync::atomic::AtomicU64>,
}

impl OutroHost {
    /// Starts on a free port.
    pub async fn iniciar() -> Self {
        let pedidos: Arc<std::sync::atomic::AtomicU64> = Arc::default();
        let contador = Arc::clone(&pedidos);
        let app = Router::new().fallback(move |uri: axum::http::Uri| {
            let contador = Arc::clone(&contador);
            async move {
                contador.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                let tipo = uri.path().rsplit('/').next().unwrap_or_default().to_owned();
                axum::Json(serde_json::json!({"resultado": "applied", "tipo": tipo}))
            }
        });
        let ouvinte = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind 127.0.0.1:0");
        let endereco = ouvinte.local_addr().expect("local address");
        tokio::spawn(async move { axum::serve(ouvinte, app).await });
        Self { endereco, pedidos }
    }

    /// Requests it received so far.
    pub fn pedidos(&self) -> u64 {
        self.pedidos.load(std::sync::atomic::Ordering::SeqCst)
    }
}

/// Counts a request in flight until dropped (also when the connection is cut mid-request).
struct EmVoo(Arc<std::sync::atomic::AtomicI64>);

impl EmVoo {
    fn entrar(contador: &Arc<std::sync::atomic::AtomicI64>) -> Self {
        contador.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        Self(Arc::clone(contador))
    }
}

impl Drop for EmVoo {
    fn drop(&mut self) {
        self.0.fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
    }
}

fn cabecalho(pedido: &Request, nome: &str) -> String {
    pedido
        .headers()
        .get(nome)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_owned()
}

/// One row of the fault matrix.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct Linha {
    /// The scenario's name (its test's name).
    pub cenario: String,
    /// What the scenario does, in a few words.
    pub descricao: String,
    /// Producer transactions attempted.
    pub tentadas: u64,
    /// Committed (ledger rows).
    pub commitadas: u64,
    /// Distinct messages whose effect was applied.
    pub aplicadas: u64,
    /// Committed, not poison, never applied.
    pub perdidas: u64,
    /// Applied, never committed.
    pub inesperadas: u64,
    /// Effects applied more than once (extra rows).
    pub efeitos_duplicados: u64,
    /// HTTP deliveries that reached the receptor.
    pub entregas: u64,
    /// Deliveries beyond the first, in all.
    pub entregas_duplicadas: u64,
    /// The most deliveries one message got.
    pub max_por_mensagem: u32,
    /// Dead letters.
    pub mortas: u64,
    /// Whether the dead letters are exactly the poison messages.
    pub mortas_sao_o_veneno: bool,
    /// From the fault healing to an empty saída.
    pub drenagem_ms: u64,
    /// Seed of the scenario's random choices.
    pub semente: u64,
    /// Scenario-specific evidence (e.g. requests during an outage, fenced settlements).
    pub observacao: String,
}

impl Linha {
    /// Fails the test unless nothing was lost, nothing applied twice or unexpectedly, and the
    /// dead letters are exactly the poison set.
    pub fn afirmar(&self) {
        assert_eq!(self.perdidas, 0, "lost messages: {self:#?}");
        assert_eq!(self.inesperadas, 0, "unexpected effects: {self:#?}");
        assert_eq!(
            self.efeitos_duplicados, 0,
            "effects applied twice: {self:#?}"
        );
        assert!(
            self.mortas_sao_o_veneno,
            "dead letters are not the poison set: {self:#?}"
        );
        assert!(
            self.commitadas > 0,
            "the scenario committed nothing: {self:#?}"
        );
    }

    /// Writes the row as JSON into `dir` (one file per scenario), for `matriz-de-faltas`.
    pub fn gravar(&self, dir: &Path) {
        std::fs::create_dir_all(dir).expect("create the matrix directory");
        std::fs::write(
            dir.join(format!("{}.json", self.cenario)),
            serde_json::to_vec_pretty(self).expect("serialize a matrix row"),
        )
        .expect("write a matrix row");
    }
}

/// Counts the ledger, the effects, the dead letters and the deliveries of one scenario, in one
/// snapshot (`REPEATABLE READ`), after no request is left inside the receptor. Cut the ways in
/// (set the proxies to `Recusar`) before calling it, so nothing can arrive late.
pub async fn verificar(
    pool: &PgPool,
    lado: &Lado,
    cenario: &str,
    descricao: &str,
    tentadas: u64,
    semente: u64,
    drenagem: Duration,
) -> Linha {
    lado.esperar_quietude(Duration::from_secs(30)).await;
    let mut tx = pool.begin().await.expect("begin the checker's snapshot");
    sqlx::query("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
        .execute(&mut *tx)
        .await
        .expect("a snapshot");
    let mut um = async |sql: &'static str| {
        sqlx::query_scalar::<_, i64>(sql)
            .fetch_one(&mut *tx)
            .await
            .expect(sql) as u64
    };
    let commitadas = um("SELECT count(*) FROM razao").await;
    let aplicadas = um("SELECT count(DISTINCT n) FROM efeito").await;
    let perdidas = um("SELECT count(*) FROM razao r WHERE NOT r.veneno \
                       AND NOT EXISTS (SELECT 1 FROM efeito e WHERE e.n = r.n)")
    .await;
    let inesperadas = um("SELECT count(DISTINCT n) FROM efeito e \
                          WHERE NOT EXISTS (SELECT 1 FROM razao r WHERE r.n = e.n)")
    .await;
    let efeitos_duplicados = um("SELECT count(*) - count(DISTINCT n) FROM efeito").await;
    let mortas: BTreeSet<uuid::Uuid> =
        sqlx::query_scalar("SELECT id_mensagem FROM mensageria_mortas")
            .fetch_all(&mut *tx)
            .await
            .expect("dead letters")
            .into_iter()
            .collect();
    let veneno: BTreeSet<uuid::Uuid> =
        sqlx::query_scalar("SELECT id_mensagem FROM razao WHERE veneno")
            .fetch_all(&mut *tx)
            .await
            .expect("poison")
            .into_iter()
            .collect();
    tx.commit().await.expect("end the checker's snapshot");
    let entregas = lado.entregas.total();
    let unicas = lado.entregas.0.lock().unwrap().len() as u64;
    Linha {
        cenario: cenario.to_owned(),
        descricao: descricao.to_owned(),
        tentadas,
        commitadas,
        aplicadas,
        perdidas,
        inesperadas,
        efeitos_duplicados,
        entregas,
        entregas_duplicadas: entregas - unicas,
        max_por_mensagem: lado.entregas.maximo(),
        mortas: mortas.len() as u64,
        mortas_sao_o_veneno: mortas == veneno,
        drenagem_ms: drenagem.as_millis() as u64,
        semente,
        observacao: String::new(),
    }
}

/// The sender's transaction: the ledger row and the enqueue of `evento`, committed together.
pub async fn produzir_com<T: mensageria_core::Enviador<Por>, Por>(
    pool: &PgPool,
    n: i64,
    veneno: bool,
    evento: &T,
) -> Result<(), mensageria_core::Erro> {
    let mut tx = pool.begin().await?;
    let id = mensageria_core::enfileirar(&mut *tx, evento).await?;
    sqlx::query("INSERT INTO razao (n, id_mensagem, veneno) VALUES ($1, $2, $3)")
        .bind(n)
        .bind(id)
        .bind(veneno)
        .execute(&mut *tx)
        .await?;
    tx.commit().await?;
    Ok(())
}

/// The fault matrix in Markdown, from the rows in `dir`.
pub fn matriz(dir: &Path) -> String {
    let mut linhas: Vec<Linha> = std::fs::read_dir(dir)
        .map(|entradas| {
            entradas
                .filter_map(Result::ok)
                .filter(|e| e.path().extension().is_some_and(|x| x == "json"))
                .filter_map(|e| serde_json::from_slice(&std::fs::read(e.path()).ok()?).ok())
                .collect()
        })
        .unwrap_or_default();
    linhas.sort_by(|a, b| a.cenario.cmp(&b.cenario));
    tabela(&linhas)
}

/// The fault matrix in Markdown.
pub fn tabela(linhas: &[Linha]) -> String {
    let mut md = String::from(
        "| scenario | fault | committed | applied | lost | unexpected | dup. effects | deliveries | dup. deliveries | max/msg | dead (= poison?) | drain after heal | seed | evidence |\n\
         |---|---|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|---:|---|\n",
    );
    for l in linhas {
        let _ = writeln!(
            md,
            "| `{}` | {} | {} / {} | {} | **{}** | **{}** | **{}** | {} | {} | {} | {} ({}) | {} ms | {} | {} |",
            l.cenario,
            l.descricao,
            l.commitadas,
            l.tentadas,
            l.aplicadas,
            l.perdidas,
            l.inesperadas,
            l.efeitos_duplicados,
            l.entregas,
            l.entregas_duplicadas,
            l.max_por_mensagem,
            l.mortas,
            if l.mortas_sao_o_veneno { "yes" } else { "NO" },
            l.drenagem_ms,
            l.semente,
            l.observacao,
        );
    }
    md
}

/// A child app's process (`tests/bin/app_*.rs`): a relay in a process of its own. Killed with
/// SIGKILL when dropped.
pub struct Filho(std::process::Child);

impl Filho {
    /// Starts `binario` on `schema`, delivering to `destino`, and waits for its relay to run.
    pub async fn iniciar(binario: &str, schema: &str, destino: &str) -> Self {
        Self::iniciar_com(binario, schema, destino, &[]).await
    }

    /// [`iniciar`](Self::iniciar) with more environment variables (`MENSAGERIA_INSTANCE`,
    /// `MENSAGERIA_TESTE_PADRAO`, `MENSAGERIA_TESTE_LIDER`: see `tests/bin/app_filho.rs`).
    pub async fn iniciar_com(
        binario: &str,
        schema: &str,
        destino: &str,
        ambiente: &[(&str, &str)],
    ) -> Self {
        use std::io::BufRead;
        let mut filho = std::process::Command::new(binario)
            .env("DATABASE_URL", crate::database_url())
            .env("MENSAGERIA_TESTE_SCHEMA", schema)
            .env("MENSAGERIA_TESTE_DESTINO", destino)
            .env("RUST_LOG", "off")
            .envs(ambiente.iter().copied())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap_or_else(|erro| panic!("start the child app {binario}: {erro}"));
        let saida = filho.stdout.take().expect("the child's stdout");
        let linha = tokio::task::spawn_blocking(move || {
            let mut linha = String::new();
            std::io::BufReader::new(saida)
                .read_line(&mut linha)
                .map(|_| linha)
        })
        .await
        .expect("read the child's first line")
        .expect("read the child's first line");
        assert_eq!(linha.trim(), "pronto", "the child app did not start");
        Self(filho)
    }

    /// The child's process id.
    pub fn pid(&self) -> u32 {
        self.0.id()
    }

    /// SIGKILL: no shutdown, no settlement, leases left to expire.
    pub fn matar(mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

impl Drop for Filho {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}
