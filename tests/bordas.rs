//! The guarantee at real deployment edges, each observed from the outside with a real HTTP
//! server on 127.0.0.1 playing the hostile destination or client:
//!
//! - a destination that redirects (301/302/303/307/308) is never followed: the row stays, the
//!   other host gets nothing, the error names the `Location`; once the destination is fixed the
//!   message is applied once;
//! - a 2xx that is not the receptor's answer (a login page, an ingress' HTML, another tipo's
//!   answer) keeps the row, unless the destination opted in to any 2xx;
//! - the base URL's path prefix is kept (`http://gw/fiscal` posts to `/fiscal/m2m/<tipo>`);
//! - a destination that answers 500 with a 256 MiB body costs the relay (a child process) no
//!   memory;
//! - natural keys are exact: big integers and exact JSON numbers that a float would merge are
//!   two keys;
//! - a password in the destination URL appears in no `ultimo_erro` and no log line, and the
//!   cause of a failed connection ("refused") is kept;
//! - `servir` closes idle and half-request sockets while normal requests flow, and limits
//!   connections;
//! - the receptor's answers leak no database text, an incomplete body is 400, a body that is not
//!   JSON by its Content-Type is 415, and the `Bearer` scheme is case-insensitive.

use std::io::{Read, Write};
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use mensageria_axum::{Config as ConfigReceptor, Rejeicao, receptor};
use mensageria_core::relay::{Config, Relay};
use mensageria_core::sqlx::{Postgres, Sqlite, Transaction};
use mensageria_core::{ContextoEnvio, Destino, FalhaEnvio, enfileirar, enviador};
use mensageria_testes::servidor::{Resposta, Servidor};
use mensageria_testes::{PgIsolado, e_postgres, esperar_ate, nos_dois_bancos};
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

const TOKEN: &str = "t0k-bordas-de-teste";

#[derive(Debug, Serialize, Deserialize)]
struct Aviso {
    n: i64,
}

#[enviador(tipo = "bordas.aviso")]
async fn enviar_aviso(evento: Aviso, ctx: &ContextoEnvio) -> Result<(), FalhaEnvio> {
    ctx.exigir::<Destino>()?.postar(&evento, ctx).await
}

#[receptor(tipo = "bordas.aviso", chave_natural = evento.n)]
async fn receber_aviso(tx: &mut Transaction<'_, Postgres>, evento: Aviso) -> Result<(), Rejeicao> {
    sqlx::query("INSERT INTO efeito (chave) VALUES ($1)")
        .bind(evento.n.to_string())
        .execute(&mut **tx)
        .await?;
    Ok(())
}

/// Numbers a float would merge, as exact JSON text and as `u128`.
#[derive(Deserialize)]
struct Numeros {
    cru: Box<RawValue>,
    grande: u128,
}

#[receptor(tipo = "bordas.numero", chave_natural = (evento.cru, evento.grande))]
async fn numero_pg(tx: &mut Transaction<'_, Postgres>, evento: Numeros) -> Result<(), Rejeicao> {
    sqlx::query("INSERT INTO efeito (chave) VALUES ($1)")
        .bind(format!("{} {}", evento.cru.get(), evento.grande))
        .execute(&mut **tx)
        .await?;
    Ok(())
}

#[receptor(tipo = "bordas.numero-lite", chave_natural = (evento.cru, evento.grande))]
async fn numero_lite(tx: &mut Transaction<'_, Sqlite>, evento: Numeros) -> Result<(), Rejeicao> {
    sqlx::query("INSERT INTO efeito (chave) VALUES ($1)")
        .bind(format!("{} {}", evento.cru.get(), evento.grande))
        .execute(&mut **tx)
        .await?;
    Ok(())
}

#[derive(Deserialize)]
struct Valor {
    v: i64,
}

