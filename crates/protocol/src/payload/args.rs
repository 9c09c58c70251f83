//! Conversion of payload arguments to a JSON object using the tool's `inputSchema`.

use std::collections::HashSet;

use serde_json::{Map, Value};

use super::error::{PayloadError, Quoted};

/// A JSON Schema type an argument value can be parsed as.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum JsonType {
    Integer,
    Number,
    Boolean,
    Array,
    Object,
    Null,
}

impl JsonType {
    fn from_name(name: &str) -> Option<Self> {
        Some(match name {
            "integer" => JsonType::Integer,
            "number" => JsonType::Number,
            "boolean" => JsonType::Boolean,
            "array" => JsonType::Array,
            "object" => JsonType::Object,
            "null" => JsonType::Null,
            _ => return None,
        })
    }

    fn with_article(self) -> &'static str {
        match self {
            JsonType::Integer => "an integer",
            JsonType::Number => "a number",
            JsonType::Boolean => "a boolean",
            JsonType::Array => "an array",
            JsonType::Object => "an object",
            JsonType::Null => "null",
        }
    }

    /// `value` converted to this type, if it is of this type. A whole-valued float such as
    /// `2.0` counts as an integer (as in JSON Schema) and is normalised to `2`.
    fn accept(self, value: &Value) -> Option<Value> {
        let ok = match self {
            JsonType::Integer => return as_integer(value),
            JsonType::Number => value.is_number(),
            JsonType::Boolean => value.is_boolean(),
            JsonType::Array => value.is_array(),
            JsonType::Object => value.is_object(),
            JsonType::Null => value.is_null(),
        };
        ok.then(|| value.clone())
    }
}

fn as_integer(value: &Value) -> Option<Value> {
    if value.is_i64() || value.is_u64() {
        return Some(value.clone());
    }
    let f = value.as_f64()?;
    // 2^63 as f64 is exact; every whole float strictly inside (-2^63, 2^63) fits an i64.
    const LIMIT: f64 = 9_223_372_036_854_775_808.0;
    if f.fract() == 0.0 && f > -LIMIT && f < LIMIT {
        // Safe cast: `f` is whole and within i64 range, checked just above.
        #[allow(clippy::cast_possible_truncation)]
        let i = f as i64;
        return Some(Value::from(i));
    }
    None
}

/// The JSON types a property schema asks for, or `None` when its value stays a string
/// (no `type`, a `string` type, or a type this converter does not know).
fn typed_property(property: Option<&Value>) -> Option<Vec<JsonType>> {
    let names: Vec<&str> = match property?.get("type")? {
        Value::String(name) => vec![name.as_str()],
        Value::Array(names) => names.iter().filter_map(Value::as_str).collect(),
        _ => return None,
    };
    let types: Option<Vec<JsonType>> = names.iter().map(|n| JsonType::from_name(n)).collect();
    types.filter(|t| !t.is_empty())
}

/// Converts payload arguments to the JSON object passed to the tool, using its `inputSchema`
/// (docs/protocol.md, "Requests and results").
///
/// A property whose `type` is `integer`, `number`, `boolean`, `array`, `object` (or a list of
/// those and `null`) is parsed as JSON and must be of that type; every other argument stays a
/// string. Defaults are not filled in.
///
/// # Errors
///
/// In argument order: a duplicate name, an argument not in `properties` when the schema sets
/// `additionalProperties: false`, or a typed value that does not parse or has the wrong type
/// (`argument "limit" must be an integer, got "2.5"`); then the first name in `required` that
/// was not given (`missing required argument "path"`).
pub fn convert_args(
    args: &[(String, String)],
    schema: &Value,
) -> Result<Map<String, Value>, PayloadError> {
    let properties = schema.get("properties").and_then(Value::as_object);
    let closed = schema.get("additionalProperties") == Some(&Value::Bool(false));
    let mut seen: HashSet<&str> = HashSet::new();
    let mut out = Map::new();
    for (name, raw) in args {
        if !seen.insert(name) {
            return Err(PayloadError::DuplicateKey {
                key: Quoted::new(name),
            });
        }
        let property = properties.and_then(|p| p.get(name));
        if closed && property.is_none() {
            return Err(PayloadError::UnknownArgument {
                name: Quoted::new(name),
            });
        }
        let value = match typed_property(property) {
            None => Value::String(raw.clone()),
            Some(types) => convert_typed(name, raw, &types)?,
        };
        out.insert(name.clone(), value);
    }
    let required = schema.get("required").and_then(Value::as_array);
    for name in required.into_iter().flatten().filter_map(Value::as_str) {
        if !out.contains_key(name) {
            return Err(PayloadError::MissingRequired {
                name: Quoted::new(name),
            });
        }
    }
    Ok(out)
}

