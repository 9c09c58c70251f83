//! `toolsrv remote up|status|down <host>`, and `ssh://` sockets for every
//! client command (docs/remote.md). The work is in `toolsrv-remote`.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{anyhow, Context, Result};
use toolsrv_client::SshAddress;
use toolsrv_remote::{Health, LocalDir, Ssh, UpOptions, UpReport, SSH_CONFIG_ENV};

use crate::cli::{Global, RemoteCommand, RemoteUpArgs};
use crate::output::{for_terminal, outln};

/// Variables for every remote command, whitespace-separated `NAME=VALUE`.
pub const REMOTE_ENV: &str = "TOOLSRV_REMOTE_ENV";
/// The remote server's `--cwd` when `up --cwd` is not given.
pub const REMOTE_CWD: &str = "TOOLSRV_REMOTE_CWD";

/// `host`, `user@host:port` or `ssh://…` as an address.
pub fn address(host: &str) -> Result<SshAddress> {
    let full = if host.starts_with(toolsrv_client::address::SSH_SCHEME) {
        host.to_string()
    } else {
        format!("{}{host}", toolsrv_client::address::SSH_SCHEME)
    };
    Ok(SshAddress::parse(&full)?)
}

fn ssh_config() -> Option<PathBuf> {
    std::env::var_os(SSH_CONFIG_ENV)
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
}

fn options(a: &RemoteUpArgs) -> Result<UpOptions> {
    let addr = address(&a.host)?;
    let mut env = Vec::new();
    let from_env = std::env::var(REMOTE_ENV).unwrap_or_default();
    for kv in from_env
        .split_whitespace()
        .chain(a.env.iter().map(String::as_str))
    {
        let (k, v) = kv
            .split_once('=')
            .ok_or_else(|| anyhow!("--env {kv:?}: expected NAME=VALUE"))?;
        env.push((k.to_string(), v.to_string()));
    }
    let config = match &a.config {
        Some(d) => Some(crate::paths::expand_tilde(d)),
        None => Some(crate::paths::config_dir()).filter(|d| d.is_dir()),
    };
    let host = toolsrv_metadata::Host::current();
    Ok(UpOptions {
        addr,
        config,
        idle_timeout: a.idle_timeout,
        cwd: a
            .cwd
            .clone()
            .or_else(|| std::env::var(REMOTE_CWD).ok().filter(|v| !v.is_empty())),
        env,
        ssh_config: ssh_config(),
        binary: std::env::current_exe().context("cannot find this binary")?,
        version: format!("toolsrv {}", env!("CARGO_PKG_VERSION")),
        host: (host.platform, host.arch),
    })
}

/// Bring `addr` up if needed (default options) and return the forwarded
/// socket: what `--socket ssh://…` resolves to.
pub fn ensure_up(addr: &SshAddress) -> Result<PathBuf> {
    let args = RemoteUpArgs {
        host: addr.to_string(),
        config: None,
        idle_timeout: std::time::Duration::from_secs(30 * 60),
        cwd: None,
        env: Vec::new(),
        if_needed: true,
        print_socket: true,
    };
    let r = toolsrv_remote::up(&options(&args)?, true)?;
    Ok(r.local_socket)
}

/// Run a `remote` subcommand.
pub fn main(global: &Global, cmd: RemoteCommand) -> ExitCode {
    let res = match cmd {
        RemoteCommand::Up(a) => run_up(&a),
        RemoteCommand::Status { host } => run_status(global, &host),
        RemoteCommand::Down { host } => address(&host).and_then(|a| {
            for refused in toolsrv_remote::down(&a, ssh_config())? {
                use std::io::Write;
                let _ = writeln!(std::io::stderr(), "toolsrv: {}", for_terminal(&refused));
            }
            outln!("{a}: down")?;
            Ok(())
        }),
        RemoteCommand::Supervise { dir, host } => address(&host).and_then(|a| {
            let dir_ok = LocalDir::for_address(&a)?;
            if dir_ok.path() != dir {
                return Err(anyhow!(
                    "--dir {} is not the directory of {a}",
                    dir.display()
                ));
            }
            let ssh = Ssh::new(a, dir_ok.control(), ssh_config());
            Ok(toolsrv_remote::supervise(dir_ok, ssh)?)
        }),
    };
    match res {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) if crate::output::is_stdout_closed(&e) => ExitCode::SUCCESS,
        Err(e) => {
            use std::io::Write;
            let _ = writeln!(std::io::stderr(), "toolsrv: {e:#}");
            ExitCode::from(1)
        }
    }
}

fn run_up(a: &RemoteUpArgs) -> Result<()> {
    let r = toolsrv_remote::up(&options(a)?, a.if_needed)?;
    if a.print_socket {
        outln!("{}", r.local_socket.display())?;
    } else {
        print_up(a, &r)?;
    }
    Ok(())
}

