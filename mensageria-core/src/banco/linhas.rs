//! The rows both backends read, as tuples in the columns' order, and their conversion into the
//! public rows of [`crate::operacoes`]: each backend's file holds the SQL, this file the one
//! mapping. A message id comes as the backend stores it (`uuid` or text) and is decoded by the
//! caller's `id`.

use uuid::Uuid;

use crate::operacoes::{
    FilaDoTipo, Instancia, Morta, MortaListada, MortaRecebida, MortasDoTipo, Reivindicacao,
    TentativasDoTipo,
};

/// `tipo, total, em_voo, idade_mais_antiga_ms, atras_de_morta`.
pub(crate) type LinhaFila = (String, i64, i64, i64, i64);

pub(crate) fn fila(linhas: Vec<LinhaFila>) -> Vec<FilaDoTipo> {
    linhas
        .into_iter()
        .map(
            |(tipo, total, em_voo, idade_mais_antiga_ms, atras_de_morta)| FilaDoTipo {
                tipo,
                total,
                em_voo,
                idade_mais_antiga_ms,
                atras_de_morta,
            },
        )
        .collect()
}

/// `tipo, tentativas, mensagens`.
pub(crate) type LinhaTentativas = (String, i64, i64);

pub(crate) fn tentativas(linhas: Vec<LinhaTentativas>) -> Vec<TentativasDoTipo> {
    linhas
        .into_iter()
        .map(|(tipo, tentativas, mensagens)| TentativasDoTipo {
            tipo,
            tentativas,
            mensagens,
        })
        .collect()
}

/// `tipo, mortas`.
pub(crate) type LinhaMortas = (String, i64);

pub(crate) fn mortas_por_tipo(linhas: Vec<LinhaMortas>) -> Vec<MortasDoTipo> {
    linhas
        .into_iter()
        .map(|(tipo, mortas)| MortasDoTipo { tipo, mortas })
        .collect()
}

/// `app, tipo, visto_ha_ms, visto_em_ms`.
pub(crate) type LinhaReivindicacao = (String, String, i64, i64);

pub(crate) fn reivindicacoes(linhas: Vec<LinhaReivindicacao>) -> Vec<Reivindicacao> {
    linhas
        .into_iter()
        .map(|(app, tipo, visto_ha_ms, visto_em_ms)| Reivindicacao {
            app,
            tipo,
            visto_ha_ms,
            visto_em_ms,
        })
        .collect()
}

/// `instancia, app, iniciada_em_ms, visto_em_ms, visto_ha_ms, morta_apos_ms, parada_em_ms,
/// recuperada_em_ms, em_voo`.
pub(crate) type LinhaInstancia = (
    String,
    String,
    i64,
    i64,
    i64,
    i64,
    Option<i64>,
    Option<i64>,
    i64,
);

pub(crate) fn instancias(linhas: Vec<LinhaInstancia>) -> Vec<Instancia> {
    linhas
        .into_iter()
        .map(
            |(
                instancia,
                app,
                iniciada_em_ms,
                visto_em_ms,
                visto_ha_ms,
                morta_apos_ms,
                parada_em_ms,
                recuperada_em_ms,
                em_voo,
            )| Instancia {
                instancia,
                app,
                iniciada_em_ms,
                visto_em_ms,
                visto_ha_ms,
                morta_apos_ms,
                parada_em_ms,
                recuperada_em_ms,
                em_voo,
            },
        )
        .collect()
}

/// `id_mensagem, tipo, tentativas, app, morta_em_ms, morta_ha_ms, ultimo_erro`.
pub(crate) type LinhaMortaListada<Id> = (Id, String, i64, Option<String>, i64, i64, String);

pub(crate) fn mortas_listadas<Id>(
    linhas: Vec<LinhaMortaListada<Id>>,
    id: impl Fn(Id) -> Result<Uuid, sqlx::Error>,
) -> Result<Vec<MortaListada>, sqlx::Error> {
    linhas
        .into_iter()
        .map(
            |(id_mensagem, tipo, tentativas, app, morta_em_ms, morta_ha_ms, ultimo_erro)| {
                Ok(MortaListada {
                    id_mensagem: id(id_mensagem)?,
                    tipo,
                    tentativas,
                    app,
                    morta_em_ms,
                    morta_ha_ms: morta_ha_ms.max(0),
                    ultimo_erro,
                })
            },
        )
        .collect()
}

/// `id_mensagem, tipo, tentativas, ultimo_erro, app, correlacao, criada_em_ms, morta_em_ms,
/// morta_ha_ms, payload, traceparent`.
pub(crate) type LinhaMorta<Id> = (
    Id,
    String,
    i64,
    String,
    Option<String>,
    Option<String>,
    i64,
    i64,
    i64,
    String,
    Option<String>,
);

pub(crate) fn morta<Id>(
    linha: Option<LinhaMorta<Id>>,
    id: impl Fn(Id) -> Result<Uuid, sqlx::Error>,
) -> Result<Option<Morta>, sqlx::Error> {
    linha
        .map(
            |(
                id_mensagem,
                tipo,
                tentativas,
                ultimo_erro,
                app,
                correlacao,
                criada_em_ms,
                morta_em_ms,
                morta_ha_ms,
                payload,
                traceparent,
            )| {
                Ok(Morta {
                    id_mensagem: id(id_mensagem)?,
                    tipo,
                    tentativas,
                    ultimo_erro,
                    app,
                    correlacao,
                    criada_em_ms,
                    morta_em_ms,
                    morta_ha_ms: morta_ha_ms.max(0),
                    payload,
                    traceparent,
                })
            },
        )
        .transpose()
}

