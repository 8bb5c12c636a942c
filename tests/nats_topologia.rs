//! The declared topology (issue 34): what a stream must be for an app to use it, checked
//! against what exists in the broker — the stream (an operator's included) and the topology
//! record every app reads its ordered lanes from. On the shared nats-server (one server: the
//! replicated rows are in `nats_cluster.rs`).

use std::time::Duration;

use mensageria_nats::async_nats::jetstream::{self, stream};
use mensageria_nats::{ConfigConsumidor, Consumidor, ErroNats, Fluxo};
use mensageria_testes::PgIsolado;
use mensageria_testes::nats as bancada;

async fn js() -> jetstream::Context {
    bancada::conectar(&bancada::url_compartilhada()).await
}

/// A unique stream name and prefix.
fn nomes() -> (String, String) {
    let sufixo = uuid::Uuid::now_v7().simple().to_string();
    (format!("TOP{sufixo}"), format!("top{sufixo}"))
}

fn problema(resultado: Result<Fluxo, ErroNats>) -> String {
    match resultado {
        Err(erro @ ErroNats::Topologia { .. }) => erro.to_string(),
        outro => panic!("expected a topology refusal, got {outro:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn as_faixas_ordenadas_vem_do_registro_no_broker() {
    // The first app records the lane count in the broker; an app that does not declare one takes
    // it, and an app that declares another refuses to start (a silent fallback would leave lanes
    // nobody consumes). Before: the count lived in the stream's free-text description and an app
    // that declared 2 silently took 8.
    let js = js().await;
    let (nome, prefixo) = nomes();
    let fluxo = || Fluxo::new(&nome, &prefixo).unwrap().com_replicas(1);
    let dono = fluxo().com_faixas_ordenadas(8).garantir(&js).await.unwrap();
    let leitor = fluxo().ler(&js).await.unwrap();
    assert_eq!((dono.faixas_ordenadas(), leitor.faixas_ordenadas()), (8, 8));
    assert!(dono.verificado() && leitor.verificado());
    for chave in ["a", "b", "pedido:42"] {
        assert_eq!(
            dono.assunto_ordenado("x.y", chave),
            leitor.assunto_ordenado("x.y", chave)
        );
    }
    let texto = problema(fluxo().com_faixas_ordenadas(2).garantir(&js).await);
    assert!(
        texto.contains("its record says 8 ordered lanes and this app declares 2"),
        "{texto}"
    );
    // The stream's description is not where it lives: an operator may rewrite it freely.
    let info = js.get_stream(&nome).await.unwrap().cached_info().clone();
    let mut config = info.config.clone();
    config.description = Some("edited by an operator".into());
    js.update_stream(&config).await.unwrap();
    assert_eq!(fluxo().ler(&js).await.unwrap().faixas_ordenadas(), 8);
    js.delete_stream(&nome).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn um_consumidor_recusa_um_registro_que_contradiz_o_que_declara() {
    let js = js().await;
    let (nome, prefixo) = nomes();
    Fluxo::new(&nome, &prefixo)
        .unwrap()
        .com_replicas(1)
        .com_faixas_ordenadas(8)
        .garantir(&js)
        .await
        .unwrap();
    let pg = PgIsolado::novo().await;
    mensageria_core::migrar(&pg.pool).await.unwrap();
    let declarado = Fluxo::new(&nome, &prefixo)
        .unwrap()
        .com_replicas(1)
        .com_faixas_ordenadas(2);
    let erro = Consumidor::new(
        pg.pool.clone(),
        js.clone(),
        declarado,
        ConfigConsumidor::new("topologia"),
    )
    .spawn()
    .await
    .unwrap_err();
    assert!(
        matches!(erro, ErroNats::Topologia { .. }) && erro.to_string().contains("declares 2"),
        "{erro}"
    );
    js.delete_stream(&nome).await.unwrap();
    pg.descartar().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn o_padrao_e_replicado_e_um_servidor_so_pede_uma_replica_explicitamente() {
    // Production's default is three replicas; on a single server the app is told what to write.
    let js = js().await;
    let (nome, prefixo) = nomes();
    let erro = Fluxo::new(&nome, &prefixo)
        .unwrap()
        .garantir(&js)
        .await
        .unwrap_err();
    assert!(
        matches!(erro, ErroNats::ReplicasSemCluster { replicas: 3, .. }),
        "{erro}"
    );
    assert!(erro.to_string().contains("com_replicas(1)"), "{erro}");
    assert!(js.get_stream(&nome).await.is_err(), "nothing was created");
    assert_eq!(Fluxo::new("X", "x").unwrap().replicas(), 3);
}

/// A contradiction: its name, how the operator's stream has it, what the refusal says.
type Caso = (&'static str, fn(&mut stream::Config), &'static str);

/// A stream an operator created by hand, with `mudar` applied to a sane configuration.
async fn do_operador(
    js: &jetstream::Context,
    mudar: impl FnOnce(&mut stream::Config),
) -> (String, String) {
    let (nome, prefixo) = nomes();
    let mut config = stream::Config {
        name: nome.clone(),
        subjects: vec![format!("{prefixo}.>")],
        discard: stream::DiscardPolicy::New,
        ..Default::default()
    };
    mudar(&mut config);
    js.create_stream(config).await.unwrap();
    (nome, prefixo)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn um_fluxo_do_operador_e_conferido_nunca_reescrito() {
    let js = js().await;
    let fluxo = |(nome, prefixo): &(String, String)| Fluxo::new(nome, prefixo).unwrap();
    // What works: a sane hand-made stream, its settings taken, its record written by the first
    // app.
    let certo = do_operador(&js, |c| c.max_age = Duration::from_secs(3600)).await;
    let lido = fluxo(&certo).com_replicas(1).garantir(&js).await.unwrap();
    assert_eq!(lido.replicas(), 1);
    assert_eq!(lido.faixas_ordenadas(), 4);
    // Contradictions: each refused, with what to do; the stream left as it was.
    let casos: [Caso; 4] = [
        (
            "work queue",
            |c| c.retention = stream::RetentionPolicy::WorkQueue,
            "work-queue",
        ),
        (
            "discard old with a size limit",
            |c| {
                c.discard = stream::DiscardPolicy::Old;
                c.max_messages = 1000;
            },
            "--discard new",
        ),
        (
            "memory",
            |c| c.storage = stream::StorageType::Memory,
            "in memory",
        ),
        (
            "interest",
            |c| c.retention = stream::RetentionPolicy::Interest,
            "retention is Interesse and this app requires Limites",
        ),
    ];
    let mut nomes_criados = vec![certo.0.clone()];
    for (caso, mudar, esperado) in casos {
        let nomes = do_operador(&js, mudar).await;
        let antes = js
            .get_stream(&nomes.0)
            .await
            .unwrap()
            .cached_info()
            .config
            .clone();
        let texto = problema(fluxo(&nomes).com_replicas(1).garantir(&js).await);
        assert!(texto.contains(esperado), "{caso}: {texto}");
        let depois = js
            .get_stream(&nomes.0)
            .await
            .unwrap()
            .cached_info()
            .config
            .clone();
        assert_eq!(
            (antes.retention, antes.discard, antes.storage),
            (depois.retention, depois.discard, depois.storage),
            "{caso}: never rewritten"
        );
        nomes_criados.push(nomes.0);
    }
    // An app that requires three replicas of a one-replica stream refuses, naming the fix.
    let texto = problema(fluxo(&certo).garantir(&js).await);
    assert!(
        texto.contains("it has 1 replica(s) and this app requires 3")
            && texto.contains("--replicas 3"),
        "{texto}"
    );
    for nome in nomes_criados {
        js.delete_stream(&nome).await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn o_registro_de_um_fluxo_apagado_nao_vale_para_o_novo() {
    // A stream deleted and created again under the same name: the old record is stale (it names
    // another stream's creation) and the new stream's first app writes its own.
    let js = js().await;
    let (nome, prefixo) = nomes();
    let fluxo = || Fluxo::new(&nome, &prefixo).unwrap().com_replicas(1);
    let primeiro = fluxo().com_faixas_ordenadas(8).garantir(&js).await.unwrap();
    assert_eq!(primeiro.faixas_ordenadas(), 8);
    js.delete_stream(&nome).await.unwrap();
    let segundo = fluxo().com_faixas_ordenadas(2).garantir(&js).await.unwrap();
    assert_eq!(segundo.faixas_ordenadas(), 2);
    assert_eq!(fluxo().ler(&js).await.unwrap().faixas_ordenadas(), 2);
    js.delete_stream(&nome).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn apps_que_declaram_juntos_convergem_num_registro() {
    // Eight apps start together on a missing stream, declaring nothing about lanes: one stream,
    // one record, every app with the same lanes.
    let js = js().await;
    let (nome, prefixo) = nomes();
    let garantias = (0..8).map(|_| {
        let (js, fluxo) = (
            js.clone(),
            Fluxo::new(&nome, &prefixo).unwrap().com_replicas(1),
        );
        tokio::spawn(async move { fluxo.garantir(&js).await })
    });
    let mut faixas = std::collections::HashSet::new();
    for garantia in garantias.collect::<Vec<_>>() {
        faixas.insert(garantia.await.unwrap().unwrap().faixas_ordenadas());
    }
    assert_eq!(faixas.len(), 1, "{faixas:?}");
    js.delete_stream(&nome).await.unwrap();
}
