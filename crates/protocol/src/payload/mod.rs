//! The request payload written to `proc/new` and `proc/new.bg` (docs/protocol.md, "Requests and results"): parsing,
//! escaping, name validation and argument conversion.

mod args;
mod error;
mod escape;
mod names;
mod parse;

use std::fmt;
use std::time::Duration;

pub use args::convert_args;
pub use error::{NameError, PayloadError, Quoted, TimeoutReason, AGENT_ID_RULE, TOOL_NAME_RULE};
pub use escape::{encode_payload, escape_value, unescape_value};
pub use names::{
    is_reserved_env_name, is_valid_env_name, unsafe_id_reason, validate_agent_id,
    validate_tool_name, MAX_NAME_LEN, RESERVED_ENV_NAMES,
};
pub use parse::parse_payload;

use crate::duration::format_duration;

/// A parsed request payload. Values are unescaped; the token is not checked here.
#[derive(Clone, PartialEq, Eq, Default)]
pub struct Payload {
    /// `token`: the session token, if given (compare with [`Payload::token_matches`]).
    pub token: Option<String>,
    /// `tool`: the tool name (validated).
    pub tool: String,
    /// `agent`: the agent ID (validated).
    pub agent: String,
    /// `session`: the session ID (never empty, `.`, `..`, nor holding `/` or a control
    /// character).
    pub session: Option<String>,
    /// `cwd`: the working directory as given; an empty value counts as absent.
    pub cwd: Option<String>,
    /// `env.NAME` fields as `(NAME, value)`, in payload order.
    pub env: Vec<(String, String)>,
    /// `bypass=true`: ask the broker for unsandboxed execution.
    pub bypass: bool,
    /// `timeout`: overrides the tool's default timeout (always greater than zero).
    pub timeout: Option<Duration>,
    /// `sandbox`: a sandbox profile name; an empty value counts as absent.
    pub sandbox: Option<String>,
    /// Every other field: the tool arguments, in payload order.
    pub args: Vec<(String, String)>,
}

impl Payload {
    /// True when the payload carries a token equal to `expected`.
    ///
    /// The comparison takes time that depends only on the length of `expected`, never on where
    /// the two tokens differ. A missing token never matches.
    pub fn token_matches(&self, expected: &str) -> bool {
        match &self.token {
            Some(token) => constant_time_eq(token.as_bytes(), expected.as_bytes()),
            None => false,
        }
    }

    /// A request for `tool` as `agent`, with nothing else set.
    pub fn new(tool: impl Into<String>, agent: impl Into<String>) -> Payload {
        Payload {
            tool: tool.into(),
            agent: agent.into(),
            ..Payload::default()
        }
    }

    /// Add a tool argument.
    pub fn arg(mut self, key: impl Into<String>, value: impl Into<String>) -> Payload {
        self.args.push((key.into(), value.into()));
        self
    }

    /// Encodes the payload back to its wire form (reserved fields first, then `env.NAME`, then
    /// the arguments); [`parse_payload`] of the result gives back an equal payload.
    pub fn encode(&self) -> String {
        let timeout = self.timeout.map(format_duration);
        let env_keys: Vec<String> = self.env.iter().map(|(k, _)| format!("env.{k}")).collect();
        let mut fields: Vec<(&str, &str)> = Vec::new();
        let optional = [
            ("token", self.token.as_deref()),
            ("tool", Some(self.tool.as_str())),
            ("agent", Some(self.agent.as_str())),
            ("session", self.session.as_deref()),
            ("cwd", self.cwd.as_deref()),
            ("bypass", self.bypass.then_some("true")),
            ("timeout", timeout.as_deref()),
            ("sandbox", self.sandbox.as_deref()),
        ];
        fields.extend(optional.iter().filter_map(|(k, v)| v.map(|v| (*k, v))));
        fields.extend(
            env_keys
                .iter()
                .zip(&self.env)
                .map(|(k, (_, v))| (k.as_str(), v.as_str())),
        );
        fields.extend(self.args.iter().map(|(k, v)| (k.as_str(), v.as_str())));
        encode_payload(&fields)
    }
}

impl fmt::Debug for Payload {
    /// Like a derived `Debug`, but the token is redacted so it never reaches a log.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Payload")
            .field("token", &self.token.as_ref().map(|_| "<redacted>"))
            .field("tool", &self.tool)
            .field("agent", &self.agent)
            .field("session", &self.session)
            .field("cwd", &self.cwd)
            .field("env", &self.env)
            .field("bypass", &self.bypass)
            .field("timeout", &self.timeout)
            .field("sandbox", &self.sandbox)
            .field("args", &self.args)
            .finish()
    }
}

/// Compares `given` with `expected` in time that depends only on `expected.len()`.
fn constant_time_eq(given: &[u8], expected: &[u8]) -> bool {
    // Any length difference makes `diff` non-zero; every byte of `expected` is always visited.
    let mut diff = u8::from(given.len() != expected.len());
    for (i, &e) in expected.iter().enumerate() {
        let g = given.get(i).copied().unwrap_or(!e);
        diff |= g ^ e;
    }
    std::hint::black_box(diff) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn token_matches_only_exact_token() {
        let mut p = Payload::default();
        assert!(!p.token_matches("secret"));
        assert!(!p.token_matches(""));
        p.token = Some("secret".into());
        assert!(p.token_matches("secret"));
        for wrong in ["", "secreT", "secre", "secrets", "tecret", "\0ecret"] {
            assert!(!p.token_matches(wrong), "{wrong:?}");
        }
        p.token = Some(String::new());
        assert!(p.token_matches(""));
        assert!(!p.token_matches("x"));
    }

    #[test]
    fn constant_time_eq_handles_prefixes() {
        assert!(constant_time_eq(b"abc", b"abc"));
        assert!(!constant_time_eq(b"ab", b"abc"));
        assert!(!constant_time_eq(b"abcd", b"abc"));
        assert!(!constant_time_eq(b"", b"a"));
        assert!(constant_time_eq(b"", b""));
    }

    #[test]
    fn debug_redacts_token() {
        let p = Payload {
            token: Some("hunter2".into()),
            tool: "shell".into(),
            ..Payload::default()
        };
        let text = format!("{p:?}");
        assert!(!text.contains("hunter2"), "{text}");
        assert!(
            text.contains("<redacted>") && text.contains("shell"),
            "{text}"
        );
    }
}
