//! Turning a tool's files into a [`Tool`] for one host.

use std::fs;
use std::io::Read;
use std::path::{Path, PathBuf};

use serde_json::json;

use crate::error::MetaError;
use crate::header::{self, HEADER_LIMIT};
use crate::host::Host;
use crate::raw::{RawMeta, SchemaSpec};
use crate::template::Template;
use crate::tool::{Tool, ToolKind};

/// The tool file `<dir>/<name>` (a script or binary).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ScriptFile {
    /// Its path.
    pub path: PathBuf,
    /// Whether any execute permission bit is set.
    pub executable: bool,
}

/// The files one tool name may be made of.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ToolFiles {
    /// The tool name.
    pub name: String,
    /// The tools directory (relative `executable:` paths resolve against it).
    pub dir: PathBuf,
    /// `<dir>/<name>`, if it exists.
    pub script: Option<ScriptFile>,
    /// `<dir>/<name>.yaml`, if it exists.
    pub sidecar: Option<PathBuf>,
}

/// Parses one metadata document. `line_offset` is added to the parser's
/// line numbers (for header blocks: the line of the opening `---`).
pub fn parse_meta(text: &str, path: &Path, line_offset: usize) -> Result<RawMeta, MetaError> {
    match serde_yaml_ng::from_str::<Option<RawMeta>>(text) {
        Ok(meta) => Ok(meta.unwrap_or_default()),
        Err(e) => Err(MetaError::Invalid {
            path: path.to_path_buf(),
            line: e.location().map(|l| l.line() + line_offset),
            reason: clean_yaml_message(&e.to_string()),
        }),
    }
}

/// Reads and resolves the tool made of `files` for `host`.
///
/// Returns `Ok(None)` when the files are not a tool (a non-executable file
/// without sidecar whose header names no interpreter), and
/// [`MetaError::NoVariant`] when the tool has variants but none for `host`.
pub fn load_tool(files: &ToolFiles, host: &Host) -> Result<Option<Tool>, MetaError> {
    let (mut meta, source) = match (&files.sidecar, &files.script) {
        (Some(sidecar), _) => {
            let text = fs::read_to_string(sidecar).map_err(|e| MetaError::io(sidecar, &e))?;
            (parse_meta(&text, sidecar, 0)?, sidecar.clone())
        }
        (None, Some(script)) => {
            let prefix = read_prefix(&script.path)?;
            let meta = match header::extract(&prefix, &script.path)? {
                Some(block) => parse_meta(&block.yaml, &script.path, block.open_line)?,
                None => RawMeta::default(),
            };
            (meta, script.path.clone())
        }
        (None, None) => {
            return Err(MetaError::UnknownTool {
                name: files.name.clone(),
            })
        }
    };
    let script = files.script.as_ref();
    if files.sidecar.is_none()
        && script.is_some_and(|s| !s.executable)
        && !meta.mentions_interpreter()
    {
        return Ok(None);
    }
    let invalid = |reason: String| MetaError::invalid(&source, reason);
    if let Some(name) = &meta.name {
        if *name != files.name {
            return Err(invalid(format!(
                "name \"{name}\" does not match the file name \"{}\"",
                files.name
            )));
        }
    }
    if let Some(variants) = meta.variants.take().filter(|v| !v.is_empty()) {
        let chosen = variants
            .into_iter()
            .find(|v| host.matches(v.platform.as_deref(), v.arch.as_deref()));
        match chosen {
            Some(v) => meta.merge(v),
            None => {
                return Err(MetaError::NoVariant {
                    name: files.name.clone(),
                    platform: host.platform.clone(),
                    arch: host.arch.clone(),
                })
            }
        }
    }
    let mut schema = match (meta.input_schema.take(), meta.params.take()) {
        (Some(schema), _) => schema,
        (None, Some(params)) => params.to_schema(),
        (None, None) => SchemaSpec {
            schema: json!({"type": "object", "properties": {}}),
            order: Vec::new(),
        },
    };
    let file_params = take_file_params(&mut schema).map_err(invalid)?;
    let kind = tool_kind(&meta, files, &schema.order).map_err(invalid)?;
    Ok(Some(Tool {
        name: files.name.clone(),
        description: meta.description.unwrap_or_default(),
        input_schema: schema.schema,
        param_order: schema.order,
        file_params,
        kind,
        timeout: meta.timeout.map(|t| t.0),
        limits: meta.limits.unwrap_or_default(),
        output: meta.output.unwrap_or_default(),
        source,
    }))
}

/// At most this many parameters of a tool may be declared `file: true`
/// (each is one descriptor of the tool's, numbered from 3).
pub const MAX_FILE_PARAMS: usize = 8;

