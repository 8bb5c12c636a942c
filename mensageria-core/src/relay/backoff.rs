//! When to try again: capped exponential backoff with jitter, honouring `Retry-After`.

use std::time::Duration;

/// The longest `Retry-After` honoured: one hour.
pub(crate) const TETO_RETRY_AFTER: Duration = Duration::from_secs(3600);

/// The delay before attempt `tentativa + 1`, after `tentativa` failed attempts (1-based).
///
/// `base · 2^(tentativa−1)`, capped at `max`, then scaled by a random factor in [0.5, 1.0]
/// ("equal jitter": retries of many messages spread out instead of arriving together). A
/// destination's `Retry-After` is a floor: we never come back sooner than it asked (up to
/// [`TETO_RETRY_AFTER`], so a hostile or broken header cannot park a message for days).
pub(crate) fn atraso(
    tentativa: u32,
    base: Duration,
    max: Duration,
    tentar_apos: Option<Duration>,
    sorteio: f64,
) -> Duration {
    let expoente = tentativa.saturating_sub(1).min(30);
    let bruto = base.saturating_mul(1u32 << expoente).min(max);
    let com_jitter = bruto.mul_f64(0.5 + 0.5 * sorteio.clamp(0.0, 1.0));
    match tentar_apos {
        Some(pedido) => com_jitter.max(pedido.min(TETO_RETRY_AFTER)),
        None => com_jitter,
    }
}

#[cfg(test)]
mod testes {
    use super::atraso;
    use std::time::Duration;

    const S: Duration = Duration::from_secs(1);

    #[test]
    fn dobra_ate_o_teto() {
        let max = Duration::from_secs(300);
        let sem_jitter: Vec<_> = (1..=12)
            .map(|t| atraso(t, S, max, None, 1.0).as_secs())
            .collect();
        assert_eq!(
            sem_jitter,
            [1, 2, 4, 8, 16, 32, 64, 128, 256, 300, 300, 300]
        );
        assert_eq!(atraso(u32::MAX, S, max, None, 1.0), max);
    }

    #[test]
    fn jitter_fica_entre_metade_e_o_todo() {
        let max = Duration::from_secs(300);
        assert_eq!(atraso(4, S, max, None, 0.0), Duration::from_secs(4));
        assert_eq!(atraso(4, S, max, None, 0.5), Duration::from_secs(6));
    }

    #[test]
    fn retry_after_e_piso_ate_uma_hora() {
        let max = Duration::from_secs(300);
        assert_eq!(
            atraso(1, S, max, Some(Duration::from_secs(30)), 1.0),
            Duration::from_secs(30)
        );
        assert_eq!(
            atraso(9, S, max, Some(Duration::from_secs(3)), 1.0),
            Duration::from_secs(256)
        );
        assert_eq!(
            atraso(1, S, max, Some(Duration::from_secs(600)), 1.0),
            Duration::from_secs(600)
        );
        assert_eq!(
            atraso(1, S, max, Some(Duration::from_secs(86_400)), 1.0),
            super::TETO_RETRY_AFTER
        );
    }
}
