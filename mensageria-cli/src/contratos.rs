//! `mensageria contratos verificar OLD NEW`: two directories of an app's contracts compared
//! ([`mensageria_core::contratos::comparar`]); `mensageria contratos asyncapi DIR`: the AsyncAPI
//! document of an app's JetStream channels from its contracts. Files only, no database.

use std::path::Path;

use mensageria_core::contratos::{self, Direcao, Papel, Problema};
use serde::Serialize;

use crate::Desfecho;
use crate::argumentos::AcaoContratos;
use crate::erro::ErroCli;
use crate::saida_formatada::{Relatorio, imprimir};

/// What the check found.
#[derive(Serialize)]
struct Verificacao {
    /// No problem.
    compativel: bool,
    /// Tipos in OLD, the ones checked.
    tipos: usize,
    problemas: Vec<ProblemaJson>,
}

#[derive(Serialize)]
struct ProblemaJson {
    tipo: String,
    /// `sent` or `received`.
    lado: &'static str,
    /// `BACKWARD`, `FORWARD`, or none.
    direcao: Option<&'static str>,
    caminho: String,
    regra: &'static str,
    detalhe: String,
    /// The line the text output prints.
    linha: String,
}

impl From<&Problema> for ProblemaJson {
    fn from(problema: &Problema) -> Self {
        Self {
            tipo: problema.tipo.clone(),
            lado: match problema.papel {
                Papel::Envio => "sent",
                Papel::Recepcao => "received",
            },
            direcao: problema.direcao.map(|d| match d {
                Direcao::Backward => "BACKWARD",
                Direcao::Forward => "FORWARD",
            }),
            caminho: problema.falha.caminho.clone(),
            regra: problema.falha.regra.nome(),
            detalhe: problema.falha.detalhe.clone(),
            linha: problema.to_string(),
        }
    }
}

impl Relatorio for Verificacao {
    fn humano(&self) -> String {
        if self.compativel {
            return format!("compatible: {} tipo(s) checked", self.tipos);
        }
        let mut texto: String = self
            .problemas
            .iter()
            .map(|p| format!("{}\n", p.linha))
            .collect();
        texto.push_str(&format!(
            "incompatible: {} problem(s) in {} tipo(s) checked",
            self.problemas.len(),
            self.tipos
        ));
        texto
    }
}

pub(crate) fn executar(acao: &AcaoContratos, json: bool) -> Result<Desfecho, ErroCli> {
    match acao {
        AcaoContratos::Verificar { antigo, novo } => verificar(antigo, novo, json),
        AcaoContratos::Asyncapi {
            dir,
            app,
            fluxo,
            prefixo,
            versao,
        } => {
            let canais = contratos::asyncapi::Canais {
                app,
                versao,
                fluxo,
                prefixo,
            };
            let documento = contratos::asyncapi::documento(&ler(dir)?, &canais);
            println!(
                "{}",
                serde_json::to_string_pretty(&documento).expect("a document is JSON")
            );
            Ok(Desfecho::Feito)
        }
    }
}

/// The contracts in `dir`.
fn ler(dir: &Path) -> Result<Vec<contratos::Contrato>, ErroCli> {
    contratos::ler_diretorio(dir).map_err(|e| ErroCli::Contratos(e.to_string()))
}

/// `contratos verificar`: one line per problem; `Problemas` (exit 1) when there is any.
fn verificar(antigo: &Path, novo: &Path, json: bool) -> Result<Desfecho, ErroCli> {
    let (antigos, novos) = (ler(antigo)?, ler(novo)?);
    let problemas = contratos::comparar(&antigos, &novos);
    let verificacao = Verificacao {
        compativel: problemas.is_empty(),
        tipos: antigos.len(),
        problemas: problemas.iter().map(ProblemaJson::from).collect(),
    };
    imprimir(&verificacao, json);
    Ok(if verificacao.compativel {
        Desfecho::Feito
    } else {
        Desfecho::Problemas
    })
}
