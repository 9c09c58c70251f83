//! Value escaping for payload fields: `\\` is a backslash and `\n` a newline (docs/protocol.md, "Requests and results").

/// Escapes a payload value: backslash becomes `\\`, newline becomes `\n`; nothing else changes.
pub fn escape_value(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for c in value.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
    out
}

/// Reverses [`escape_value`]: `\\` becomes a backslash and `\n` a newline. Any other backslash,
/// including one at the end of the value, is kept literally.
pub fn unescape_value(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    let mut chars = value.chars().peekable();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.peek() {
            Some('\\') => {
                chars.next();
                out.push('\\');
            }
            Some('n') => {
                chars.next();
                out.push('\n');
            }
            _ => out.push('\\'),
        }
    }
    out
}

/// Builds a payload: one `key=<escaped value>\n` line per field, in order.
///
/// Keys are written as given and nothing is rejected; a key containing `=` or a newline, or a
/// value ending in a carriage return, will not parse back as written.
pub fn encode_payload(fields: &[(&str, &str)]) -> String {
    let mut out = String::new();
    for (key, value) in fields {
        out.push_str(key);
        out.push('=');
        out.push_str(&escape_value(value));
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_backslash_and_newline_only() {
        assert_eq!(escape_value("a\\b\nc\td\r"), "a\\\\b\\nc\td\r");
        assert_eq!(escape_value(""), "");
    }

    #[test]
    fn unescape_keeps_other_backslashes() {
        assert_eq!(unescape_value(r"a\\b"), r"a\b");
        assert_eq!(unescape_value(r"a\nb"), "a\nb");
        assert_eq!(unescape_value(r"a\tb"), r"a\tb");
        assert_eq!(unescape_value(r"end\"), r"end\");
        assert_eq!(unescape_value(r"\\n"), r"\n");
        assert_eq!(unescape_value(r"\\\n"), "\\\n");
        assert_eq!(unescape_value(r"\\\"), r"\\");
        assert_eq!(unescape_value(r"\é"), r"\é");
    }

    #[test]
    fn encode_writes_one_line_per_field() {
        assert_eq!(
            encode_payload(&[("tool", "shell"), ("command", "echo a\nb\\c")]),
            "tool=shell\ncommand=echo a\\nb\\\\c\n"
        );
        assert_eq!(encode_payload(&[]), "");
    }
}
