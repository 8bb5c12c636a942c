//! Several destinations in one relay: each tipo goes where the app said, per tipo
//! (`Relay::recurso_para`) or per enviador (a newtype resource), observed on real HTTP servers
//! on 127.0.0.1; a resource for a tipo nobody sends, or one handed twice, is a configuration
//! error at start, never a silent replacement.

use std::collections::HashSet;

use mensageria_core::relay::{Config, Relay};
use mensageria_core::{
    ContextoEnvio, Destino, Erro, ErroConfiguracao, FalhaEnvio, enfileirar, enviador,
};
use mensageria_testes::servidor::Servidor;
use mensageria_testes::{contar, nos_dois_bancos};
use serde::{Deserialize, Serialize};

#[derive(Debug, Serialize, Deserialize)]
struct Fechamento {
    n: i64,
}

#[derive(Debug, Serialize, Deserialize)]
struct Arquivamento {
    n: i64,
}

#[derive(Debug, Serialize, Deserialize)]
struct Auditoria {
    n: i64,
}

/// The audit service, chosen by its enviador through a resource type of its own.
struct DestinoDaAuditoria(Destino);

#[enviador(tipo = "destinos.fechamento")]
async fn enviar_fechamento(evento: Fechamento, ctx: &ContextoEnvio) -> Result<(), FalhaEnvio> {
    ctx.exigir::<Destino>()?.postar(&evento, ctx).await
}

#[enviador(tipo = "destinos.arquivamento")]
async fn enviar_arquivamento(evento: Arquivamento, ctx: &ContextoEnvio) -> Result<(), FalhaEnvio> {
    ctx.exigir::<Destino>()?.postar(&evento, ctx).await
}

#[enviador(tipo = "destinos.auditoria")]
async fn enviar_auditoria(evento: Auditoria, ctx: &ContextoEnvio) -> Result<(), FalhaEnvio> {
    ctx.exigir::<DestinoDaAuditoria>()?
        .0
        .postar(&evento, ctx)
        .await
}

fn destino(servidor: &Servidor) -> Destino {
    Destino::new(&servidor.url()).unwrap().com_token("t0k")
}

/// The tipos a server received, and how many distinct messages.
fn recebido(servidor: &Servidor) -> (HashSet<String>, usize) {
    let recebidas = servidor.recebidas();
    let tipos = recebidas.iter().map(|r| r.tipo.clone()).collect();
    let ids: HashSet<String> = recebidas.iter().map(|r| r.id.clone()).collect();
    (tipos, ids.len())
}

fn so(tipo: &str) -> HashSet<String> {
    HashSet::from([tipo.to_owned()])
}

nos_dois_bancos! {
    async fn cada_tipo_vai_ao_seu_destino(db) {
        mensageria_core::migrar(&db.pool).await.unwrap();
        let (fiscal, arquivo, auditoria) =
            (Servidor::iniciar().await, Servidor::iniciar().await, Servidor::iniciar().await);
        for n in 0..5 {
            enfileirar(&db.pool, &Fechamento { n }).await.unwrap();
            enfileirar(&db.pool, &Arquivamento { n }).await.unwrap();
            enfileirar(&db.pool, &Auditoria { n }).await.unwrap();
        }

        let relay = Relay::new(db.pool.clone(), Config::new("destinos"))
            .recurso(destino(&fiscal))
            .recurso_para("destinos.arquivamento", destino(&arquivo))
            .recurso(DestinoDaAuditoria(destino(&auditoria)));
        relay.drenar().await.unwrap();

        assert_eq!(contar(&db.pool, "mensageria_saida").await, 0, "all delivered");
        assert_eq!(recebido(&fiscal), (so("destinos.fechamento"), 5));
        assert_eq!(recebido(&arquivo), (so("destinos.arquivamento"), 5));
        assert_eq!(recebido(&auditoria), (so("destinos.auditoria"), 5));
    }
}

