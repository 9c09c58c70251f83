//! Client commands that run and watch processes: `call`, `bg`, `ps`, `stat`,
//! `out`, `wait`, `kill`, `dismiss`.

use std::io::Write;
use std::process::ExitCode;

use anyhow::{bail, Context, Result};
use toolsrv_client::Client;
use toolsrv_protocol::{encode_payload, ToolResult};
use toolsrv_wire::{ORDWR, OREAD};

use crate::cli::{CallArgs, Global};

/// The request payload for `call`/`bg`.
fn payload(client: &Client, a: &CallArgs) -> Result<String> {
    let mut fields: Vec<(String, String)> = Vec::new();
    if let Some(t) = client.token() {
        fields.push(("token".into(), t.into()));
    }
    fields.push(("tool".into(), a.tool.clone()));
    fields.push(("agent".into(), a.agent.clone()));
    for (k, v) in [
        ("session", &a.session),
        ("cwd", &a.cwd),
        ("timeout", &a.timeout),
        ("sandbox", &a.sandbox),
    ] {
        if let Some(v) = v {
            fields.push((k.into(), v.clone()));
        }
    }
    if a.bypass {
        fields.push(("bypass".into(), "true".into()));
    }
    for arg in &a.args {
        let Some((k, v)) = arg.split_once('=') else {
            bail!("argument {arg:?} is not key=value");
        };
        if k.is_empty() {
            bail!("argument {arg:?} has an empty key");
        }
        fields.push((k.into(), v.into()));
    }
    let refs: Vec<(&str, &str)> = fields
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    Ok(encode_payload(&refs))
}

/// Load the tool for the agent unless it is loaded already.
async fn ensure_loaded(client: &Client, agent: &str, tool: &str) -> Result<()> {
    let tools = client.transact("tools", agent.as_bytes()).await?;
    let tools: serde_json::Value = serde_json::from_slice(&tools).context("tools: bad JSON")?;
    let loaded = tools
        .as_array()
        .is_some_and(|a| a.iter().any(|t| t["name"] == tool));
    if !loaded {
        client
            .write_file("ctl", format!("load {agent} {tool}\n").as_bytes())
            .await?;
    }
    Ok(())
}

/// `toolsrv call`: run, print the result text, exit 1 on isError; Ctrl-C clunks.
pub async fn call(client: &Client, global: &Global, a: &CallArgs) -> Result<ExitCode> {
    ensure_loaded(client, &a.agent, &a.tool).await?;
    let body = payload(client, a)?;
    let run = async {
        let f = client.open("proc/new", ORDWR).await?;
        f.write_all(body.as_bytes()).await?;
        let out = f.read_to_end().await?;
        f.clunk().await?;
        anyhow::Ok(out)
    };
    let out = tokio::select! {
        r = run => r?,
        _ = tokio::signal::ctrl_c() => {
            // Dropping the request's file clunks it: the server kills the tool.
            eprintln!("toolsrv: cancelled");
            return Ok(ExitCode::from(130));
        }
    };
    if global.json {
        println!("{}", String::from_utf8_lossy(&out));
    }
    let result: ToolResult =
        serde_json::from_slice(&out).context("the server sent a result that does not parse")?;
    if !global.json {
        print_result(&result)?;
    }
    Ok(if result.is_error {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}

fn print_result(r: &ToolResult) -> Result<()> {
    let mut out = std::io::stdout().lock();
    for c in &r.content {
        match c {
            toolsrv_protocol::Content::Text { text } => {
                out.write_all(text.as_bytes())?;
                if !text.is_empty() && !text.ends_with('\n') {
                    out.write_all(b"\n")?;
                }
            }
            toolsrv_protocol::Content::Image { data, mime_type } => {
                writeln!(out, "[image {mime_type}, {} bytes of base64]", data.len())?;
            }
        }
    }
    Ok(())
}

/// `toolsrv bg`: start, print the pid.
pub async fn bg(client: &Client, a: &CallArgs) -> Result<ExitCode> {
    ensure_loaded(client, &a.agent, &a.tool).await?;
    let body = payload(client, a)?;
    let pid = client.transact("proc/new.bg", body.as_bytes()).await?;
    println!("{}", String::from_utf8_lossy(&pid).trim());
    Ok(ExitCode::SUCCESS)
}

/// `toolsrv ps`.
pub async fn ps(client: &Client, global: &Global, agent: Option<&str>) -> Result<()> {
    let data = match agent {
        Some(a) => client.transact("proc/list", a.as_bytes()).await?,
        None => client.read_file("proc/list").await?,
    };
    if global.json {
        println!("{}", String::from_utf8_lossy(&data));
        return Ok(());
    }
    let v: serde_json::Value = serde_json::from_slice(&data).context("proc/list: bad JSON")?;
    println!(
        "{:>6}  {:<10} {:<12} {:<17} {:>5} {:>9}  COMMAND",
        "PID", "AGENT", "TOOL", "STATE", "EXIT", "RUNTIME"
    );
    for p in v.as_array().into_iter().flatten() {
        println!(
            "{:>6}  {:<10} {:<12} {:<17} {:>5} {:>8}s  {}",
            p["pid"].as_u64().unwrap_or(0),
            p["agent"].as_str().unwrap_or(""),
            p["tool"].as_str().unwrap_or(""),
            p["state"].as_str().unwrap_or(""),
            p["exit_code"]
                .as_i64()
                .map_or("-".into(), |c| c.to_string()),
            format!(
                "{:.1}",
                p["runtime_ms"].as_u64().unwrap_or(0) as f64 / 1000.0
            ),
            p["command"].as_str().unwrap_or("").replace('\n', "\\n"),
        );
    }
    Ok(())
}

/// `toolsrv stat`.
pub async fn stat(client: &Client, pid: u64) -> Result<()> {
    let data = client.read_file(&format!("proc/{pid}/stat")).await?;
    let v: serde_json::Value = serde_json::from_slice(&data).context("stat: bad JSON")?;
    println!("{}", serde_json::to_string_pretty(&v)?);
    Ok(())
}

/// `toolsrv out [-f]`: the output so far; with `-f`, follow until the process ends.
/// Without `-f` a running process's output is printed up to where it stands now
/// (a read that waits longer than a moment means the end was reached; it is flushed).
pub async fn out(client: &Client, pid: u64, follow: bool) -> Result<()> {
    let f = client.open(&format!("proc/{pid}/out"), OREAD).await?;
    let mut stdout = std::io::stdout().lock();
    let mut offset = 0u64;
    loop {
        let read = f.read_at(offset, f.max_io());
        let data = if follow {
            read.await?
        } else {
            match tokio::time::timeout(std::time::Duration::from_millis(200), read).await {
                Ok(r) => r?,
                Err(_) => break,
            }
        };
        if data.is_empty() {
            break;
        }
        offset += data.len() as u64;
        stdout.write_all(&data)?;
        stdout.flush()?;
    }
    f.clunk().await?;
    Ok(())
}

/// `toolsrv wait`.
pub async fn wait(client: &Client, pid: u64) -> Result<ExitCode> {
    let data = client.read_file(&format!("proc/{pid}/wait")).await?;
    let s = String::from_utf8_lossy(&data);
    print!("{s}");
    let code: i32 = s.trim().parse().unwrap_or(1);
    Ok(ExitCode::from(code.clamp(0, 255) as u8))
}

/// `toolsrv kill` and `toolsrv dismiss`.
pub async fn ctl(client: &Client, pid: u64, cmd: &str) -> Result<()> {
    client
        .write_file(&format!("proc/{pid}/ctl"), cmd.as_bytes())
        .await?;
    Ok(())
}
