//! Harness of the end-to-end suites: every test gets its own PostgreSQL schema or SQLite file,
//! so the suite runs in parallel against real databases.
//!
//! PostgreSQL is reached at `DATABASE_URL`, by default `postgres://postgres@127.0.0.1:5432/postgres`
//! (`scripts/test` starts the local server when it is down).

pub mod faltas;
pub mod nats;
pub mod rede;

use sqlx::{PgPool, SqlitePool};

/// The PostgreSQL server the suites use (`DATABASE_URL` or the local server).
pub use mensageria_core::teste::database_url;

/// A PostgreSQL schema of one test's own, dropped by [`PgIsolado::descartar`]: the suites'
/// face of [`mensageria_core::teste::PgIsolado`] (an **empty** schema, 8 connections, fields
/// instead of getters, panics instead of errors).
pub struct PgIsolado {
    /// A pool whose `search_path` is the test's schema.
    pub pool: PgPool,
    /// The schema's name.
    pub schema: String,
    isolado: mensageria_core::teste::PgIsolado,
}

impl PgIsolado {
    /// Creates a fresh, empty schema (no mensageria tables yet).
    pub async fn novo() -> Self {
        let isolado = mensageria_core::teste::PgIsolado::vazio(&database_url(), 8)
            .await
            .expect("a schema on PostgreSQL at DATABASE_URL (run scripts/test, which starts it)");
        Self {
            pool: isolado.pool().clone(),
            schema: isolado.schema().to_owned(),
            isolado,
        }
    }

    /// Another pool on the same schema (another app, another replica).
    pub async fn outro_pool(&self, conexoes: u32) -> PgPool {
        self.isolado
            .outro_pool(conexoes)
            .await
            .expect("connect to the test schema")
    }

    /// Another pool on the same schema whose connections carry `application_name = nome`, so
    /// a test can find and kill them (`pg_terminate_backend`).
    pub async fn pool_com_nome(&self, conexoes: u32, nome: &str) -> PgPool {
        let opcoes = self.isolado.opcoes_de_conexao().application_name(nome);
        Self::conectar(opcoes, conexoes).await
    }

    /// Another pool on the same schema that reaches PostgreSQL through `endereco` (a fault
    /// proxy on 127.0.0.1).
    pub async fn pool_via(&self, endereco: std::net::SocketAddr, conexoes: u32) -> PgPool {
        let opcoes = self
            .isolado
            .opcoes_de_conexao()
            .host(&endereco.ip().to_string())
            .port(endereco.port());
        Self::conectar(opcoes, conexoes).await
    }

    async fn conectar(opcoes: sqlx::postgres::PgConnectOptions, conexoes: u32) -> PgPool {
        sqlx::postgres::PgPoolOptions::new()
            .max_connections(conexoes)
            .connect_with(opcoes)
            .await
            .expect("connect to the test schema")
    }

    /// Drops the schema and everything in it.
    pub async fn descartar(self) {
        self.isolado.fechar().await.expect("drop the test schema");
    }
}

/// A SQLite file of one test's own, in a temporary directory removed by
/// [`SqliteIsolado::descartar`] (or on drop): the suites' face of
/// [`mensageria_core::teste::SqliteIsolado`] (an **empty** file, fields instead of getters).
pub struct SqliteIsolado {
    /// A pool on the file, opened as `mensageria_core::banco::sqlite::abrir` does.
    pub pool: SqlitePool,
    /// The file's path.
    pub caminho: std::path::PathBuf,
    isolado: mensageria_core::teste::SqliteIsolado,
}

impl SqliteIsolado {
    /// Creates a fresh, empty database file.
    pub async fn novo() -> Self {
        let isolado = mensageria_core::teste::SqliteIsolado::vazio()
            .await
            .expect("a SQLite file in a temporary directory");
        Self {
            pool: isolado.pool().clone(),
            caminho: isolado.caminho().to_owned(),
            isolado,
        }
    }

