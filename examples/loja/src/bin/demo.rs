//! `cargo run -p loja --bin demo [N]`: builds and starts `estoque`, `analise` and `pedidos`
//! against the PostgreSQL at `DATABASE_URL` (default: the local server) in schemas of their
//! own and the NATS server at `NATS_URL` (default: the local one) on a stream of their own,
//! sends N orders (200 by default) and checks that each got exactly one reservation and exactly
//! one analysis. With `LOJA_SPANS=<file>`, the services export their spans to that file and the
//! demo prints the trace of order 1 across the three processes.

use std::time::Duration;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let n: i64 = std::env::args()
        .nth(1)
        .map(|n| n.parse())
        .transpose()?
        .unwrap_or(200);
    // `cargo run --bin demo` builds only this binary: build the three services too.
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let construido = std::process::Command::new(cargo)
        .args([
            "build", "--quiet", "-p", "loja", "--bin", "pedidos", "--bin", "estoque", "--bin",
            "analise",
        ])
        .status()?;
    if !construido.success() {
        return Err("building pedidos, estoque and analise failed".into());
    }
    let dir = std::env::current_exe()?
        .parent()
        .ok_or("no directory")?
        .to_owned();
    let exe = |nome: &str| dir.join(nome).to_string_lossy().into_owned();
    let (pedidos, estoque, analise) = (exe("pedidos"), exe("estoque"), exe("analise"));
    println!(
        "loja: pedidos -> JetStream ({}) -> estoque and analise, estoque -> HTTP -> pedidos; {n} orders",
        loja::nats_url()
    );
    let resultado = loja::rodar(
        loja::Executaveis {
            pedidos: &pedidos,
            estoque: &estoque,
            analise: &analise,
        },
        n,
        Duration::from_secs(120),
    )
    .await?;
    print!("{resultado}");
    if !resultado.certo(n) {
        return Err("some order was not reserved exactly once and analysed exactly once".into());
    }
    println!("loja: every order reserved exactly once and analysed exactly once");
    // The services inherited `LOJA_SPANS` and have stopped: their spans are in the file.
    if let Some(arquivo) = std::env::var_os(loja::rastreamento::VARIAVEL).filter(|a| !a.is_empty())
    {
        let spans = loja::rastreamento::ler(arquivo.as_ref())?;
        let rastro = loja::rastreamento::rastro_do_pedido(&spans, 1)
            .ok_or("no `POST /pedidos` span of order 1 in LOJA_SPANS' file")?;
        print!("{}", loja::rastreamento::arvore(&spans, rastro));
    }
    Ok(())
}
