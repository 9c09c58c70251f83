//! `Policy::parse`: YAML text to [`Policy`], with errors naming file and line.

use super::{Policy, PolicyError};
use std::path::Path;
use std::sync::LazyLock;

/// `... at line 4 column 3` suffixes that serde_yaml_ng appends; the line goes in front instead.
static AT_MARK: LazyLock<Option<regex::Regex>> =
    LazyLock::new(|| regex::Regex::new(r" at (line \d+ column \d+|position \d+)").ok());

/// serde_yaml_ng prefixes errors with the key path (`filesystem: unknown field ...`).
static PATH_PREFIX: LazyLock<Option<regex::Regex>> =
    LazyLock::new(|| regex::Regex::new(r"^([A-Za-z0-9_.\[\]-]+): (.*)$").ok());

impl Policy {
    /// Parses the text of a policy file. `origin` is only used in error messages,
    /// which read `<origin>:<line>: <reason>`, for example
    /// `/x/sandbox.yaml:4: unknown field "rwxx", expected one of "ro", "rox", "rw", "rwx", "deny_read", "deny_write" (in filesystem)`.
    ///
    /// An empty document (or only comments) is the all-defaults policy.
    pub fn parse(text: &str, origin: &Path) -> Result<Policy, PolicyError> {
        if is_blank(text) {
            return Ok(Policy::default());
        }
        let policy = serde_yaml_ng::from_str::<Option<Policy>>(text)
            .map(Option::unwrap_or_default)
            .map_err(|e| {
                let message = clean_message(&e.to_string());
                let line = duplicate_line(text, &message).or(e.location().map(|l| l.line()));
                PolicyError::Parse {
                    file: origin.to_path_buf(),
                    line,
                    message,
                }
            })?;
        if !policy.network.enabled && !policy.network.domains.is_empty() {
            return Err(PolicyError::Parse {
                file: origin.to_path_buf(),
                line: key_line(text, "domains"),
                message:
                    "network.domains lists hosts, but network.enabled is false: remove one of them"
                        .to_string(),
            });
        }
        if !policy.secrets.is_empty() && policy.network.domains.is_empty() {
            return Err(PolicyError::Parse {
                file: origin.to_path_buf(),
                line: key_line(text, "secrets"),
                message: "secrets go through toolsrv's proxy, which only network.domains turns on: list the secrets' hosts there".to_string(),
            });
        }
        let mut policy = policy;
        // A secret's file is hidden from every run.
        for s in &policy.secrets {
            if let super::model::SecretSource::File(path) = &s.from {
                policy.filesystem.deny_read.push(path.clone());
            }
        }
        Ok(policy)
    }
}

/// The line of the first `key:` (indented or not).
fn key_line(text: &str, key: &str) -> Option<usize> {
    text.lines()
        .position(|l| {
            l.trim_start()
                .strip_prefix(key)
                .is_some_and(|r| r.trim_start().starts_with(':'))
        })
        .map(|i| i + 1)
}

/// The line of the second top-level `key:` for a `duplicate field "key"`
/// message (the parser reports the mapping's first line, which points at
/// neither).
fn duplicate_line(text: &str, message: &str) -> Option<usize> {
    let key = message
        .strip_prefix("duplicate field \"")?
        .split('"')
        .next()?;
    let mut seen = 0;
    for (i, line) in text.lines().enumerate() {
        if line
            .strip_prefix(key)
            .is_some_and(|r| r.trim_start().starts_with(':'))
        {
            seen += 1;
            if seen == 2 {
                return Some(i + 1);
            }
        }
    }
    None
}

/// Only whitespace, comments and document markers.
fn is_blank(text: &str) -> bool {
    text.lines().all(|l| {
        let t = l.trim();
        t.is_empty() || t.starts_with('#') || t == "---" || t == "..."
    })
}

/// Drops position suffixes, moves the key path to the end and uses double quotes.
fn clean_message(raw: &str) -> String {
    let msg = match AT_MARK.as_ref() {
        Some(re) => re.replace_all(raw, "").into_owned(),
        None => raw.to_string(),
    };
    let msg = msg.replace('`', "\"");
    if let Some(caps) = PATH_PREFIX.as_ref().and_then(|re| re.captures(&msg)) {
        if let (Some(path), Some(rest)) = (caps.get(1), caps.get(2)) {
            return format!("{} (in {})", rest.as_str(), path.as_str());
        }
    }
    msg
}
