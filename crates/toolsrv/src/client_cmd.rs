//! The client subcommands (docs/cli.md, "The client").

use std::process::ExitCode;

use anyhow::{anyhow, bail, Context, Result};
use toolsrv_client::Client;
use toolsrv_wire::DMDIR;

use crate::cli::{Command, Global};
use crate::connect::connect;
use crate::output::{for_terminal, is_stdout_closed, json_for_terminal, outln, write_raw};

/// Run a client subcommand; errors go to stderr with exit 1. A closed stdout
/// (`toolsrv ps | head -1`) ends it quietly with exit 0: its reader has all it
/// wanted.
pub fn main(global: &Global, cmd: Command) -> ExitCode {
    let Some(outcome) = crate::runtime::block_on(run(global, cmd)) else {
        return ExitCode::from(1);
    };
    match outcome {
        Ok(code) => code,
        Err(e) if is_stdout_closed(&e) => ExitCode::SUCCESS,
        Err(e) => {
            use std::io::Write;
            // Not `eprintln!`: a closed stderr must not panic either.
            let _ = writeln!(std::io::stderr(), "toolsrv: {e:#}");
            ExitCode::from(1)
        }
    }
}

async fn run(global: &Global, cmd: Command) -> Result<ExitCode> {
    check_agents(&cmd)?;
    let client = connect(global).await?;
    let pid = command_pid(&cmd);
    run_command(global, &client, cmd)
        .await
        .map_err(|e| match pid {
            // A walk to `proc/<pid>/...` that fails: the process is not there.
            Some(pid) if is_not_found(&e) => anyhow!("no process {pid}"),
            _ => e,
        })
}

/// The process a command is about, if it names one.
fn command_pid(cmd: &Command) -> Option<u64> {
    match cmd {
        Command::Stat { pid }
        | Command::Out { pid, .. }
        | Command::Wait { pid }
        | Command::Kill { pid, .. }
        | Command::Dismiss { pid } => Some(*pid),
        _ => None,
    }
}

/// Refuse an agent id the server would refuse, before connecting, naming it
/// (the server's own message for `ctl` is a usage line).
fn check_agents(cmd: &Command) -> Result<()> {
    let agent = match cmd {
        Command::Tools { agent }
        | Command::Describe { agent, .. }
        | Command::Rev { agent }
        | Command::Load { agent, .. }
        | Command::Unload { agent, .. } => Some(agent.as_str()),
        Command::Ps { agent, .. } => agent.as_deref(),
        _ => None,
    };
    if let Some(a) = agent {
        toolsrv_protocol::validate_agent_id(a)
            .map_err(|e| anyhow!("invalid agent {:?}: {e}", for_terminal(a)))?;
    }
    Ok(())
}

/// Whether `e` is the server's (or the client's) "file not found".
fn is_not_found(e: &anyhow::Error) -> bool {
    e.chain().any(|c| {
        c.downcast_ref::<toolsrv_client::ClientError>()
            .and_then(toolsrv_client::ClientError::server_message)
            .is_some_and(|m| m.starts_with("file not found"))
    })
}

/// The stat entry of `path`, or an error naming it.
async fn stat_of(client: &Client, path: &str) -> Result<toolsrv_client::Stat> {
    client.stat(path).await.map_err(|e| {
        let e = anyhow::Error::new(e);
        if is_not_found(&e) {
            anyhow!("no such file in the namespace: {}", for_terminal(path))
        } else {
            e.context(format!("cannot stat {}", for_terminal(path)))
        }
    })
}

