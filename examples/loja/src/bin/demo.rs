//! `cargo run -p loja --bin demo [N]`: builds and starts `estoque` and `pedidos` against the
//! PostgreSQL at `DATABASE_URL` (default: the local server), in a schema of their own, sends N
//! orders (200 by default) and checks that each got exactly one reservation.

use std::time::Duration;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let n: i64 = std::env::args()
        .nth(1)
        .map(|n| n.parse())
        .transpose()?
        .unwrap_or(200);
    // `cargo run --bin demo` builds only this binary: build the two services too.
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let construido = std::process::Command::new(cargo)
        .args([
            "build", "--quiet", "-p", "loja", "--bin", "pedidos", "--bin", "estoque",
        ])
        .status()?;
    if !construido.success() {
        return Err("building pedidos and estoque failed".into());
    }
    let dir = std::env::current_exe()?
        .parent()
        .ok_or("no directory")?
        .to_owned();
    let exe = |nome: &str| dir.join(nome).to_string_lossy().into_owned();
    println!("loja: estoque and pedidos on one schema, {n} orders");
    let resultado = loja::rodar(
        &exe("pedidos"),
        &exe("estoque"),
        n,
        Duration::from_secs(120),
    )
    .await?;
    print!("{resultado}");
    if !resultado.certo(n) {
        return Err("some order was not reserved exactly once".into());
    }
    println!("loja: every order reserved exactly once");
    Ok(())
}
