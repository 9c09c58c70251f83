//! The agent-facing descriptions of a tool, shared with the protocol crate.

pub use toolsrv_protocol::toolinfo::{ToolInfo, ToolSummary};