/// Stores `v` in a `smallint` column: 100000 is a data exception (SQLSTATE 22003).
#[receptor(tipo = "bordas.pequeno", chave_natural = evento.v)]
async fn pequeno(tx: &mut Transaction<'_, Postgres>, evento: Valor) -> Result<(), Rejeicao> {
    sqlx::query("INSERT INTO tabela_pequena_secreta (coluna_secreta) VALUES ($1)")
        .bind(evento.v)
        .execute(&mut **tx)
        .await?;
    Ok(())
}

/// Reads a table that does not exist (SQLSTATE 42P01): temporary.
#[receptor(tipo = "bordas.sumida", chave_natural = evento.v)]
async fn sumida(tx: &mut Transaction<'_, Postgres>, evento: Valor) -> Result<(), Rejeicao> {
    sqlx::query("SELECT * FROM tabela_que_nao_existe_secreta WHERE x = $1")
        .bind(evento.v)
        .execute(&mut **tx)
        .await?;
    Ok(())
}

/// Fast settings: short poll and backoff.
fn config() -> Config {
    Config::new("bordas")
        .com_intervalo(Duration::from_millis(50))
        .com_backoff(Duration::from_millis(20), Duration::from_millis(100))
        .com_tempo_limite_envio(Duration::from_secs(5))
        .com_lease(Duration::from_secs(30))
}

/// Migrates and creates the effect table.
async fn preparar<DB: mensageria_core::Banco>(pool: &sqlx::Pool<DB>)
where
    for<'c> &'c mut DB::Connection: sqlx::Executor<'c, Database = DB>,
    DB::Arguments: sqlx::IntoArguments<DB>,
{
    mensageria_core::migrar(pool).await.unwrap();
    sqlx::query("CREATE TABLE efeito (chave TEXT NOT NULL)")
        .execute(pool)
        .await
        .unwrap();
}

async fn enfileirar_avisos(pool: &sqlx::PgPool, quantos: i64) {
    for n in 0..quantos {
        let mut tx = pool.begin().await.unwrap();
        enfileirar(&mut *tx, &Aviso { n }).await.unwrap();
        tx.commit().await.unwrap();
    }
}

async fn contar(pool: &sqlx::PgPool, sql: &str) -> i64 {
    sqlx::query_scalar(sqlx::AssertSqlSafe(sql.to_owned()))
        .fetch_one(pool)
        .await
        .unwrap()
}

async fn ultimos_erros(pool: &sqlx::PgPool) -> Vec<String> {
    sqlx::query_scalar("SELECT coalesce(ultimo_erro, '') FROM mensageria_saida")
        .fetch_all(pool)
        .await
        .unwrap()
}

/// Makes the saída's rows due again (the backoff set them in the future).
async fn vencer_agora(pool: &sqlx::PgPool) {
    sqlx::query("UPDATE mensageria_saida SET proxima_tentativa_em = now()")
        .execute(pool)
        .await
        .unwrap();
}

/// The router of every receptor of this binary, served by `servir` on a free port.
async fn receptores(pool: sqlx::PgPool, config: ConfigReceptor) -> SocketAddr {
    receptores_com(pool, config, |servir| servir).await
}

/// [`receptores`], with `ajustar` applied to the server's settings.
async fn receptores_com(
    pool: sqlx::PgPool,
    config: ConfigReceptor,
    ajustar: impl FnOnce(mensageria_axum::Servir) -> mensageria_axum::Servir,
) -> SocketAddr {
    let app = mensageria_axum::router(pool, config).unwrap();
    let ouvinte = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let endereco = ouvinte.local_addr().unwrap();
    tokio::spawn(ajustar(mensageria_axum::servir(ouvinte, app)).into_future());
    endereco
}

