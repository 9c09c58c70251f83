//! Go-syntax durations (`500ms`, `90s`, `1h30m`, `1.5h`) as used on the command line and in the
//! `timeout` payload field (docs/cli.md; docs/protocol.md, "Requests and results").

use std::time::Duration;

/// Nanoseconds per unit, longest suffix first so `ms` wins over `m` and `s`.
const UNITS: &[(&str, u128)] = &[
    ("ns", 1),
    ("us", 1_000),
    ("\u{b5}s", 1_000),  // µ MICRO SIGN, as Go writes it
    ("\u{3bc}s", 1_000), // μ GREEK SMALL LETTER MU, also accepted by Go
    ("ms", 1_000_000),
    ("s", 1_000_000_000),
    ("m", 60_000_000_000),
    ("h", 3_600_000_000_000),
];

/// Why a duration string was rejected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DurationReason {
    /// The string was empty (or only whitespace).
    #[error("empty duration")]
    Empty,
    /// The string started with `-`.
    #[error("negative durations are not allowed")]
    Negative,
    /// A number was expected at this point.
    #[error("expected a number")]
    ExpectedNumber,
    /// A number was not followed by a unit (only a lone integer may omit it).
    #[error("missing unit after a number")]
    MissingUnit,
    /// A unit that Go does not know.
    #[error("unknown unit {0:?}")]
    UnknownUnit(String),
    /// The value does not fit.
    #[error("duration is too large")]
    Overflow,
}

/// A duration string that could not be parsed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid duration {value:?}: {reason}")]
pub struct DurationError {
    /// The offending input, as given.
    pub value: String,
    /// Why it was rejected.
    pub reason: DurationReason,
}

/// Parses a duration in Go's syntax, or a bare non-negative integer meaning seconds.
///
/// Accepted: a sequence of decimal numbers, each with an optional fraction and a unit out of
/// `ns`, `us`/`µs`, `ms`, `s`, `m`, `h` (`1h30m`, `1.5h`, `500ms`); a leading `+` is allowed;
/// surrounding whitespace is ignored. A fraction finer than a nanosecond is truncated.
///
/// # Errors
///
/// Empty input, a negative value, a malformed number, a missing or unknown unit, or a value too
/// large for [`Duration`]; the error names the input.
pub fn parse_duration(input: &str) -> Result<Duration, DurationError> {
    let err = |reason| DurationError {
        value: input.to_owned(),
        reason,
    };
    let s = input.trim();
    if s.is_empty() {
        return Err(err(DurationReason::Empty));
    }
    if s.starts_with('-') {
        return Err(err(DurationReason::Negative));
    }
    let s = s.strip_prefix('+').unwrap_or(s);
    if !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()) {
        let secs: u64 = s.parse().map_err(|_| err(DurationReason::Overflow))?;
        return Ok(Duration::from_secs(secs));
    }
    let nanos = parse_go_units(s).map_err(err)?;
    nanos_to_duration(nanos).ok_or_else(|| err(DurationReason::Overflow))
}

/// Sums the `<number><unit>` groups of `s` in nanoseconds.
fn parse_go_units(mut s: &str) -> Result<u128, DurationReason> {
    if s.is_empty() {
        return Err(DurationReason::ExpectedNumber);
    }
    let mut total: u128 = 0;
    while !s.is_empty() {
        let int_len = s.bytes().take_while(u8::is_ascii_digit).count();
        let (int_part, rest) = s.split_at(int_len);
        let (frac_part, rest) = match rest.strip_prefix('.') {
            Some(after) => {
                let n = after.bytes().take_while(u8::is_ascii_digit).count();
                after.split_at(n)
            }
            None => ("", rest),
        };
        if int_part.is_empty() && frac_part.is_empty() {
            return Err(DurationReason::ExpectedNumber);
        }
        let unit_len = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let (unit, rest) = rest.split_at(unit_len);
        if unit.is_empty() {
            return Err(DurationReason::MissingUnit);
        }
        let scale = UNITS
            .iter()
            .find(|(name, _)| *name == unit)
            .map(|(_, scale)| *scale)
            .ok_or_else(|| DurationReason::UnknownUnit(unit.to_owned()))?;
        let whole = digits_value(int_part).ok_or(DurationReason::Overflow)?;
        let mut part = whole.checked_mul(scale).ok_or(DurationReason::Overflow)?;
        part = part
            .checked_add(fraction_nanos(frac_part, scale))
            .ok_or(DurationReason::Overflow)?;
        total = total.checked_add(part).ok_or(DurationReason::Overflow)?;
        s = rest;
    }
    Ok(total)
}

/// The value of a (possibly empty) string of ASCII digits, `None` on overflow.
fn digits_value(digits: &str) -> Option<u128> {
    digits.bytes().try_fold(0u128, |acc, b| {
        acc.checked_mul(10)?.checked_add(u128::from(b - b'0'))
    })
}

/// `0.<digits> * scale`, truncated; digits beyond what can matter are ignored.
fn fraction_nanos(digits: &str, scale: u128) -> u128 {
    // scale <= 3.6e12 and 10^18 * scale fits easily in u128.
    let mut num: u128 = 0;
    let mut den: u128 = 1;
    for b in digits.bytes().take(18) {
        num = num * 10 + u128::from(b - b'0');
        den *= 10;
    }
    num * scale / den
}

/// Converts nanoseconds to a [`Duration`], `None` if it does not fit.
fn nanos_to_duration(nanos: u128) -> Option<Duration> {
    let secs = u64::try_from(nanos / 1_000_000_000).ok()?;
    // The remainder is below 1e9 and fits in u32.
    let sub = u32::try_from(nanos % 1_000_000_000).ok()?;
    Some(Duration::new(secs, sub))
}

