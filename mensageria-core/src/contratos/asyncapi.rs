//! The AsyncAPI 3.0 document of an app's JetStream channels, from its contracts: a channel per
//! subject (a tipo's `{prefixo}.{tipo}`, and its ordered lanes `{prefixo}._ordem.{faixa}.{tipo}`),
//! a message per tipo with its payload's schema and the headers every message carries
//! (`Nats-Msg-Id`, the CloudEvents attributes, the trace context, the correlation id), and a
//! `send` or `receive` operation per side the app has.

use serde_json::{Map, Value, json};

use super::{Contrato, Lado};

/// What the document says of the app and its stream.
#[derive(Clone, Debug)]
pub struct Canais<'a> {
    /// The app's name (the document's title).
    pub app: &'a str,
    /// The app's version.
    pub versao: &'a str,
    /// The stream's name.
    pub fluxo: &'a str,
    /// The stream's subject prefix (`Fluxo::new(nome, prefixo)`).
    pub prefixo: &'a str,
}

/// The AsyncAPI 3.0 document of `contratos` on the stream `canais` describes.
///
/// ```
/// use mensageria_core::contratos::{Contrato, Lado, asyncapi::{Canais, documento}};
///
/// let contrato = Contrato {
///     tipo: "pedido.criado".into(),
///     compatibilidade: Default::default(),
///     envio: Some(Lado { tipo_rust: "PedidoCriado".into(), esquema: Some(serde_json::json!({"type": "object"})), ..Default::default() }),
///     recepcao: None,
/// };
/// let canais = Canais { app: "pedidos", versao: "1.0.0", fluxo: "LOJA", prefixo: "loja" };
/// let doc = documento(&[contrato], &canais);
/// assert_eq!(doc["asyncapi"], "3.0.0");
/// assert_eq!(doc["channels"]["pedido.criado"]["address"], "loja.pedido.criado");
/// assert_eq!(doc["operations"]["envia.pedido.criado"]["action"], "send");
/// ```
pub fn documento(contratos: &[Contrato], canais: &Canais<'_>) -> Value {
    let mut partes = Partes::default();
    partes
        .esquemas
        .insert("MensageriaCabecalhos".into(), cabecalhos());
    for contrato in contratos {
        partes.acrescentar(contrato, canais.prefixo);
    }
    let Partes {
        canais: canais_json,
        operacoes,
        mensagens,
        esquemas,
    } = partes;
    json!({
        "asyncapi": "3.0.0",
        "info": {
            "title": format!("{} (mensageria)", canais.app),
            "version": canais.versao,
            "description": format!(
                "The events `{}` publishes to and consumes from the JetStream stream `{}`, \
                 written by mensageria from the app's contracts. Delivery is at least once; a \
                 receiver is idempotent by its natural key.",
                canais.app, canais.fluxo
            ),
        },
        "defaultContentType": "application/json",
        "channels": canais_json,
        "operations": operacoes,
        "components": {"messages": mensagens, "schemas": esquemas},
    })
}

/// The document's maps, filled tipo by tipo.
#[derive(Default)]
struct Partes {
    canais: Map<String, Value>,
    operacoes: Map<String, Value>,
    mensagens: Map<String, Value>,
    esquemas: Map<String, Value>,
}

