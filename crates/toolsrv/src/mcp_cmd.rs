//! `toolsrv mcp`: the MCP bridge (docs/mcp.md) over stdio, or Streamable HTTP
//! with `--http`. stdout belongs to the MCP session: everything else goes to
//! stderr.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{anyhow, Context, Result};
use tokio_util::sync::CancellationToken;
use toolsrv_mcp::{Bridge, BridgeConfig, HttpListen, Listener};

use crate::cli::{Global, McpArgs};
use crate::logwriter::LogWriter;

/// The environment variable that sets the HTTP bearer token.
const TOKEN_ENV: &str = "TOOLSRV_MCP_TOKEN";

pub fn main(global: &Global, args: McpArgs) -> ExitCode {
    init_logging();
    let Some(outcome) = crate::runtime::block_on(run(global, args)) else {
        return ExitCode::from(1);
    };
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            use std::io::Write;
            let _ = writeln!(std::io::stderr(), "toolsrv: {e:#}");
            ExitCode::from(1)
        }
    }
}

fn init_logging() {
    use tracing_subscriber::EnvFilter;
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("warn"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(false)
        .with_writer(LogWriter::Stderr)
        .try_init();
}

async fn run(global: &Global, a: McpArgs) -> Result<()> {
    toolsrv_protocol::validate_agent_id(&a.agent)
        .map_err(|e| anyhow!("invalid agent {:?}: {e}", a.agent))?;
    let listen = a.http.as_deref().map(HttpListen::parse).transpose()?;
    let client = crate::connect::connect(global).await?;
    let tools: Vec<&str> = a
        .load
        .iter()
        .map(|t| t.trim())
        .filter(|t| !t.is_empty())
        .collect();
    if !tools.is_empty() {
        client
            .load(&a.agent, &tools)
            .await
            .with_context(|| format!("cannot load {} for agent {}", tools.join(","), a.agent))?;
    }
    let mut cfg = BridgeConfig::new(&a.agent);
    cfg.session = a.session.clone();
    cfg.poll_interval = a.poll;
    match &a.cwd {
        Some(d) => cfg.cwd = Some(d.clone()),
        None => {
            cfg.cwd = std::env::current_dir()
                .ok()
                .and_then(|d| d.to_str().map(str::to_string));
            cfg.cwd_fallback = true;
        }
    }
    let bridge = Bridge::new(client, cfg).await?;
    match listen {
        None => toolsrv_mcp::serve_stdio(bridge).await?,
        Some(listen) => serve_http(global, &a, bridge, listen).await?,
    }
    Ok(())
}

async fn serve_http(
    global: &Global,
    a: &McpArgs,
    bridge: Bridge,
    listen: HttpListen,
) -> Result<()> {
    let listener = Listener::bind(&listen).await?;
    let unix: Vec<PathBuf> = match &listen {
        HttpListen::Unix(p) => vec![p.clone()],
        HttpListen::Tcp(_) => Vec::new(),
    };
    let (token, file) = match std::env::var(TOKEN_ENV).ok().filter(|t| !t.is_empty()) {
        Some(t) => (t, None),
        None => {
            let file = match &a.token_file {
                Some(f) => f.clone(),
                None => toolsrv_base::Sibling::McpToken.of(&crate::connect::socket_path(global)?),
            };
            (toolsrv_mcp::generate_token(), Some(file))
        }
    };
    // Before the token is written: every server of this user hides what the
    // bridge registers (docs/mcp.md, "Where the token file may lie").
    let _registration = toolsrv_mcp::announce(&unix, file.as_slice());
    if let Some(f) = &file {
        toolsrv_mcp::write_token_file(f, &token)?;
    }
    let where_ = match &file {
        Some(f) => format!("the bearer token is in {} (mode 0600)", f.display()),
        None => format!("the bearer token is ${TOKEN_ENV}"),
    };
    {
        use std::io::Write;
        let _ = writeln!(
            std::io::stderr(),
            "toolsrv mcp: serving {} for agent {}; {where_}",
            listener.url(),
            a.agent
        );
    }
    let stop = CancellationToken::new();
    let signals = stop.clone();
    tokio::spawn(async move {
        wait_for_signal().await;
        signals.cancel();
    });
    let r = toolsrv_mcp::serve_http(bridge, listener, token, stop).await;
    if let Some(f) = file {
        let _ = std::fs::remove_file(f);
    }
    Ok(r?)
}

async fn wait_for_signal() {
    use tokio::signal::unix::{signal, SignalKind};
    match (
        signal(SignalKind::interrupt()),
        signal(SignalKind::terminate()),
    ) {
        (Ok(mut i), Ok(mut t)) => {
            tokio::select! {
                _ = i.recv() => {}
                _ = t.recv() => {}
            }
        }
        _ => std::future::pending().await,
    }
}
