//! The YAML shape of tool metadata, deserialized with `serde_yaml_ng` so
//! that every error carries the line it was found on.
//!
//! Field checks that need a location (schema shape, `params` entries,
//! `timeout` syntax, `output` values) happen inside the `Deserialize`
//! implementations here, so their errors get the parser's line too.

use std::fmt;
use std::time::Duration;

use serde::de::{self, Deserializer, MapAccess, SeqAccess, Visitor};
use serde::Deserialize;
use serde_json::{Map, Value};

use crate::tool::OutputMode;

/// One metadata document (a sidecar file or a header block).
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawMeta {
    /// Optional; must equal the file name.
    pub name: Option<String>,
    /// What the tool does.
    pub description: Option<String>,
    /// Shorthand for `inputSchema.properties`.
    pub params: Option<ParamsSpec>,
    /// A full JSON Schema object; wins over `params`.
    #[serde(rename = "inputSchema")]
    pub input_schema: Option<SchemaSpec>,
    /// Shell command template of a metadata-only tool.
    pub command: Option<String>,
    /// The program to run.
    pub executable: Option<String>,
    /// The interpreter a script is run through.
    pub interpreter: Option<String>,
    /// The tool's default timeout.
    pub timeout: Option<TimeoutSpec>,
    /// How output is returned.
    pub output: Option<OutputMode>,
    /// Per-run limits; each applies when lower than the policy's.
    pub limits: Option<toolsrv_protocol::Limits>,
    /// Host variants; the first match is merged over the base.
    pub variants: Option<Vec<RawVariant>>,
}

/// One entry of `variants`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawVariant {
    /// Go `GOOS` name; omitted matches any.
    pub platform: Option<String>,
    /// Go `GOARCH` name; omitted matches any.
    pub arch: Option<String>,
    /// Replaces the base description.
    pub description: Option<String>,
    /// Replaces the base parameters (and schema).
    pub params: Option<ParamsSpec>,
    /// Replaces the base schema (and parameters).
    #[serde(rename = "inputSchema")]
    pub input_schema: Option<SchemaSpec>,
    /// Replaces how the tool runs.
    pub command: Option<String>,
    /// Replaces how the tool runs.
    pub executable: Option<String>,
    /// Replaces how the tool runs.
    pub interpreter: Option<String>,
    /// Replaces the timeout.
    pub timeout: Option<TimeoutSpec>,
    /// Replaces the output mode.
    pub output: Option<OutputMode>,
    /// Replaces the limits.
    pub limits: Option<toolsrv_protocol::Limits>,
}

impl RawMeta {
    /// Whether the base or any variant names an interpreter.
    pub fn mentions_interpreter(&self) -> bool {
        self.interpreter.is_some()
            || self
                .variants
                .iter()
                .flatten()
                .any(|v| v.interpreter.is_some())
    }

    /// Merges `v` over this base: every field the variant sets replaces the
    /// base's. `params`/`inputSchema` are replaced together, and so are
    /// `command`/`executable`/`interpreter`, so a variant never ends up
    /// half-combined with the base's way of running.
    pub fn merge(&mut self, v: RawVariant) {
        if v.params.is_some() || v.input_schema.is_some() {
            self.params = v.params;
            self.input_schema = v.input_schema;
        }
        if v.command.is_some() || v.executable.is_some() || v.interpreter.is_some() {
            self.command = v.command;
            self.executable = v.executable;
            self.interpreter = v.interpreter;
        }
        if v.description.is_some() {
            self.description = v.description;
        }
        if v.timeout.is_some() {
            self.timeout = v.timeout;
        }
        if v.output.is_some() {
            self.output = v.output;
        }
        if v.limits.is_some() {
            self.limits = v.limits;
        }
    }
}

/// A `timeout`: a Go duration string, or an integer number of seconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TimeoutSpec(pub Duration);

