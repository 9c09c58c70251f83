//! A resolved tool: metadata merged for this host, ready to invoke.

use std::path::PathBuf;
use std::time::Duration;

use serde::Deserialize;

use crate::info::{ToolInfo, ToolSummary};
use crate::template::Template;

/// How a tool's output is returned to the agent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum OutputMode {
    /// One text item (the default).
    #[default]
    Text,
    /// One image item.
    Image,
    /// An image item for PNG/JPEG/GIF/WebP bytes, a text item otherwise.
    Auto,
}

/// How a tool runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ToolKind {
    /// Run a program directly: the executable tool file itself, or the
    /// metadata's `executable:` (an absolute path, a path made absolute
    /// against the tools directory, or a bare name looked up in `PATH` at
    /// invocation).
    Executable {
        /// The program.
        program: PathBuf,
    },
    /// A metadata-only tool: a shell command template run with `/bin/sh -c`.
    Command {
        /// The parsed `command:`.
        template: Template,
    },
    /// A script run through an interpreter (`<interpreter> <script>`).
    Interpreted {
        /// The interpreter as written (a bare name looked up in `PATH`, or a
        /// path); further whitespace-separated words are passed before the
        /// script.
        interpreter: String,
        /// The script file.
        script: PathBuf,
    },
}

/// A tool resolved for one host.
#[derive(Debug, Clone, PartialEq)]
pub struct Tool {
    /// The tool name (the file name).
    pub name: String,
    /// What the tool does (empty when the metadata gives none).
    pub description: String,
    /// JSON Schema object of the arguments (`type: object`).
    pub input_schema: serde_json::Value,
    /// The schema's property names in the order the metadata declares them
    /// (JSON objects do not keep order); argv follows this order.
    pub param_order: Vec<String>,
    /// The parameters declared `file: true`, in declaration order: their
    /// values reach the tool in files, not on its command line or in its
    /// environment (docs/metadata.md, "Large values").
    pub file_params: Vec<String>,
    /// How the tool runs.
    pub kind: ToolKind,
    /// The tool's default timeout, if its metadata sets one.
    pub timeout: Option<Duration>,
    /// The tool's own limits (0: not set); they only ever tighten the policy's.
    pub limits: toolsrv_protocol::Limits,
    /// How output is returned.
    pub output: OutputMode,
    /// The file the metadata came from: the sidecar `<name>.yaml` when there
    /// is one, else the tool file itself.
    pub source: PathBuf,
}

impl Tool {
    /// The tool as an agent sees it after `load` (name, description, schema).
    pub fn info(&self) -> ToolInfo {
        ToolInfo {
            name: self.name.clone(),
            description: self.description.clone(),
            input_schema: self.input_schema.clone(),
        }
    }

    /// The tool as listed by `all` (name, description).
    pub fn summary(&self) -> ToolSummary {
        ToolSummary {
            name: self.name.clone(),
            description: self.description.clone(),
            error: None,
        }
    }
}
