//! The topology record: what every app on one stream must agree on, kept in the broker.
//!
//! A stream's ordered lanes decide which subject a key's messages go to, so a publisher and a
//! consumer that count them differently lose messages to a lane nobody consumes. On a 2.10
//! server this would be stream metadata; on 2.9 it is a record the library owns in the
//! key-value bucket `mensageria_topologia` (one key per stream, the stream's name), created once
//! by whichever app gets there first (an atomic create: every other app reads the winner's) and
//! read by every publisher and consumer at start. It is never changed by an app: an app that
//! declares something else refuses to start and says what differs.

use async_nats::jetstream::{self, kv, stream};
use serde::{Deserialize, Serialize};

use crate::ErroNats;

/// The bucket that holds the records.
pub(crate) const BALDE: &str = "mensageria_topologia";

/// How ordered lanes are laid out: one set of lanes per stream, shared by every tipo, so one
/// key's messages of several tipos go to one lane (`{prefixo}._ordem.{n}.{tipo}`).
pub(crate) const FAIXAS_POR_CHAVE: &str = "per-key";

/// The record (JSON): what every app on the stream agrees on.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Topologia {
    /// The record's format: 1.
    pub(crate) formato: u32,
    /// The subjects' prefix.
    pub(crate) prefixo: String,
    /// Ordered lanes of the stream.
    pub(crate) faixas_ordenadas: u32,
    /// Their layout ([`FAIXAS_POR_CHAVE`]).
    pub(crate) disposicao: String,
    /// The replicas the stream had when the record was written (`doctor` reports drift).
    pub(crate) replicas: usize,
    /// When the stream was created (Unix ns): a record of an earlier stream of the same name is
    /// stale, and replaced.
    pub(crate) fluxo_criado: i64,
}

/// The record of stream `nome`, or `proposta` written as it if there is none yet, or only a stale
/// one (left by an earlier stream of that name: its `fluxo_criado` is not this stream's). The
/// first app wins; the others read what it wrote (create and replace are compare-and-set). The
/// bucket is created with `replicas` (the stream's).
pub(crate) async fn garantir(
    js: &jetstream::Context,
    nome: &str,
    replicas: usize,
    proposta: &Topologia,
) -> Result<Topologia, ErroNats> {
    let balde = balde(js, replicas).await?;
    let corpo: bytes::Bytes = serde_json::to_vec(proposta)
        .expect("the record serializes")
        .into();
    for _ in 0..8 {
        let entrada = balde
            .entry(nome)
            .await
            .map_err(|erro| ErroNats::jetstream("reading the topology record")(Box::new(erro)))?
            .filter(|entrada| entrada.operation == kv::Operation::Put);
        let escrita = match entrada {
            Some(entrada) => {
                let registro = decodificar(nome, &entrada.value)?;
                if registro.fluxo_criado == proposta.fluxo_criado {
                    return Ok(registro);
                }
                match balde.update(nome, corpo.clone(), entrada.revision).await {
                    Ok(_) => return Ok(proposta.clone()),
                    Err(erro) if erro.kind() == kv::UpdateErrorKind::WrongLastRevision => continue,
                    Err(erro) => Err(ErroNats::jetstream("replacing a stale topology record")(
                        Box::new(erro),
                    )),
                }
            }
            None => match balde.create(nome, corpo.clone()).await {
                Ok(_) => return Ok(proposta.clone()),
                // Another app wrote it between our read and our create: read it again.
                Err(erro) if erro.kind() == kv::CreateErrorKind::AlreadyExists => continue,
                Err(erro) => Err(ErroNats::jetstream("writing the topology record")(
                    Box::new(erro),
                )),
            },
        };
        escrita?;
    }
    Err(ErroNats::Topologia {
        fluxo: nome.to_owned(),
        problema: "its record kept changing while this app read it; start again".to_owned(),
    })
}

/// The record of stream `nome`, if there is one.
pub(crate) async fn ler(
    js: &jetstream::Context,
    nome: &str,
) -> Result<Option<Topologia>, ErroNats> {
    match js.get_key_value(BALDE).await {
        Ok(balde) => ler_do_balde(&balde, nome).await,
        Err(erro) if erro.kind() == jetstream::context::KeyValueErrorKind::GetBucket => Ok(None),
        Err(erro) => Err(ErroNats::jetstream("reading the topology bucket")(
            Box::new(erro),
        )),
    }
}

async fn ler_do_balde(balde: &kv::Store, nome: &str) -> Result<Option<Topologia>, ErroNats> {
    let Some(corpo) = balde
        .get(nome)
        .await
        .map_err(|erro| ErroNats::jetstream("reading the topology record")(Box::new(erro)))?
    else {
        return Ok(None);
    };
    decodificar(nome, &corpo).map(Some)
}

fn decodificar(nome: &str, corpo: &[u8]) -> Result<Topologia, ErroNats> {
    serde_json::from_slice(corpo).map_err(|erro| ErroNats::Topologia {
        fluxo: nome.to_owned(),
        problema: format!(
            "its record in bucket `{BALDE}` is not one this version reads ({erro}): {}",
            String::from_utf8_lossy(corpo)
        ),
    })
}

/// The bucket, created when missing (concurrent creations converge: a bucket that exists with
/// other settings is simply opened). Its stream is made here as the key-value convention wants
/// it (the client's own bucket creation asks the account's limits in a form 2.9 servers do not
/// answer): one value a key, rollups allowed, deletes denied, direct gets, `discard new`.
async fn balde(js: &jetstream::Context, replicas: usize) -> Result<kv::Store, ErroNats> {
    if let Ok(balde) = js.get_key_value(BALDE).await {
        return Ok(balde);
    }
    let config = stream::Config {
        name: format!("KV_{BALDE}"),
        description: Some(
            "mensageria: what every app on a stream agrees on (ordered lanes, layout)".to_owned(),
        ),
        subjects: vec![format!("$KV.{BALDE}.>")],
        max_messages_per_subject: 1,
        storage: stream::StorageType::File,
        allow_rollup: true,
        deny_delete: true,
        allow_direct: true,
        discard: stream::DiscardPolicy::New,
        num_replicas: replicas,
        ..Default::default()
    };
    let criacao = js.create_stream(config).await;
    js.get_key_value(BALDE).await.map_err(|erro| match criacao {
        Err(criacao) => ErroNats::jetstream("creating the topology bucket")(Box::new(criacao)),
        Ok(_) => ErroNats::jetstream("opening the topology bucket")(Box::new(erro)),
    })
}
