//! One order is one trace across the three processes, as their exporters recorded it
//! (`LOJA_SPANS`, `loja::rastreamento`): `POST /pedidos` in `pedidos` → the enqueue of
//! `pedido.criado` → its delivery to the stream → the receptors of `estoque` and of `analise`,
//! each a child of that delivery span → the reply's enqueue in `estoque`'s receptor → its
//! delivery over HTTP → `pedidos`' receptor of the reply. Every link is checked by span id.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use loja::rastreamento::{SpanGravado, arvore, ler, rastro_do_pedido};

const PEDIDOS: i64 = 3;

#[tokio::test]
async fn cada_pedido_e_um_rastro_nos_tres_processos() {
    let inicio = Instant::now();
    let dir = tempfile::tempdir().unwrap();
    let arquivo = dir.path().join("spans.jsonl");
    let resultado = loja::rodar_gravando_spans(
        loja::Executaveis {
            pedidos: env!("CARGO_BIN_EXE_pedidos"),
            estoque: env!("CARGO_BIN_EXE_estoque"),
            analise: env!("CARGO_BIN_EXE_analise"),
        },
        PEDIDOS,
        Duration::from_secs(60),
        &arquivo,
    )
    .await
    .unwrap();
    assert!(resultado.certo(PEDIDOS), "{resultado}");

    // The services have stopped: every span they recorded is in the file.
    let spans = ler(&arquivo).unwrap();
    for pedido in 1..=PEDIDOS {
        let rastro = rastro_do_pedido(&spans, pedido)
            .unwrap_or_else(|| panic!("no `POST /pedidos` span for order {pedido}"));
        conferir(&spans, rastro, pedido);
        if pedido == 1 {
            println!("{}", arvore(&spans, rastro));
        }
    }
    println!("{PEDIDOS} orders, each one trace: {:?}", inicio.elapsed());
}

/// The trace of one order, link by link.
fn conferir(spans: &[SpanGravado], rastro: &str, pedido: i64) {
    let todos: Vec<&SpanGravado> = spans.iter().filter(|s| s.trace_id == rastro).collect();
    let arvore = arvore(spans, rastro);
    let por_id: HashMap<&str, &SpanGravado> =
        todos.iter().map(|s| (s.span_id.as_str(), *s)).collect();
    // One root, the request; every other span's parent is in the trace (no broken link, in
    // whichever process the parent ran).
    let raizes: Vec<_> = todos
        .iter()
        .filter(|s| s.parent_span_id.is_none())
        .collect();
    assert_eq!(raizes.len(), 1, "order {pedido}: one root\n{arvore}");
    let raiz = raizes[0];
    assert_eq!(
        (raiz.service.as_str(), raiz.name.as_str()),
        ("pedidos", "POST /pedidos"),
        "{arvore}"
    );
    for span in &todos {
        if let Some(pai) = &span.parent_span_id {
            assert!(
                por_id.contains_key(pai.as_str()),
                "order {pedido}: {}'s {} has a parent outside the trace\n{arvore}",
                span.service,
                span.name
            );
        }
    }
    // The children of any of `pais` recorded by `servico` under `nome`.
    let filhos = |pais: &[&SpanGravado], servico: &str, nome: &str| -> Vec<&SpanGravado> {
        let filhos: Vec<&SpanGravado> = todos
            .iter()
            .copied()
            .filter(|s| s.service == servico && s.name == nome)
            .filter(|s| {
                pais.iter()
                    .any(|p| s.parent_span_id.as_deref() == Some(p.span_id.as_str()))
            })
            .collect();
        assert!(
            !filhos.is_empty(),
            "order {pedido}: no {servico}: {nome} under {:?}\n{arvore}",
            pais.iter()
                .map(|p| format!("{}: {}", p.service, p.name))
                .collect::<Vec<_>>()
        );
        filhos
    };
    // Whether `span` is `ancestral` or under it.
    let sob = |span: &SpanGravado, ancestral: &SpanGravado| {
        let mut atual = Some(span);
        while let Some(s) = atual {
            if s.span_id == ancestral.span_id {
                return true;
            }
            atual = s
                .parent_span_id
                .as_deref()
                .and_then(|p| por_id.get(p).copied());
        }
        false
    };
    let com_tipo = |spans: &[&SpanGravado], tipo: &str| {
        for span in spans {
            assert_eq!(span.atributo("tipo"), Some(tipo), "{arvore}");
        }
    };

    // pedidos: the request, the enqueue of `pedido.criado` in it, its delivery to the stream.
    assert_eq!(raiz.atributo("pedido"), Some(pedido.to_string().as_str()));
    let enfileirado = filhos(&[raiz], "pedidos", "mensageria.enfileirar");
    assert_eq!(
        enfileirado.len(),
        1,
        "order {pedido}: one enqueue\n{arvore}"
    );
    com_tipo(&enfileirado, "pedido.criado");
    let entregas = filhos(&enfileirado, "pedidos", "mensageria.entrega");
    com_tipo(&entregas, "pedido.criado");
    // Across processes: both receiving apps continue the delivery span.
    let em_estoque = filhos(&entregas, "estoque", "mensageria.receptor");
    com_tipo(&em_estoque, "pedido.criado");
    let em_analise = filhos(&entregas, "analise", "mensageria.receptor");
    com_tipo(&em_analise, "pedido.criado");
    // estoque: the reply, enqueued inside its receptor's span, and its delivery over HTTP.
    let resposta: Vec<&SpanGravado> = todos
        .iter()
        .copied()
        .filter(|s| s.service == "estoque" && s.name == "mensageria.enfileirar")
        .filter(|s| em_estoque.iter().any(|r| sob(s, r)))
        .collect();
    assert!(
        !resposta.is_empty(),
        "order {pedido}: no reply enqueued under estoque's receptor\n{arvore}"
    );
    com_tipo(&resposta, "estoque.reservado");
    let entregas_da_resposta = filhos(&resposta, "estoque", "mensageria.entrega");
    com_tipo(&entregas_da_resposta, "estoque.reservado");
    // Back in pedidos: its receptor of the reply continues estoque's delivery span.
    let de_volta = filhos(&entregas_da_resposta, "pedidos", "mensageria.receptor");
    com_tipo(&de_volta, "estoque.reservado");
}
