//! The registry of enviadores, built at link time.
//!
//! Each `#[enviador]` submits one [`EnviadorRegistrado`] through `inventory`; nobody writes a
//! list of tipos. The relay claims exactly [`Registro::tipos`], and
//! [`enfileirar_json`](crate::enfileirar_json) refuses any other tipo.
//!
//! # Linking caveat
//!
//! The linker drops a crate that nothing in the binary references, and its registrations go with
//! it. The typed path cannot hit this silently: `enfileirar(&mut *tx, &evento)` names the payload
//! type, and naming it links the crate that holds its `#[enviador]` when the type is that crate's
//! own; for a contracts crate's [`Evento`](crate::enviador::Evento), a crate of enviadores that nothing
//! names is not loaded, so `enfileirar` does not compile (no `Enviador` impl) until the binary
//! names it (`use remetente as _;`). A binary that only enqueues through
//! [`enfileirar_json`](crate::enfileirar_json), or only runs a relay, must still reference each
//! crate of enviadores (for example `use enviadores_fiscais as _;` in `main.rs`), and should check
//! at start that [`Registro::tipos`] is what it expects.

use std::collections::HashMap;
use std::sync::OnceLock;

use crate::despacho::EnvioEmCurso;
use crate::enviador::{ContextoEnvio, FalhaEnvio};
use crate::erro::Erro;

/// One `#[enviador]`, as registered at link time.
#[derive(Debug)]
pub struct EnviadorRegistrado {
    /// The tipo it sends.
    pub tipo: &'static str,
    /// The payload type, as written in the source.
    pub tipo_rust: &'static str,
    /// The module of the `#[enviador]` function.
    pub modulo: &'static str,
    /// The name of the `#[enviador]` function.
    pub funcao: &'static str,
    /// The ordering key's expression (`#[enviador(ordem = ...)]`), as written.
    pub chave_de_ordem: Option<&'static str>,
    /// The payload's JSON Schema, when its type derives `utoipa::ToSchema` (its contract,
    /// [`crate::contratos`]).
    pub esquema: fn() -> Option<serde_json::Value>,
    /// Decodes a stored payload and calls the function.
    pub(crate) despachar: for<'a> fn(&'a str, &'a ContextoEnvio) -> EnvioEmCurso<'a>,
}

inventory::collect!(EnviadorRegistrado);

impl EnviadorRegistrado {
    /// `module::function(Type)`, to name it in messages.
    pub fn descricao(&self) -> String {
        format!("{}::{}({})", self.modulo, self.funcao, self.tipo_rust)
    }

    /// Decodes a stored payload as this enviador's type and calls its function, as the relay
    /// does for each delivery. A payload that does not decode is a permanent failure.
    pub async fn despachar(&self, payload: &str, ctx: &ContextoEnvio) -> Result<(), FalhaEnvio> {
        (self.despachar)(payload, ctx).await
    }
}

/// The enviadores linked into this binary.
///
/// ```
/// use mensageria_core::Registro;
/// // A binary with no #[enviador] (a pure receiver) registers nothing.
/// assert!(Registro::global().tipos().is_empty());
/// assert!(Registro::global().validar().is_ok());
/// ```
#[derive(Debug)]
#[doc(alias = "registry")]
pub struct Registro {
    por_tipo: HashMap<&'static str, &'static EnviadorRegistrado>,
    tipos: Vec<&'static str>,
    duplicados: Vec<(&'static EnviadorRegistrado, &'static EnviadorRegistrado)>,
}

impl Registro {
    /// The registry of this binary, collected once.
    pub fn global() -> &'static Registro {
        static GLOBAL: OnceLock<Registro> = OnceLock::new();
        GLOBAL.get_or_init(|| Registro::de(inventory::iter::<EnviadorRegistrado>))
    }

    fn de(enviadores: impl IntoIterator<Item = &'static EnviadorRegistrado>) -> Self {
        let mut por_tipo = HashMap::new();
        let mut duplicados = Vec::new();
        for enviador in enviadores {
            if let Some(primeiro) = por_tipo.insert(enviador.tipo, enviador) {
                // Keep the first one so lookups are stable; `validar` reports the pair.
                por_tipo.insert(enviador.tipo, primeiro);
                duplicados.push((primeiro, enviador));
            }
        }
        let mut tipos: Vec<_> = por_tipo.keys().copied().collect();
        tipos.sort_unstable();
        Self {
            por_tipo,
            tipos,
            duplicados,
        }
    }

    /// The tipos this binary can send, sorted: exactly what its relay claims.
    pub fn tipos(&self) -> &[&'static str] {
        &self.tipos
    }

    /// The enviador of `tipo`, if this binary has one.
    pub fn enviador(&self, tipo: &str) -> Option<&'static EnviadorRegistrado> {
        self.por_tipo.get(tipo).copied()
    }

    /// Every registered enviador, in tipo order.
    pub fn enviadores(&self) -> impl Iterator<Item = &'static EnviadorRegistrado> + '_ {
        self.tipos.iter().map(|tipo| self.por_tipo[tipo])
    }

    /// Checks the registry as a whole: every tipo is valid and none has two enviadores.
    ///
    /// Two `#[enviador]` with one tipo in the same crate do not compile; in two different crates
    /// of one binary only this check sees them. The relay runs it before it starts; call it at
    /// start-up if the binary enqueues without running a relay.
    pub fn validar(&self) -> Result<(), Erro> {
        if let Some((primeiro, segundo)) = self.duplicados.first() {
            return Err(Erro::TipoDuplicado {
                tipo: primeiro.tipo,
                primeiro: primeiro.descricao(),
                segundo: segundo.descricao(),
            });
        }
        self.tipos
            .iter()
            .try_for_each(|tipo| crate::tipo::validar(tipo))
    }
}

#[cfg(test)]
mod testes {
    use super::*;

    fn falso<'a>(_: &'a str, _: &'a ContextoEnvio) -> EnvioEmCurso<'a> {
        Box::pin(std::future::ready(Ok(())))
    }

    fn vazar(tipo: &'static str, modulo: &'static str) -> &'static EnviadorRegistrado {
        Box::leak(Box::new(EnviadorRegistrado {
            tipo,
            tipo_rust: "Evento",
            modulo,
            funcao: "enviar",
            chave_de_ordem: None,
            esquema: || None,
            despachar: falso,
        }))
    }

    #[test]
    fn tipo_em_dois_crates_e_nomeado_com_os_dois_tipos_rust() {
        let registro = Registro::de([
            vazar("a.b", "crate_um::saida"),
            vazar("c", "crate_um"),
            vazar("a.b", "crate_dois::saida"),
        ]);
        assert_eq!(registro.tipos(), ["a.b", "c"]);
        let erro = registro.validar().unwrap_err().to_string();
        assert!(erro.contains("crate_um::saida::enviar(Evento)"), "{erro}");
        assert!(erro.contains("crate_dois::saida::enviar(Evento)"), "{erro}");
        assert_eq!(registro.enviador("a.b").unwrap().modulo, "crate_um::saida");
    }
}