impl<'de> Deserialize<'de> for TimeoutSpec {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = TimeoutSpec;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a duration such as 30s or 2m")
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<TimeoutSpec, E> {
                Ok(TimeoutSpec(Duration::from_secs(v)))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<TimeoutSpec, E> {
                u64::try_from(v)
                    .map(|s| TimeoutSpec(Duration::from_secs(s)))
                    .map_err(|_| {
                        E::custom(format!(
                            "invalid duration {v}: negative durations are not allowed"
                        ))
                    })
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<TimeoutSpec, E> {
                toolsrv_protocol::duration::parse_duration(v)
                    .map(TimeoutSpec)
                    .map_err(E::custom)
            }
        }
        d.deserialize_any(V)
    }
}

/// `inputSchema`: a JSON Schema object with `type: object`, plus the order
/// its `properties` were declared in.
#[derive(Debug, Clone, PartialEq)]
pub struct SchemaSpec {
    /// The schema as JSON.
    pub schema: Value,
    /// Property names in declaration order.
    pub order: Vec<String>,
}

impl<'de> Deserialize<'de> for SchemaSpec {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = SchemaSpec;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a JSON Schema object with \"type\": \"object\"")
            }
            // Checks happen inside visit_map so errors get the mapping's line.
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<SchemaSpec, A::Error> {
                let entries = OValueVisitor.visit_map(map).map(OValue::into_entries)?;
                let ty = entries.iter().find(|(k, _)| k == "type").map(|(_, v)| v);
                if !matches!(ty, Some(OValue::Str(t)) if t == "object") {
                    return Err(de::Error::custom(
                        "a JSON Schema object with \"type\": \"object\" is required",
                    ));
                }
                let order = match entries.iter().find(|(k, _)| k == "properties") {
                    Some((_, OValue::Map(props))) => props.iter().map(|(k, _)| k.clone()).collect(),
                    Some(_) => {
                        return Err(de::Error::custom(
                            "\"properties\" must be a mapping of parameter schemas",
                        ))
                    }
                    None => Vec::new(),
                };
                Ok(SchemaSpec {
                    schema: OValue::Map(entries).into_json(),
                    order,
                })
            }
        }
        d.deserialize_map(V)
    }
}

/// `params`: parameter name to property schema, in declaration order, with
/// each property's `required: true|false` taken out.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ParamsSpec {
    /// Properties in declaration order (without their `required` keys).
    pub properties: Vec<(String, Value)>,
    /// Names declared `required: true`, in declaration order.
    pub required: Vec<String>,
}

impl ParamsSpec {
    /// The equivalent `{"type":"object","properties":{..},"required":[..]}`.
    pub fn to_schema(&self) -> SchemaSpec {
        let mut props = Map::new();
        for (k, v) in &self.properties {
            props.insert(k.clone(), v.clone());
        }
        let mut schema = Map::new();
        schema.insert("type".into(), Value::String("object".into()));
        schema.insert("properties".into(), Value::Object(props));
        schema.insert(
            "required".into(),
            Value::Array(self.required.iter().cloned().map(Value::String).collect()),
        );
        SchemaSpec {
            schema: Value::Object(schema),
            order: self.properties.iter().map(|(k, _)| k.clone()).collect(),
        }
    }
}

impl<'de> Deserialize<'de> for ParamsSpec {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = ParamsSpec;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a mapping of parameter names to schemas")
            }
            fn visit_unit<E>(self) -> Result<ParamsSpec, E> {
                Ok(ParamsSpec::default())
            }
            // Checks happen inside visit_map so errors get the mapping's line.
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<ParamsSpec, A::Error> {
                let entries = OValueVisitor.visit_map(map).map(OValue::into_entries)?;
                let mut spec = ParamsSpec::default();
                for (name, prop) in entries {
                    let mut fields = match prop {
                        OValue::Map(fields) => fields,
                        OValue::Null => Vec::new(),
                        _ => {
                            return Err(de::Error::custom(format!(
                                "parameter \"{name}\" must be a mapping such as {{type: string}}"
                            )))
                        }
                    };
                    if let Some(pos) = fields.iter().position(|(k, _)| k == "required") {
                        match fields.remove(pos).1 {
                            OValue::Bool(true) => spec.required.push(name.clone()),
                            OValue::Bool(false) => {}
                            _ => {
                                return Err(de::Error::custom(format!(
                                    "parameter \"{name}\": required must be true or false"
                                )))
                            }
                        }
                    }
                    spec.properties
                        .push((name, OValue::Map(fields).into_json()));
                }
                Ok(spec)
            }
        }
        d.deserialize_any(V)
    }
}

