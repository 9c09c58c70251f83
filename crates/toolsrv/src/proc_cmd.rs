//! Client commands that run and watch processes: `call`, `bg`, `ps`, `stat`,
//! `out`, `wait`, `kill`, `dismiss`.

use std::process::ExitCode;

use anyhow::Result;
use toolsrv_client::{CallRequest, Client};
use toolsrv_protocol::ToolResult;
use toolsrv_wire::OREAD;

use crate::cli::{CallArgs, Global};
use crate::interrupt::{Interrupt, Interrupts};
use crate::output::{for_terminal, json_for_terminal, outln, write_raw};
use crate::request::{ensure_loaded, note_server_cwd, outside_cwd, request, start_bg};

/// `toolsrv call`: run, print the result text, exit 1 on isError; Ctrl-C,
/// SIGTERM and SIGHUP cancel the run.
pub async fn call(client: &Client, global: &Global, a: &CallArgs) -> Result<ExitCode> {
    use std::io::IsTerminal;
    let stream = a.stream || (!a.no_stream && !global.json && std::io::stdout().is_terminal());
    if stream {
        return crate::stream::call(client, global, a).await;
    }
    let mut interrupts = Interrupts::listen()?;
    let mut req = request(a, global)?;
    ensure_loaded(client, &a.agent, &a.tool).await?;
    let mut result = run_call(client, &req, &mut interrupts).await?;
    if a.cwd.is_none()
        && result
            .as_ref()
            .is_ok_and(|r| r.is_error && outside_cwd(&r.joined_text()))
    {
        note_server_cwd(&req);
        req.cwd = None;
        result = run_call(client, &req, &mut interrupts).await?;
    }
    let result = match result {
        Ok(r) => r,
        Err(signal) => return Ok(signal.exit_code()),
    };
    if global.json {
        outln!("{}", json_for_terminal(&serde_json::to_string(&result)?))?;
    } else {
        print_result(&result)?;
    }
    Ok(if result.is_error {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}

/// One call; `Err` with the signal that cancelled it. While a bypass request
/// waits, the approval hint is printed (the request is recognised in
/// `bypass/pending` as the first of its agent, session and tool: a
/// synchronous call has no pid to match).
async fn run_call(
    client: &Client,
    req: &CallRequest,
    interrupts: &mut Interrupts,
) -> Result<Result<ToolResult, Interrupt>> {
    let call = client.call(req);
    tokio::pin!(call);
    let called = async {
        if req.bypass {
            let ours = |r: &toolsrv_protocol::BypassRequest| {
                r.agent == req.agent && r.tool == req.tool && r.session == req.session
            };
            tokio::select! {
                r = &mut call => return r,
                () = crate::approval::hint_when(client, ours) => {}
            }
        }
        call.await
    };
    tokio::select! {
        r = called => Ok(Ok(r?)),
        signal = interrupts.recv() => {
            // Dropping the call closes its request: the server kills the
            // tool, or withdraws its pending bypass request.
            crate::logwriter::say!("toolsrv: cancelled");
            Ok(Err(signal))
        }
    }
}

fn print_result(r: &ToolResult) -> Result<()> {
    // The tool's output as it is (like `out` and `cat`): it is what the tool
    // printed, colours included.
    let mut text = Vec::new();
    for c in &r.content {
        match c {
            toolsrv_protocol::Content::Text { text: t } => {
                text.extend_from_slice(t.as_bytes());
                if !t.is_empty() && !t.ends_with('\n') {
                    text.push(b'\n');
                }
            }
            toolsrv_protocol::Content::Image { data, mime_type } => {
                let line = format!(
                    "[image {}, {} bytes of base64]\n",
                    for_terminal(mime_type),
                    data.len()
                );
                text.extend_from_slice(line.as_bytes());
            }
        }
    }
    write_raw(&text)
}

/// `toolsrv bg`: start, print the pid.
pub async fn bg(client: &Client, global: &Global, a: &CallArgs) -> Result<ExitCode> {
    let pid = start_bg(client, global, a).await?;
    outln!("{pid}")?;
    Ok(ExitCode::SUCCESS)
}

/// `toolsrv ps`.
pub async fn ps(
    client: &Client,
    global: &Global,
    agent: Option<&str>,
    running: bool,
) -> Result<()> {
    let procs: Vec<_> = client
        .ps(agent)
        .await?
        .into_iter()
        .filter(|p| !running || !p.state.is_finished())
        .collect();
    if global.json {
        return outln!("{}", json_for_terminal(&serde_json::to_string(&procs)?));
    }
    outln!(
        "{:>6}  {:<10} {:<12} {:<17} {:>5} {:>9}  COMMAND",
        "PID",
        "AGENT",
        "TOOL",
        "STATE",
        "EXIT",
        "RUNTIME"
    )?;
    for p in procs {
        outln!(
            "{:>6}  {:<10} {:<12} {:<17} {:>5} {:>8.1}s  {}",
            p.pid,
            for_terminal(&p.agent),
            for_terminal(&p.tool),
            p.state.as_str(),
            p.exit_code.map_or("-".into(), |c| c.to_string()),
            p.runtime_ms as f64 / 1000.0,
            for_terminal(&short_command(&p.tool, &p.command)),
        )?;
    }
    Ok(())
}

/// A command line as a person wants to read it: the tool's name instead of
/// the path of its file (`/root/.cache/toolsrv/builtin-…/shell --command 'ls'`
/// is `shell --command 'ls'`).
fn short_command<'a>(tool: &str, command: &'a str) -> std::borrow::Cow<'a, str> {
    let (first, rest) = command.split_once(' ').unwrap_or((command, ""));
    if first.starts_with('/') && first.rsplit('/').next() == Some(tool) {
        if rest.is_empty() {
            tool.to_string().into()
        } else {
            format!("{tool} {rest}").into()
        }
    } else {
        command.into()
    }
}

