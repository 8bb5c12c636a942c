//! Parked keys, retried: an ordered lane's message that kept failing temporarily is parked (kept
//! as a `parked` dead letter, its key's later messages held behind it) so the lane's other keys
//! go on. This task retries each parked key in process, in the key's order
//! ([`mensageria_axum::recepcao::reaplicar_chave`]), every `intervalo` at the soonest and with a
//! backoff per key, until it applies; then the key's held messages follow, in order.

use std::collections::HashMap;
use std::time::Duration;

use mensageria_core::Banco;
use mensageria_core::operacoes;
use mensageria_core::sqlx::Pool;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// How many of the app's dead letters one round looks at.
const POR_RODADA: i64 = 1000;

pub(crate) struct Retomada<DB: Banco> {
    pub(crate) pool: Pool<DB>,
    pub(crate) app: String,
    pub(crate) intervalo: Duration,
    pub(crate) base: Duration,
    pub(crate) maximo: Duration,
}

impl<DB: Banco> Retomada<DB> {
    pub(crate) async fn rodar(self, cancelar: CancellationToken) {
        // Per parked key: failed rounds so far and when to try again.
        let mut agenda: HashMap<String, (u32, Instant)> = HashMap::new();
        loop {
            tokio::select! {
                _ = cancelar.cancelled() => return,
                _ = tokio::time::sleep(self.intervalo) => {}
            }
            let Ok(mortas) =
                operacoes::mortas_recebidas(&self.pool, Some(&self.app), POR_RODADA).await
            else {
                continue; // the database is down: the next round asks again
            };
            let mut chaves: Vec<String> = mortas
                .into_iter()
                .filter(|morta| morta.motivo.starts_with("parked:"))
                .filter_map(|morta| morta.chave_ordem)
                .collect();
            chaves.sort_unstable();
            chaves.dedup();
            agenda.retain(|chave, _| chaves.contains(chave));
            let agora = Instant::now();
            for chave in chaves {
                if agenda
                    .get(&chave)
                    .is_some_and(|(_, quando)| *quando > agora)
                {
                    continue;
                }
                if cancelar.is_cancelled() {
                    return;
                }
                let feito =
                    mensageria_axum::recepcao::reaplicar_chave(&self.pool, &self.app, &chave).await;
                match feito {
                    Ok(feito) if feito.mantidas == 0 => {
                        tracing::info!(app = %self.app, chave = %chave, aplicadas = feito.aplicadas, "mensageria nats: a parked key applied; its held messages followed in order");
                        agenda.remove(&chave);
                    }
                    outro => {
                        let falhas = agenda.get(&chave).map_or(1, |(falhas, _)| falhas + 1);
                        let espera = self
                            .base
                            .saturating_mul(2_u32.saturating_pow(falhas.min(20)))
                            .min(self.maximo);
                        tracing::warn!(app = %self.app, chave = %chave, falhas, retry_in_ms = u64::try_from(espera.as_millis()).unwrap_or(u64::MAX), resultado = ?outro.map(|f| f.mantidas), "mensageria nats: a parked key still fails; retried later");
                        agenda.insert(chave, (falhas, Instant::now() + espera));
                    }
                }
            }
        }
    }
}
