//! Errors of payload parsing, argument conversion and name validation.

use std::fmt;

use crate::duration::DurationReason;

/// Longest excerpt of input quoted in an error message, in bytes.
const MAX_QUOTED: usize = 80;

/// A piece of input shown in an error message: quoted, escaped, and truncated to 80 bytes
/// (with `...` appended) so an error never echoes a huge payload back.
#[derive(Clone, PartialEq, Eq)]
pub struct Quoted(String);

impl Quoted {
    /// Captures (a bounded prefix of) `s` for an error message.
    pub fn new(s: &str) -> Self {
        if s.len() <= MAX_QUOTED {
            return Quoted(s.to_owned());
        }
        let mut end = MAX_QUOTED;
        while !s.is_char_boundary(end) {
            end -= 1;
        }
        Quoted(format!("{}...", &s[..end]))
    }

    /// The captured (possibly truncated) text, unquoted.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for Quoted {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}", self.0)
    }
}

impl fmt::Debug for Quoted {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}", self.0)
    }
}

/// What an agent ID may be, as the messages say it.
pub const AGENT_ID_RULE: &str = "an agent ID is 1 to 128 characters, each a letter (A-Z, a-z), a digit or one of . _ : @ - (and not \".\" or \"..\")";

/// What a tool name may be, as the messages say it.
pub const TOOL_NAME_RULE: &str = "a tool name is 1 to 128 characters, each a letter (A-Z, a-z), a digit or one of . _ : @ - (and not \".\" or \"..\")";

/// An agent ID or tool name that is not 1–128 bytes of `[A-Za-z0-9._:@-]`.
///
/// The messages start as the protocol says (`invalid agent ID`, `invalid
/// tool name`), say which characters are allowed, and do not echo the value
/// (the caller may).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum NameError {
    /// The agent ID is empty, longer than 128 bytes, or holds a forbidden character.
    #[error("invalid agent ID: {AGENT_ID_RULE}")]
    InvalidAgentId,
    /// The tool name is empty, longer than 128 bytes, or holds a forbidden character.
    #[error("invalid tool name: {TOOL_NAME_RULE}")]
    InvalidToolName,
}

/// Why a request payload, or its arguments, were refused. The Display text is what the agent
/// sees in the error result.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PayloadError {
    /// The payload bytes are not UTF-8.
    #[error("payload is not valid UTF-8 (invalid byte at offset {offset})")]
    NotUtf8 {
        /// Byte offset of the first invalid sequence.
        offset: usize,
    },
    /// A non-empty line without `=`.
    #[error("malformed payload line {line}")]
    MalformedLine {
        /// The line (truncated).
        line: Quoted,
    },
    /// A line starting with `=`.
    #[error("empty key in payload line {line}")]
    EmptyKey {
        /// The line (truncated).
        line: Quoted,
    },
    /// No `tool` field.
    #[error("missing tool")]
    MissingTool,
    /// No `agent` field.
    #[error("missing agent")]
    MissingAgent,
    /// A key given twice (including `env.NAME` keys).
    #[error("duplicate key {key}")]
    DuplicateKey {
        /// The repeated key (truncated).
        key: Quoted,
    },
    /// `bypass` other than `true` or `false`.
    #[error("invalid bypass {value}: must be true or false")]
    InvalidBypass {
        /// The value given (truncated).
        value: Quoted,
    },
    /// `timeout` that is not a positive duration.
    #[error("invalid timeout {value}: {reason}")]
    InvalidTimeout {
        /// The value given (truncated).
        value: Quoted,
        /// Why it was rejected.
        reason: TimeoutReason,
    },
    /// `env.NAME` whose NAME is not `[A-Za-z_][A-Za-z0-9_]*`.
    #[error("invalid environment variable name {name}")]
    InvalidEnvName {
        /// The NAME part (truncated).
        name: Quoted,
    },
    /// `env.NAME` naming a variable the server sets or one that changes how programs start.
    #[error("environment variable {name} cannot be set by a request")]
    ReservedEnvName {
        /// The NAME part (truncated).
        name: Quoted,
    },
    /// A `session` value that cannot be used in a path or message.
    #[error("invalid session {value}: {reason}")]
    InvalidSession {
        /// The value given (truncated).
        value: Quoted,
        /// Why it was rejected.
        reason: &'static str,
    },
    /// An `agent` value within the agent ID alphabet that still cannot be used (`.`, `..`).
    #[error("invalid agent ID {value}: {reason}")]
    UnsafeAgentId {
        /// The value given (truncated).
        value: Quoted,
        /// Why it was rejected.
        reason: &'static str,
    },
    /// An invalid `tool` or `agent` value.
    #[error(transparent)]
    Name(#[from] NameError),
    /// A typed argument whose value does not parse as JSON of that type.
    #[error("argument {name} must be {expected}, got {value}")]
    WrongType {
        /// The argument name (truncated).
        name: Quoted,
        /// The expected type with its article, e.g. `an integer`, `a boolean or null`.
        expected: String,
        /// The value given (truncated).
        value: Quoted,
    },
    /// A required argument that was not given.
    #[error("missing required argument {name}")]
    MissingRequired {
        /// The argument name (truncated).
        name: Quoted,
    },
    /// An argument the schema does not declare while `additionalProperties` is false.
    #[error("unknown argument {name}")]
    UnknownArgument {
        /// The argument name (truncated).
        name: Quoted,
    },
}

/// Why a `timeout` value was rejected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TimeoutReason {
    /// It is not a duration.
    #[error("{0}")]
    Syntax(DurationReason),
    /// It is zero.
    #[error("must be greater than zero")]
    Zero,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quoted_truncates_on_char_boundary() {
        let long = "é".repeat(100); // 200 bytes
        let q = Quoted::new(&long);
        assert_eq!(q.as_str().len(), 80 + 3);
        assert!(q.as_str().ends_with("..."));
        assert_eq!(Quoted::new("a\"b").to_string(), r#""a\"b""#);
        assert_eq!(Quoted::new(&"x".repeat(80)).as_str().len(), 80);
    }
}