/// Takes the `file: true|false` keys out of the schema's properties (they
/// are toolsrv's, not JSON Schema's: an agent never sees them) and returns
/// the names declared `file: true`, in declaration order. Such a parameter
/// must be a string.
fn take_file_params(schema: &mut SchemaSpec) -> Result<Vec<String>, String> {
    let Some(props) = schema
        .schema
        .get_mut("properties")
        .and_then(|p| p.as_object_mut())
    else {
        return Ok(Vec::new());
    };
    let mut files = Vec::new();
    for name in &schema.order {
        let Some(prop) = props.get_mut(name).and_then(|p| p.as_object_mut()) else {
            continue;
        };
        let Some(file) = prop.remove("file") else {
            continue;
        };
        match file {
            serde_json::Value::Bool(true) => {}
            serde_json::Value::Bool(false) => continue,
            other => {
                return Err(format!(
                    "parameter \"{name}\": file must be true or false, not {other}"
                ))
            }
        }
        if prop.get("type").and_then(|t| t.as_str()) != Some("string") {
            return Err(format!(
                "parameter \"{name}\": file: true needs type: string (the file holds the text)"
            ));
        }
        files.push(name.clone());
    }
    if files.len() > MAX_FILE_PARAMS {
        return Err(format!(
            "{} parameters are declared file: true; at most {MAX_FILE_PARAMS} may be",
            files.len()
        ));
    }
    Ok(files)
}

/// Decides how the tool runs from the merged metadata and the files.
fn tool_kind(meta: &RawMeta, files: &ToolFiles, params: &[String]) -> Result<ToolKind, String> {
    let set: Vec<&str> = [
        ("command", meta.command.is_some()),
        ("executable", meta.executable.is_some()),
        ("interpreter", meta.interpreter.is_some()),
    ]
    .iter()
    .filter(|(_, on)| *on)
    .map(|(k, _)| *k)
    .collect();
    if set.len() > 1 {
        return Err(format!(
            "{} cannot be combined; a tool runs in exactly one way",
            set.join(" and ")
        ));
    }
    if let Some(interpreter) = &meta.interpreter {
        if interpreter.trim().is_empty() {
            return Err("interpreter is empty".into());
        }
        let Some(script) = &files.script else {
            return Err(format!(
                "interpreter \"{interpreter}\" needs a script file {}, which does not exist",
                files.dir.join(&files.name).display()
            ));
        };
        return Ok(ToolKind::Interpreted {
            interpreter: interpreter.trim().to_string(),
            script: script.path.clone(),
        });
    }
    if let Some(command) = &meta.command {
        let template = Template::parse(command, params).map_err(|e| e.to_string())?;
        return Ok(ToolKind::Command { template });
    }
    if let Some(executable) = &meta.executable {
        if executable.trim().is_empty() {
            return Err("executable is empty".into());
        }
        let p = Path::new(executable);
        let program = if p.is_absolute() || !executable.contains('/') {
            p.to_path_buf()
        } else {
            files.dir.join(p)
        };
        return Ok(ToolKind::Executable { program });
    }
    match &files.script {
        Some(script) if script.executable => Ok(ToolKind::Executable {
            program: script.path.clone(),
        }),
        Some(script) => Err(format!(
            "no command, executable or interpreter is given and {} is not executable",
            script.path.display()
        )),
        None => Err("a metadata-only tool needs a command or an executable".into()),
    }
}

/// Reads at most [`HEADER_LIMIT`] leading bytes of `path`.
fn read_prefix(path: &Path) -> Result<Vec<u8>, MetaError> {
    let file = fs::File::open(path).map_err(|e| MetaError::io(path, &e))?;
    let mut buf = Vec::new();
    file.take(HEADER_LIMIT as u64)
        .read_to_end(&mut buf)
        .map_err(|e| MetaError::io(path, &e))?;
    Ok(buf)
}

/// Removes the parser's ` at line N column M` / ` at position N` (the line
/// is reported separately, translated for header blocks) and writes quoted
/// names with double quotes instead of backticks.
pub fn clean_yaml_message(msg: &str) -> String {
    let mut out = String::with_capacity(msg.len());
    let mut rest = msg;
    while let Some(i) = rest.find(" at ") {
        out.push_str(&rest[..i]);
        let after = &rest[i + 4..];
        let skip = location_len(after);
        if skip > 0 {
            rest = &after[skip..];
        } else {
            out.push_str(" at ");
            rest = after;
        }
    }
    out.push_str(rest);
    out.replace('`', "\"")
}

/// Length of a leading `line N column M` or `position N`, else 0.
fn location_len(s: &str) -> usize {
    fn digits(s: &str) -> usize {
        s.bytes().take_while(u8::is_ascii_digit).count()
    }
    if let Some(r) = s.strip_prefix("line ") {
        let n = digits(r);
        if n > 0 {
            if let Some(r2) = r[n..].strip_prefix(" column ") {
                let m = digits(r2);
                if m > 0 {
                    return "line ".len() + n + " column ".len() + m;
                }
            }
        }
    } else if let Some(r) = s.strip_prefix("position ") {
        let n = digits(r);
        if n > 0 {
            return "position ".len() + n;
        }
    }
    0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cleans_locations() {
        assert_eq!(
            clean_yaml_message(
                "unknown field `descripton`, expected one of `name` at line 3 column 1"
            ),
            "unknown field \"descripton\", expected one of \"name\""
        );
        assert_eq!(
            clean_yaml_message("did not find expected key at line 2 column 3, while parsing a block mapping at line 1 column 1"),
            "did not find expected key, while parsing a block mapping"
        );
        assert_eq!(clean_yaml_message("look at this"), "look at this");
    }

    #[test]
    fn empty_document_is_empty_metadata() {
        let m = parse_meta("", Path::new("/t/x.yaml"), 0).expect("empty");
        assert!(m.description.is_none());
        let m = parse_meta("# only a comment\n", Path::new("/t/x.yaml"), 0).expect("comment");
        assert!(m.command.is_none());
    }
}
