//! Keys that go on by themselves. An ordered lane's message that kept failing temporarily is
//! parked (kept as a `parked` dead letter, its key's later messages held behind it) so the lane's
//! other keys go on; and a `held` dead letter with nothing before it any more (the one it waited
//! behind was replayed, applied or discarded, possibly while it was being held) has nothing left
//! to wait for. This task finds such keys every `intervalo` and applies their dead letters in
//! process, in the key's order ([`mensageria_axum::recepcao::reaplicar_em_ordem`]), with a backoff
//! per key, until they apply. A key whose first dead letter was refused for good (`rejected`,
//! `gave_up`, `expired`) waits for an operator: each round only looks whether its first dead
//! letter is still the same one (one index probe), so a discard or a replay takes effect at the
//! next round (it waited 30 s: a key held behind a dead letter discarded just after a round saw
//! it stayed held that long).

use std::collections::HashMap;
use std::time::Duration;

use mensageria_core::Banco;
use mensageria_core::operacoes;
use mensageria_core::sqlx::Pool;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

/// How long a key left to another binary of the app, or to an operator, goes without a full
/// look (an operator's key is still probed every round: see [`Espera::cabeca`]).
const ESPERA_DO_OPERADOR: Duration = Duration::from_secs(30);

/// Why and until when a key is left alone.
struct Espera {
    /// Failed rounds so far (the backoff of a parked key that still fails).
    falhas: u32,
    quando: Instant,
    /// The first dead letter an operator has to act on: while it is still the key's first, the
    /// key waits; once it is gone (discarded, replayed), the key is looked at again at once.
    cabeca: Option<Uuid>,
}

impl Espera {
    fn por(falhas: u32, espera: Duration, cabeca: Option<Uuid>) -> Self {
        Self {
            falhas,
            quando: Instant::now() + espera,
            cabeca,
        }
    }
}

pub(crate) struct Retomada<DB: Banco> {
    pub(crate) pool: Pool<DB>,
    pub(crate) app: String,
    pub(crate) intervalo: Duration,
    pub(crate) base: Duration,
    pub(crate) maximo: Duration,
}

impl<DB: Banco> Retomada<DB> {
    pub(crate) async fn rodar(self, cancelar: CancellationToken) {
        let mut agenda: HashMap<String, Espera> = HashMap::new();
        loop {
            tokio::select! {
                _ = cancelar.cancelled() => return,
                _ = tokio::time::sleep(self.intervalo) => {}
            }
            let Ok(chaves) = operacoes::chaves_a_retomar(&self.pool, &self.app).await else {
                continue; // the database is down: the next round asks again
            };
            agenda.retain(|chave, _| chaves.contains(chave));
            for chave in chaves {
                if let Some(espera) = agenda.get(&chave)
                    && espera.quando > Instant::now()
                    && !self.cabeca_mudou(&chave, espera.cabeca).await
                {
                    continue;
                }
                if cancelar.is_cancelled() {
                    return;
                }
                self.retomar(chave, &mut agenda).await;
            }
        }
    }

    /// Whether the key's first dead letter is no longer `cabeca`, the one an operator had to act
    /// on (false when the key waits for something else, or the database does not answer).
    async fn cabeca_mudou(&self, chave: &str, cabeca: Option<Uuid>) -> bool {
        let Some(cabeca) = cabeca else {
            return false;
        };
        operacoes::morta_recebida_que_retem(&self.pool, &self.app, chave, i64::MAX)
            .await
            .is_ok_and(|primeira| primeira != Some(cabeca))
    }

    /// Applies `chave`'s dead letters in order when its first one is its consumer's to resume.
    async fn retomar(&self, chave: String, agenda: &mut HashMap<String, Espera>) {
        let Ok(da_chave) =
            operacoes::mortas_recebidas_da_chave(&self.pool, &self.app, &chave).await
        else {
            return; // the database is down: the next round asks again
        };
        let Some(primeira) = da_chave.first() else {
            return;
        };
        if !(primeira.motivo.starts_with("parked:") || primeira.motivo.starts_with("held:")) {
            let cabeca = Some(primeira.id_mensagem);
            agenda.insert(chave, Espera::por(0, ESPERA_DO_OPERADOR, cabeca));
            return;
        }
        let feito =
            mensageria_axum::recepcao::reaplicar_em_ordem(&self.pool, &self.app, &da_chave).await;
        match feito {
            // The key's next dead letter is of a tipo another binary of the app receives (after
            // those applied here, if any): that binary's consumer resumes it.
            Ok(feito) if feito.sem_receptor > 0 => {
                agenda.insert(chave, Espera::por(0, ESPERA_DO_OPERADOR, None));
            }
            Ok(feito) if feito.mantidas == 0 => {
                tracing::info!(app = %self.app, chave = %chave, aplicadas = feito.aplicadas, "mensageria nats: an ordered key went on; its held messages followed in order");
                agenda.remove(&chave);
            }
            outro => {
                let falhas = agenda.get(&chave).map_or(1, |espera| espera.falhas + 1);
                let espera = self
                    .base
                    .saturating_mul(2_u32.saturating_pow(falhas.min(20)))
                    .min(self.maximo);
                tracing::warn!(app = %self.app, chave = %chave, falhas, retry_in_ms = u64::try_from(espera.as_millis()).unwrap_or(u64::MAX), resultado = ?outro.map(|f| f.mantidas), "mensageria nats: a parked key still fails; retried later");
                agenda.insert(chave, Espera::por(falhas, espera, None));
            }
        }
    }
}