/// `tipo, tipo_da_cabeca, cabeca_morta (0/1), linhas, chaves, exemplo`.
pub(crate) type LinhaRetida = (String, String, i64, i64, i64, String);

pub(crate) fn retidas(linhas: Vec<LinhaRetida>) -> Vec<crate::operacoes::Retida> {
    linhas
        .into_iter()
        .map(
            |(tipo, tipo_da_cabeca, morta, linhas, chaves, exemplo)| crate::operacoes::Retida {
                tipo,
                tipo_da_cabeca,
                cabeca_morta: morta != 0,
                linhas,
                chaves,
                exemplo,
            },
        )
        .collect()
}

/// `seq_ordem, id_mensagem, tipo, morta (0/1), tentativas, em_voo (0/1), lease_dono,
/// proxima_em_ms (from now; saída only), idade_ms, ultimo_erro, app (dead letters only)`.
pub(crate) type LinhaDaChave<Id> = (
    i64,
    Id,
    String,
    i64,
    i64,
    i64,
    Option<String>,
    Option<i64>,
    i64,
    Option<String>,
    Option<String>,
);

pub(crate) fn fila_da_chave<Id>(
    linhas: Vec<LinhaDaChave<Id>>,
    id: impl Fn(Id) -> Result<Uuid, sqlx::Error>,
) -> Result<Vec<crate::operacoes::PosicaoNaChave>, sqlx::Error> {
    linhas
        .into_iter()
        .map(
            |(
                seq_ordem,
                id_mensagem,
                tipo,
                morta,
                tentativas,
                em_voo,
                lease_dono,
                proxima_em_ms,
                idade_ms,
                ultimo_erro,
                app,
            )| {
                Ok(crate::operacoes::PosicaoNaChave {
                    seq_ordem,
                    id_mensagem: id(id_mensagem)?,
                    tipo,
                    morta: morta != 0,
                    tentativas,
                    em_voo: em_voo != 0,
                    lease_dono,
                    proxima_em_ms,
                    idade_ms: idade_ms.max(0),
                    ultimo_erro,
                    app,
                })
            },
        )
        .collect()
}

/// A receiver-side dead letter's columns, in the order both backends select them; the message
/// id as the backend stores it (`uuid` or text).
pub(crate) type LinhaMortaRecebida<Id> = (
    String,
    Id,
    String,
    String,
    String,
    Option<String>,
    String,
    i64,
    i64,
    Option<String>,
    Option<String>,
    Option<i64>,
    Option<String>,
);

pub(crate) fn mortas_recebidas<Id>(
    linhas: Vec<LinhaMortaRecebida<Id>>,
    id: impl Fn(Id) -> Uuid,
) -> Vec<MortaRecebida> {
    linhas
        .into_iter()
        .map(
            |(
                app,
                id_mensagem,
                tipo,
                origem,
                payload,
                correlacao,
                motivo,
                entregas,
                em,
                traceparent,
                tracestate,
                sequencia,
                chave_ordem,
            )| {
                MortaRecebida {
                    app,
                    id_mensagem: id(id_mensagem),
                    tipo,
                    origem,
                    payload,
                    correlacao,
                    motivo,
                    entregas,
                    morta_em_ms: em,
                    traceparent,
                    tracestate,
                    sequencia,
                    chave_ordem,
                }
            },
        )
        .collect()
}

/// `app, tipo, mortas`.
pub(crate) type LinhaMortasRecebidas = (String, String, i64);

pub(crate) fn mortas_recebidas_por_tipo(
    linhas: Vec<LinhaMortasRecebidas>,
) -> Vec<crate::operacoes::MortasRecebidasDoTipo> {
    linhas
        .into_iter()
        .map(|(app, tipo, mortas)| crate::operacoes::MortasRecebidasDoTipo { app, tipo, mortas })
        .collect()
}

/// `app, tipo, registros, newest record's age in ms`.
pub(crate) type LinhaRecebidasDoApp = (String, String, i64, i64);

pub(crate) fn recebidas_por_app(
    linhas: Vec<LinhaRecebidasDoApp>,
) -> Vec<crate::operacoes::RecebidasDoApp> {
    linhas
        .into_iter()
        .map(
            |(app, tipo, registros, mais_recente_ha_ms)| crate::operacoes::RecebidasDoApp {
                app,
                tipo,
                registros,
                mais_recente_ha_ms: mais_recente_ha_ms.max(0),
            },
        )
        .collect()
}

/// `app, tipo, transporte, visto_ha_ms, pendentes, em_voo, reentregues, mais_antiga_ms,
/// max_age_ms` (the last five NULL over HTTP).
pub(crate) type LinhaReceptor = (
    String,
    String,
    String,
    i64,
    Option<i64>,
    Option<i64>,
    Option<i64>,
    Option<i64>,
    Option<i64>,
);

pub(crate) fn receptores(linhas: Vec<LinhaReceptor>) -> Vec<crate::operacoes::ReceptorDoApp> {
    linhas
        .into_iter()
        .map(
            |(
                app,
                tipo,
                transporte,
                visto_ha_ms,
                pendentes,
                em_voo,
                reentregues,
                antiga,
                max_age,
            )| {
                let consumo = pendentes.map(|pendentes| crate::operacoes::Consumo {
                    pendentes,
                    em_voo: em_voo.unwrap_or(0),
                    reentregues: reentregues.unwrap_or(0),
                    mais_antiga_ms: antiga.unwrap_or(0),
                    max_age_ms: max_age.unwrap_or(0),
                });
                crate::operacoes::ReceptorDoApp {
                    app,
                    tipo,
                    transporte,
                    visto_ha_ms: visto_ha_ms.max(0),
                    consumo,
                }
            },
        )
        .collect()
}
