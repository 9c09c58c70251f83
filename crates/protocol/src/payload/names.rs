//! Validation of agent IDs, tool names and environment variable names.

use super::error::NameError;

/// Longest agent ID or tool name, in bytes.
pub const MAX_NAME_LEN: usize = 128;

/// True when `s` is 1–128 bytes of `[A-Za-z0-9._:@-]`.
fn is_valid_name(s: &str) -> bool {
    !s.is_empty()
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
        assert_eq!(NameError::InvalidAgentId.to_string(), "invalid agent ID");
        assert_eq!(NameError::InvalidToolName.to_string(), "invalid tool name");
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
