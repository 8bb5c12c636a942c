//! `mensageria contratos verificar OLD NEW`: two directories of an app's contracts compared
//! ([`mensageria_core::contratos::comparar`]); files only, no database.

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
    let AcaoContratos::Verificar { antigo, novo } = acao;
    let ler =
        |dir: &Path| contratos::ler_diretorio(dir).map_err(|e| ErroCli::Contratos(e.to_string()));
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
