//! Client commands that run and watch processes: `call`, `bg`, `ps`, `stat`,
//! `out`, `wait`, `kill`, `dismiss`.

use std::io::Write;
use std::process::ExitCode;

use anyhow::{bail, Result};
use toolsrv_client::{CallRequest, Client};
use toolsrv_protocol::ToolResult;
use toolsrv_wire::OREAD;

use crate::cli::{CallArgs, Global};

/// The request for `call`/`bg`.
fn request(a: &CallArgs) -> Result<CallRequest> {
    let mut req = CallRequest::new(&a.tool, &a.agent);
    req.session = a.session.clone();
    req.cwd = a.cwd.clone();
    req.timeout = a.timeout;
    req.sandbox = a.sandbox.clone();
    req.bypass = a.bypass;
    for arg in &a.args {
        let Some((k, v)) = arg.split_once('=') else {
            bail!("argument {arg:?} is not key=value");
        };
        if k.is_empty() {
            bail!("argument {arg:?} has an empty key");
        }
        req.args.push((k.into(), v.into()));
    }
    Ok(req)
}

/// Load the tool for the agent unless it is loaded already.
async fn ensure_loaded(client: &Client, agent: &str, tool: &str) -> Result<()> {
    if !client.tools(agent).await?.iter().any(|t| t.name == tool) {
        client.load(agent, &[tool]).await?;
    }
    Ok(())
}

/// `toolsrv call`: run, print the result text, exit 1 on isError; Ctrl-C cancels.
pub async fn call(client: &Client, global: &Global, a: &CallArgs) -> Result<ExitCode> {
    let req = request(a)?;
    ensure_loaded(client, &a.agent, &a.tool).await?;
    let result = tokio::select! {
        r = client.call(&req) => r?,
        _ = tokio::signal::ctrl_c() => {
            // Dropping the call closes its request: the server kills the tool.
            eprintln!("toolsrv: cancelled");
            return Ok(ExitCode::from(130));
        }
    };
    if global.json {
        println!("{}", serde_json::to_string(&result)?);
    } else {
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
    let req = request(a)?;
    ensure_loaded(client, &a.agent, &a.tool).await?;
    println!("{}", client.spawn(&req).await?);
    Ok(ExitCode::SUCCESS)
}

/// `toolsrv ps`.
pub async fn ps(client: &Client, global: &Global, agent: Option<&str>) -> Result<()> {
    let procs = client.ps(agent).await?;
    if global.json {
        println!("{}", serde_json::to_string(&procs)?);
        return Ok(());
    }
    println!(
        "{:>6}  {:<10} {:<12} {:<17} {:>5} {:>9}  COMMAND",
        "PID", "AGENT", "TOOL", "STATE", "EXIT", "RUNTIME"
    );
    for p in procs {
        println!(
            "{:>6}  {:<10} {:<12} {:<17} {:>5} {:>8.1}s  {}",
            p.pid,
            p.agent,
            p.tool,
            p.state.as_str(),
            p.exit_code.map_or("-".into(), |c| c.to_string()),
            p.runtime_ms as f64 / 1000.0,
            p.command.replace('\n', "\\n"),
        );
    }
    Ok(())
}

/// `toolsrv stat`.
pub async fn stat(client: &Client, global: &Global, pid: u64) -> Result<()> {
    let st = client.proc_stat(pid).await?;
    if global.json {
        println!("{}", serde_json::to_string(&st)?);
    } else {
        println!("{}", serde_json::to_string_pretty(&st)?);
    }
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
