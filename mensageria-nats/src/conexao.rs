//! Connecting to a NATS cluster: a list of servers, so an app follows the cluster when the node it
//! talks to dies.

use std::time::Duration;

use crate::ErroNats;

/// The servers of `lista`, a comma-separated list of URLs (`nats://a:4222,nats://b:4222`; the
/// NATS client itself takes no such string): each trimmed, blanks dropped.
///
/// ```
/// let servidores = mensageria_nats::servidores(" nats://n1:4222, nats://n2:4222 ,");
/// assert_eq!(servidores, ["nats://n1:4222", "nats://n2:4222"]);
/// ```
pub fn servidores(lista: &str) -> Vec<String> {
    lista
        .split(',')
        .map(str::trim)
        .filter(|url| !url.is_empty())
        .map(str::to_owned)
        .collect()
}

/// Connects to a server of `lista` (a comma-separated list, see [`servidores`]; tried in a random
/// order, so an app's replicas spread over the nodes) that answers within 3 s, as client `nome`
/// (the app's name: the server's monitoring shows it), and returns its JetStream context. The
/// client learns the rest of the cluster from the server, and reconnects to another node,
/// forever, when its own dies; a [`Publicador`](crate::Publicador) or a
/// [`Consumidor`](crate::Consumidor) through which JetStream stays silent for 3 s (its node cut
/// from the cluster's majority) asks it to.
///
/// ```no_run
/// # async fn f() -> Result<(), mensageria_nats::ErroNats> {
/// let js = mensageria_nats::conectar("nats://n1:4222,nats://n2:4222,nats://n3:4222", "estoque").await?;
/// # Ok(()) }
/// ```
pub async fn conectar(lista: &str, nome: &str) -> Result<async_nats::jetstream::Context, ErroNats> {
    let (opcoes, servidores) = opcoes_de_conexao(lista, nome);
    let mostrados = servidores.join(",");
    if servidores.is_empty() {
        return Err(ErroNats::Conexao {
            servidores: mostrados,
            motivo: "no server URL given".to_owned(),
        });
    }
    let cliente = opcoes
        .connect(servidores)
        .await
        .map_err(|erro| ErroNats::Conexao {
            servidores: mostrados.clone(),
            motivo: erro.to_string(),
        })?;
    Ok(async_nats::jetstream::new(cliente))
}

/// What [`conectar`] connects with, for an app that adds options of its own (an event callback,
/// TLS): the client options (name `nome`, a 3 s connection timeout, and the credentials of `lista`'s URLs) and the servers without their credentials. The NATS
/// client ignores a `user:password@` or `token@` in a URL and would fail with "authorization
/// violation": they are taken out of the URLs and given to the client here (the first URL that
/// has some).
///
/// ```
/// let (_opcoes, servidores) =
///     mensageria_nats::opcoes_de_conexao("nats://app:segredo@n1:4222,nats://n2:4222", "app");
/// assert_eq!(servidores, ["nats://n1:4222", "nats://n2:4222"]);
/// ```
pub fn opcoes_de_conexao(lista: &str, nome: &str) -> (async_nats::ConnectOptions, Vec<String>) {
    let mut opcoes = async_nats::ConnectOptions::new()
        .name(nome)
        .connection_timeout(Duration::from_secs(3));
    let mut credenciais_dadas = false;
    let mut limpos = Vec::new();
    for url in servidores(lista) {
        let (limpo, credenciais) = separar_credenciais(&url);
        if let (false, Some((usuario, senha))) = (credenciais_dadas, credenciais) {
            credenciais_dadas = true;
            opcoes = match senha {
                Some(senha) => opcoes.user_and_password(usuario, senha),
                None => opcoes.token(usuario),
            };
        }
        limpos.push(limpo);
    }
    (opcoes, limpos)
}

/// `url` without its credentials, and them: `(user, Some(password))`, or `(token, None)`.
fn separar_credenciais(url: &str) -> (String, Option<(String, Option<String>)>) {
    let (esquema, resto) = match url.find("://") {
        Some(i) => (&url[..i + 3], &url[i + 3..]),
        None => ("", url),
    };
    match resto.rfind('@') {
        Some(arroba) => {
            let (credenciais, endereco) = (&resto[..arroba], &resto[arroba + 1..]);
            let credenciais = match credenciais.split_once(':') {
                Some((usuario, senha)) => (decodificar(usuario), Some(decodificar(senha))),
                None => (decodificar(credenciais), None),
            };
            (format!("{esquema}{endereco}"), Some(credenciais))
        }
        None => (url.to_owned(), None),
    }
}

/// Percent-decoding of a URL's user or password (`%40` for `@`, say).
fn decodificar(texto: &str) -> String {
    let bytes = texto.as_bytes();
    let hexa = |b: u8| char::from(b).to_digit(16).map(|d| d as u8);
    let mut saida = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%'
            && let (Some(&a), Some(&b)) = (bytes.get(i + 1), bytes.get(i + 2))
            && let (Some(a), Some(b)) = (hexa(a), hexa(b))
        {
            saida.push(a * 16 + b);
            i += 3;
            continue;
        }
        saida.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&saida).into_owned()
}

#[cfg(test)]
mod testes {
    use super::*;

    #[test]
    fn credenciais_saem_das_urls_e_vao_para_o_cliente() {
        assert_eq!(
            separar_credenciais("nats://u:seg%40redo@h:4222"),
            (
                "nats://h:4222".to_owned(),
                Some(("u".to_owned(), Some("seg@redo".to_owned())))
            )
        );
        assert_eq!(
            separar_credenciais("tok@h:4222"),
            ("h:4222".to_owned(), Some(("tok".to_owned(), None)))
        );
        assert_eq!(
            separar_credenciais("nats://h:4222"),
            ("nats://h:4222".to_owned(), None)
        );
    }

    #[tokio::test]
    async fn lista_vazia_e_servidor_ausente_dizem_o_que_fazer() {
        let erro = conectar(" , ", "app").await.unwrap_err().to_string();
        assert!(erro.contains("no server URL given"), "{erro}");
        let porta = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|o| o.local_addr())
            .unwrap()
            .port();
        let url = format!("nats://u:segredo@127.0.0.1:{porta}");
        let erro = conectar(&url, "app").await.unwrap_err().to_string();
        assert!(!erro.contains("segredo"), "{erro}");
        assert!(erro.contains("nats://127.0.0.1"), "{erro}");
    }
}
