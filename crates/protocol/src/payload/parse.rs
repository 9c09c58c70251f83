//! The payload parser: `key=value` lines to a [`Payload`].

use std::collections::HashSet;
use std::time::Duration;

use super::error::{PayloadError, Quoted, TimeoutReason};
use super::escape::unescape_value;
use super::names::{
    is_reserved_env_name, is_valid_env_name, unsafe_id_reason, validate_agent_id,
    validate_tool_name,
};
use super::Payload;
use crate::duration::parse_duration;

/// Parses a request payload.
///
/// The payload is UTF-8 text with one `key=value` field per line, split at the first `=`.
/// Empty lines are skipped; every other byte of a value is itself (docs/protocol.md, "Requests and results"), so a `\r`
/// before a `\n` belongs to the value. Values are unescaped with
/// [`unescape_value`](super::unescape_value). Reserved keys fill the named fields (see
/// docs/protocol.md, "Requests and results"); `env.NAME` fields go to [`Payload::env`] and every other field, in order, to
/// [`Payload::args`]. Empty `cwd` and `sandbox` values count as absent.
///
/// # Errors
///
/// The first problem found, in line order: invalid UTF-8, a line without `=`, an empty key, a
/// duplicate key, an invalid `tool`/`agent`/`session`/`bypass`/`timeout` value (a `session` or
/// `agent` that is empty, `.`, `..`, or holds `/` or a control character), an invalid
/// `env.NAME` name or a reserved one ([`RESERVED_ENV_NAMES`](super::RESERVED_ENV_NAMES)); then
/// a missing `tool`, then a missing `agent`.
pub fn parse_payload(bytes: &[u8]) -> Result<Payload, PayloadError> {
    let text = std::str::from_utf8(bytes).map_err(|e| PayloadError::NotUtf8 {
        offset: e.valid_up_to(),
    })?;
    let mut payload = Payload::default();
    let mut seen: HashSet<&str> = HashSet::new();
    let (mut have_tool, mut have_agent) = (false, false);
    for line in lines(text) {
        let Some((key, raw)) = line.split_once('=') else {
            return Err(PayloadError::MalformedLine {
                line: Quoted::new(line),
            });
        };
        if key.is_empty() {
            return Err(PayloadError::EmptyKey {
                line: Quoted::new(line),
            });
        }
        if !seen.insert(key) {
            return Err(PayloadError::DuplicateKey {
                key: Quoted::new(key),
            });
        }
        let value = unescape_value(raw);
        match key {
            "token" => payload.token = Some(value),
            "tool" => {
                validate_tool_name(&value)?;
                payload.tool = value;
                have_tool = true;
            }
            "agent" => {
                // `.` and `..` get the reason they are unsafe; anything else
                // the character check first.
                if !matches!(value.as_str(), "." | "..") {
                    validate_agent_id(&value)?;
                }
                if let Some(reason) = unsafe_id_reason(&value) {
                    return Err(PayloadError::UnsafeAgentId {
                        value: Quoted::new(&value),
                        reason,
                    });
                }
                payload.agent = value;
                have_agent = true;
            }
            "session" => {
                if let Some(reason) = unsafe_id_reason(&value) {
                    return Err(PayloadError::InvalidSession {
                        value: Quoted::new(&value),
                        reason,
                    });
                }
                payload.session = Some(value);
            }
            "cwd" => payload.cwd = non_empty(value),
            "sandbox" => payload.sandbox = non_empty(value),
            "bypass" => payload.bypass = parse_bypass(&value)?,
            "timeout" => payload.timeout = Some(parse_timeout(&value)?),
            _ => match key.strip_prefix("env.") {
                Some(name) if is_reserved_env_name(name) => {
                    return Err(PayloadError::ReservedEnvName {
                        name: Quoted::new(name),
                    })
                }
                Some(name) if is_valid_env_name(name) => payload.env.push((name.to_owned(), value)),
                Some(name) => {
                    return Err(PayloadError::InvalidEnvName {
                        name: Quoted::new(name),
                    })
                }
                None => payload.args.push((key.to_owned(), value)),
            },
        }
    }
    if !have_tool {
        return Err(PayloadError::MissingTool);
    }
    if !have_agent {
        return Err(PayloadError::MissingAgent);
    }
    Ok(payload)
}

/// The non-empty lines of `text`, each without its `\n`.
fn lines(text: &str) -> impl Iterator<Item = &str> {
    text.split('\n').filter(|line| !line.is_empty())
}

fn non_empty(value: String) -> Option<String> {
    (!value.is_empty()).then_some(value)
}

fn parse_bypass(value: &str) -> Result<bool, PayloadError> {
    match value {
        "true" => Ok(true),
        "false" => Ok(false),
        _ => Err(PayloadError::InvalidBypass {
            value: Quoted::new(value),
        }),
    }
}