fn print_up(a: &RemoteUpArgs, r: &UpReport) -> Result<()> {
    if r.skipped {
        outln!(
            "{}: up already; socket {}",
            a.host,
            r.local_socket.display()
        )?;
        return Ok(());
    }
    let how = match r.how {
        Some(toolsrv_remote::How::Installed) => "installed now",
        Some(toolsrv_remote::How::AlreadyInstalled) => "installed before",
        Some(toolsrv_remote::How::OnPath) => "found on the remote PATH",
        Some(toolsrv_remote::How::Replaced) => {
            "installed again: the installed file's SHA-256 was not this binary's"
        }
        None => "",
    };
    outln!("binary      {} ({}, {how})", r.binary, r.version)?;
    outln!(
        "config      {} of {} files sent ({} bytes)",
        r.sync.sent,
        r.sync.files,
        r.sync.bytes
    )?;
    outln!("server      {:?} on {}", r.server, r.remote_socket)?;
    outln!("socket      {}", r.local_socket.display())?;
    outln!(
        "use it      export TOOLSRV_SOCKET={}",
        r.local_socket.display()
    )?;
    Ok(())
}

fn human(d: std::time::Duration) -> String {
    let s = d.as_secs();
    match s {
        0..=59 => format!("{s}s"),
        60..=3599 => format!("{}m{:02}s", s / 60, s % 60),
        _ => format!("{}h{:02}m", s / 3600, (s % 3600) / 60),
    }
}

fn run_status(global: &Global, host: &str) -> Result<()> {
    let addr = address(host)?;
    let st = toolsrv_remote::status(&addr)?;
    let procs = running_processes(&st.state.local_socket);
    if global.json {
        let v = serde_json::json!({
            "host": st.state.address,
            "version": st.state.remote.version,
            "binary": st.state.remote.bin,
            "remote_socket": st.state.remote.socket,
            "local_socket": st.state.local_socket,
            "server": match &st.health {
                Some(Health::Running(pid)) => serde_json::json!({"state": "running", "pid": pid}),
                Some(h) => serde_json::json!({"state": format!("{h:?}")}),
                None => serde_json::json!({"state": "unknown (no connection)"}),
            },
            "uptime_secs": st.uptime.as_secs(),
            "supervisor_pid": st.supervisor,
            "ssh_pid": st.ssh,
            "processes": procs.as_ref().ok(),
            "last_event": st.last_event,
        });
        outln!("{}", crate::output::json_for_terminal(&v.to_string()))?;
        return Ok(());
    }
    outln!("host        {}", st.state.address)?;
    outln!(
        "version     {} ({})",
        st.state.remote.version,
        st.state.remote.bin
    )?;
    let server = match &st.health {
        Some(Health::Running(pid)) => format!("running, pid {pid}, up {}", human(st.uptime)),
        Some(h) => format!("{h:?}"),
        None => "unknown: no SSH connection".into(),
    };
    outln!("server      {server}")?;
    outln!("socket      {} (remote)", st.state.remote.socket)?;
    outln!("            {} (local)", st.state.local_socket.display())?;
    outln!(
        "ssh         {}",
        match (st.ssh, st.supervisor) {
            (Some(p), Some(s)) => format!("connected (master pid {p}, supervisor pid {s})"),
            (None, Some(s)) => format!("reconnecting (supervisor pid {s})"),
            (_, None) => "no supervisor: run `toolsrv remote up` again".into(),
        }
    )?;
    match procs {
        Ok(list) if list.is_empty() => outln!("processes   none running")?,
        Ok(list) => {
            outln!("processes   {} running", list.len())?;
            for p in list {
                outln!("            {}", for_terminal(&p))?;
            }
        }
        Err(e) => outln!("processes   unknown ({e:#})")?,
    }
    outln!(
        "last        {}",
        for_terminal(st.last_event.as_deref().unwrap_or("nothing yet"))
    )?;
    Ok(())
}

/// `pid tool agent runtime` of every running process, through the forward.
fn running_processes(socket: &std::path::Path) -> Result<Vec<String>> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    rt.block_on(async {
        let secret = toolsrv_client::secret::socket_secret(socket)?;
        let c =
            toolsrv_client::Client::connect(socket, toolsrv_client::Auth::Secret(secret)).await?;
        let list = c.ps(None).await?;
        Ok(list
            .iter()
            .filter(|p| p.state == toolsrv_protocol::ProcState::Running)
            .map(|p| {
                format!(
                    "{} {} (agent {}{}), {}",
                    p.pid,
                    p.tool,
                    p.agent,
                    if p.background { ", background" } else { "" },
                    human(std::time::Duration::from_millis(p.runtime_ms))
                )
            })
            .collect())
    })
}
