//! `toolsrv describe <tool>`: a tool's description and parameters, readable.

use anyhow::{anyhow, Result};
use serde_json::Value;
use toolsrv_client::Client;

use crate::cli::Global;
use crate::output::{for_terminal, json_for_terminal, outln};

/// Loads `tool` for `agent` if needed and prints what it takes.
pub async fn describe(client: &Client, global: &Global, agent: &str, tool: &str) -> Result<()> {
    crate::request::ensure_loaded(client, agent, tool).await?;
    let info = client
        .tools(agent)
        .await?
        .into_iter()
        .find(|t| t.name == tool)
        .ok_or_else(|| anyhow!("tool {tool:?} is not loaded for agent {agent:?}"))?;
    if global.json {
        return outln!("{}", json_for_terminal(&serde_json::to_string(&info)?));
    }
    outln!("{}", for_terminal(&info.name))?;
    for line in info.description.lines() {
        outln!("  {}", for_terminal(line))?;
    }
    let params = parameters(&info.input_schema);
    if params.is_empty() {
        return outln!("\nno parameters");
    }
    outln!("\nparameters:")?;
    let width = params.iter().map(|p| p.name.len()).max().unwrap_or(0);
    for p in &params {
        let mut facts = vec![p.kind.clone()];
        if p.required {
            facts.push("required".into());
        }
        if let Some(d) = &p.default {
            facts.push(format!("default {d}"));
        }
        outln!(
            "  {:<width$}  {}{}",
            for_terminal(&p.name),
            for_terminal(&facts.join(", ")),
            if p.description.is_empty() {
                String::new()
            } else {
                format!(": {}", for_terminal(&p.description))
            }
        )?;
    }
    outln!(
        "\nrun it: toolsrv call {} key=value ...",
        for_terminal(tool)
    )
}

/// One parameter, as `describe` shows it.
struct Param {
    name: String,
    kind: String,
    required: bool,
    default: Option<String>,
    description: String,
}

/// The parameters of a JSON Schema object, required ones first, then by name.
fn parameters(schema: &Value) -> Vec<Param> {
    let required: Vec<&str> = schema["required"]
        .as_array()
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let mut out: Vec<Param> = schema["properties"]
        .as_object()
        .map(|props| {
            props
                .iter()
                .map(|(name, p)| Param {
                    name: name.clone(),
                    kind: match &p["type"] {
                        Value::String(s) => s.clone(),
                        Value::Array(a) => a
                            .iter()
                            .filter_map(Value::as_str)
                            .collect::<Vec<_>>()
                            .join("|"),
                        _ => "any".into(),
                    },
                    required: required.contains(&name.as_str()),
                    default: p.get("default").map(Value::to_string),
                    description: p["description"].as_str().unwrap_or_default().to_string(),
                })
                .collect()
        })
        .unwrap_or_default();
    out.sort_by(|a, b| b.required.cmp(&a.required).then(a.name.cmp(&b.name)));
    out
}
