//! `teste::PgIsolado` and `teste::SqliteIsolado` against the real PostgreSQL (`DATABASE_URL`)
//! and a real SQLite file: each test gets migrated tables of its own, invisible to the others,
//! and `fechar` leaves nothing behind.

use std::str::FromStr as _;

use mensageria_core::sqlx::{self, Connection as _};
use mensageria_core::teste::{PgIsolado, SqliteIsolado, database_url};

/// Whether schema `nome` exists, seen from a connection outside it.
async fn schema_existe(nome: &str) -> bool {
    let opcoes = sqlx::postgres::PgConnectOptions::from_str(&database_url()).unwrap();
    let mut conexao = sqlx::PgConnection::connect_with(&opcoes).await.unwrap();
    let existe: bool =
        sqlx::query_scalar("SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = $1)")
            .bind(nome)
            .fetch_one(&mut conexao)
            .await
            .unwrap();
    conexao.close().await.unwrap();
    existe
}

#[tokio::test]
async fn pg_isolado_da_um_schema_migrado_so_seu_e_fechar_o_remove() {
    let a = PgIsolado::novo().await.unwrap();
    let b = PgIsolado::novo().await.unwrap();
    assert_ne!(a.schema(), b.schema());
    assert!(a.schema().starts_with("mensageria_teste_"));
    assert_eq!(a.pool().options().get_max_connections(), 3);

    // Migrated, in its own schema (the search_path).
    let versao = mensageria_core::verificar_schema(a.pool()).await.unwrap();
    assert_eq!(versao.aplicada, versao.esperada);
    let onde: String = sqlx::query_scalar(
        "SELECT table_schema FROM information_schema.tables WHERE table_name = 'mensageria_saida' \
         AND table_schema = current_schema()",
    )
    .fetch_one(a.pool())
    .await
    .unwrap();
    assert_eq!(onde, a.schema());

    // A row in one is not seen by the other, nor by another pool's view of the other.
    sqlx::query("CREATE TABLE nota (texto TEXT NOT NULL)")
        .execute(a.pool())
        .await
        .unwrap();
    sqlx::query("INSERT INTO nota (texto) VALUES ('só de a')")
        .execute(a.pool())
        .await
        .unwrap();
    let em_b: Option<String> = sqlx::query_scalar("SELECT to_regclass('nota')::text")
        .fetch_one(b.pool())
        .await
        .unwrap();
    assert_eq!(em_b, None, "b does not see a's table");
    let outro = a.outro_pool(1).await.unwrap();
    let notas: i64 = sqlx::query_scalar("SELECT count(*) FROM nota")
        .fetch_one(&outro)
        .await
        .unwrap();
    assert_eq!(notas, 1, "another pool on a's schema sees a's row");
    outro.close().await;

    let (nome_a, nome_b) = (a.schema().to_owned(), b.schema().to_owned());
    a.fechar().await.unwrap();
    assert!(!schema_existe(&nome_a).await, "fechar drops the schema");
    assert!(
        schema_existe(&nome_b).await,
        "the other test's schema is untouched"
    );
    b.fechar().await.unwrap();
    assert!(!schema_existe(&nome_b).await);
}

#[tokio::test]
async fn pg_isolado_vazio_nao_tem_tabelas_ate_migrar() {
    let db = PgIsolado::vazio(&database_url(), 2).await.unwrap();
    let erro = mensageria_core::verificar_schema(db.pool())
        .await
        .unwrap_err();
    assert!(
        matches!(erro, mensageria_core::Erro::SchemaAusente { .. }),
        "{erro}"
    );
    mensageria_core::migrar(db.pool()).await.unwrap();
    mensageria_core::verificar_schema(db.pool()).await.unwrap();
    db.fechar().await.unwrap();
}

#[tokio::test]
async fn pg_isolado_num_servidor_que_nao_existe_e_um_erro() {
    // Port 1 on 127.0.0.1: nothing listens there.
    let erro = PgIsolado::em("postgres://postgres@127.0.0.1:1/postgres")
        .await
        .unwrap_err();
    assert!(matches!(erro, mensageria_core::Erro::Banco(_)), "{erro}");
}

#[tokio::test]
async fn sqlite_isolado_da_um_arquivo_migrado_e_fechar_o_apaga() {
    let db = SqliteIsolado::novo().await.unwrap();
    let versao = mensageria_core::verificar_schema(db.pool()).await.unwrap();
    assert_eq!(versao.aplicada, versao.esperada);
    let arquivo = db.caminho().to_owned();
    assert!(arquivo.exists());
    db.fechar().await.unwrap();
    assert!(!arquivo.exists());
    assert!(
        !arquivo.parent().unwrap().exists(),
        "its directory goes too"
    );
}