/// The configuration error `rodada` reports for this relay.
async fn erro_de(relay: Relay<sqlx::Sqlite>) -> ErroConfiguracao {
    match relay.rodada().await {
        Err(Erro::Configuracao(erro)) => erro,
        outro => panic!("expected a configuration error, got {outro:?}"),
    }
}

#[tokio::test]
async fn recurso_para_um_tipo_que_ninguem_envia_e_um_erro() {
    let db = mensageria_testes::SqliteIsolado::novo().await;
    let servidor = Servidor::iniciar().await;
    let relay = Relay::new(db.pool.clone(), Config::new("destinos"))
        .recurso_para("destinos.fechamentoo", destino(&servidor));
    let erro = erro_de(relay).await;
    assert!(
        matches!(&erro, ErroConfiguracao::RecursoSemEnviador { tipo, .. } if tipo == "destinos.fechamentoo"),
        "{erro:?}"
    );
    let texto = erro.to_string();
    assert!(
        texto.contains("no enviador of this binary sends it"),
        "{texto}"
    );
    assert!(
        texto.contains("enviadores here: ") && texto.contains("destinos.fechamento)"),
        "{texto}"
    );
    db.descartar().await;
}

#[tokio::test]
async fn dois_recursos_do_mesmo_tipo_nunca_se_substituem() {
    let db = mensageria_testes::SqliteIsolado::novo().await;
    let (a, b) = (Servidor::iniciar().await, Servidor::iniciar().await);

    let relay = Relay::new(db.pool.clone(), Config::new("destinos"))
        .recurso(destino(&a))
        .recurso(destino(&b));
    let erro = erro_de(relay).await;
    assert!(
        matches!(erro, ErroConfiguracao::RecursoRepetido { .. }),
        "{erro:?}"
    );
    assert!(
        erro.to_string().contains("recurso_para(tipo, ...)"),
        "{erro}"
    );

    let relay = Relay::new(db.pool.clone(), Config::new("destinos"))
        .recurso_para("destinos.arquivamento", destino(&a))
        .recurso_para("destinos.arquivamento", destino(&b));
    let erro = erro_de(relay).await;
    assert!(
        matches!(&erro, ErroConfiguracao::RecursoRepetidoParaTipo { tipo, .. } if tipo == "destinos.arquivamento"),
        "{erro:?}"
    );
    assert_eq!(
        a.recebidas().len() + b.recebidas().len(),
        0,
        "nothing was sent"
    );
    db.descartar().await;
}

/// The lines `log` captured that mention the relay.
fn linhas_do_relay(log: &mensageria_testes::log::Captura) -> Vec<String> {
    log.texto()
        .lines()
        .filter(|l| l.contains("mensageria relay:"))
        .map(str::to_owned)
        .collect()
}

/// Each failed delivery is one log line: a WARN when it will be retried, one ERROR when it
/// goes to the dead letters — never both for one attempt — and the line keeps the cause.
#[tokio::test(flavor = "current_thread")]
async fn cada_falha_de_entrega_e_uma_linha_de_log() {
    let log = mensageria_testes::log::Captura::default();
    let _guarda = tracing::subscriber::set_default(log.assinante());
    let db = mensageria_testes::SqliteIsolado::novo().await;
    mensageria_core::migrar(&db.pool).await.unwrap();
    let fora = Servidor::iniciar().await;
    fora.responder(mensageria_testes::servidor::Resposta::Status(503, None));
    enfileirar(&db.pool, &Fechamento { n: 1 }).await.unwrap();

    let config = Config::new("destinos").com_max_tentativas(2);
    let relay = Relay::new(db.pool.clone(), config).recurso(destino(&fora));
    relay.rodada().await.unwrap();
    let linhas = linhas_do_relay(&log);
    assert_eq!(linhas.len(), 1, "{linhas:#?}");
    assert!(
        linhas[0].contains("WARN") && linhas[0].contains("temporary failure; will retry"),
        "{linhas:#?}"
    );
    assert!(
        linhas[0].contains("503"),
        "the cause is in the line: {linhas:#?}"
    );

    // The second attempt is the last: one ERROR line, and no WARN for it.
    sqlx::query("UPDATE mensageria_saida SET proxima_tentativa_em = 0")
        .execute(&db.pool)
        .await
        .unwrap();
    relay.rodada().await.unwrap();
    let linhas = linhas_do_relay(&log);
    assert_eq!(linhas.len(), 2, "{linhas:#?}");
    assert!(
        linhas[1].contains("ERROR") && linhas[1].contains("moved to dead letters"),
        "{linhas:#?}"
    );
    assert_eq!(contar(&db.pool, "mensageria_mortas").await, 1);
    db.descartar().await;
}