fn convert_typed(name: &str, raw: &str, types: &[JsonType]) -> Result<Value, PayloadError> {
    let parsed: Option<Value> = serde_json::from_str(raw).ok();
    parsed
        .and_then(|v| types.iter().find_map(|t| t.accept(&v)))
        .ok_or_else(|| PayloadError::WrongType {
            name: Quoted::new(name),
            expected: types
                .iter()
                .map(|t| t.with_article())
                .collect::<Vec<_>>()
                .join(" or "),
            value: Quoted::new(raw),
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn args(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    fn schema() -> Value {
        json!({
            "type": "object",
            "properties": {
                "path": {"type": "string"},
                "limit": {"type": "integer"},
                "ratio": {"type": "number"},
                "all": {"type": "boolean"},
                "names": {"type": "array", "items": {"type": "string"}},
                "opts": {"type": "object"},
                "maybe": {"type": ["integer", "null"]},
                "either": {"type": ["string", "integer"]},
                "free": {}
            },
            "required": ["path"]
        })
    }

    fn convert(pairs: &[(&str, &str)], schema: &Value) -> Result<Value, String> {
        convert_args(&args(pairs), schema)
            .map(Value::Object)
            .map_err(|e| e.to_string())
    }

    #[test]
    fn converts_typed_properties() {
        let got = convert(
            &[
                ("path", "/x"),
                ("limit", "25"),
                ("ratio", "0.5"),
                ("all", "true"),
                ("names", r#"["a","b"]"#),
                ("opts", r#"{"k": 1}"#),
                ("maybe", "null"),
                ("either", "7"),
                ("free", "42"),
                ("extra", "true"),
            ],
            &schema(),
        );
        assert_eq!(
            got,
            Ok(json!({
                "path": "/x", "limit": 25, "ratio": 0.5, "all": true, "names": ["a", "b"],
                "opts": {"k": 1}, "maybe": null, "either": "7", "free": "42", "extra": "true"
            }))
        );
    }

    #[test]
    fn strings_stay_strings_even_if_json_like() {
        let got = convert(&[("path", "123"), ("limit", " 3 ")], &schema());
        assert_eq!(got, Ok(json!({"path": "123", "limit": 3})));
    }

    #[test]
    fn whole_floats_are_integers() {
        assert_eq!(
            convert(&[("path", "p"), ("limit", "2.0")], &schema()),
            Ok(json!({"path": "p", "limit": 2}))
        );
        assert_eq!(
            convert(&[("path", "p"), ("limit", "1e3")], &schema()),
            Ok(json!({"path": "p", "limit": 1000}))
        );
        assert_eq!(
            convert(&[("path", "p"), ("ratio", "3")], &schema()),
            Ok(json!({"path": "p", "ratio": 3}))
        );
    }

    #[test]
    fn wrong_types_name_the_argument() {
        let cases = [
            (
                "limit",
                "2.5",
                r#"argument "limit" must be an integer, got "2.5""#,
            ),
            (
                "limit",
                "ten",
                r#"argument "limit" must be an integer, got "ten""#,
            ),
            (
                "limit",
                "1e300",
                r#"argument "limit" must be an integer, got "1e300""#,
            ),
            (
                "ratio",
                "\"1\"",
                r#"argument "ratio" must be a number, got "\"1\"""#,
            ),
            (
                "all",
                "yes",
                r#"argument "all" must be a boolean, got "yes""#,
            ),
            ("all", "", r#"argument "all" must be a boolean, got """#),
            (
                "names",
                "a,b",
                r#"argument "names" must be an array, got "a,b""#,
            ),
            (
                "opts",
                "[]",
                r#"argument "opts" must be an object, got "[]""#,
            ),
            (
                "maybe",
                "x",
                r#"argument "maybe" must be an integer or null, got "x""#,
            ),
        ];
        for (name, value, message) in cases {
            assert_eq!(
                convert(&[("path", "p"), (name, value)], &schema()),
                Err(message.to_owned())
            );
        }
    }

    #[test]
    fn missing_required_and_unknown() {
        assert_eq!(
            convert(&[("limit", "1")], &schema()),
            Err(r#"missing required argument "path""#.to_owned())
        );
        let mut closed = schema();
        closed["additionalProperties"] = json!(false);
        assert_eq!(
            convert(&[("path", "p"), ("x", "1")], &closed),
            Err(r#"unknown argument "x""#.to_owned())
        );
        assert_eq!(convert(&[("path", "p")], &closed), Ok(json!({"path": "p"})));
        assert_eq!(
            convert(&[("path", "p"), ("path", "q")], &schema()),
            Err(r#"duplicate key "path""#.to_owned())
        );
    }

    #[test]
    fn tolerates_odd_schemas() {
        assert_eq!(convert(&[("a", "1")], &json!(true)), Ok(json!({"a": "1"})));
        assert_eq!(
            convert(&[("a", "1")], &json!({"properties": []})),
            Ok(json!({"a": "1"}))
        );
        assert_eq!(
            convert(&[("a", "1")], &json!({"properties": {"a": {"type": 5}}})),
            Ok(json!({"a": "1"}))
        );
        assert_eq!(
            convert(&[], &json!({"required": [1, "x"]})),
            Err(r#"missing required argument "x""#.to_owned())
        );
    }
}