/// Formats a duration the way Go's `Duration.String` does: `1h30m0s`, `1.5s`, `500ms`, `0s`.
///
/// The output always parses back to the same value with [`parse_duration`].
pub fn format_duration(d: Duration) -> String {
    let nanos = d.as_nanos();
    if nanos == 0 {
        return "0s".to_owned();
    }
    if nanos < 1_000 {
        return format!("{nanos}ns");
    }
    if nanos < 1_000_000 {
        return format!("{}\u{b5}s", decimal(nanos, 1_000, 3));
    }
    if nanos < 1_000_000_000 {
        return format!("{}ms", decimal(nanos, 1_000_000, 6));
    }
    let secs = d.as_secs();
    let (hours, minutes, seconds) = (secs / 3600, secs / 60 % 60, secs % 60);
    let sec_nanos = u128::from(seconds) * 1_000_000_000 + u128::from(d.subsec_nanos());
    let sec_text = format!("{}s", decimal(sec_nanos, 1_000_000_000, 9));
    if hours > 0 {
        format!("{hours}h{minutes}m{sec_text}")
    } else if minutes > 0 {
        format!("{minutes}m{sec_text}")
    } else {
        sec_text
    }
}

/// `value / unit` as a decimal with up to `places` fraction digits, trailing zeros removed.
fn decimal(value: u128, unit: u128, places: usize) -> String {
    let whole = value / unit;
    let frac = value % unit;
    if frac == 0 {
        return whole.to_string();
    }
    let frac_text = format!("{frac:0places$}");
    format!("{whole}.{}", frac_text.trim_end_matches('0'))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok(s: &str) -> Duration {
        match parse_duration(s) {
            Ok(d) => d,
            Err(e) => panic!("{s:?} should parse: {e}"),
        }
    }

    #[test]
    fn parses_go_syntax() {
        assert_eq!(ok("500ms"), Duration::from_millis(500));
        assert_eq!(ok("90s"), Duration::from_secs(90));
        assert_eq!(ok("5m"), Duration::from_secs(300));
        assert_eq!(ok("1h30m"), Duration::from_secs(5400));
        assert_eq!(ok("1.5h"), Duration::from_secs(5400));
        assert_eq!(ok("2us"), Duration::from_micros(2));
        assert_eq!(ok("2µs"), Duration::from_micros(2));
        assert_eq!(ok("2μs"), Duration::from_micros(2));
        assert_eq!(ok("7ns"), Duration::from_nanos(7));
        assert_eq!(ok(".5s"), Duration::from_millis(500));
        assert_eq!(ok("1.s"), Duration::from_secs(1));
        assert_eq!(ok("+3s"), Duration::from_secs(3));
        assert_eq!(ok("1m0.25s"), Duration::from_millis(60_250));
        assert_eq!(ok("0"), Duration::ZERO);
        assert_eq!(ok(" 10s\n"), Duration::from_secs(10));
    }

    #[test]
    fn bare_integer_is_seconds() {
        assert_eq!(ok("120"), Duration::from_secs(120));
    }

    #[test]
    fn sub_nanosecond_fraction_truncates() {
        assert_eq!(ok("1.0000000009s"), Duration::from_secs(1));
        assert_eq!(
            ok("0.3333333333333333333333333ms"),
            Duration::from_nanos(333_333)
        );
    }

    #[test]
    fn rejects_bad_input_naming_it() {
        let cases = [
            ("", DurationReason::Empty),
            ("  ", DurationReason::Empty),
            ("-5s", DurationReason::Negative),
            ("-5", DurationReason::Negative),
            ("1.5", DurationReason::MissingUnit),
            ("5x", DurationReason::UnknownUnit("x".into())),
            ("5 s", DurationReason::UnknownUnit(" s".into())),
            ("ms", DurationReason::ExpectedNumber),
            (".s", DurationReason::ExpectedNumber),
            ("1h30", DurationReason::MissingUnit),
            ("99999999999999999999999h", DurationReason::Overflow),
            ("99999999999999999999999", DurationReason::Overflow),
        ];
        for (input, reason) in cases {
            let e = parse_duration(input).expect_err(input);
            assert_eq!(e.reason, reason, "{input:?}");
            assert_eq!(e.value, input);
            assert!(e
                .to_string()
                .starts_with(&format!("invalid duration {input:?}: ")));
        }
        assert_eq!(
            parse_duration("5x").map_err(|e| e.to_string()),
            Err("invalid duration \"5x\": unknown unit \"x\"".to_owned())
        );
    }

    #[test]
    fn formats_like_go() {
        let cases = [
            (Duration::ZERO, "0s"),
            (Duration::from_nanos(7), "7ns"),
            (Duration::from_nanos(1_500), "1.5µs"),
            (Duration::from_millis(500), "500ms"),
            (Duration::from_micros(1_250), "1.25ms"),
            (Duration::from_secs(1), "1s"),
            (Duration::from_millis(1_500), "1.5s"),
            (Duration::from_secs(90), "1m30s"),
            (Duration::from_secs(120), "2m0s"),
            (Duration::from_secs(5400), "1h30m0s"),
            (Duration::new(3601, 1), "1h0m1.000000001s"),
        ];
        for (d, text) in cases {
            assert_eq!(format_duration(d), text);
            assert_eq!(ok(text), d, "{text} parses back");
        }
    }
}
