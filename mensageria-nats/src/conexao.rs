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

/// Connects to the first server of `lista` (a comma-separated list, see [`servidores`]) that
/// answers within 3 s, as client `nome` (the app's name: the server's monitoring shows it), and
/// returns its JetStream context. The client learns the rest of the cluster from the server, and
/// reconnects to any node, forever, when its own dies.
///
/// ```no_run
/// # async fn f() -> Result<(), mensageria_nats::ErroNats> {
/// let js = mensageria_nats::conectar("nats://n1:4222,nats://n2:4222,nats://n3:4222", "estoque").await?;
/// # Ok(()) }
/// ```
pub async fn conectar(lista: &str, nome: &str) -> Result<async_nats::jetstream::Context, ErroNats> {
    let servidores = servidores(lista);
    let mostrados = servidores
        .iter()
        .map(|url| sem_credenciais(url))
        .collect::<Vec<_>>()
        .join(",");
    if servidores.is_empty() {
        return Err(ErroNats::Conexao {
            servidores: mostrados,
            motivo: "no server URL given".to_owned(),
        });
    }
    let cliente = async_nats::ConnectOptions::new()
        .name(nome)
        .connection_timeout(Duration::from_secs(3))
        .retain_servers_order()
        .connect(servidores)
        .await
        .map_err(|erro| ErroNats::Conexao {
            servidores: mostrados.clone(),
            motivo: erro.to_string(),
        })?;
    Ok(async_nats::jetstream::new(cliente))
}

/// `url` without its `user:password@` (or token), for messages: secrets never leave.
fn sem_credenciais(url: &str) -> String {
    match (url.find("://"), url.rfind('@')) {
        (Some(esquema), Some(arroba)) if arroba > esquema => {
            format!("{}://***@{}", &url[..esquema], &url[arroba + 1..])
        }
        (None, Some(arroba)) => format!("***@{}", &url[arroba + 1..]),
        _ => url.to_owned(),
    }
}

#[cfg(test)]
mod testes {
    use super::*;

    #[test]
    fn credenciais_nao_saem_nas_mensagens() {
        assert_eq!(
            sem_credenciais("nats://u:segredo@h:4222"),
            "nats://***@h:4222"
        );
        assert_eq!(sem_credenciais("tok@h:4222"), "***@h:4222");
        assert_eq!(sem_credenciais("nats://h:4222"), "nats://h:4222");
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
        assert!(erro.contains("nats://***@127.0.0.1"), "{erro}");
    }
}