fn parse_timeout(value: &str) -> Result<Duration, PayloadError> {
    let invalid = |reason| PayloadError::InvalidTimeout {
        value: Quoted::new(value),
        reason,
    };
    match parse_duration(value) {
        Ok(d) if d.is_zero() => Err(invalid(TimeoutReason::Zero)),
        Ok(d) => Ok(d),
        Err(e) => Err(invalid(TimeoutReason::Syntax(e.reason))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::payload::{NameError, AGENT_ID_RULE, TOOL_NAME_RULE};

    fn parse(text: &str) -> Result<Payload, String> {
        parse_payload(text.as_bytes()).map_err(|e| e.to_string())
    }

    fn err(text: &str) -> String {
        match parse(text) {
            Ok(p) => panic!("{text:?} should fail, parsed {p:?}"),
            Err(e) => e,
        }
    }

    #[test]
    fn parses_every_reserved_key() {
        let p = parse(
            "token=t0k\ntool=shell\nagent=a1\nsession=s1\ncwd=/tmp/x y\nenv.FOO=bar\nenv._B2=\n\
             bypass=true\ntimeout=1m30s\nsandbox=strict\ncommand=echo hi\nlimit=5\n",
        );
        assert_eq!(
            p,
            Ok(Payload {
                token: Some("t0k".into()),
                tool: "shell".into(),
                agent: "a1".into(),
                session: Some("s1".into()),
                cwd: Some("/tmp/x y".into()),
                env: vec![("FOO".into(), "bar".into()), ("_B2".into(), String::new())],
                bypass: true,
                timeout: Some(Duration::from_secs(90)),
                sandbox: Some("strict".into()),
                args: vec![
                    ("command".into(), "echo hi".into()),
                    ("limit".into(), "5".into())
                ],
            })
        );
    }

    #[test]
    fn minimal_payload_defaults() {
        let p = parse("tool=t\nagent=a");
        assert_eq!(
            p,
            Ok(Payload {
                tool: "t".into(),
                agent: "a".into(),
                ..Payload::default()
            })
        );
        let p = parse("tool=t\nagent=a\ncwd=\nsandbox=\nbypass=false\ntoken=");
        assert_eq!(
            p,
            Ok(Payload {
                tool: "t".into(),
                agent: "a".into(),
                token: Some(String::new()),
                ..Payload::default()
            })
        );
    }

    #[test]
    fn splits_at_first_equals_and_unescapes() {
        let p = parse("tool=t\nagent=a\nexpr=a=b==c\ntext=line1\\nline2\\\\n\\t\\\n");
        assert_eq!(
            p.map(|p| p.args),
            Ok(vec![
                ("expr".into(), "a=b==c".into()),
                ("text".into(), "line1\nline2\\n\\t\\".into()),
            ])
        );
    }

    #[test]
    fn skips_blank_lines_and_keeps_carriage_returns() {
        let p = parse("\n\ntool=t\n\nagent=a\nx=1\r\n\n\n");
        assert_eq!(
            p.map(|p| (p.tool, p.agent, p.args)),
            Ok(("t".into(), "a".into(), vec![("x".into(), "1\r".into())]))
        );
        // A carriage return is part of the value wherever it stands.
        let p = parse("tool=t\nagent=a\nx=1\r");
        assert_eq!(p.map(|p| p.args), Ok(vec![("x".into(), "1\r".into())]));
        let p = parse("tool=t\nagent=a\nx=1\r2\n");
        assert_eq!(p.map(|p| p.args), Ok(vec![("x".into(), "1\r2".into())]));
    }

    #[test]
    fn rejects_invalid_utf8() {
        assert_eq!(
            parse_payload(b"tool=t\nagent=\xffa").map_err(|e| e.to_string()),
            Err("payload is not valid UTF-8 (invalid byte at offset 13)".to_owned())
        );
    }

    #[test]
    fn rejects_malformed_lines_quoted_and_truncated() {
        assert_eq!(
            err("tool=t\nagent=a\nno equals here"),
            r#"malformed payload line "no equals here""#
        );
        assert_eq!(err(" \ntool=t\nagent=a"), r#"malformed payload line " ""#);
        let long = format!("tool=t\nagent=a\n{}", "y".repeat(5000));
        assert_eq!(
            err(&long),
            format!("malformed payload line \"{}...\"", "y".repeat(80))
        );
        assert_eq!(
            err("tool=t\n=value"),
            r#"empty key in payload line "=value""#
        );
    }

    #[test]
    fn rejects_missing_tool_and_agent() {
        assert_eq!(err(""), "missing tool");
        assert_eq!(err("agent=a"), "missing tool");
        assert_eq!(err("tool=t"), "missing agent");
        assert_eq!(err("tool=t\nx=1\n"), "missing agent");
    }

    #[test]
    fn rejects_duplicates() {
        assert_eq!(err("tool=t\ntool=t\nagent=a"), r#"duplicate key "tool""#);
        assert_eq!(err("tool=t\nagent=a\nx=1\nx=2"), r#"duplicate key "x""#);
        assert_eq!(
            err("tool=t\nagent=a\nenv.A=1\nenv.A=2"),
            r#"duplicate key "env.A""#
        );
        assert_eq!(
            err("tool=t\nagent=a\ntoken=1\ntoken=1"),
            r#"duplicate key "token""#
        );
    }

    #[test]
    fn rejects_bad_bypass_and_timeout() {
        assert_eq!(
            err("tool=t\nagent=a\nbypass=yes"),
            r#"invalid bypass "yes": must be true or false"#
        );
        assert_eq!(
            err("tool=t\nagent=a\nbypass=True"),
            r#"invalid bypass "True": must be true or false"#
        );
        assert_eq!(
            err("tool=t\nagent=a\ntimeout=soon"),
            r#"invalid timeout "soon": expected a number"#
        );
        assert_eq!(
            err("tool=t\nagent=a\ntimeout=-1s"),
            r#"invalid timeout "-1s": negative durations are not allowed"#
        );
        assert_eq!(
            err("tool=t\nagent=a\ntimeout="),
            r#"invalid timeout "": empty duration"#
        );
        assert_eq!(
            err("tool=t\nagent=a\ntimeout=0s"),
            r#"invalid timeout "0s": must be greater than zero"#
        );
        assert_eq!(
            parse("tool=t\nagent=a\ntimeout=45").map(|p| p.timeout),
            Ok(Some(Duration::from_secs(45)))
        );
    }

    #[test]
    fn rejects_bad_env_names() {
        assert_eq!(
            err("tool=t\nagent=a\nenv.1X=1"),
            r#"invalid environment variable name "1X""#
        );
        assert_eq!(
            err("tool=t\nagent=a\nenv.=1"),
            r#"invalid environment variable name """#
        );
        assert_eq!(
            err("tool=t\nagent=a\nenv.A-B=1"),
            r#"invalid environment variable name "A-B""#
        );
        // `env` without a dot is an ordinary argument.
        assert_eq!(
            parse("tool=t\nagent=a\nenv=1").map(|p| p.args),
            Ok(vec![("env".into(), "1".into())])
        );
    }

    #[test]
    fn refuses_reserved_env_names() {
        for name in [
            "ARG_COMMAND",
            "TOOL_ARGS",
            "LD_PRELOAD",
            "BASH_ENV",
            "ENV",
            "PWD",
            "OLLIE_AGENT_ID",
            "IFS",
        ] {
            assert_eq!(
                err(&format!("tool=t\nagent=a\nenv.{name}=x")),
                format!("environment variable \"{name}\" cannot be set by a request")
            );
        }
        assert_eq!(
            parse("tool=t\nagent=a\nenv.ARGS=1").map(|p| p.env),
            Ok(vec![("ARGS".into(), "1".into())])
        );
    }

    #[test]
    fn refuses_session_and_agent_values_unsafe_in_paths() {
        assert_eq!(
            err("tool=t\nagent=a\nsession=.."),
            r#"invalid session "..": must not be "." or "..""#
        );
        assert_eq!(
            err("tool=t\nagent=a\nsession=x/../y"),
            r#"invalid session "x/../y": must not contain "/""#
        );
        assert_eq!(
            err("tool=t\nagent=a\nsession="),
            r#"invalid session "": must not be empty"#
        );
        assert_eq!(
            err("tool=t\nagent=a\nsession=a\r"),
            r#"invalid session "a\r": must not contain control characters"#
        );
        assert_eq!(
            err("tool=t\nagent=.."),
            r#"invalid agent ID "..": must not be "." or "..""#
        );
        assert_eq!(
            err("tool=t\nagent=."),
            r#"invalid agent ID ".": must not be "." or "..""#
        );
        assert_eq!(
            parse("tool=t\nagent=a.b\nsession=s.1").map(|p| p.session),
            Ok(Some("s.1".into()))
        );
    }

    #[test]
    fn validates_tool_and_agent() {
        assert_eq!(
            parse_payload(b"tool=a b\nagent=a"),
            Err(PayloadError::Name(NameError::InvalidToolName))
        );
        assert_eq!(
            err("tool=\nagent=a"),
            format!("invalid tool name: {TOOL_NAME_RULE}")
        );
        assert_eq!(
            err("tool=t\nagent=x/y"),
            format!("invalid agent ID: {AGENT_ID_RULE}")
        );
        assert_eq!(
            err(&format!("tool=t\nagent={}", "a".repeat(129))),
            format!("invalid agent ID: {AGENT_ID_RULE}")
        );
        // Names are unescaped before validation: an escaped newline is still invalid.
        assert_eq!(
            err("tool=t\\n\nagent=a"),
            format!("invalid tool name: {TOOL_NAME_RULE}")
        );
    }
}
