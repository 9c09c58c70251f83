//! Command templates of metadata-only tools: `{name}` placeholders replaced
//! by single-quoted argument values; `{{` and `}}` are literal braces.

use serde_json::{Map, Value};

use crate::quote::single_quote;

/// Why a command template was rejected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TemplateError {
    /// A `{name}` names no declared parameter.
    #[error("command placeholder \"{{{name}}}\" is not a declared parameter")]
    UnknownPlaceholder {
        /// The placeholder's name.
        name: String,
    },
    /// A `{` has no matching `}`.
    #[error("command has an unclosed \"{{\" at byte {offset}; write \"{{{{\" for a literal brace")]
    Unclosed {
        /// Byte offset of the `{`.
        offset: usize,
    },
    /// A `}` has no matching `{`.
    #[error(
        "command has an unmatched \"}}\" at byte {offset}; write \"}}}}\" for a literal brace"
    )]
    StrayClose {
        /// Byte offset of the `}`.
        offset: usize,
    },
}

/// One piece of a parsed template.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Segment {
    /// Text copied as is (with `{{`/`}}` already unescaped).
    Literal(String),
    /// A parameter whose quoted value is substituted.
    Param(String),
}

/// A parsed command template.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Template {
    source: String,
    segments: Vec<Segment>,
}

impl Template {
    /// Parses `text`, checking every placeholder against `params` (the
    /// declared parameter names).
    pub fn parse(text: &str, params: &[String]) -> Result<Template, TemplateError> {
        let mut segments = Vec::new();
        let mut literal = String::new();
        let mut chars = text.char_indices().peekable();
        while let Some((i, c)) = chars.next() {
            match c {
                '{' if chars.peek().map(|&(_, n)| n) == Some('{') => {
                    chars.next();
                    literal.push('{');
                }
                '}' if chars.peek().map(|&(_, n)| n) == Some('}') => {
                    chars.next();
                    literal.push('}');
                }
                '}' => return Err(TemplateError::StrayClose { offset: i }),
                '{' => {
                    let rest = &text[i + 1..];
                    let end = rest
                        .find('}')
                        .ok_or(TemplateError::Unclosed { offset: i })?;
                    let name = &rest[..end];
                    if !params.iter().any(|p| p == name) {
                        return Err(TemplateError::UnknownPlaceholder {
                            name: name.to_string(),
                        });
                    }
                    // Skip the name and the closing brace.
                    for _ in 0..name.chars().count() + 1 {
                        chars.next();
                    }
                    if !literal.is_empty() {
                        segments.push(Segment::Literal(std::mem::take(&mut literal)));
                    }
                    segments.push(Segment::Param(name.to_string()));
                }
                c => literal.push(c),
            }
        }
        if !literal.is_empty() {
            segments.push(Segment::Literal(literal));
        }
        Ok(Template {
            source: text.to_string(),
            segments,
        })
    }

    /// The template text as written in the metadata.
    pub fn source(&self) -> &str {
        &self.source
    }

    /// The parsed pieces.
    pub fn segments(&self) -> &[Segment] {
        &self.segments
    }

    /// Renders the template: each `{name}` becomes the argument's value in
    /// single quotes (strings verbatim, other JSON values as compact JSON);
    /// an absent argument becomes the schema's `default` for it, else `''`.
    pub fn render(&self, args: &Map<String, Value>, schema: &Value) -> String {
        let mut out = String::with_capacity(self.source.len());
        for seg in &self.segments {
            match seg {
                Segment::Literal(s) => out.push_str(s),
                Segment::Param(name) => {
                    let default = schema
                        .get("properties")
                        .and_then(|p| p.get(name))
                        .and_then(|p| p.get("default"));
                    match args.get(name).or(default) {
                        Some(v) => out.push_str(&single_quote(&value_text(v))),
                        None => out.push_str("''"),
                    }
                }
            }
        }
        out
    }
}

/// The text of an argument value: strings verbatim, everything else as
/// compact JSON.
pub fn value_text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn params(names: &[&str]) -> Vec<String> {
        names.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn renders_quoted_values_and_defaults() {
        let t = Template::parse(
            "wc -l -- {path} {n} {opt} {{x}}",
            &params(&["path", "n", "opt"]),
        )
        .expect("parse");
        let schema =
            json!({"type": "object", "properties": {"n": {"type": "integer", "default": 5}}});
        let args = json!({"path": "it's a file"});
        let out = t.render(args.as_object().expect("object"), &schema);
        assert_eq!(out, "wc -l -- 'it'\\''s a file' '5' '' {x}");
        let args = json!({"path": "p", "n": 7, "opt": [1, "a"]});
        let out = t.render(args.as_object().expect("object"), &schema);
        assert_eq!(out, "wc -l -- 'p' '7' '[1,\"a\"]' {x}");
    }

    #[test]
    fn rejects_bad_templates() {
        assert_eq!(
            Template::parse("echo {nope}", &params(&["x"])),
            Err(TemplateError::UnknownPlaceholder {
                name: "nope".into()
            })
        );
        assert_eq!(
            Template::parse("echo {x", &params(&["x"])),
            Err(TemplateError::Unclosed { offset: 5 })
        );
        assert_eq!(
            Template::parse("echo x}", &params(&["x"])),
            Err(TemplateError::StrayClose { offset: 6 })
        );
        let e = Template::parse("echo {nope}", &[]).expect_err("unknown");
        assert_eq!(
            e.to_string(),
            "command placeholder \"{nope}\" is not a declared parameter"
        );
    }

    #[test]
    fn literal_braces_and_unicode() {
        let t = Template::parse("é {{}} {a}é", &params(&["a"])).expect("parse");
        let args = json!({"a": "ü"});
        assert_eq!(
            t.render(args.as_object().expect("object"), &json!({})),
            "é {} 'ü'é"
        );
    }
}