/// The last error of the only row of the saída.
async fn ultimo_erro(pool: &sqlx::SqlitePool) -> String {
    sqlx::query_scalar("SELECT ultimo_erro FROM mensageria_saida")
        .fetch_one(pool)
        .await
        .unwrap()
}

/// A 404 that is not the receptor's (a wrong base path: the server's own empty 404, or a
/// proxy's HTML page) is reported readably: the status, "an empty body" or a short excerpt
/// without control characters, and the URL without its credentials (issue 25: it read
/// "Not Found: ;").
#[tokio::test]
async fn um_404_de_caminho_errado_diz_o_que_voltou() {
    let db = mensageria_testes::SqliteIsolado::novo().await;
    mensageria_core::migrar(&db.pool).await.unwrap();
    let servidor = Servidor::iniciar().await;
    enfileirar(&db.pool, &Fechamento { n: 1 }).await.unwrap();
    let errado = format!(
        "http://usuario:senha-secreta@{}/base-errada",
        servidor.endereco
    );
    let relay = Relay::new(db.pool.clone(), Config::new("destinos"))
        .recurso(Destino::new(&errado).unwrap().com_token("t0k"));
    relay.rodada().await.unwrap();
    let erro = ultimo_erro(&db.pool).await;
    let url = format!(
        "http://{}/base-errada/m2m/destinos.fechamento",
        servidor.endereco
    );
    assert!(
        erro.contains(&format!("POST {url} answered 404 Not Found")),
        "{erro}"
    );
    assert!(erro.contains("empty body"), "{erro}");
    assert!(!erro.contains(": ;"), "{erro}");
    assert!(
        !erro.contains("senha-secreta") && !erro.contains("usuario"),
        "{erro}"
    );
    assert!(erro.contains("check the URL (the base path"), "{erro}");

    // A proxy's HTML 404: a bounded excerpt, its control characters escaped.
    let pagina = format!(
        "<html>\x1b[2J<h1>404 Not Found</h1>{}</html>",
        "x".repeat(5000)
    );
    let proxy = axum::Router::new().fallback(move || {
        let pagina = pagina.clone();
        async move {
            (
                axum::http::StatusCode::NOT_FOUND,
                [("content-type", "text/html")],
                pagina,
            )
        }
    });
    let ouvinte = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let endereco = ouvinte.local_addr().unwrap();
    tokio::spawn(async move {
        let _ = axum::serve(ouvinte, proxy).await;
    });
    sqlx::query("UPDATE mensageria_saida SET proxima_tentativa_em = 0")
        .execute(&db.pool)
        .await
        .unwrap();
    let relay = Relay::new(db.pool.clone(), Config::new("destinos"))
        .recurso(Destino::new(&format!("http://{endereco}")).unwrap());
    relay.rodada().await.unwrap();
    let erro = ultimo_erro(&db.pool).await;
    assert!(erro.contains("answered 404 Not Found"), "{erro}");
    assert!(erro.contains("text/html"), "{erro}");
    assert!(erro.contains("<h1>404 Not Found</h1>"), "{erro}");
    assert!(!erro.contains('\x1b') && erro.contains("\\u{1b}"), "{erro}");
    assert!(
        erro.len() < 1000,
        "the excerpt is bounded: {} bytes",
        erro.len()
    );
    db.descartar().await;
}