async fn run_command(global: &Global, client: &Client, cmd: Command) -> Result<ExitCode> {
    let client = client.clone();
    match cmd {
        Command::Serve(_)
        | Command::Init { .. }
        | Command::Completions { .. }
        | Command::Man { .. }
        | Command::Remote(_)
        | Command::Doctor { .. }
        | Command::Audit(_)
        | Command::Mcp(_) => {
            unreachable!("handled in main")
        }
        Command::All => {
            let data = client.read_file("all").await?;
            print_json(global, &data, |v| {
                table(&broken_tools_said(v), &["name", "description"])
            })?;
        }
        Command::Tools { agent } => {
            let data = client.transact("tools", agent.as_bytes()).await?;
            if !global.json && is_empty_list(&data) {
                // Not an empty table: say why, and what to do (on stderr, so
                // that stdout stays the list, which is empty).
                let a = for_terminal(&agent);
                crate::logwriter::say!(
                    "toolsrv: no tools are loaded for agent {a}; load some with `toolsrv load {a} TOOL...` (`toolsrv all` lists them; `call` loads what it runs)"
                );
                return Ok(ExitCode::SUCCESS);
            }
            print_json(global, &data, |v| table(v, &["name", "description"]))?;
        }
        Command::Rev { agent } => outln!("{}", client.revision(&agent).await?)?,
        Command::Describe { agent, tool } => {
            crate::describe::describe(&client, global, &agent, &tool).await?
        }
        Command::Load { agent, tools } => {
            client
                .load(
                    &agent,
                    &tools.iter().map(String::as_str).collect::<Vec<_>>(),
                )
                .await?
        }
        Command::Unload { agent, tools } => {
            client
                .unload(
                    &agent,
                    &tools.iter().map(String::as_str).collect::<Vec<_>>(),
                )
                .await?
        }
        Command::Call(a) => return crate::proc_cmd::call(&client, global, &a).await,
        Command::Bg(a) => return crate::proc_cmd::bg(&client, global, &a).await,
        Command::Ps { agent, running } => {
            crate::proc_cmd::ps(&client, global, agent.as_deref(), running).await?
        }
        Command::Stat { pid } => crate::proc_cmd::stat(&client, global, pid).await?,
        Command::Out { pid, follow } => crate::proc_cmd::out(&client, pid, follow).await?,
        Command::Wait { pid } => return crate::proc_cmd::wait(&client, pid).await,
        Command::Kill { pid, signal } => match signal {
            Some(s) => client.signal(pid, &s).await?,
            None => client.kill(pid).await?,
        },
        Command::Dismiss { pid } => client.dismiss(pid).await?,
        Command::Pending { follow } => pending(&client, global, follow).await?,
        Command::Approve { id } => client.approve(&id).await?,
        Command::Reject { id, reason } => {
            let reason = if reason.is_empty() {
                "rejected".to_string()
            } else {
                reason.join(" ")
            };
            client.reject(&id, &reason).await?
        }
        Command::Info => {
            let data = client.read_file("info").await?;
            print_json(global, &data, |v| {
                format!(
                    "platform: {}\narch: {}",
                    for_terminal(v["platform"].as_str().unwrap_or("?")),
                    for_terminal(v["arch"].as_str().unwrap_or("?"))
                )
            })?;
        }
        Command::Ls { path } => {
            let path = path.unwrap_or_default();
            let st = stat_of(&client, &path).await?;
            if st.mode & DMDIR == 0 {
                // Like ls(1): a file is listed as itself.
                let name = for_terminal(&st.name);
                outln!("-{} {:>8} {name}", perms(st.mode), st.length)?;
                return Ok(ExitCode::SUCCESS);
            }
            for st in client.list_dir(&path).await? {
                let kind = if st.mode & DMDIR != 0 { 'd' } else { '-' };
                let name = for_terminal(&st.name);
                outln!("{kind}{} {:>8} {name}", perms(st.mode), st.length)?;
            }
        }
        Command::Cat { path } => {
            // The file's bytes as they are, like cat(1); a directory's stat
            // records are not for a terminal.
            if stat_of(&client, &path).await?.mode & DMDIR != 0 {
                bail!(
                    "{} is a directory (list it with `toolsrv ls {}`)",
                    for_terminal(&path),
                    for_terminal(&path)
                );
            }
            let mut data = client
                .read_file(&path)
                .await
                .with_context(|| format!("cannot read {}", for_terminal(&path)))?;
            // The namespace's JSON files (`info`, `all`, `doctor`) end
            // without a newline; text gets one, so the shell's prompt starts
            // on a line of its own. Other bytes are left as they are.
            if !data.is_empty() && !data.ends_with(b"\n") && std::str::from_utf8(&data).is_ok() {
                data.push(b'\n');
            }
            write_raw(&data)?;
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// A JSON array of objects as an aligned table of `cols` (the last column is not padded).
/// `all` for the table: a broken tool file's row says its error where the
/// description would be (`error: <file>: <reason>`).
fn broken_tools_said(v: &serde_json::Value) -> serde_json::Value {
    let mut v = v.clone();
    if let Some(rows) = v.as_array_mut() {
        for row in rows {
            if let Some(e) = row.get("error").and_then(|e| e.as_str()).map(str::to_owned) {
                row["description"] = serde_json::Value::String(format!("error: {e}"));
            }
        }
    }
    v
}

fn table(v: &serde_json::Value, cols: &[&str]) -> String {
    let rows: Vec<Vec<String>> = v
        .as_array()
        .map(|a| {
            a.iter()
                .map(|o| {
                    cols.iter()
                        .map(|c| match &o[*c] {
                            serde_json::Value::String(s) => {
                                for_terminal(s.lines().next().unwrap_or("")).into_owned()
                            }
                            serde_json::Value::Null => "-".to_string(),
                            other => other.to_string(),
                        })
                        .collect()
                })
                .collect()
        })
        .unwrap_or_default();
    let mut widths: Vec<usize> = cols.iter().map(|c| c.len()).collect();
    for r in &rows {
        for (w, cell) in widths.iter_mut().zip(r) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let line = |cells: Vec<String>| {
        let n = cells.len();
        cells
            .into_iter()
            .enumerate()
            .map(|(i, c)| {
                if i + 1 == n {
                    c
                } else {
                    format!("{c:<w$}", w = widths[i])
                }
            })
            .collect::<Vec<_>>()
            .join("  ")
    };
    let mut out = vec![line(cols.iter().map(|c| c.to_uppercase()).collect())];
    out.extend(rows.into_iter().map(line));
    out.join("\n")
}

/// `toolsrv pending [-f]`: a readable line per request (JSON with `--json`).
async fn pending(client: &Client, global: &Global, follow: bool) -> Result<()> {
    let mut watch = client.pending().await?;
    let mut shown = 0usize;
    loop {
        let next = if follow {
            watch.next().await?
        } else {
            match tokio::time::timeout(std::time::Duration::from_millis(200), watch.next()).await {
                Ok(r) => r?,
                Err(_) => {
                    if shown == 0 && !global.json {
                        crate::logwriter::say!("toolsrv: no bypass request is pending");
                    }
                    return Ok(());
                }
            }
        };
        shown += 1;
        if global.json {
            outln!("{}", json_for_terminal(&serde_json::to_string(&next)?))?;
        } else {
            outln!("{}", describe_pending(&next))?;
        }
    }
}

/// A pending request for a human: what it is, the command, and the request's
/// own `env.NAME` fields, every field escaped for the terminal (docs/protocol.md, "Bypass requests").
fn describe_pending(r: &toolsrv_protocol::BypassRequest) -> String {
    let t = |s: &str| for_terminal(s).into_owned();
    let mut text = format!(
        "{}  pid {}  agent {}  session {}  tool {}  cwd {}\n    {}",
        t(&r.id),
        r.pid,
        t(&r.agent),
        r.session.as_deref().map_or_else(|| "-".into(), t),
        t(&r.tool),
        t(&r.cwd),
        t(&r.command),
    );
    if r.request_env.is_empty() {
        text.push_str("\n    request env: (none)");
    }
    for (name, value) in &r.request_env {
        text.push_str(&format!("\n    request env: {}={}", t(name), t(value)));
    }
    for (name, value) in &r.files {
        text.push_str(&format!("\n    {}: {}", t(name), t(&file_preview(value))));
    }
    text
}

/// The start of a `file: true` argument's value for the terminal: at most
/// 400 bytes, and how long it is when that is not all.
fn file_preview(value: &str) -> String {
    const SHOWN: usize = 400;
    if value.len() <= SHOWN {
        return value.to_string();
    }
    let mut end = SHOWN;
    while !value.is_char_boundary(end) {
        end -= 1;
    }
    format!(
        "{}… ({} bytes in all; `toolsrv --json pending` shows every byte)",
        &value[..end],
        value.len()
    )
}

/// `rwxr-xr-x` from permission bits.
fn perms(mode: u32) -> String {
    let mut s = String::with_capacity(9);
    for shift in [6, 3, 0] {
        let b = (mode >> shift) & 7;
        s.push(if b & 4 != 0 { 'r' } else { '-' });
        s.push(if b & 2 != 0 { 'w' } else { '-' });
        s.push(if b & 1 != 0 { 'x' } else { '-' });
    }
    s
}

/// Whether `data` is the JSON list `[]`.
fn is_empty_list(data: &[u8]) -> bool {
    serde_json::from_slice::<serde_json::Value>(data)
        .is_ok_and(|v| v.as_array().is_some_and(Vec::is_empty))
}

/// Print JSON raw with `--json`, else through `human`.
fn print_json(
    global: &Global,
    data: &[u8],
    human: impl Fn(&serde_json::Value) -> String,
) -> Result<()> {
    if global.json {
        let text = String::from_utf8_lossy(data);
        return outln!("{}", json_for_terminal(text.trim_end()));
    }
    let v: serde_json::Value =
        serde_json::from_slice(data).context("the server sent JSON that does not parse")?;
    outln!("{}", human(&v))
}