    /// Closes the pool and deletes the file.
    pub async fn descartar(self) {
        self.isolado.fechar().await.expect("delete the test file");
    }
}

/// Writes one test body twice, as `mod $nome { async fn postgres(); async fn sqlite(); }`, with
/// `$db` bound to a fresh [`PgIsolado`] or [`SqliteIsolado`]. Both have `.pool`; SQL in the body
/// uses `$1`-style parameters, which both backends accept.
#[macro_export]
macro_rules! nos_dois_bancos {
    ($(#[$meta:meta])* async fn $nome:ident($db:ident) $corpo:block) => {
        $(#[$meta])*
        mod $nome {
            #[allow(unused_imports)]
            use super::*;

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn postgres() {
                let $db = $crate::PgIsolado::novo().await;
                $corpo
                $db.descartar().await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn sqlite() {
                let $db = $crate::SqliteIsolado::novo().await;
                $corpo
                $db.descartar().await;
            }
        }
    };
}

/// PostgreSQL or SQLite, for the helpers the suites write once for both backends (`$1`-style
/// parameters, which both accept). It carries the one bound every such helper needs (the
/// arguments sqlx binds); the executor and column-type bounds cannot ride on a trait (Rust
/// does not imply them from it), so each helper states the ones it uses.
pub trait Sql: sqlx::Database<Arguments: sqlx::IntoArguments<Self>> {}

impl<DB: sqlx::Database<Arguments: sqlx::IntoArguments<DB>>> Sql for DB {}

/// `SELECT count(*) FROM <de>`: `de` is a table, optionally followed by a `WHERE`.
pub async fn contar<DB: Sql>(pool: &sqlx::Pool<DB>, de: &str) -> i64
where
    for<'c> &'c mut DB::Connection: sqlx::Executor<'c, Database = DB>,
    (i64,): for<'r> sqlx::FromRow<'r, DB::Row>,
{
    sqlx::query_scalar(sqlx::AssertSqlSafe(format!(
        "SELECT CAST(count(*) AS BIGINT) FROM {de}"
    )))
    .fetch_one(pool)
    .await
    .unwrap_or_else(|erro| panic!("count {de}: {erro}"))
}

/// Waits (at most `segundos`) until the saída of `pool` is empty, polling every 20 ms; fails the
/// test with the last count seen.
pub async fn esperar_saida_vazia<DB: Sql>(pool: &sqlx::Pool<DB>, segundos: u64)
where
    for<'c> &'c mut DB::Connection: sqlx::Executor<'c, Database = DB>,
    (i64,): for<'r> sqlx::FromRow<'r, DB::Row>,
{
    esperar_valor(
        "an empty saída",
        std::time::Duration::from_secs(segundos),
        std::time::Duration::from_millis(20),
        || contar(pool, "mensageria_saida"),
        |&pendentes| pendentes == 0,
    )
    .await;
}

/// Serves `app` with `mensageria_axum::servir` on a free port of 127.0.0.1: its base URL, and
/// the server's task (abort it to stop serving).
pub async fn servir_em_porta_livre(app: axum::Router) -> (String, tokio::task::AbortHandle) {
    let ouvinte = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("a free port");
    let base = format!("http://{}", ouvinte.local_addr().expect("its address"));
    let servidor = tokio::spawn(std::future::IntoFuture::into_future(
        mensageria_axum::servir(ouvinte, app),
    ));
    (base, servidor.abort_handle())
}

/// Starts `relay`, waits until the saída of `pool` is empty (polling every 20 ms) or `limite`
/// passed, and shuts the relay down: the seconds the drain took. A slow drain is measured and
/// reported here, not cut at a limit as [`esperar_saida_vazia`] does; the caller checks the saída.
pub async fn cronometrar_dreno<DB: Sql + mensageria_core::Banco>(
    pool: &sqlx::Pool<DB>,
    relay: mensageria_core::relay::Relay<DB>,
    limite: std::time::Duration,
) -> f64
where
    for<'c> &'c mut DB::Connection: sqlx::Executor<'c, Database = DB>,
    (i64,): for<'r> sqlx::FromRow<'r, DB::Row>,
{
    let inicio = std::time::Instant::now();
    let relay = relay.spawn().expect("start the relay");
    while contar(pool, "mensageria_saida").await > 0 && inicio.elapsed() < limite {
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    let segundos = inicio.elapsed().as_secs_f64();
    relay.shutdown(std::time::Duration::from_secs(15)).await;
    segundos
}

/// Runs `sql` with `textos` as its text parameters (`$1`, `$2`, …), failing the test with
/// `para_que` (what the statement is for) if it fails.
pub async fn executar<DB: Sql>(pool: &sqlx::Pool<DB>, sql: String, textos: &[&str], para_que: &str)
where
    for<'c> &'c mut DB::Connection: sqlx::Executor<'c, Database = DB>,
    for<'q> &'q str: sqlx::Encode<'q, DB> + sqlx::Type<DB>,
{
    let mut consulta = sqlx::query(sqlx::AssertSqlSafe(sql));
    for texto in textos {
        consulta = consulta.bind(*texto);
    }
    consulta
        .execute(pool)
        .await
        .unwrap_or_else(|erro| panic!("{para_que}: {erro}"));
}

/// A real HTTP receiver on 127.0.0.1 (own port) that records every delivery and answers as told.
pub mod servidor {
    use std::collections::HashMap;
    use std::net::SocketAddr;
    use std::sync::{Arc, Mutex};
    use std::time::Duration;

    use axum::extract::{Path, State};
    use axum::http::{HeaderMap, StatusCode};
    use axum::response::{IntoResponse, Response};
    use axum::routing::post;

    /// How the server answers.
    #[derive(Clone, Debug)]
    pub enum Resposta {
        /// 200 with a mensageria receptor's answer (`{"resultado":"applied","tipo":…}`).
        Ok,
        /// A bare 200 with this content type and body, as a gateway or login page answers.
        Ok200Com(&'static str, &'static str),
        /// This redirect status, to this `Location`.
        Redirecionar(u16, String),
        /// This status with a streamed body of this many bytes (never held in memory).
        CorpoGigante(u16, u64),
        /// This status, with `Retry-After` if given.
        Status(u16, Option<u64>),
        /// Wait, then 200.
        Demorar(Duration),
    }

    /// One request as received.
    #[derive(Clone, Debug)]
    pub struct Recebida {
        /// The path's tipo.
        pub tipo: String,
        /// `x-request-id`.
        pub id: String,
        /// `x-mensageria-tentativa`.
        pub tentativa: String,
        /// `authorization`.
        pub autorizacao: Option<String>,
        /// The body.
        pub corpo: String,
        /// The status we answered.
        pub status: u16,
    }

    #[derive(Default)]
    struct Estado {
        padrao: Option<Resposta>,
        /// Answers for bodies containing a marker, checked first.
        por_marcador: Vec<(String, Resposta)>,
        recebidas: Vec<Recebida>,
    }

    /// The running server.
    #[derive(Clone)]
    pub struct Servidor {
        /// Where it listens.
        pub endereco: SocketAddr,
        estado: Arc<Mutex<Estado>>,
    }

    impl Servidor {
        /// Starts on a free port of 127.0.0.1, answering 200.
        pub async fn iniciar() -> Self {
            let estado = Arc::new(Mutex::new(Estado::default()));
            let app = axum::Router::new()
                .route("/m2m/{tipo}", post(receber))
                .with_state(Arc::clone(&estado));
            let ouvinte = tokio::net::TcpListener::bind("127.0.0.1:0")
                .await
                .expect("bind 127.0.0.1:0");
            let endereco = ouvinte.local_addr().expect("local address");
            tokio::spawn(async move {
                let _ = axum::serve(ouvinte, app).await;
            });
            Self { endereco, estado }
        }

        /// `http://127.0.0.1:port`.
        pub fn url(&self) -> String {
            format!("http://{}", self.endereco)
        }

        /// Sets the default answer.
        pub fn responder(&self, resposta: Resposta) {
            self.estado.lock().unwrap().padrao = Some(resposta);
        }

        /// Answers `resposta` to bodies that contain `marcador`.
        pub fn responder_se_contem(&self, marcador: &str, resposta: Resposta) {
            self.estado
                .lock()
                .unwrap()
                .por_marcador
                .push((marcador.to_owned(), resposta));
        }

        /// Every request so far.
        pub fn recebidas(&self) -> Vec<Recebida> {
            self.estado.lock().unwrap().recebidas.clone()
        }

        /// Requests answered 2xx, per message id.
        pub fn aceitas_por_id(&self) -> HashMap<String, usize> {
            let mut contagem = HashMap::new();
            for r in self
                .recebidas()
                .into_iter()
                .filter(|r| (200..300).contains(&r.status))
            {
                *contagem.entry(r.id).or_insert(0) += 1;
            }
            contagem
        }
    }

    async fn receber(
        State(estado): State<Arc<Mutex<Estado>>>,
        Path(tipo): Path<String>,
        cabecalhos: HeaderMap,
        corpo: String,
    ) -> Response {
        let texto = |nome: &str| {
            cabecalhos
                .get(nome)
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned)
        };
        let resposta = {
            let estado = estado.lock().unwrap();
            estado
                .por_marcador
                .iter()
                .find(|(marcador, _)| corpo.contains(marcador.as_str()))
                .map(|(_, r)| r.clone())
                .or_else(|| estado.padrao.clone())
                .unwrap_or(Resposta::Ok)
        };
        if let Resposta::Demorar(tempo) = &resposta {
            tokio::time::sleep(*tempo).await;
        }
        let (status, retry_after) = match &resposta {
            Resposta::Status(s, r) => (*s, *r),
            Resposta::Redirecionar(s, _) | Resposta::CorpoGigante(s, _) => (*s, None),
            _ => (200, None),
        };
        let tipo_resposta = tipo.clone();
        estado.lock().unwrap().recebidas.push(Recebida {
            tipo,
            id: texto("x-request-id").unwrap_or_default(),
            tentativa: texto("x-mensageria-tentativa").unwrap_or_default(),
            autorizacao: texto("authorization"),
            corpo,
            status,
        });
        let status_http = StatusCode::from_u16(status).unwrap();
        let mut resposta = match resposta {
            Resposta::Ok | Resposta::Demorar(_) => (
                status_http,
                axum::Json(serde_json::json!({"resultado": "applied", "tipo": tipo_resposta})),
            )
                .into_response(),
            Resposta::Ok200Com(tipo_conteudo, corpo) => {
                (status_http, [("content-type", tipo_conteudo)], corpo).into_response()
            }
            Resposta::Redirecionar(_, para) => {
                (status_http, [("location", para)], "").into_response()
            }
            Resposta::CorpoGigante(_, tamanho) => (
                status_http,
                axum::body::Body::from_stream(crate::corpo_gigante(tamanho)),
            )
                .into_response(),
            Resposta::Status(..) => status_http.into_response(),
        };
        if let Some(segundos) = retry_after {
            resposta
                .headers_mut()
                .insert("retry-after", segundos.to_string().parse().unwrap());
        }
        resposta
    }
}

/// `tamanho` bytes of `x` in 64 KiB chunks, made as they are sent.
pub(crate) fn corpo_gigante(
    tamanho: u64,
) -> impl futures_util::Stream<Item = Result<Vec<u8>, std::io::Error>> + Send {
    const PEDACO: u64 = 64 * 1024;
    futures_util::stream::unfold(0_u64, move |enviado| async move {
        (enviado < tamanho).then(|| {
            let n = PEDACO.min(tamanho - enviado);
            (Ok(vec![b'x'; n as usize]), enviado + n)
        })
    })
}

/// Whether `pool` is a PostgreSQL pool, for the few statements whose SQL differs by backend.
pub fn e_postgres<P>(pool: &P) -> bool {
    std::any::type_name_of_val(pool).contains("Postgres")
}

/// Polls `condicao` every 20 ms until it holds, failing the test after `limite`. For waiting on
/// a final state, never for measuring speed.
pub async fn esperar_ate<F, Fut>(limite: std::time::Duration, condicao: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let intervalo = std::time::Duration::from_millis(20);
    esperar_valor("condition", limite, intervalo, condicao, |&ok| ok).await;
}

/// Reads `ler` every `a_cada` until `pronto` holds for what it read, and returns that value;
/// fails the test after `limite`, naming what was awaited (`esperado`) and the last value seen.
pub async fn esperar_valor<T, F, Fut>(
    esperado: &str,
    limite: std::time::Duration,
    a_cada: std::time::Duration,
    mut ler: F,
    pronto: impl Fn(&T) -> bool,
) -> T
where
    T: std::fmt::Debug,
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = T>,
{
    let fim = tokio::time::Instant::now() + limite;
    loop {
        let valor = ler().await;
        if pronto(&valor) {
            return valor;
        }
        assert!(
            tokio::time::Instant::now() < fim,
            "{esperado}: not reached within {limite:?}, last seen {valor:?}"
        );
        tokio::time::sleep(a_cada).await;
    }
}

/// Captures what the library logs through `tracing`, for tests that assert a warning.
pub mod log {
    use std::io::Write;
    use std::sync::{Arc, Mutex};

    /// Everything logged while [`Captura::assinante`] is the default subscriber.
    #[derive(Clone, Default)]
    pub struct Captura(Arc<Mutex<Vec<u8>>>);

    impl Captura {
        /// A plain-text subscriber (no colours) that writes here, at every level.
        pub fn assinante(&self) -> impl tracing::Subscriber + Send + Sync + 'static {
            tracing_subscriber::fmt()
                .with_ansi(false)
                .with_max_level(tracing::Level::TRACE)
                .with_writer(self.clone())
                .finish()
        }

        /// What was logged so far.
        pub fn texto(&self) -> String {
            String::from_utf8_lossy(&self.0.lock().expect("log lock")).into_owned()
        }
    }

    impl Write for Captura {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.lock().expect("log lock").extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for Captura {
        type Writer = Captura;
        fn make_writer(&'a self) -> Self::Writer {
            self.clone()
        }
    }
}

/// Sends only the head of a `POST` to `caminho` that announces a body of `tamanho` bytes (with
/// the extra header lines `cabecalhos`, each ending in `\r\n`), never the body, and returns the
/// answer's status line. An answer that waited for the body would never come; an answer that
/// comes without it cannot race the client's writes (as a large body sent in full would).
pub async fn so_a_cabeca(
    endereco: std::net::SocketAddr,
    caminho: &str,
    cabecalhos: &str,
    tamanho: usize,
) -> String {
    use std::io::{Read, Write};
    let cabeca = format!(
        "POST {caminho} HTTP/1.1\r\nhost: {endereco}\r\ncontent-type: application/json\r\n\
         {cabecalhos}content-length: {tamanho}\r\n\r\n"
    );
    tokio::task::spawn_blocking(move || {
        let mut conexao = std::net::TcpStream::connect(endereco).expect("connect");
        conexao
            .set_read_timeout(Some(std::time::Duration::from_secs(10)))
            .expect("read timeout");
        conexao.write_all(cabeca.as_bytes()).expect("send the head");
        let mut lido = Vec::new();
        let mut pedaco = [0_u8; 1024];
        while !lido.windows(4).any(|w| w == b"\r\n\r\n") {
            let n = conexao
                .read(&mut pedaco)
                .expect("an answer without the body");
            if n == 0 {
                break;
            }
            lido.extend_from_slice(&pedaco[..n]);
        }
        let texto = String::from_utf8_lossy(&lido).into_owned();
        texto.lines().next().unwrap_or_default().to_owned()
    })
    .await
    .expect("the head-only request")
}
