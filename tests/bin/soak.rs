//! Soak: a seeded random fault schedule, at any size, over two apps with two replica processes
//! each on one shared PostgreSQL schema; prints the fault matrix's row for the run.
//!
//! ```text
//! cargo run --release -p mensageria-testes --bin soak -- --mensagens 100000 --semente 7
//! ```
//!
//! While the producers run, every 100–600 ms (seeded) the schedule picks one fault: lose a
//! share of acks after the receptor committed, cut connections right after the request went
//! through, refuse connections (destination down), delay every chunk, replace answers by 500
//! after the commit, or SIGKILL one replica and start it again. Then everything heals, the
//! saída drains, and the checker compares the ledger with the effects.

#[path = "../comum/apps_ab.rs"]
mod apps_ab;

use std::time::Duration;

use apps_ab::{EventoA, EventoB};
use clap::Parser;
use mensageria_core::teste::{ModoProxy, ProxyDeFalhas};
use mensageria_testes::PgIsolado;
use mensageria_testes::faltas::{
    FalhaResposta, Filho, Lado, TABELAS, produzir_com, tabela, verificar,
};
use tokio::time::Instant;

/// A seeded random fault schedule over 2 apps × 2 replicas; prints the fault matrix's row.
#[derive(Parser, Debug)]
struct Args {
    /// Messages to enqueue (half `faltas.a`, half `faltas.b`).
    #[arg(long, default_value_t = 2000)]
    mensagens: i64,
    /// Seed of the fault schedule and of every random choice.
    #[arg(long, default_value_t = 1)]
    semente: u64,
    /// Producer tasks.
    #[arg(long, default_value_t = 4)]
    produtores: i64,
    /// Give up if the saída has not drained this many seconds after the faults heal.
    #[arg(long, default_value_t = 300)]
    limite_drenagem: u64,
}

fn main() {
    let args = Args::parse();
    let runtime = tokio::runtime::Runtime::new().expect("tokio runtime");
    let ok = runtime.block_on(soak(args));
    std::process::exit(if ok { 0 } else { 1 });
}

/// The child apps sit next to this binary (`cargo build` puts every bin of the package there).
fn binario(nome: &str) -> String {
    let aqui = std::env::current_exe().expect("the path of this binary");
    aqui.with_file_name(nome).to_string_lossy().into_owned()
}

