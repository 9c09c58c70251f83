//! Quoting for the remote shell. Every value that reaches a remote command
//! line goes through [`sh`]: single quotes, with `'` written as `'\''`, which
//! POSIX sh, bash, zsh and fish all read back as the same bytes.

use crate::error::RemoteError;

/// `s` as one single-quoted word (the tool templates' quoting, shared).
pub fn sh(s: &str) -> String {
    toolsrv_metadata::single_quote(s)
}

/// Check that `s` can travel in a line-oriented remote script.
pub fn text(s: &str) -> Result<&str, RemoteError> {
    if s.contains(['\n', '\r', '\0']) {
        return Err(RemoteError::NotOneLine(s.to_string()));
    }
    Ok(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What `sh -c 'printf %s <quoted>'` prints is the original.
    #[test]
    fn quoting_survives_a_real_shell() {
        for s in [
            "plain",
            "",
            "it's",
            "a b\tc",
            "$HOME `id` $(id) \\ \" ; | & > < * ? [ ] ~ # !",
            "''''",
            "-n",
        ] {
            let out = std::process::Command::new("sh")
                .arg("-c")
                .arg(format!("printf %s {}", sh(s)))
                .output()
                .expect("sh");
            assert_eq!(String::from_utf8_lossy(&out.stdout), s, "{s:?}");
        }
    }

    #[test]
    fn newlines_are_refused() {
        assert!(text("a\nb").is_err());
        assert_eq!(text("/x/y").ok(), Some("/x/y"));
    }
}
