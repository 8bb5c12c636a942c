//! Durations as operators type and read them: `7d`, `12h`, `1d12h`, `90m`, `30s`, or a bare
//! number of hours.

use std::time::Duration;

/// Parses `7d`, `12h`, `30m`, `45s`, combinations such as `1d12h`, or a bare number (hours).
/// For clap's `value_parser`.
pub(crate) fn analisar(texto: &str) -> Result<Duration, String> {
    let texto = texto.trim();
    if texto.is_empty() {
        return Err("empty duration; write e.g. 7d, 12h, 30m or 45s".into());
    }
    if let Ok(horas) = texto.parse::<u64>() {
        return horas
            .checked_mul(3600)
            .map(Duration::from_secs)
            .ok_or_else(|| format!("`{texto}` hours is too long"));
    }
    let mut total: u64 = 0;
    let mut numero = String::new();
    for c in texto.chars() {
        if c.is_ascii_digit() {
            numero.push(c);
            continue;
        }
        let unidade = match c {
            'd' => 86_400,
            'h' => 3_600,
            'm' => 60,
            's' => 1,
            _ => {
                return Err(format!(
                    "`{texto}`: unknown unit `{c}`; use d, h, m or s (e.g. 7d, 1d12h, 90m)"
                ));
            }
        };
        let valor: u64 = numero
            .parse()
            .map_err(|_| format!("`{texto}`: a number must come before `{c}`"))?;
        numero.clear();
        total = valor
            .checked_mul(unidade)
            .and_then(|s| total.checked_add(s))
            .ok_or_else(|| format!("`{texto}` is too long"))?;
    }
    if !numero.is_empty() {
        return Err(format!(
            "`{texto}`: the last number has no unit; use d, h, m or s"
        ));
    }
    Ok(Duration::from_secs(total))
}

/// A duration for people: `45s`, `3m 12s`, `2h 05m`, `4d 03h`, `7d 00h 06m` (seconds dropped
/// past an hour, minutes past a day unless they matter).
pub(crate) fn humana(duracao: Duration) -> String {
    let s = duracao.as_secs();
    match s {
        0..60 => format!("{s}s"),
        60..3_600 => format!("{}m {:02}s", s / 60, s % 60),
        3_600..86_400 => format!("{}h {:02}m", s / 3_600, s % 3_600 / 60),
        _ if s % 3_600 / 60 == 0 => format!("{}d {:02}h", s / 86_400, s % 86_400 / 3_600),
        _ => format!(
            "{}d {:02}h {:02}m",
            s / 86_400,
            s % 86_400 / 3_600,
            s % 3_600 / 60
        ),
    }
}

/// [`humana`] of a number of milliseconds (negative, from clock skew, reads as 0s).
pub(crate) fn humana_ms(ms: i64) -> String {
    humana(Duration::from_millis(u64::try_from(ms).unwrap_or(0)))
}

#[cfg(test)]
mod testes {
    use super::*;

    #[test]
    fn le_o_que_operadores_escrevem() {
        assert_eq!(analisar("7d"), Ok(Duration::from_secs(7 * 86_400)));
        assert_eq!(analisar("12h"), Ok(Duration::from_secs(12 * 3_600)));
        assert_eq!(analisar("1d12h"), Ok(Duration::from_secs(36 * 3_600)));
        assert_eq!(analisar("90m"), Ok(Duration::from_secs(5_400)));
        assert_eq!(analisar("45s"), Ok(Duration::from_secs(45)));
        assert_eq!(analisar("48"), Ok(Duration::from_secs(48 * 3_600)));
    }

    #[test]
    fn recusa_o_que_nao_entende() {
        assert!(analisar("").is_err());
        assert!(analisar("7x").is_err());
        assert!(analisar("d").is_err());
        assert!(analisar("7d3").is_err());
        assert!(analisar("-1d").is_err());
        assert!(analisar("99999999999999999999d").is_err());
    }

    #[test]
    fn escreve_para_pessoas() {
        assert_eq!(humana(Duration::from_secs(45)), "45s");
        assert_eq!(humana(Duration::from_secs(192)), "3m 12s");
        assert_eq!(humana(Duration::from_secs(2 * 3_600 + 300)), "2h 05m");
        assert_eq!(
            humana(Duration::from_secs(4 * 86_400 + 3 * 3_600)),
            "4d 03h"
        );
        assert_eq!(humana(Duration::from_secs(7 * 86_400 + 360)), "7d 00h 06m");
        assert_eq!(humana_ms(-5), "0s");
    }
}