async fn soak(args: Args) -> bool {
    let pg = PgIsolado::novo().await;
    mensageria_core::migrar(&pg.pool).await.expect("migrate");
    sqlx::raw_sql(TABELAS)
        .execute(&pg.pool)
        .await
        .expect("suite tables");
    let lado = Lado::new(args.semente);
    let app = mensageria_axum::router(
        pg.outro_pool(8).await,
        mensageria_axum::Config::new("receptor", ["faltas-token-de-teste"]),
    )
    .expect("the receptor's router");
    let app = lado.envolver(app);
    let ouvinte = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let endereco = ouvinte.local_addr().expect("local address");
    tokio::spawn(async move { axum::serve(ouvinte, app).await });
    let proxy = ProxyDeFalhas::iniciar(endereco, args.semente)
        .await
        .expect("proxy");
    let (app_a, app_b) = (binario("app-a"), binario("app-b"));
    let mut replicas = Vec::new();
    for binario in [&app_a, &app_b, &app_a, &app_b] {
        replicas.push(Some(
            Filho::iniciar(binario, &pg.schema, &proxy.url()).await,
        ));
    }
    println!(
        "soak: {} messages, seed {}, schema {}, 2 apps × 2 replicas",
        args.mensagens, args.semente, pg.schema
    );

    let produtores: Vec<_> = (0..args.produtores)
        .map(|p| {
            let pool = pg.pool.clone();
            let (total, passo) = (args.mensagens, args.produtores);
            tokio::spawn(async move {
                let mut tentadas = 0u64;
                let mut n = p;
                while n < total {
                    tentadas += 1;
                    let feito = if n % 2 == 0 {
                        produzir_com(&pool, n, false, &EventoA { n }).await
                    } else {
                        produzir_com(&pool, n, false, &EventoB { n }).await
                    };
                    feito
                        .expect("a producer transaction failed (the database is not a fault here)");
                    n += passo;
                }
                tentadas
            })
        })
        .collect();

    let mut sorte = fastrand::Rng::with_seed(args.semente);
    let mut agenda: Vec<String> = Vec::new();
    let mut mortes = 0u32;
    while !produtores.iter().all(|p| p.is_finished()) {
        tokio::time::sleep(Duration::from_millis(sorte.u64(100..600))).await;
        let evento = match sorte.u8(0..7) {
            0 => {
                let fracao = sorte.f64() * 0.5;
                proxy.modo(ModoProxy::PerderResposta { fracao });
                format!("lose {:.0}% of acks", fracao * 100.0)
            }
            1 => {
                proxy.modo(ModoProxy::CortarAposEncaminhar);
                "cut after forwarding".to_owned()
            }
            2 => {
                proxy.modo(ModoProxy::Recusar);
                "destination down".to_owned()
            }
            3 => {
                proxy.modo(ModoProxy::Atrasar(Duration::from_millis(50)));
                "delay 50 ms".to_owned()
            }
            4 => {
                lado.falhar(FalhaResposta::ErroAposCommit(0.3));
                "500 after commit (30%)".to_owned()
            }
            5 => {
                let i = sorte.usize(0..replicas.len());
                if let Some(filho) = replicas[i].take() {
                    filho.matar();
                }
                let binario = if i.is_multiple_of(2) { &app_a } else { &app_b };
                replicas[i] = Some(Filho::iniciar(binario, &pg.schema, &proxy.url()).await);
                mortes += 1;
                format!("SIGKILL replica {i}, restart")
            }
            _ => {
                proxy.modo(ModoProxy::Passar);
                lado.falhar(FalhaResposta::Nenhuma);
                "heal".to_owned()
            }
        };
        agenda.push(evento);
    }
    let mut tentadas = 0;
    for produtor in produtores {
        tentadas += produtor.await.expect("a producer panicked");
    }

    proxy.modo(ModoProxy::Passar);
    lado.falhar(FalhaResposta::Nenhuma);
    let cura = Instant::now();
    let limite = Duration::from_secs(args.limite_drenagem);
    loop {
        let pendentes: i64 = sqlx::query_scalar("SELECT count(*) FROM mensageria_saida")
            .fetch_one(&pg.pool)
            .await
            .expect("count the saída");
        if pendentes == 0 {
            break;
        }
        if cura.elapsed() > limite {
            eprintln!(
                "soak: {pendentes} messages still pending {limite:?} after the faults healed"
            );
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let drenagem = cura.elapsed();
    drop(replicas);
    let proxy_contagem = proxy.contagem();
    proxy.modo(ModoProxy::Recusar); // nothing may arrive after the checker counts
    let mut linha = verificar(
        &pg.pool,
        &lado,
        "soak",
        &format!("{} seeded faults over 2 apps × 2 replicas", agenda.len()),
        tentadas,
        args.semente,
        drenagem,
    )
    .await;
    linha.observacao = format!(
        "{mortes} SIGKILLs; {} responses lost and {} connections reset by the proxy; {} answers replaced",
        proxy_contagem.respostas_perdidas,
        proxy_contagem.resets - proxy_contagem.respostas_perdidas,
        lado.injetadas()
    );
    println!("schedule: {}", agenda.join(", "));
    println!();
    print!("{}", tabela(std::slice::from_ref(&linha)));
    pg.descartar().await;
    let ok = linha.perdidas == 0
        && linha.inesperadas == 0
        && linha.efeitos_duplicados == 0
        && linha.mortas_sao_o_veneno;
    if !ok {
        eprintln!("soak: FAILED: {linha:#?}");
    }
    ok
}
