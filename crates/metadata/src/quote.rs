//! Quoting for `/bin/sh`.

/// Quotes `s` as one `/bin/sh` word: left bare when non-empty and made only
/// of `[A-Za-z0-9_./:=@%+,-]`, otherwise wrapped in single quotes with each
/// `'` written as `'\''`.
pub fn sh_quote(s: &str) -> String {
    let bare = !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"_./:=@%+,-".contains(&b));
    if bare {
        s.to_string()
    } else {
        single_quote(s)
    }
}

/// Always wraps `s` in single quotes (`'` becomes `'\''`), so the result is
/// one word even where a bare word would be special (e.g. `a=b` as a command
/// name).
pub fn single_quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('\'');
    for c in s.chars() {
        if c == '\'' {
            out.push_str("'\\''");
        } else {
            out.push(c);
        }
    }
    out.push('\'');
    out
}

/// Quotes each word with [`sh_quote`] and joins them with spaces.
pub fn sh_join<S: AsRef<str>>(words: &[S]) -> String {
    words
        .iter()
        .map(|w| sh_quote(w.as_ref()))
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bare_and_quoted() {
        assert_eq!(sh_quote("abc-1.2/x:y=z@%+,_"), "abc-1.2/x:y=z@%+,_");
        assert_eq!(sh_quote(""), "''");
        assert_eq!(sh_quote("a b"), "'a b'");
        assert_eq!(sh_quote("it's"), "'it'\\''s'");
        assert_eq!(sh_quote("$(x)"), "'$(x)'");
        assert_eq!(single_quote("abc"), "'abc'");
        assert_eq!(sh_join(&["sh", "-c", "echo hi"]), "sh -c 'echo hi'");
    }

    #[test]
    fn quoted_round_trips_through_sh() {
        for s in [
            "it's",
            "$(touch /nonexistent/x)",
            "`id`",
            "a\nb",
            "back\\slash",
            "",
            "*",
        ] {
            let out = std::process::Command::new("/bin/sh")
                .arg("-c")
                .arg(format!("printf %s {}", sh_quote(s)))
                .output()
                .expect("spawn /bin/sh");
            assert_eq!(String::from_utf8_lossy(&out.stdout), s);
        }
    }
}
