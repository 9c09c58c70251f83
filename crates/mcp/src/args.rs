//! MCP `tools/call` arguments to a `proc/new` payload (docs/protocol.md, "Requests and results").
//!
//! A payload field is text; the server turns it back into JSON with the tool's
//! `inputSchema` (a property typed `integer`, `number`, `boolean`, `array` or
//! `object` is parsed as JSON, everything else stays a string). So:
//!
//! - a JSON string is sent as itself, byte for byte (the payload escaping of
//!   `\` and newlines is undone by the server's parser);
//! - every other value is sent as compact JSON, which the server parses back
//!   into the same value for a typed property;
//! - `null` for a property whose type does not allow `null` is left out (the
//!   argument counts as not given: a string property cannot hold `null`);
//! - `timeout` and `sandbox` are the request's dispatch fields, as through 9P
//!   (the built-in `shell` tool documents `timeout` as an argument);
//! - the other reserved keys (`token`, `tool`, `agent`, `session`, `cwd`,
//!   `bypass`, `env.*`) and names a payload line cannot carry are refused: the
//!   bridge owns them (`bypass` is asked for with `_meta`).

use serde_json::{Map, Value};
use toolsrv_protocol::Payload;

use crate::error::ArgError;

/// Reserved payload keys an MCP argument may not set.
const OWNED_BY_BRIDGE: &[&str] = &["token", "tool", "agent", "session", "cwd", "bypass"];

/// Adds `arguments` to `req`, using the tool's `schema` to tell whether a
/// `null` may be sent.
pub fn add_arguments(
    req: &mut Payload,
    arguments: &Map<String, Value>,
    schema: &Value,
) -> Result<(), ArgError> {
    for (name, value) in arguments {
        check_name(name)?;
        let text = match value {
            Value::String(s) => s.clone(),
            Value::Null if !allows_null(schema, name) => continue,
            other => other.to_string(),
        };
        match name.as_str() {
            "timeout" => {
                req.timeout = Some(
                    toolsrv_protocol::parse_duration(&text)
                        .ok()
                        .filter(|d| !d.is_zero())
                        .ok_or_else(|| ArgError::Timeout(text.clone()))?,
                )
            }
            "sandbox" => req.sandbox = Some(text).filter(|s| !s.is_empty()),
            _ => req.args.push((name.clone(), text)),
        }
    }
    Ok(())
}

fn check_name(name: &str) -> Result<(), ArgError> {
    if name == "bypass" {
        return Err(ArgError::Bypass);
    }
    if OWNED_BY_BRIDGE.contains(&name) || name.starts_with("env.") {
        return Err(ArgError::Reserved(name.to_string()));
    }
    if name.is_empty() || name.contains(['=', '\n']) {
        return Err(ArgError::BadName(name.to_string()));
    }
    Ok(())
}

/// Whether property `name` of `schema` lists `null` among its types.
fn allows_null(schema: &Value, name: &str) -> bool {
    match schema.pointer(&format!("/properties/{}/type", pointer_escape(name))) {
        Some(Value::String(t)) => t == "null",
        Some(Value::Array(ts)) => ts.iter().any(|t| t == "null"),
        _ => false,
    }
}

fn pointer_escape(name: &str) -> String {
    name.replace('~', "~0").replace('/', "~1")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use toolsrv_protocol::{convert_args, parse_payload};

    fn schema() -> Value {
        json!({"type": "object", "properties": {
            "s": {"type": "string"}, "i": {"type": "integer"}, "n": {"type": "number"},
            "b": {"type": "boolean"}, "a": {"type": "array"}, "o": {"type": "object"},
            "m": {"type": ["integer", "null"]}, "free": {}
        }})
    }

    /// What the tool gets: encode, parse as the server does, convert with the schema.
    fn round_trip(args: Value) -> Result<Value, String> {
        let mut req = Payload::new("t", "a");
        let Value::Object(map) = args else {
            return Err("not an object".into());
        };
        add_arguments(&mut req, &map, &schema()).map_err(|e| e.to_string())?;
        let parsed = parse_payload(req.encode().as_bytes()).map_err(|e| e.to_string())?;
        convert_args(&parsed.args, &schema())
            .map(Value::Object)
            .map_err(|e| e.to_string())
    }

    #[test]
    fn json_types_are_kept() {
        let args = json!({"s": "x", "i": -7, "n": 0.25, "b": true, "a": [1, "two", null],
                          "o": {"k": {"deep": [false]}}, "m": null});
        assert_eq!(round_trip(args.clone()), Ok(args));
    }

    #[test]
    fn strings_arrive_byte_for_byte() {
        for s in [
            "a\\b",
            "\\n",
            "line1\nline2\r\n",
            "\\",
            "ends with \\",
            "=x=",
            "\"{}\"",
            "123",
            "true",
            "null",
            "tab\there",
            "ünïcødé ✓",
            "",
            " lead and trail ",
            "\r",
        ] {
            let got = round_trip(json!({"s": s, "free": s}));
            assert_eq!(got, Ok(json!({"s": s, "free": s})), "{s:?}");
        }
    }

    #[test]
    fn null_for_a_non_nullable_property_is_left_out() {
        assert_eq!(round_trip(json!({"s": null, "i": 1})), Ok(json!({"i": 1})));
    }

    #[test]
    fn reserved_and_unencodable_names_are_refused() {
        for name in ["token", "tool", "agent", "session", "cwd", "env.PATH"] {
            let r = round_trip(json!({ name: "x" }));
            assert!(
                r.as_ref().is_err_and(|e| e.contains("reserved")),
                "{name}: {r:?}"
            );
        }
        let r = round_trip(json!({"bypass": true}));
        assert!(r.is_err_and(|e| e.contains("toolsrv/bypass")));
        for name in ["", "a=b", "a\nb"] {
            assert!(round_trip(json!({ name: "x" })).is_err(), "{name:?}");
        }
    }

    #[test]
    fn timeout_and_sandbox_are_dispatch_fields() {
        let mut req = Payload::new("t", "a");
        let args = json!({"timeout": "90s", "sandbox": "net"});
        let Value::Object(map) = args else { return };
        assert!(add_arguments(&mut req, &map, &schema()).is_ok());
        assert_eq!(req.timeout, Some(std::time::Duration::from_secs(90)));
        assert_eq!(req.sandbox.as_deref(), Some("net"));
        assert!(req.args.is_empty());
        let args = json!({"timeout": 5});
        let Value::Object(map) = args else { return };
        assert!(add_arguments(&mut req, &map, &schema()).is_ok());
        assert_eq!(req.timeout, Some(std::time::Duration::from_secs(5)));
        let args = json!({"timeout": "soon"});
        let Value::Object(map) = args else { return };
        assert!(add_arguments(&mut req, &map, &schema()).is_err());
    }
}