/// `toolsrv stat`: one `field: value` line each (JSON with `--json`).
pub async fn stat(client: &Client, global: &Global, pid: u64) -> Result<()> {
    let st = client.proc_stat(pid).await?;
    if global.json {
        return outln!("{}", json_for_terminal(&serde_json::to_string(&st)?));
    }
    outln!("{}", describe_stat(&st))
}

/// A process's state for a person, every server-given text escaped for the
/// terminal.
fn describe_stat(st: &toolsrv_protocol::ProcStat) -> String {
    let t = |s: &str| for_terminal(s).into_owned();
    let yes_no = |b: bool| if b { "yes" } else { "no" };
    let state = match st.exit_code {
        Some(code) => format!("{} (exit {code})", st.state.as_str()),
        None => st.state.as_str().to_string(),
    };
    let fields = [
        ("pid", st.pid.to_string()),
        ("tool", t(&st.tool)),
        ("agent", t(&st.agent)),
        (
            "session",
            st.session.as_deref().map_or_else(|| "-".into(), t),
        ),
        ("state", state),
        ("background", yes_no(st.background).into()),
        ("sandboxed", yes_no(st.sandboxed).into()),
        ("started", t(&st.started)),
        ("ended", st.ended.as_deref().map_or_else(|| "-".into(), t)),
        ("runtime", format!("{:.1}s", st.runtime_ms as f64 / 1000.0)),
        ("cwd", t(&st.cwd)),
        ("command", t(&short_command(&st.tool, &st.command))),
    ];
    fields
        .iter()
        .map(|(name, value)| format!("{:<11} {value}", format!("{name}:")))
        .collect::<Vec<_>>()
        .join("\n")
}

/// `toolsrv out [-f]`: the output so far; with `-f`, follow until the process ends.
/// Without `-f` a running process's output is printed up to where it stands now
/// (a read that waits longer than a moment means the end was reached; it is flushed).
/// A lost connection (a server restart, a dropped SSH forward) does not end
/// `-f`: the file is opened again on the reconnected client and reading
/// resumes at the same offset, so nothing is lost or repeated.
pub async fn out(client: &Client, pid: u64, follow: bool) -> Result<()> {
    let path = format!("proc/{pid}/out");
    let mut f = client.open(&path, OREAD).await?;
    let mut offset = 0u64;
    loop {
        let read = f.read_at(offset, f.max_io());
        let data = if follow {
            match read.await {
                Ok(d) => d,
                Err(toolsrv_client::ClientError::Disconnected) => {
                    crate::logwriter::say!("toolsrv: connection lost; resuming at byte {offset}");
                    f = client.open(&path, OREAD).await?;
                    continue;
                }
                Err(e) => return Err(e.into()),
            }
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
        write_raw(&data)?;
    }
    f.clunk().await?;
    Ok(())
}

/// `toolsrv wait`.
pub async fn wait(client: &Client, pid: u64) -> Result<ExitCode> {
    let data = client.read_file(&format!("proc/{pid}/wait")).await?;
    let s = String::from_utf8_lossy(&data);
    write_raw(for_terminal(s.trim_end()).as_bytes())?;
    write_raw(b"\n")?;
    let code: i32 = s.trim().parse().unwrap_or(1);
    Ok(ExitCode::from(code.clamp(0, 255) as u8))
}
