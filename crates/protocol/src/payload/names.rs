//! Validation of agent IDs, tool names and environment variable names.

use super::error::NameError;

/// Longest agent ID or tool name, in bytes.
pub const MAX_NAME_LEN: usize = 128;

/// True when `s` is 1–128 bytes of `[A-Za-z0-9._:@-]`, other than `.` and
/// `..` (docs/protocol.md, "Namespace": names become path elements).
fn is_valid_name(s: &str) -> bool {
    !s.is_empty()
        && s != "."
        && s != ".."
        && s.len() <= MAX_NAME_LEN
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b':' | b'@' | b'-'))
}

/// Checks an agent ID: 1–128 bytes of `[A-Za-z0-9._:@-]`.
///
/// # Errors
///
/// [`NameError::InvalidAgentId`] (`invalid agent ID`) otherwise.
pub fn validate_agent_id(id: &str) -> Result<(), NameError> {
    if is_valid_name(id) {
        Ok(())
    } else {
        Err(NameError::InvalidAgentId)
    }
}

/// Checks a tool name: 1–128 bytes of `[A-Za-z0-9._:@-]`.
///
/// # Errors
///
/// [`NameError::InvalidToolName`] (`invalid tool name`) otherwise.
pub fn validate_tool_name(name: &str) -> Result<(), NameError> {
    if is_valid_name(name) {
        Ok(())
    } else {
        Err(NameError::InvalidToolName)
    }
}

/// Environment variables a request's `env.NAME` field cannot set (docs/protocol.md, "Requests and results"): the ones the
/// server sets itself, and the ones that change how programs start. `ARG_` and `LD_` are
/// prefixes; the others are exact names.
pub const RESERVED_ENV_NAMES: &[&str] = &[
    "TOOL_ARGS",
    "ARG_*",
    "OLLIE_AGENT_ID",
    "OLLIE_SESSION_ID",
    "PWD",
    "LD_*",
    "BASH_ENV",
    "ENV",
    "SHELLOPTS",
    "BASHOPTS",
    "PS4",
    "IFS",
];

/// True when a request may not set the environment variable `name` (see
/// [`RESERVED_ENV_NAMES`]). Names are case-sensitive, like the variables themselves.
pub fn is_reserved_env_name(name: &str) -> bool {
    RESERVED_ENV_NAMES
        .iter()
        .any(|r| match r.strip_suffix('*') {
            Some(prefix) => name.starts_with(prefix),
            None => name == *r,
        })
}

/// Why a `session` or `agent` value of a payload cannot be used (docs/protocol.md, "Requests and results"): these values
/// end up in paths (`s/<session>/prompt`) and messages. `None` when it is fine.
pub fn unsafe_id_reason(value: &str) -> Option<&'static str> {
    if value.is_empty() {
        Some("must not be empty")
    } else if value == "." || value == ".." {
        Some("must not be \".\" or \"..\"")
    } else if value.contains('/') {
        Some("must not contain \"/\"")
    } else if value.chars().any(char::is_control) {
        Some("must not contain control characters")
    } else {
        None
    }
}

/// True when `name` is a valid environment variable name, `[A-Za-z_][A-Za-z0-9_]*`.
pub fn is_valid_env_name(name: &str) -> bool {
    let mut bytes = name.bytes();
    match bytes.next() {
        Some(first) if first.is_ascii_alphabetic() || first == b'_' => {
            bytes.all(|b| b.is_ascii_alphanumeric() || b == b'_')
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_valid_names() {
        for ok in ["a", "shell", "file_read", "a1.b-c:d@e_F9", &"x".repeat(128)] {
            assert_eq!(validate_agent_id(ok), Ok(()), "{ok}");
            assert_eq!(validate_tool_name(ok), Ok(()), "{ok}");
        }
    }

    #[test]
    fn rejects_invalid_names() {
        for bad in [
            "",
            "a b",
            "a/b",
            "é",
            "a\n",
            "a=b",
            "../x",
            &"x".repeat(129),
        ] {
            assert_eq!(
                validate_agent_id(bad),
                Err(NameError::InvalidAgentId),
                "{bad:?}"
            );
            assert_eq!(
                validate_tool_name(bad),
                Err(NameError::InvalidToolName),
                "{bad:?}"
            );
        }
        assert_eq!(
            NameError::InvalidAgentId.to_string(),
            "invalid agent ID: an agent ID is 1 to 128 characters, each a letter (A-Z, a-z), a digit or one of . _ : @ - (and not \".\" or \"..\")"
        );
        assert!(NameError::InvalidToolName
            .to_string()
            .starts_with("invalid tool name: a tool name is 1 to 128 characters"));
    }

    #[test]
    fn reserved_env_names() {
        for reserved in [
            "TOOL_ARGS",
            "ARG_COMMAND",
            "ARG_",
            "OLLIE_AGENT_ID",
            "OLLIE_SESSION_ID",
            "PWD",
            "LD_PRELOAD",
            "LD_LIBRARY_PATH",
            "LD_AUDIT",
            "BASH_ENV",
            "ENV",
            "SHELLOPTS",
            "BASHOPTS",
            "PS4",
            "IFS",
        ] {
            assert!(is_reserved_env_name(reserved), "{reserved}");
        }
        for free in [
            "FOO",
            "PATH",
            "HOME",
            "ARGS",
            "TOOL_ARGS2",
            "arg_command",
            "OLDPWD",
            "ENVX",
        ] {
            assert!(!is_reserved_env_name(free), "{free}");
        }
    }

    #[test]
    fn unsafe_ids() {
        for ok in ["s1", "a.b", "...", "sess ion", "ünï"] {
            assert_eq!(unsafe_id_reason(ok), None, "{ok:?}");
        }
        for bad in [
            "",
            ".",
            "..",
            "a/b",
            "/",
            "../x",
            "a\nb",
            "a\rb",
            "\u{1b}[2J",
            "x\u{85}",
        ] {
            assert!(unsafe_id_reason(bad).is_some(), "{bad:?}");
        }
    }

    #[test]
    fn env_names() {
        for ok in ["A", "_", "PATH", "a_1", "_X9"] {
            assert!(is_valid_env_name(ok), "{ok}");
        }
        for bad in ["", "1A", "A-B", "A B", "A=B", "É", "A."] {
            assert!(!is_valid_env_name(bad), "{bad:?}");
        }
    }
}
