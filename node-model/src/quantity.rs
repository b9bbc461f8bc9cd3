//! Kubernetes resource quantities (`k8s.io/apimachinery/pkg/api/resource.Quantity`) parsed into the
//! integer units the node model counts in: CPU in millicores, memory in bytes.
//!
//! Grammar (as the API server accepts it):
//! `<quantity> ::= <signedNumber><suffix>`, `<suffix> ::= <binarySI> | <decimalExponent> | <decimalSI>`,
//! binary `Ki Mi Gi Ti Pi Ei`, decimal `n u m "" k M G T P E`, exponent `e<signedNumber>` / `E<signedNumber>`.
//! Like `Quantity.MilliValue()` / `Quantity.Value()`, fractional results are rounded **up**, so a
//! request is never under-counted.

use thiserror::Error;

/// Why a quantity string was refused.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum QuantityError {
    #[error("empty quantity")]
    Empty,
    #[error("quantity {0:?} is not a Kubernetes quantity")]
    Malformed(String),
    #[error("quantity {0:?} has an unknown suffix")]
    UnknownSuffix(String),
    #[error("quantity {0:?} is negative; resource amounts must be zero or more")]
    Negative(String),
    #[error("quantity {0:?} is too large to count")]
    Overflow(String),
}

/// Exponents are bounded so that `10^exp` stays computable; anything beyond overflows anyway.
const MAX_DECIMAL_EXPONENT: i64 = 1_000;

/// CPU quantity in millicores, rounded up (`"250m"` → 250, `"0.1"` → 100, `"1u"` → 1).
pub fn parse_cpu_millis(q: &str) -> Result<i64, QuantityError> {
    parse_scaled(q, 3)
}

/// Memory quantity in bytes, rounded up (`"1Gi"` → 1073741824, `"1k"` → 1000, `"1500m"` → 2).
pub fn parse_memory_bytes(q: &str) -> Result<i64, QuantityError> {
    parse_scaled(q, 0)
}

/// Canonical CPU text: whole cores without a suffix (`"6"`), otherwise millicores (`"250m"`).
pub fn format_cpu_millis(m: i64) -> String {
    if m % 1000 == 0 {
        format!("{}", m / 1000)
    } else {
        format!("{m}m")
    }
}

/// Canonical memory text: the largest binary suffix that divides exactly (`"1Gi"`, `"500Mi"`),
/// otherwise plain bytes.
pub fn format_memory_bytes(b: i64) -> String {
    const UNITS: [(&str, u32); 6] = [
        ("Ei", 60),
        ("Pi", 50),
        ("Ti", 40),
        ("Gi", 30),
        ("Mi", 20),
        ("Ki", 10),
    ];
    if b != 0 {
        for (suffix, shift) in UNITS {
            let unit = 1i64 << shift;
            if b % unit == 0 {
                return format!("{}{suffix}", b / unit);
            }
        }
    }
    format!("{b}")
}

/// Parses `q` and returns `ceil(value * 10^target_exp10)`.
fn parse_scaled(q: &str, target_exp10: i64) -> Result<i64, QuantityError> {
    let text = q.trim();
    if text.is_empty() {
        return Err(QuantityError::Empty);
    }
    let malformed = || QuantityError::Malformed(q.to_string());

    let (negative, unsigned) = match text.as_bytes()[0] {
        b'-' => (true, &text[1..]),
        b'+' => (false, &text[1..]),
        _ => (false, text),
    };
    let number_len = unsigned
        .bytes()
        .take_while(|b| b.is_ascii_digit() || *b == b'.')
        .count();
    let (number, suffix) = unsigned.split_at(number_len);
    let (int_part, frac_part) = match number.split_once('.') {
        Some((i, f)) => (i, f),
        None => (number, ""),
    };
    if (int_part.is_empty() && frac_part.is_empty()) || frac_part.contains('.') {
        return Err(malformed());
    }

    let (exp10, exp2) = parse_suffix(suffix).ok_or_else(|| {
        if suffix.starts_with(['e', 'E']) {
            malformed()
        } else {
            QuantityError::UnknownSuffix(q.to_string())
        }
    })?;

    // Significant digits as one integer; leading zeros carry no value and trailing fractional
    // zeros only shift the exponent, so dropping them keeps long-but-small inputs countable.
    let frac_trimmed = frac_part.trim_end_matches('0');
    let digits: String = format!("{int_part}{frac_trimmed}");
    let digits = digits.trim_start_matches('0');
    let scale10 = exp10 - frac_trimmed.len() as i64 + target_exp10;

    if digits.is_empty() {
        return Ok(0); // "-0" is zero, not a negative amount
    }
    if negative {
        return Err(QuantityError::Negative(q.to_string()));
    }
    let overflow = || QuantityError::Overflow(q.to_string());
    let significand: i128 = digits.parse().map_err(|_| overflow())?;
    let numerator = significand
        .checked_mul(pow_i128(2, exp2).ok_or_else(overflow)?)
        .ok_or_else(overflow)?;

    let value = if scale10 >= 0 {
        numerator
            .checked_mul(pow_i128(10, scale10).ok_or_else(overflow)?)
            .ok_or_else(overflow)?
    } else {
        match pow_i128(10, -scale10) {
            // Round up: a fraction of a millicore or byte still occupies one.
            Some(denominator) => numerator / denominator + i128::from(numerator % denominator != 0),
            // The value is a positive amount smaller than one unit.
            None => 1,
        }
    };
    i64::try_from(value).map_err(|_| overflow())
}