use std::future::IntoFuture as _;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redirecionamento_nunca_e_seguido_nem_conta_como_entrega() {
    let db = PgIsolado::novo().await;
    preparar(&db.pool).await;
    let outro_host = Servidor::iniciar().await;
    let hostil = Servidor::iniciar().await;
    // A relay per round: one relay's per-tipo circuit would open after a few failures.
    let relay = || {
        Relay::new(db.pool.clone(), config())
            .recurso(Destino::new(&hostil.url()).unwrap().com_token(TOKEN))
    };
    for (n, status) in [301_u16, 302, 303, 307, 308].into_iter().enumerate() {
        let para = format!("{}/m2m/bordas.aviso?n={n}", outro_host.url());
        hostil.responder(Resposta::Redirecionar(status, para.clone()));
        let mut tx = db.pool.begin().await.unwrap();
        enfileirar(&mut *tx, &Aviso { n: n as i64 }).await.unwrap();
        tx.commit().await.unwrap();
        vencer_agora(&db.pool).await;
        relay().rodada().await.unwrap();
        assert!(
            outro_host.recebidas().is_empty(),
            "{status}: the payload went to another host"
        );
        assert_eq!(
            contar(&db.pool, "SELECT count(*) FROM mensageria_saida").await,
            n as i64 + 1,
            "{status}: the row must stay"
        );
        assert_eq!(
            contar(&db.pool, "SELECT count(*) FROM mensageria_mortas").await,
            0,
            "{status}: a redirect is not poison"
        );
        let erros = ultimos_erros(&db.pool).await;
        assert!(
            erros
                .iter()
                .all(|e| e.contains(&para) && e.contains(&status.to_string())),
            "{status}: the error names the Location: {erros:?}"
        );
    }
    // The destination fixed: every message is delivered once, to it alone.
    hostil.responder(Resposta::Ok);
    vencer_agora(&db.pool).await;
    relay().drenar().await.unwrap();
    assert_eq!(
        contar(&db.pool, "SELECT count(*) FROM mensageria_saida").await,
        0
    );
    assert!(outro_host.recebidas().is_empty());
    let aceitas = hostil.aceitas_por_id();
    assert_eq!(aceitas.len(), 5);
    assert!(aceitas.values().all(|&vezes| vezes == 1), "{aceitas:?}");
    db.descartar().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn um_2xx_que_nao_e_do_receptor_nao_confirma() {
    let db = PgIsolado::novo().await;
    preparar(&db.pool).await;
    let hostil = Servidor::iniciar().await;
    let relay = || {
        Relay::new(db.pool.clone(), config())
            .recurso(Destino::new(&hostil.url()).unwrap().com_token(TOKEN))
    };
    enfileirar_avisos(&db.pool, 3).await;
    for (tipo_conteudo, corpo, esperado) in [
        ("text/html", "<html><form>login</form></html>", "text/html"),
        ("application/json", r#"{"ok":true}"#, "application/json"),
        (
            "application/json",
            r#"{"resultado":"applied","tipo":"outro.tipo"}"#,
            "outro.tipo",
        ),
        ("text/plain", "\u{1b}]0;pwned\u{7}\u{1b}[2J", "\\u{1b}"),
    ] {
        hostil.responder(Resposta::Ok200Com(tipo_conteudo, corpo));
        vencer_agora(&db.pool).await;
        relay().rodada().await.unwrap();
        assert_eq!(
            contar(&db.pool, "SELECT count(*) FROM mensageria_saida").await,
            3,
            "{corpo}: rows must stay"
        );
        assert_eq!(
            contar(&db.pool, "SELECT count(*) FROM mensageria_mortas").await,
            0
        );
        let erros = ultimos_erros(&db.pool).await;
        assert!(
            erros
                .iter()
                .all(|e| e.contains("not as a mensageria receptor") && e.contains(esperado)),
            "{erros:?}"
        );
        assert!(
            erros.iter().all(|e| !e.contains('\u{1b}')),
            "control characters escaped: {erros:?}"
        );
    }
    // A receiver that is not a mensageria receptor, by explicit opt-in: any 2xx delivers.
    hostil.responder(Resposta::Ok200Com("text/html", "<html>ok</html>"));
    vencer_agora(&db.pool).await;
    let terceiro = Relay::new(db.pool.clone(), config()).recurso(
        Destino::new(&hostil.url())
            .unwrap()
            .com_token(TOKEN)
            .aceitar_qualquer_2xx(),
    );
    terceiro.drenar().await.unwrap();
    assert_eq!(
        contar(&db.pool, "SELECT count(*) FROM mensageria_saida").await,
        0
    );
    db.descartar().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn o_prefixo_do_caminho_da_base_fica() {
    let db = PgIsolado::novo().await;
    preparar(&db.pool).await;
    let endereco = receptores(
        db.pool.clone(),
        ConfigReceptor::new("receptor", [TOKEN]).com_caminho_base("/fiscal/m2m"),
    )
    .await;
    enfileirar_avisos(&db.pool, 4).await;
    let relay = Relay::new(db.pool.clone(), config()).recurso(
        Destino::new(&format!("http://{endereco}/fiscal"))
            .unwrap()
            .com_token(TOKEN),
    );
    relay.drenar().await.unwrap();
    assert_eq!(
        contar(&db.pool, "SELECT count(*) FROM mensageria_saida").await,
        0
    );
    assert_eq!(contar(&db.pool, "SELECT count(*) FROM efeito").await, 4);
    assert_eq!(
        contar(&db.pool, "SELECT count(DISTINCT chave) FROM efeito").await,
        4
    );
    db.descartar().await;
}

/// Peak resident memory (`VmHWM`) of process `pid`, in KiB.
fn pico_rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn corpo_de_erro_gigante_nao_custa_memoria_ao_relay() {
    const TAMANHO: u64 = 256 * 1024 * 1024;
    let db = PgIsolado::novo().await;
    mensageria_core::migrar(&db.pool).await.unwrap();
    let hostil = Servidor::iniciar().await;
    hostil.responder(Resposta::CorpoGigante(500, TAMANHO));
    for n in 0..8 {
        sqlx::query(
            "INSERT INTO mensageria_saida (id_mensagem, tipo, payload) VALUES ($1, 'faltas.a', $2)",
        )
        .bind(uuid::Uuid::now_v7())
        .bind(sqlx::types::Json(serde_json::json!({ "n": n })))
        .execute(&db.pool)
        .await
        .unwrap();
    }
    let filho = mensageria_testes::faltas::Filho::iniciar(
        env!("CARGO_BIN_EXE_app-a"),
        &db.schema,
        &hostil.url(),
    )
    .await;
    let antes = pico_rss_kib(filho.pid());
    // The first claim takes all 8 and delivers them at once: eight 256 MiB answers in flight.
    let pool = db.pool.clone();
    esperar_ate(Duration::from_secs(60), || {
        let pool = pool.clone();
        async move {
            contar(
                &pool,
                "SELECT count(*) FROM mensageria_saida WHERE ultimo_erro IS NOT NULL",
            )
            .await
                == 8
        }
    })
    .await;
    let depois = pico_rss_kib(filho.pid());
    filho.matar();
    let crescimento_mib = depois.saturating_sub(antes) as f64 / 1024.0;
    println!(
        "relay peak RSS {:.1} MiB -> {:.1} MiB (+{crescimento_mib:.1} MiB) after {} answers of 256 MiB",
        antes as f64 / 1024.0,
        depois as f64 / 1024.0,
        hostil.recebidas().len()
    );
    assert!(
        crescimento_mib < 32.0,
        "the relay's peak RSS grew {crescimento_mib:.1} MiB reading 256 MiB error bodies"
    );
    let erros = ultimos_erros(&db.pool).await;
    assert!(
        erros.iter().all(|e| e.contains("500") && e.len() < 2048),
        "{erros:?}"
    );
    assert_eq!(
        contar(&db.pool, "SELECT count(*) FROM mensageria_saida").await,
        8
    );
    db.descartar().await;
}

nos_dois_bancos! {
    async fn numeros_que_um_float_juntaria_sao_duas_chaves(db) {
        preparar(&db.pool).await;
        let tipo = if e_postgres(&db.pool) { "bordas.numero" } else { "bordas.numero-lite" };
        let app = mensageria_axum::router(db.pool.clone(), ConfigReceptor::new("receptor", [TOKEN])).unwrap();
        let ouvinte = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let endereco = ouvinte.local_addr().unwrap();
        tokio::spawn(mensageria_axum::servir(ouvinte, app).into_future());
        let http = reqwest::Client::new();
        let postar = |corpo: &'static str| {
            http.post(format!("http://{endereco}/m2m/{tipo}"))
                .bearer_auth(TOKEN)
                .header("content-type", "application/json")
                .body(corpo)
                .send()
        };
        let mut resultados = Vec::new();
        for corpo in [
            r#"{"cru": 18446744073709551616, "grande": 18446744073709551616}"#,
            r#"{"cru": 18446744073709551617, "grande": 18446744073709551616}"#,
            r#"{"cru": 0.30000000000000004, "grande": 1}"#,
            r#"{"cru": 0.30000000000000005, "grande": 1}"#,
            r#"{"cru": 1, "grande": 340282366920938463463374607431768211455}"#,
            r#"{"cru": 1, "grande": 340282366920938463463374607431768211454}"#,
            r#"{"cru": 18446744073709551616, "grande": 18446744073709551616}"#,
        ] {
            let resposta = postar(corpo).await.unwrap();
            assert_eq!(resposta.status(), 200, "{corpo}");
            let corpo: serde_json::Value = resposta.json().await.unwrap();
            resultados.push(corpo["resultado"].as_str().unwrap().to_owned());
        }
        assert_eq!(
            resultados,
            ["applied", "applied", "applied", "applied", "applied", "applied", "duplicate"]
        );
        let chaves: Vec<String> = sqlx::query_scalar("SELECT chave FROM mensageria_recebidas ORDER BY chave")
            .fetch_all(&db.pool)
            .await
            .unwrap();
        assert_eq!(chaves.len(), 6, "{chaves:?}");
        assert!(chaves.contains(&"[18446744073709551617,18446744073709551616]".to_owned()), "{chaves:?}");
    }
}

#[tokio::test(flavor = "current_thread")]
async fn a_senha_da_url_nao_aparece_e_a_causa_fica() {
    let log = mensageria_testes::log::Captura::default();
    let _guarda = tracing::subscriber::set_default(log.assinante());
    let db = PgIsolado::novo().await;
    preparar(&db.pool).await;
    enfileirar_avisos(&db.pool, 1).await;
    // Port 1 on 127.0.0.1: nothing listens, the connection is refused.
    let destino = Destino::new("http://usuario:senha-muito-secreta@127.0.0.1:1/base")
        .unwrap()
        .com_token("token-muito-secreto");
    assert!(!format!("{destino:?}").contains("senha-muito-secreta"));
    assert!(!format!("{destino:?}").contains("token-muito-secreto"));
    let relay = Relay::new(db.pool.clone(), config()).recurso(destino);
    relay.rodada().await.unwrap();
    let erros = ultimos_erros(&db.pool).await;
    assert_eq!(erros.len(), 1);
    assert!(!erros[0].contains("senha-muito-secreta"), "{erros:?}");
    assert!(!erros[0].contains("usuario"), "{erros:?}");
    assert!(
        erros[0].to_lowercase().contains("refused"),
        "the cause is kept: {erros:?}"
    );
    let texto = log.texto();
    assert!(
        texto.contains("127.0.0.1:1"),
        "the failure was logged: {texto}"
    );
    assert!(!texto.contains("senha-muito-secreta"), "{texto}");
    assert!(!texto.contains("token-muito-secreto"), "{texto}");
    let config = ConfigReceptor::new("receptor", ["token-do-receptor-secreto"]);
    assert!(!format!("{config:?}").contains("token-do-receptor-secreto"));
    db.descartar().await;
}

/// Opens a connection and sends `bytes` (maybe nothing), leaving it open.
fn abrir(endereco: SocketAddr, bytes: &[u8]) -> std::net::TcpStream {
    let mut conexao = std::net::TcpStream::connect(endereco).unwrap();
    conexao.write_all(bytes).unwrap();
    conexao
}

/// Whether the server closed `conexao` (EOF or reset) within `limite`.
fn fechada_em(conexao: &mut std::net::TcpStream, limite: Duration) -> bool {
    conexao.set_read_timeout(Some(limite)).unwrap();
    let mut lixo = [0_u8; 512];
    loop {
        match conexao.read(&mut lixo) {
            Ok(0) => return true,
            Ok(_) => continue, // a 408 or similar before the close
            Err(erro)
                if erro.kind() == std::io::ErrorKind::WouldBlock
                    || erro.kind() == std::io::ErrorKind::TimedOut =>
            {
                return false;
            }
            Err(_) => return true,
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn servir_fecha_conexoes_ociosas_e_pela_metade_enquanto_atende() {
    let db = PgIsolado::novo().await;
    preparar(&db.pool).await;
    let endereco = receptores_com(
        db.pool.clone(),
        ConfigReceptor::new("receptor", [TOKEN]),
        |servir| {
            servir
                .com_tempo_de_cabecalho(Duration::from_millis(500))
                .com_tempo_ocioso(Duration::from_secs(1))
        },
    )
    .await;
    let inicio = Instant::now();
    let (pela_metade, ociosas) = tokio::task::spawn_blocking(move || {
        let pela_metade: Vec<_> = (0..100)
            .map(|_| {
                abrir(
                    endereco,
                    b"POST /m2m/bordas.aviso HTTP/1.1\r\nhost: x\r\ncontent-le",
                )
            })
            .collect();
        let ociosas: Vec<_> = (0..200).map(|_| abrir(endereco, b"")).collect();
        (pela_metade, ociosas)
    })
    .await
    .unwrap();
    // Normal requests keep flowing while 300 hostile sockets are open.
    let http = reqwest::Client::new();
    for n in 0..20 {
        let resposta = http
            .post(format!("http://{endereco}/m2m/bordas.aviso"))
            .bearer_auth(TOKEN)
            .header("content-type", "application/json")
            .body(format!(r#"{{"n":{n}}}"#))
            .send()
            .await
            .unwrap();
        assert_eq!(resposta.status(), 200);
    }
    let (tempo_metade, todas) = tokio::task::spawn_blocking(move || {
        let mut pela_metade = pela_metade;
        let mut ociosas = ociosas;
        let fechadas_metade = pela_metade
            .iter_mut()
            .map(|c| fechada_em(c, Duration::from_secs(5)))
            .filter(|&fechada| fechada)
            .count();
        let tempo_metade = inicio.elapsed();
        let fechadas_ociosas = ociosas
            .iter_mut()
            .map(|c| fechada_em(c, Duration::from_secs(5)))
            .filter(|&fechada| fechada)
            .count();
        (tempo_metade, (fechadas_metade, fechadas_ociosas))
    })
    .await
    .unwrap();
    println!(
        "100 half-request sockets closed {tempo_metade:?} after they were opened (header timeout 500 ms); idle ones: {}/200",
        todas.1
    );
    assert_eq!(todas, (100, 200));
    assert!(tempo_metade < Duration::from_secs(5), "{tempo_metade:?}");
    assert_eq!(contar(&db.pool, "SELECT count(*) FROM efeito").await, 20);
    db.descartar().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn servir_atende_com_mais_sockets_calados_que_o_limite() {
    // The probe: more silent sockets (connected, not a byte sent) than the connection limit
    // used to hold every slot until the idle timeout (60 s), and legitimate requests got none.
    let db = PgIsolado::novo().await;
    preparar(&db.pool).await;
    let endereco = receptores_com(
        db.pool.clone(),
        ConfigReceptor::new("receptor", [TOKEN]),
        |servir| {
            servir
                .com_maximo_de_conexoes(64)
                .com_tempo_de_cabecalho(Duration::from_millis(500))
                .com_tempo_ocioso(Duration::from_secs(60))
        },
    )
    .await;
    let caladas = tokio::task::spawn_blocking(move || {
        (0..80).map(|_| abrir(endereco, b"")).collect::<Vec<_>>()
    })
    .await
    .unwrap();
    tokio::time::sleep(Duration::from_millis(100)).await;
    let http = reqwest::Client::builder()
        .timeout(Duration::from_secs(5))
        .build()
        .unwrap();
    let inicio = Instant::now();
    let mut atendidas = 0;
    for n in 0..10 {
        let resposta = http
            .post(format!("http://{endereco}/m2m/bordas.aviso"))
            .bearer_auth(TOKEN)
            .header("content-type", "application/json")
            .body(format!(r#"{{"n":{n}}}"#))
            .send()
            .await;
        if resposta.is_ok_and(|r| r.status() == 200) {
            atendidas += 1;
        }
    }
    let tempo = inicio.elapsed();
    println!(
        "80 silent sockets against a limit of 64 (header timeout 500 ms): {atendidas}/10 legitimate requests served in {tempo:?}"
    );
    assert_eq!(
        atendidas, 10,
        "legitimate requests are served during the flood"
    );
    assert!(tempo < Duration::from_secs(5), "{tempo:?}");
    drop(caladas);
    assert_eq!(contar(&db.pool, "SELECT count(*) FROM efeito").await, 10);
    db.descartar().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn servir_limita_as_conexoes() {
    let db = PgIsolado::novo().await;
    preparar(&db.pool).await;
    let endereco = receptores_com(
        db.pool.clone(),
        ConfigReceptor::new("receptor", [TOKEN]),
        |servir| {
            servir
                .com_maximo_de_conexoes(2)
                .com_tempo_ocioso(Duration::from_millis(1500))
        },
    )
    .await;
    let _ocupadas: Vec<_> = (0..2).map(|_| abrir(endereco, b"")).collect();
    tokio::time::sleep(Duration::from_millis(200)).await;
    let inicio = Instant::now();
    let resposta = reqwest::Client::new()
        .post(format!("http://{endereco}/m2m/bordas.aviso"))
        .bearer_auth(TOKEN)
        .header("content-type", "application/json")
        .body(r#"{"n":1}"#)
        .send()
        .await
        .unwrap();
    assert_eq!(resposta.status(), 200);
    // Served only once an idle connection was closed and its slot freed.
    assert!(
        inicio.elapsed() >= Duration::from_millis(800),
        "{:?}",
        inicio.elapsed()
    );
    db.descartar().await;
}

/// Sends raw `bytes` to `endereco`, half-closes, and returns the status line and body.
async fn cru(endereco: SocketAddr, bytes: Vec<u8>) -> (String, String) {
    tokio::task::spawn_blocking(move || {
        let mut conexao = std::net::TcpStream::connect(endereco).unwrap();
        conexao
            .set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        conexao.write_all(&bytes).unwrap();
        conexao.shutdown(std::net::Shutdown::Write).unwrap();
        let mut lido = Vec::new();
        let _ = conexao.read_to_end(&mut lido);
        let texto = String::from_utf8_lossy(&lido).into_owned();
        let status = texto.lines().next().unwrap_or_default().to_owned();
        let corpo = texto
            .split("\r\n\r\n")
            .nth(1)
            .unwrap_or_default()
            .to_owned();
        (status, corpo)
    })
    .await
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn respostas_do_receptor_seguem_o_contrato_e_nao_vazam() {
    let db = PgIsolado::novo().await;
    preparar(&db.pool).await;
    sqlx::query("CREATE TABLE tabela_pequena_secreta (coluna_secreta smallint NOT NULL)")
        .execute(&db.pool)
        .await
        .unwrap();
    let endereco = receptores(db.pool.clone(), ConfigReceptor::new("receptor", [TOKEN])).await;
    let http = reqwest::Client::new();
    let postar = |tipo: &str, tipo_conteudo: Option<&str>, autorizacao: &str, corpo: &str| {
        let mut pedido = http
            .post(format!("http://{endereco}/m2m/{tipo}"))
            .header("authorization", autorizacao)
            .body(corpo.to_owned());
        if let Some(tipo_conteudo) = tipo_conteudo {
            pedido = pedido.header("content-type", tipo_conteudo);
        }
        pedido.send()
    };
    let bearer = format!("Bearer {TOKEN}");

    // Database text stays in the log: the caller gets the SQLSTATE class only.
    for (tipo, status, classe) in [("bordas.pequeno", 422, "22"), ("bordas.sumida", 503, "42")] {
        let resposta = postar(tipo, Some("application/json"), &bearer, r#"{"v":100000}"#)
            .await
            .unwrap();
        assert_eq!(resposta.status(), status, "{tipo}");
        let corpo = resposta.text().await.unwrap();
        assert!(
            corpo.contains(&format!("SQLSTATE class {classe}")),
            "{corpo}"
        );
        for segredo in ["secreta", "smallint", "out of range", "does not exist"] {
            assert!(
                !corpo.contains(segredo),
                "{tipo} leaks {segredo:?}: {corpo}"
            );
        }
    }

    // Content-Type is checked as the OpenAPI document says: JSON or 415.
    for tipo_conteudo in [
        None,
        Some("text/plain"),
        Some("application/x-www-form-urlencoded"),
    ] {
        let resposta = postar("bordas.aviso", tipo_conteudo, &bearer, r#"{"n":1}"#)
            .await
            .unwrap();
        assert_eq!(resposta.status(), 415, "{tipo_conteudo:?}");
        let corpo: serde_json::Value = resposta.json().await.unwrap();
        assert_eq!(corpo["erro"], "unsupported_media_type");
    }
    let resposta = postar(
        "bordas.aviso",
        Some("application/json; charset=utf-8"),
        &bearer,
        r#"{"n":1}"#,
    )
    .await
    .unwrap();
    assert_eq!(resposta.status(), 200);

    // The scheme is case-insensitive (RFC 6750, RFC 9110).
    for esquema in ["bearer", "BEARER", "BeArEr"] {
        let resposta = postar(
            "bordas.aviso",
            Some("application/json"),
            &format!("{esquema} {TOKEN}"),
            r#"{"n":2}"#,
        )
        .await
        .unwrap();
        assert_eq!(resposta.status(), 200, "{esquema}");
    }
    for ruim in [
        format!("Bearer {TOKEN}x"),
        format!("Basic {TOKEN}"),
        format!("Bearer{TOKEN}"),
    ] {
        let resposta = postar(
            "bordas.aviso",
            Some("application/json"),
            &ruim,
            r#"{"n":3}"#,
        )
        .await
        .unwrap();
        assert_eq!(resposta.status(), 401, "{ruim}");
    }

    // A body shorter than its Content-Length is a bad request (400), not a body too large.
    let (status, corpo) = cru(
        endereco,
        format!(
            "POST /m2m/bordas.aviso HTTP/1.1\r\nhost: x\r\nauthorization: {bearer}\r\n\
             content-type: application/json\r\ncontent-length: 100\r\nconnection: close\r\n\r\n{{\"n\":"
        )
        .into_bytes(),
    )
    .await;
    assert!(status.contains(" 400 "), "{status} {corpo}");
    assert!(corpo.contains("incomplete_body"), "{corpo}");

    assert_eq!(
        sqlx::query_scalar::<_, String>("SELECT chave FROM efeito ORDER BY chave")
            .fetch_all(&db.pool)
            .await
            .unwrap(),
        ["1", "2"],
        "exactly the accepted events were applied"
    );
    db.descartar().await;
}
