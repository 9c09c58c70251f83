//! Tool descriptions as read from `tools` and `all` (CONTRACT §4).

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

/// An available tool as listed by `all`: `{"name","description"}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolSummary {
    /// The tool name.
    pub name: String,
    /// What the tool does.
    pub description: String,
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
        };
        let json = serde_json::to_string(&s).unwrap_or_default();
        assert_eq!(json, r#"{"name":"shell","description":"run a command"}"#);
    }
}
