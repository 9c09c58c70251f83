//! Dangerous-command validation ([`Validator`]) and the per-agent
//! [`RateLimiter`] for repeated refusals.
//!
//! The validator lexes the command line (and every string argument) as shell
//! text, follows `sh -c`, `eval` and `$(...)`, and applies the built-in rules
//! to each simple command; `validation.deny` patterns from the policy are
//! matched against the raw text.
//!
//! It is a crate of its own, not a module of `toolsrv-sandbox`: it reads
//! text only (no system call, no policy type; the server hands it the
//! policy's deny patterns as strings), while everything in the sandbox crate
//! works with the kernel. Apart, each is built and tested without the other,
//! and the sandbox crate holds one concern.

#![forbid(unsafe_code)]

mod builtin;
mod lex;
mod rate;

pub use rate::{RateLimited, RateLimiter, COOLDOWN, MAX_REFUSALS, WINDOW};

use regex::Regex;
use std::fmt;

/// The longest quoted command text in a [`Refusal`] message, in bytes.
const QUOTE_LIMIT: usize = 200;

/// An extra deny pattern that is not a valid regular expression.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid deny pattern \"{pattern}\": {reason}")]
pub struct ValidateError {
    /// The pattern as written.
    pub pattern: String,
    /// The regex compiler's complaint.
    pub reason: String,
}

/// A command refused by a validation rule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    /// The rule's short name (`recursive delete of /`, or `deny pattern <regex>`).
    pub rule: String,
    /// The refused text (the command line or the string argument).
    pub text: String,
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "command refused by validation rule \"{}\": {}",
            self.rule,
            truncate(&self.text, QUOTE_LIMIT)
        )
    }
}

impl std::error::Error for Refusal {}

/// At most `limit` bytes of `s` (on a character boundary), `…` when cut.
fn truncate(s: &str, limit: usize) -> std::borrow::Cow<'_, str> {
    if s.len() <= limit {
        return s.into();
    }
    let mut end = limit;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &s[..end]).into()
}

/// Rejects dangerous commands: the built-in rules plus extra deny patterns.
#[derive(Debug, Clone)]
pub struct Validator {
    extra: Vec<(String, Regex)>,
    home: Option<String>,
}

impl Validator {
    /// A validator with the built-in rules and `extra_deny` regular expressions
    /// (the policy's `validation.deny`). The process's `$HOME` is treated like `~`.
    pub fn new(extra_deny: &[String]) -> Result<Validator, ValidateError> {
        let extra = extra_deny
            .iter()
            .map(|p| {
                Regex::new(p)
                    .map(|re| (p.clone(), re))
                    .map_err(|e| ValidateError {
                        pattern: p.clone(),
                        reason: e
                            .to_string()
                            .lines()
                            .rev()
                            .find(|l| !l.trim().is_empty())
                            .unwrap_or_default()
                            .trim()
                            .trim_start_matches("error: ")
                            .to_string(),
                    })
            })
            .collect::<Result<_, _>>()?;
        let home = std::env::var("HOME").ok().filter(|h| h.len() > 1);
        Ok(Validator { extra, home })
    }

    /// Checks the final command line and every string argument.
    pub fn check(&self, command_line: &str, string_args: &[&str]) -> Result<(), Refusal> {
        for text in std::iter::once(command_line).chain(string_args.iter().copied()) {
            if let Some(rule) = builtin::check(text, self.home.as_deref()) {
                return Err(Refusal {
                    rule: rule.to_string(),
                    text: text.to_string(),
                });
            }
            if let Some((pattern, _)) = self.extra.iter().find(|(_, re)| re.is_match(text)) {
                return Err(Refusal {
                    rule: format!("deny pattern {pattern}"),
                    text: text.to_string(),
                });
            }
        }
        Ok(())
    }
}
