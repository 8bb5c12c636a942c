//! What `mensageria doctor --nats` reports about a stream: its topology record against the
//! stream (drift), a single replica, ordered lanes nobody consumes, and tipos published that no
//! receiving app consumes (their messages would otherwise sit in the stream until they expire,
//! with no trace anywhere).

use std::collections::BTreeMap;

use async_nats::jetstream;
use futures_util::TryStreamExt;

use crate::{ErroNats, Fluxo, topologia};

/// One finding about the stream.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Achado {
    /// A stable code: `stream-topology`, `stream-single-replica`, `lane-unconsumed`,
    /// `tipo-unconsumed`.
    pub codigo: &'static str,
    /// What was found and what to do.
    pub mensagem: String,
}

/// The findings about stream `nome` (its prefix is its record's, or its first subject's when it
/// has none). Empty when all is well.
///
/// ```no_run
/// # async fn f(js: mensageria_nats::async_nats::jetstream::Context) -> Result<(), mensageria_nats::ErroNats> {
/// for achado in mensageria_nats::diagnosticar(&js, "MENSAGERIA").await? {
///     println!("{}: {}", achado.codigo, achado.mensagem);
/// }
/// # Ok(()) }
/// ```
pub async fn diagnosticar(js: &jetstream::Context, nome: &str) -> Result<Vec<Achado>, ErroNats> {
    let fluxo_js = Fluxo::new(nome, "x")?.existente(js).await?;
    let info = fluxo_js.cached_info().clone();
    let registro = topologia::ler(js, nome).await?;
    let prefixo = match &registro {
        Some(registro) => registro.prefixo.clone(),
        None => info
            .config
            .subjects
            .first()
            .map(|assunto| assunto.trim_end_matches(".>").to_owned())
            .unwrap_or_default(),
    };
    let fluxo = Fluxo::new(nome, &prefixo)?;
    let mut achados = achados_da_topologia(nome, &info, registro.as_ref());
    achados.extend(achados_do_consumo(&fluxo_js, &fluxo, &prefixo).await?);
    Ok(achados)
}

/// The record missing or drifted from the stream, and a single replica.
fn achados_da_topologia(
    nome: &str,
    info: &async_nats::jetstream::stream::Info,
    registro: Option<&topologia::Topologia>,
) -> Vec<Achado> {
    let mut achados = Vec::new();
    let replicas = info.config.num_replicas.max(1);
    match registro {
        None => achados.push(Achado {
            codigo: "stream-topology",
            mensagem: format!(
                "stream `{nome}` has no topology record (bucket `{}`): the first app of this \
                 version that starts writes it; until then apps cannot agree on its ordered lanes",
                topologia::BALDE
            ),
        }),
        Some(registro) if registro.replicas != replicas => achados.push(Achado {
            codigo: "stream-topology",
            mensagem: format!(
                "stream `{nome}` has {replicas} replica(s) and its record says {}: it was changed \
                 after the apps set it up; check that every app still requires what it has",
                registro.replicas
            ),
        }),
        Some(_) => {}
    }
    if replicas == 1 {
        achados.push(Achado {
            codigo: "stream-single-replica",
            mensagem: format!(
                "stream `{nome}` has one replica: a PubAck is one server's, and losing that \
                 server's disk loses what it had not synced after the relay deleted it from the \
                 saída; use 3 replicas on a cluster in production"
            ),
        });
    }
    achados
}

/// Ordered lanes and tipos with messages that no durable consumes.
async fn achados_do_consumo(
    fluxo_js: &jetstream::stream::Stream,
    fluxo: &Fluxo,
    prefixo: &str,
) -> Result<Vec<Achado>, ErroNats> {
    let mut achados = Vec::new();
    let filtros: Vec<String> = fluxo_js
        .consumers()
        .map_ok(|consumidor| consumidor.config.filter_subject)
        .try_collect()
        .await
        .map_err(|erro| ErroNats::jetstream("listing the stream's consumers")(Box::new(erro)))?;
    let mut assuntos = BTreeMap::new();
    let mut lista = fluxo_js
        .info_with_subjects(format!("{prefixo}.>"))
        .await
        .map_err(|erro| ErroNats::jetstream("reading the stream's subjects")(Box::new(erro)))?;
    while let Some((assunto, mensagens)) = lista
        .try_next()
        .await
        .map_err(|erro| ErroNats::jetstream("reading the stream's subjects")(Box::new(erro)))?
    {
        assuntos.insert(assunto, mensagens);
    }
    let consumido = |assunto: &str| filtros.iter().any(|f| casa(f, assunto));
    let mut por_tipo: BTreeMap<String, usize> = BTreeMap::new();
    for (assunto, mensagens) in &assuntos {
        let tipo = match fluxo.tipo_da_faixa(assunto) {
            Some(tipo) => {
                if !consumido(assunto) {
                    achados.push(Achado {
                        codigo: "lane-unconsumed",
                        mensagem: format!(
                            "{mensagens} message(s) on ordered lane subject `{assunto}`, which no \
                             durable consumes: a receiving app declares other lanes, or none \
                             runs; they are applied only when one does"
                        ),
                    });
                }
                tipo
            }
            None => assunto
                .strip_prefix(prefixo)
                .and_then(|resto| resto.strip_prefix('.'))
                .unwrap_or(assunto),
        };
        *por_tipo.entry(tipo.to_owned()).or_default() += mensagens;
    }
    for (tipo, mensagens) in por_tipo {
        // Every receiving app of a tipo has a durable on its unordered subject.
        if !consumido(&format!("{prefixo}.{tipo}")) {
            achados.push(Achado {
                codigo: "tipo-unconsumed",
                mensagem: format!(
                    "{mensagens} message(s) of tipo `{tipo}` in stream `{}`, which no receiving \
                     app consumes: they stay until the stream's max_age deletes them; start the \
                     app that receives it, or stop publishing it",
                    fluxo.nome()
                ),
            });
        }
    }
    Ok(achados)
}

/// Whether a consumer's filter subject takes `assunto` (an empty filter takes everything).
fn casa(filtro: &str, assunto: &str) -> bool {
    if filtro.is_empty() {
        return true;
    }
    let mut tokens = assunto.split('.');
    for parte in filtro.split('.') {
        match (parte, tokens.next()) {
            (">", Some(_)) => return true,
            ("*", Some(_)) => {}
            (parte, Some(token)) if parte == token => {}
            _ => return false,
        }
    }
    tokens.next().is_none()
}

#[cfg(test)]
mod testes {
    use super::casa;

    #[test]
    fn filtros_como_o_nats() {
        assert!(casa("", "a.b"));
        assert!(casa("a.b", "a.b"));
        assert!(!casa("a.b", "a.b.c"));
        assert!(casa("a.>", "a.b.c"));
        assert!(!casa("a.>", "a"));
        assert!(casa("a.*.c", "a.b.c"));
        assert!(!casa("a.*", "a.b.c"));
    }
}
