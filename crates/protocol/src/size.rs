//! Byte sizes with binary suffixes (`8MiB`, `512KiB`, `1048576`), as used by `--max-output`.

/// Binary units, matched exactly (case-sensitive).
const UNITS: &[(&str, u64)] = &[
    ("B", 1),
    ("KiB", 1 << 10),
    ("MiB", 1 << 20),
    ("GiB", 1 << 30),
    ("TiB", 1 << 40),
];

/// A size string that could not be parsed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SizeError {
    /// Empty input.
    #[error("invalid size {0:?}: empty size")]
    Empty(String),
    /// The input does not start with a non-negative integer.
    #[error("invalid size {0:?}: expected a non-negative whole number of bytes")]
    NotANumber(String),
    /// A suffix other than `B`, `KiB`, `MiB`, `GiB` or `TiB`.
    #[error("invalid size {value:?}: unknown unit {unit:?} (use B, KiB, MiB, GiB or TiB)")]
    UnknownUnit {
        /// The offending input.
        value: String,
        /// The unrecognised suffix.
        unit: String,
    },
    /// The size does not fit in 64 bits.
    #[error("invalid size {0:?}: too large")]
    Overflow(String),
}

/// Parses a byte count with an optional binary suffix: `1048576`, `512KiB`, `8MiB`, `1GiB`.
///
/// Whitespace around the input and between the number and the unit is ignored.
///
/// # Errors
///
/// Empty input, a missing or fractional number, an unknown unit, or a size above `u64::MAX`;
/// the error names the input.
pub fn parse_size(input: &str) -> Result<u64, SizeError> {
    let s = input.trim();
    if s.is_empty() {
        return Err(SizeError::Empty(input.to_owned()));
    }
    let digits_len = s.bytes().take_while(u8::is_ascii_digit).count();
    let (digits, unit) = s.split_at(digits_len);
    if digits.is_empty() {
        return Err(SizeError::NotANumber(input.to_owned()));
    }
    let unit = unit.trim_start();
    let number: u64 = digits
        .parse()
        .map_err(|_| SizeError::Overflow(input.to_owned()))?;
    let scale = if unit.is_empty() {
        1
    } else if unit.starts_with(|c: char| c.is_ascii_digit() || c == '.') {
        return Err(SizeError::NotANumber(input.to_owned()));
    } else {
        UNITS
            .iter()
            .find(|(name, _)| *name == unit)
            .map(|(_, scale)| *scale)
            .ok_or_else(|| SizeError::UnknownUnit {
                value: input.to_owned(),
                unit: unit.to_owned(),
            })?
    };
    number
        .checked_mul(scale)
        .ok_or_else(|| SizeError::Overflow(input.to_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_sizes() {
        assert_eq!(parse_size("1048576"), Ok(1_048_576));
        assert_eq!(parse_size("8MiB"), Ok(8 * 1024 * 1024));
        assert_eq!(parse_size("512KiB"), Ok(512 * 1024));
        assert_eq!(parse_size("2GiB"), Ok(2 * 1024 * 1024 * 1024));
        assert_eq!(parse_size("1TiB"), Ok(1 << 40));
        assert_eq!(parse_size("100B"), Ok(100));
        assert_eq!(parse_size(" 8 MiB\n"), Ok(8 << 20));
        assert_eq!(parse_size("0"), Ok(0));
    }

    #[test]
    fn rejects_bad_sizes_naming_them() {
        assert_eq!(parse_size(""), Err(SizeError::Empty(String::new())));
        assert_eq!(
            parse_size("MiB").map_err(|e| e.to_string()),
            Err("invalid size \"MiB\": expected a non-negative whole number of bytes".to_owned())
        );
        assert_eq!(parse_size("-1"), Err(SizeError::NotANumber("-1".into())));
        assert_eq!(
            parse_size("1.5MiB"),
            Err(SizeError::NotANumber("1.5MiB".into()))
        );
        assert_eq!(
            parse_size("8MB").map_err(|e| e.to_string()),
            Err(
                "invalid size \"8MB\": unknown unit \"MB\" (use B, KiB, MiB, GiB or TiB)"
                    .to_owned()
            )
        );
        assert_eq!(
            parse_size("8mib"),
            Err(SizeError::UnknownUnit {
                value: "8mib".into(),
                unit: "mib".into()
            })
        );
        assert_eq!(
            parse_size("99999999999999999999"),
            Err(SizeError::Overflow("99999999999999999999".into()))
        );
        assert_eq!(
            parse_size("17179869184GiB"),
            Err(SizeError::Overflow("17179869184GiB".into()))
        );
    }
}
