//! Go-syntax durations (`500ms`, `90s`, `1h30m`; a bare integer is seconds).
//!
//! A local parser, because `toolsrv-protocol` was not available when this
//! crate was written; it follows the same rules as CONTRACT.md section 1.

use std::time::Duration;

/// Why a duration string was rejected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid duration {input:?}: {reason}")]
pub struct DurationError {
    /// The rejected text.
    pub input: String,
    /// Why it was rejected.
    pub reason: &'static str,
}

/// Parses a Go duration (`300ms`, `1.5h`, `2h45m`, units `ns us µs ms s m
/// h`) or a bare non-negative integer meaning seconds. Negative durations
/// are rejected.
pub fn parse_duration(input: &str) -> Result<Duration, DurationError> {
    let err = |reason| DurationError {
        input: input.to_string(),
        reason,
    };
    let s = input.trim();
    if s.is_empty() {
        return Err(err("it is empty"));
    }
    if s.bytes().all(|b| b.is_ascii_digit()) {
        let secs: u64 = s.parse().map_err(|_| err("it is too large"))?;
        return Ok(Duration::from_secs(secs));
    }
    if s.starts_with('-') {
        return Err(err("it is negative"));
    }
    let s = s.strip_prefix('+').unwrap_or(s);
    if s == "0" {
        return Ok(Duration::ZERO);
    }
    let mut total: f64 = 0.0;
    let mut rest = s;
    while !rest.is_empty() {
        let num_len = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        let num = &rest[..num_len];
        if num.is_empty() || num == "." || num.matches('.').count() > 1 {
            return Err(err("expected a number"));
        }
        let value: f64 = num.parse().map_err(|_| err("expected a number"))?;
        rest = &rest[num_len..];
        let unit_len = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let unit = &rest[..unit_len];
        rest = &rest[unit_len..];
        let nanos_per = match unit {
            "ns" => 1.0,
            "us" | "µs" | "μs" => 1e3,
            "ms" => 1e6,
            "s" => 1e9,
            "m" => 60e9,
            "h" => 3600e9,
            "" => return Err(err("missing unit")),
            _ => return Err(err("unknown unit")),
        };
        total += value * nanos_per;
    }
    if !total.is_finite() || total > u64::MAX as f64 {
        return Err(err("it is too large"));
    }
    Ok(Duration::from_nanos(total.round() as u64))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_go_durations() {
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("90s"), Ok(Duration::from_secs(90)));
        assert_eq!(parse_duration("5m"), Ok(Duration::from_secs(300)));
        assert_eq!(parse_duration("1h30m"), Ok(Duration::from_secs(5400)));
        assert_eq!(parse_duration("1.5s"), Ok(Duration::from_millis(1500)));
        assert_eq!(parse_duration("30"), Ok(Duration::from_secs(30)));
        assert_eq!(parse_duration("0"), Ok(Duration::ZERO));
    }

    #[test]
    fn rejects_bad_durations() {
        for bad in ["", "abc", "5x", "-5s", "1.2.3s", "s", "5s3"] {
            let e = parse_duration(bad).expect_err(bad);
            assert!(e.to_string().contains(&format!("{bad:?}")), "{e}");
        }
    }
}
