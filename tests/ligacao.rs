//! The linking caveat, shown: the typed path names the payload type, which links the crate that
//! holds its `#[enviador]`, so its registration is always there.

use enviadores_fiscais::NotaAutorizada;
use mensageria_core::Registro;
use mensageria_testes::SqliteIsolado;

#[tokio::test]
async fn enfileirar_tipado_liga_o_crate_do_enviador() {
    let db = SqliteIsolado::novo().await;
    mensageria_core::migrar(&db.pool).await.unwrap();
    // This binary references `enviadores_fiscais` only through the payload type it enqueues.
    mensageria_core::enfileirar(&db.pool, &NotaAutorizada { chave: "35".into() })
        .await
        .unwrap();

    let registro = Registro::global();
    let enviador = registro
        .enviador("fiscal.nota")
        .expect("the enviador of a payload this binary enqueues is linked");
    assert_eq!(enviador.modulo, "enviadores_fiscais");
    assert_eq!(registro.tipos(), ["fiscal.nota"]);
    registro.validar().unwrap();
    // And the dynamic path finds it too.
    mensageria_core::enfileirar_json(&db.pool, "fiscal.nota", &serde_json::json!({"chave": "36"}))
        .await
        .unwrap();
    db.descartar().await;
}