/// A JSON-like tree that keeps mapping keys in document order.
#[derive(Debug, Clone, PartialEq)]
pub enum OValue {
    /// `null` or an empty value.
    Null,
    /// A boolean.
    Bool(bool),
    /// A number.
    Number(serde_json::Number),
    /// A string.
    Str(String),
    /// A sequence.
    Seq(Vec<OValue>),
    /// A mapping, in document order.
    Map(Vec<(String, OValue)>),
}

impl OValue {
    /// The entries of a mapping (empty for anything else).
    pub fn into_entries(self) -> Vec<(String, OValue)> {
        match self {
            OValue::Map(entries) => entries,
            _ => Vec::new(),
        }
    }

    /// Converts to `serde_json::Value` (non-finite floats become `null`).
    pub fn into_json(self) -> Value {
        match self {
            OValue::Null => Value::Null,
            OValue::Bool(b) => Value::Bool(b),
            OValue::Number(n) => Value::Number(n),
            OValue::Str(s) => Value::String(s),
            OValue::Seq(items) => Value::Array(items.into_iter().map(OValue::into_json).collect()),
            OValue::Map(entries) => {
                let mut m = Map::new();
                for (k, v) in entries {
                    m.insert(k, v.into_json());
                }
                Value::Object(m)
            }
        }
    }
}

impl<'de> Deserialize<'de> for OValue {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(OValueVisitor)
    }
}

/// Builds an [`OValue`] from any self-describing input.
struct OValueVisitor;

impl<'de> Visitor<'de> for OValueVisitor {
    type Value = OValue;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON-compatible value")
    }
    fn visit_unit<E>(self) -> Result<OValue, E> {
        Ok(OValue::Null)
    }
    fn visit_none<E>(self) -> Result<OValue, E> {
        Ok(OValue::Null)
    }
    fn visit_some<D2: Deserializer<'de>>(self, d: D2) -> Result<OValue, D2::Error> {
        OValue::deserialize(d)
    }
    fn visit_bool<E>(self, v: bool) -> Result<OValue, E> {
        Ok(OValue::Bool(v))
    }
    fn visit_i64<E>(self, v: i64) -> Result<OValue, E> {
        Ok(OValue::Number(v.into()))
    }
    fn visit_u64<E>(self, v: u64) -> Result<OValue, E> {
        Ok(OValue::Number(v.into()))
    }
    fn visit_f64<E>(self, v: f64) -> Result<OValue, E> {
        Ok(serde_json::Number::from_f64(v).map_or(OValue::Null, OValue::Number))
    }
    fn visit_str<E>(self, v: &str) -> Result<OValue, E> {
        Ok(OValue::Str(v.to_string()))
    }
    fn visit_string<E>(self, v: String) -> Result<OValue, E> {
        Ok(OValue::Str(v))
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<OValue, A::Error> {
        let mut items = Vec::new();
        while let Some(item) = seq.next_element()? {
            items.push(item);
        }
        Ok(OValue::Seq(items))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<OValue, A::Error> {
        let mut entries: Vec<(String, OValue)> = Vec::new();
        while let Some((k, v)) = map.next_entry::<String, OValue>()? {
            if entries.iter().any(|(e, _)| *e == k) {
                return Err(de::Error::custom(format!("duplicate key \"{k}\"")));
            }
            entries.push((k, v));
        }
        Ok(OValue::Map(entries))
    }
}
