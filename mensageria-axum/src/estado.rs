//! The state every receptor route shares: the pool and the configuration.

use std::sync::Arc;

use mensageria_core::Banco;
use mensageria_core::sqlx::Pool;

use crate::Config;
use crate::admissao::Admissao;

/// The receptores' state. Compose it into your own state with `FromRef` to mount receptores
/// one by one with [`rota`](crate::rota).
pub struct Estado<DB: Banco> {
    pub(crate) pool: Pool<DB>,
    pub(crate) config: Arc<Config>,
    pub(crate) admissao: Arc<Admissao>,
}

impl<DB: Banco> Clone for Estado<DB> {
    fn clone(&self) -> Self {
        Self {
            pool: self.pool.clone(),
            config: Arc::clone(&self.config),
            admissao: Arc::clone(&self.admissao),
        }
    }
}

impl<DB: Banco> Estado<DB> {
    /// Checks `config` and builds the state.
    pub fn new(pool: Pool<DB>, config: Config) -> Result<Self, mensageria_core::Erro> {
        config.validar()?;
        Ok(Self {
            pool,
            admissao: Arc::new(Admissao::new(config.espera_por_conexao)),
            config: Arc::new(config),
        })
    }

    /// The pool.
    pub fn pool(&self) -> &Pool<DB> {
        &self.pool
    }
}
