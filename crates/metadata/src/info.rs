//! The agent-facing descriptions of a tool.
//!
//! Defined locally with exactly the shape of
//! `toolsrv_protocol::toolinfo::{ToolInfo, ToolSummary}` (which had not
//! landed when this crate was written).

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