/// A base URL with `user:password@` delivers: the HTTP client takes the credentials out of the
/// URL before sending, which is no redirect (every attempt was refused as one).
#[tokio::test]
async fn uma_url_com_credenciais_entrega() {
    let db = mensageria_testes::SqliteIsolado::novo().await;
    mensageria_core::migrar(&db.pool).await.unwrap();
    let servidor = Servidor::iniciar().await;
    enfileirar(&db.pool, &Fechamento { n: 1 }).await.unwrap();
    let base = format!("http://usuario:senha@{}", servidor.endereco);
    let relay = Relay::new(db.pool.clone(), Config::new("destinos"))
        .recurso(Destino::new(&base).unwrap().com_token("t0k"));
    let rodada = relay.rodada().await.unwrap();
    assert_eq!(rodada.entregues, 1, "{rodada:?}");
    assert_eq!(recebido(&servidor), (so("destinos.fechamento"), 1));
    db.descartar().await;
}

/// A 3xx is never followed and keeps the row; what is logged (issue 25: the README said
/// "logged once", and a WARN came on every attempt): each attempt is the relay's one line (a
/// WARN while it will be retried, with backoff), whose reason names the status and the
/// `Location`; `Destino` itself adds nothing above DEBUG, and the redirect's target never gets
/// the payload.
#[tokio::test(flavor = "current_thread")]
async fn um_redirecionamento_e_uma_linha_do_relay_por_tentativa() {
    let log = mensageria_testes::log::Captura::default();
    let _guarda = tracing::subscriber::set_default(log.assinante());
    let db = mensageria_testes::SqliteIsolado::novo().await;
    mensageria_core::migrar(&db.pool).await.unwrap();
    let (portao, alvo) = (Servidor::iniciar().await, Servidor::iniciar().await);
    let para = format!("{}/m2m/destinos.fechamento", alvo.url());
    portao.responder(mensageria_testes::servidor::Resposta::Redirecionar(
        307,
        para.clone(),
    ));
    enfileirar(&db.pool, &Fechamento { n: 1 }).await.unwrap();
    let relay = Relay::new(db.pool.clone(), Config::new("destinos")).recurso(destino(&portao));
    for tentativa in 1..=3 {
        sqlx::query("UPDATE mensageria_saida SET proxima_tentativa_em = 0")
            .execute(&db.pool)
            .await
            .unwrap();
        let rodada = relay.rodada().await.unwrap();
        assert_eq!(rodada.reagendadas, 1, "attempt {tentativa}: {rodada:?}");
    }
    let texto = log.texto();
    let acima_de_debug: Vec<&str> = texto
        .lines()
        .filter(|l| l.contains(" WARN ") || l.contains(" ERROR ") || l.contains(" INFO "))
        .filter(|l| l.contains("redirect"))
        .collect();
    assert_eq!(
        acima_de_debug.len(),
        3,
        "one line per attempt: {acima_de_debug:#?}"
    );
    for linha in &acima_de_debug {
        assert!(
            linha.contains("WARN")
                && linha.contains("mensageria relay:")
                && linha.contains("307")
                && linha.contains(&para),
            "{linha}"
        );
    }
    assert_eq!(portao.recebidas().len(), 3);
    assert!(alvo.recebidas().is_empty(), "a redirect is never followed");
    // The guide (Sending) says what this test sees.
    let leia_me = include_str!("../docs/guide/src/sending.md")
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ");
    assert!(
        leia_me.contains("a 3xx keeps the row and each attempt is one WARN line of the relay"),
        "the guide's Delivered-means paragraph (sending.md) must say what is logged on a 3xx"
    );
    db.descartar().await;
}
