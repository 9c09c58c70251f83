//! Tool descriptions as read from `tools` and `all` (docs/protocol.md, "Namespace").

use serde::{Deserialize, Serialize};

/// A loaded tool as an agent sees it: `{"name","description","inputSchema"}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolInfo {
    /// The tool name.
    pub name: String,
    /// What the tool does, for the model.
    pub description: String,
    /// The JSON Schema object describing the tool's arguments.
    #[serde(rename = "inputSchema")]
    pub input_schema: serde_json::Value,
}

/// An available tool as listed by `all`: `{"name","description"}`, and for
/// a tool file that fails to parse `{"name","description":"","error"}`
/// (docs/protocol.md, "Namespace").
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolSummary {
    /// The tool name.
    pub name: String,
    /// What the tool does (empty for a broken tool file).
    pub description: String,
    /// Why the tool's file cannot be used: `<file>: <reason>`. Absent for a
    /// good tool; `load` of a broken one fails with the same reason.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn toolinfo_uses_input_schema_key() {
        let info = ToolInfo {
            name: "file_read".into(),
            description: "read a file".into(),
            input_schema: serde_json::json!({"type": "object", "properties": {}}),
        };
        let json = serde_json::to_string(&info).unwrap_or_default();
        assert_eq!(
            json,
            r#"{"name":"file_read","description":"read a file","inputSchema":{"properties":{},"type":"object"}}"#
        );
        let back: Result<ToolInfo, _> = serde_json::from_str(&json);
        assert_eq!(back.ok(), Some(info));
    }

    #[test]
    fn summary_has_two_keys() {
        let s = ToolSummary {
            name: "shell".into(),
            description: "run a command".into(),
            error: None,
        };
        let json = serde_json::to_string(&s).unwrap_or_default();
        assert_eq!(json, r#"{"name":"shell","description":"run a command"}"#);
    }

    #[test]
    fn a_broken_tool_file_is_summarised_with_its_error() {
        let s = ToolSummary {
            name: "bad".into(),
            description: String::new(),
            error: Some("/t/bad.yaml:2: unknown key \"bogus\"".into()),
        };
        let json = serde_json::to_string(&s).unwrap_or_default();
        assert_eq!(
            json,
            r#"{"name":"bad","description":"","error":"/t/bad.yaml:2: unknown key \"bogus\""}"#
        );
        let back: Result<ToolSummary, _> = serde_json::from_str(&json);
        assert_eq!(back.ok(), Some(s));
    }
}