/// Suffix → (decimal exponent, binary exponent).
fn parse_suffix(suffix: &str) -> Option<(i64, i64)> {
    let pair = match suffix {
        "" => (0, 0),
        "n" => (-9, 0),
        "u" => (-6, 0),
        "m" => (-3, 0),
        "k" => (3, 0),
        "M" => (6, 0),
        "G" => (9, 0),
        "T" => (12, 0),
        "P" => (15, 0),
        "E" => (18, 0),
        "Ki" => (0, 10),
        "Mi" => (0, 20),
        "Gi" => (0, 30),
        "Ti" => (0, 40),
        "Pi" => (0, 50),
        "Ei" => (0, 60),
        _ => {
            let exponent = suffix.strip_prefix(['e', 'E'])?;
            let digits = exponent.strip_prefix(['+', '-']).unwrap_or(exponent);
            if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) || digits.len() > 6 {
                return None;
            }
            let value: i64 = exponent.parse().ok()?;
            if value.abs() > MAX_DECIMAL_EXPONENT {
                return None;
            }
            (value, 0)
        }
    };
    Some(pair)
}

fn pow_i128(base: i128, exp: i64) -> Option<i128> {
    let exp = u32::try_from(exp).ok()?;
    base.checked_pow(exp)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_forms() {
        let cases = [
            ("6", 6000),
            ("250m", 250),
            ("0.1", 100),
            ("100u", 1),
            ("1n", 1),
            (".5", 500),
            ("5.", 5000),
            ("1e3", 1_000_000),
            ("1E-3", 1),
            ("1.5k", 1_500_000),
            ("+2", 2000),
            ("0", 0),
            ("-0", 0),
            ("1Ki", 1_024_000),
        ];
        for (text, millis) in cases {
            assert_eq!(parse_cpu_millis(text), Ok(millis), "{text}");
        }
    }

    #[test]
    fn memory_forms() {
        let cases = [
            ("1Gi", 1 << 30),
            ("500Mi", 500 << 20),
            ("128974848", 128_974_848),
            ("129e6", 129_000_000),
            ("129M", 129_000_000),
            ("123Mi", 123 << 20),
            ("1500m", 2),
            ("4718592000", 4_718_592_000),
            ("1E", 1_000_000_000_000_000_000),
            ("7Ei", 7i64 << 60),
        ];
        for (text, bytes) in cases {
            assert_eq!(parse_memory_bytes(text), Ok(bytes), "{text}");
        }
    }

    #[test]
    fn refusals() {
        assert_eq!(parse_cpu_millis(""), Err(QuantityError::Empty));
        assert!(matches!(parse_cpu_millis("-1"), Err(QuantityError::Negative(_))));
        assert!(matches!(
            parse_memory_bytes("8Ei"),
            Err(QuantityError::Overflow(_))
        ));
        assert!(matches!(
            parse_cpu_millis("1e30"),
            Err(QuantityError::Overflow(_))
        ));
        assert!(matches!(
            parse_cpu_millis("99999999999999999999999999999999999999999"),
            Err(QuantityError::Overflow(_))
        ));
        for garbage in [
            "abc",
            "1..2",
            ".",
            "1e",
            "1Kb",
            "1 Gi",
            "Gi",
            "1e+",
            "1e99999999",
            "--1",
            "1ki",
        ] {
            assert!(parse_memory_bytes(garbage).is_err(), "{garbage} accepted");
        }
    }

    #[test]
    fn formats() {
        assert_eq!(format_cpu_millis(6000), "6");
        assert_eq!(format_cpu_millis(250), "250m");
        assert_eq!(format_memory_bytes(1 << 30), "1Gi");
        assert_eq!(format_memory_bytes(500 << 20), "500Mi");
        assert_eq!(format_memory_bytes(1000), "1000");
        assert_eq!(format_memory_bytes(0), "0");
    }
}
