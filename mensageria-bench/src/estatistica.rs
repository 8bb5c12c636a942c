//! Medians, extremes and percentiles of repeated measurements.

/// The median of `valores` (0 when empty).
pub(crate) fn mediana(valores: &[f64]) -> f64 {
    percentil(valores, 50.0)
}

/// The `p`-th percentile (nearest rank) of `valores` (0 when empty).
pub(crate) fn percentil(valores: &[f64], p: f64) -> f64 {
    if valores.is_empty() {
        return 0.0;
    }
    let mut ordenados = valores.to_vec();
    ordenados.sort_by(f64::total_cmp);
    let posicao = ((p / 100.0) * ordenados.len() as f64).ceil() as usize;
    ordenados[posicao.clamp(1, ordenados.len()) - 1]
}

pub(crate) fn minimo(valores: &[f64]) -> f64 {
    valores.iter().copied().fold(f64::INFINITY, f64::min)
}

pub(crate) fn maximo(valores: &[f64]) -> f64 {
    valores.iter().copied().fold(f64::NEG_INFINITY, f64::max)
}

#[cfg(test)]
mod testes {
    use super::*;

    #[test]
    fn percentis_por_posicao() {
        let v = [5.0, 1.0, 4.0, 2.0, 3.0];
        assert_eq!(mediana(&v), 3.0);
        assert_eq!(percentil(&v, 99.0), 5.0);
        assert_eq!(percentil(&v, 1.0), 1.0);
        assert_eq!(mediana(&[]), 0.0);
        assert_eq!((minimo(&v), maximo(&v)), (1.0, 5.0));
    }
}
