//! The body of the fault suite's child apps: a relay in its own process, killed with SIGKILL or
//! run as one replica of an app on a shared schema.
//!
//! Environment: `DATABASE_URL`, `MENSAGERIA_TESTE_SCHEMA` (the scenario's schema),
//! `MENSAGERIA_TESTE_DESTINO` (the receptor's base URL); `MENSAGERIA_TESTE_PADRAO` for the
//! library's default settings, `MENSAGERIA_INSTANCE` for a stable instance name, `MENSAGERIA_TESTE_LIDER` for leader mode. Prints `pronto` once the relay runs,
//! then runs until killed.

use std::str::FromStr;
use std::time::Duration;

use mensageria_core::Destino;
use mensageria_core::relay::{Config, Relay};
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};

/// Runs the relay of `app` (whose tipos are the enviadores linked into this binary) forever.
pub(crate) fn rodar(app: &str) {
    let variavel = |nome: &str| std::env::var(nome).unwrap_or_else(|_| panic!("{nome} is not set"));
    let runtime = tokio::runtime::Runtime::new().expect("tokio runtime");
    runtime.block_on(async {
        let opcoes = PgConnectOptions::from_str(&mensageria_testes::database_url())
            .expect("a valid DATABASE_URL")
            .options([("search_path", variavel("MENSAGERIA_TESTE_SCHEMA"))]);
        let pool = PgPoolOptions::new()
            .max_connections(4)
            .connect_with(opcoes)
            .await
            .expect("connect to the scenario's schema");
        let mut cabecalhos = reqwest::header::HeaderMap::new();
        cabecalhos.insert("x-app", app.parse().expect("an ASCII app name"));
        let cliente = Destino::construtor_de_cliente()
            .default_headers(cabecalhos)
            .build()
            .expect("an HTTP client");
        let destino = Destino::new(&variavel("MENSAGERIA_TESTE_DESTINO"))
            .expect("a destination URL")
            .com_token("faltas-token-de-teste")
            .com_tempo_limite(Duration::from_millis(800))
            .com_cliente(cliente);
        // `MENSAGERIA_TESTE_PADRAO`: the library's defaults (with `MENSAGERIA_INSTANCE`, a
        // stable instance name), as a user would run it; otherwise fast test settings.
        let config = if std::env::var_os("MENSAGERIA_TESTE_PADRAO").is_some() {
            Config::do_ambiente(app)
        } else {
            Config::new(app)
                .com_intervalo(Duration::from_millis(50))
                .com_backoff(Duration::from_millis(20), Duration::from_millis(200))
                .com_lease(Duration::from_secs(2))
                .com_tempo_limite_envio(Duration::from_secs(1))
                .com_lote(16)
                .com_concorrencia(8)
                .com_intervalo_registro(Duration::from_millis(500))
        };
        // `MENSAGERIA_TESTE_LIDER`: one replica of the app leads each round.
        let config = if std::env::var_os("MENSAGERIA_TESTE_LIDER").is_some() {
            config.com_modo(mensageria_core::relay::Modo::Lider)
        } else {
            config
        };
        let _relay = Relay::new(pool, config)
            .recurso(destino)
            .spawn()
            .expect("start the relay");
        println!("pronto");
        std::future::pending::<()>().await;
    });
}