impl Partes {
    /// `contrato`'s messages (one when both sides read and write one schema, one per side
    /// otherwise), its two channels (unordered, and the ordered lanes) and its operations.
    fn acrescentar(&mut self, contrato: &Contrato, prefixo: &str) {
        let tipo = &contrato.tipo;
        let lados: Vec<(&str, &Lado)> =
            [("envia", &contrato.envio), ("recebe", &contrato.recepcao)]
                .into_iter()
                .filter_map(|(nome, lado)| lado.as_ref().map(|l| (nome, l)))
                .collect();
        let um_so = lados.len() == 1
            || lados
                .windows(2)
                .all(|par| par[0].1.esquema == par[1].1.esquema);
        let mut ids = Vec::new();
        for (nome, lado) in &lados {
            let id = if um_so {
                tipo.clone()
            } else {
                format!("{tipo}.{nome}")
            };
            if !self.mensagens.contains_key(&id) {
                let corpo = mensagem(tipo, lado, &id, &mut self.esquemas);
                self.mensagens.insert(id.clone(), corpo);
            }
            ids.push(id);
        }
        let ordenado = format!("{tipo}.ordenado");
        self.canais.insert(
            tipo.clone(),
            canal(
                format!("{prefixo}.{tipo}"),
                format!("Messages of tipo `{tipo}` without an ordering key."),
                &ids,
                None,
            ),
        );
        self.canais.insert(ordenado.clone(), canal(
            format!("{prefixo}._ordem.{{faixa}}.{tipo}"),
            format!(
                "Messages of tipo `{tipo}` with an ordering key, in the key's lane (every tipo of a \
                 key shares its lane, so its steps are applied in order)."
            ),
            &ids,
            Some(json!({"faixa": {"description": "the ordered lane: FNV-1a of the ordering key, modulo the stream's lane count (its topology record in KV bucket mensageria_topologia)"}})),
        ));
        for ((nome, lado), id) in lados.iter().zip(&ids) {
            // A sender publishes to one of the two channels; a receiver consumes both.
            let alvos = match *nome {
                "envia" if lado.chave_de_ordem.is_some() => vec![ordenado.clone()],
                "envia" => vec![tipo.clone()],
                _ => vec![tipo.clone(), ordenado.clone()],
            };
            let acao = if *nome == "envia" { "send" } else { "receive" };
            for alvo in alvos {
                let sufixo = if alvo == ordenado && acao == "receive" {
                    ".ordenado"
                } else {
                    ""
                };
                self.operacoes.insert(
                    format!("{nome}.{tipo}{sufixo}"),
                    json!({
                        "action": acao,
                        "channel": {"$ref": format!("#/channels/{alvo}")},
                        "messages": [{"$ref": format!("#/channels/{alvo}/messages/{id}")}],
                        "summary": format!("`{}` {} it", lado.tipo_rust, if acao == "send" { "publishes" } else { "consumes" }),
                    }),
                );
            }
        }
    }
}

fn canal(endereco: String, descricao: String, ids: &[String], parametros: Option<Value>) -> Value {
    let mensagens: Map<String, Value> = ids
        .iter()
        .map(|id| {
            (
                id.clone(),
                json!({"$ref": format!("#/components/messages/{id}")}),
            )
        })
        .collect();
    let mut canal = json!({"address": endereco, "description": descricao, "messages": mensagens});
    if let Some(parametros) = parametros {
        canal["parameters"] = parametros;
    }
    canal
}

/// The message of `tipo` as `lado` has it; its schema's `$defs` go to the components, named
/// `{id}.{name}`.
fn mensagem(tipo: &str, lado: &Lado, id: &str, esquemas: &mut Map<String, Value>) -> Value {
    let mut mensagem = json!({
        "name": tipo,
        "title": lado.tipo_rust,
        "contentType": "application/json",
        "headers": {"$ref": "#/components/schemas/MensageriaCabecalhos"},
        "correlationId": {"location": "$message.header#/x-correlation-id"},
    });
    let mut descricao = Vec::new();
    if let Some(chave) = &lado.chave_natural {
        descricao.push(format!("natural key: `{chave}`"));
    }
    if let Some(chave) = &lado.chave_de_ordem {
        descricao.push(format!("ordering key: `{chave}`"));
    }
    if let Some(versao) = &lado.versao {
        descricao.push(format!("version: `{versao}` (convergent)"));
    }
    if !descricao.is_empty() {
        mensagem["description"] = Value::String(descricao.join("; "));
    }
    match &lado.esquema {
        Some(esquema) => {
            let mut esquema = esquema.clone();
            if let Some(Value::Object(defs)) =
                esquema.as_object_mut().and_then(|m| m.remove("$defs"))
            {
                for (nome, def) in defs {
                    esquemas.insert(format!("{id}.{nome}"), componentes(def, id));
                }
            }
            mensagem["payload"] = componentes(esquema, id);
        }
        None => {
            mensagem["description"] = Value::String(format!(
                "schema not published: `{}` does not derive utoipa::ToSchema",
                lado.tipo_rust
            ));
        }
    }
    mensagem
}

/// `#/$defs/X` → `#/components/schemas/{id}.X`, everywhere in `valor`.
fn componentes(valor: Value, id: &str) -> Value {
    match valor {
        Value::Object(mapa) => Value::Object(
            mapa.into_iter()
                .map(|(k, v)| match (k.as_str(), v) {
                    ("$ref", Value::String(r)) => {
                        let r = match r.strip_prefix("#/$defs/") {
                            Some(nome) => format!("#/components/schemas/{id}.{nome}"),
                            None => r,
                        };
                        (k, Value::String(r))
                    }
                    (_, v) => (k, componentes(v, id)),
                })
                .collect(),
        ),
        Value::Array(lista) => {
            Value::Array(lista.into_iter().map(|v| componentes(v, id)).collect())
        }
        outro => outro,
    }
}

/// The headers every message carries.
fn cabecalhos() -> Value {
    let texto = |descricao: &str| json!({"type": "string", "description": descricao});
    json!({
        "type": "object",
        "properties": {
            "Nats-Msg-Id": {"type": "string", "format": "uuid", "description": "the message id: the stream's dedup key within its duplicate window"},
            "ce-specversion": texto("CloudEvents spec version, 1.0"),
            "ce-id": texto("CloudEvents id: the message id"),
            "ce-type": texto("CloudEvents type: the tipo"),
            "ce-source": texto("CloudEvents source: the sending app"),
            "ce-time": texto("CloudEvents time: when it was enqueued (RFC 3339)"),
            "ce-partitionkey": texto("CloudEvents partitioning extension: the ordering key, on ordered messages"),
            "ce-traceparent": texto("CloudEvents distributed-tracing extension: the W3C traceparent"),
            "ce-tracestate": texto("CloudEvents distributed-tracing extension: the W3C tracestate"),
            "traceparent": texto("W3C Trace Context of the enqueue, when it was enqueued in a trace"),
            "tracestate": texto("W3C Trace Context state"),
            "x-correlation-id": texto("the correlation id in force when it was enqueued"),
            "content-type": texto("application/json"),
        },
        "required": ["Nats-Msg-Id", "ce-specversion", "ce-id", "ce-type", "ce-source"],
    })
}

#[cfg(test)]
mod testes {
    use super::*;

    fn lado(chave_de_ordem: Option<&str>, esquema: Value) -> Option<Lado> {
        Some(Lado {
            tipo_rust: "Pedido".into(),
            chave_de_ordem: chave_de_ordem.map(str::to_owned),
            esquema: Some(esquema),
            ..Lado::default()
        })
    }

    #[test]
    fn ordenado_publica_na_faixa_recebe_nas_duas_e_defs_viram_componentes() {
        let esquema = json!({
            "type": "object",
            "properties": {"item": {"$ref": "#/$defs/Item"}},
            "$defs": {"Item": {"type": "string"}}
        });
        let contrato = Contrato {
            tipo: "pedido.criado".into(),
            compatibilidade: Default::default(),
            envio: lado(Some("evento.id"), esquema.clone()),
            recepcao: lado(None, esquema),
        };
        let canais = Canais {
            app: "a",
            versao: "1",
            fluxo: "F",
            prefixo: "p",
        };
        let doc = documento(&[contrato], &canais);
        assert_eq!(
            doc["operations"]["envia.pedido.criado"]["channel"]["$ref"],
            "#/channels/pedido.criado.ordenado"
        );
        assert_eq!(
            doc["channels"]["pedido.criado.ordenado"]["address"],
            "p._ordem.{faixa}.pedido.criado"
        );
        for id in ["recebe.pedido.criado", "recebe.pedido.criado.ordenado"] {
            assert_eq!(doc["operations"][id]["action"], "receive", "{id}");
        }
        // One schema on both sides: one message; its $defs under the components, renamed.
        assert_eq!(doc["components"]["messages"].as_object().unwrap().len(), 1);
        assert_eq!(
            doc["components"]["messages"]["pedido.criado"]["payload"]["properties"]["item"]["$ref"],
            "#/components/schemas/pedido.criado.Item"
        );
        assert!(doc["components"]["schemas"]["pedido.criado.Item"].is_object());
    }
}
