//! The client subcommands (CONTRACT §10).

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{anyhow, Context, Result};
use toolsrv_client::{Auth, Client};
use toolsrv_wire::DMDIR;

use crate::cli::{Command, Global};

/// Run a client subcommand; errors go to stderr with exit 1.
pub fn main(global: &Global, cmd: Command) -> ExitCode {
    let rt = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("toolsrv: cannot start the async runtime: {e}");
            return ExitCode::from(1);
        }
    };
    match rt.block_on(run(global, cmd)) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("toolsrv: {e:#}");
            ExitCode::from(1)
        }
    }
}

fn socket_path(global: &Global) -> Result<PathBuf> {
    global
        .socket
        .clone()
        .or_else(|| {
            std::env::var_os("TOOLSRV_SOCKET")
                .filter(|v| !v.is_empty())
                .map(PathBuf::from)
        })
        .ok_or_else(|| anyhow!("no socket: pass --socket PATH or set TOOLSRV_SOCKET"))
}

async fn connect(global: &Global) -> Result<Client> {
    let socket = socket_path(global)?;
    let secret = toolsrv_client::secret::resolve_secret(&socket, global.secret_file.as_deref())?;
    Client::connect(&socket, Auth::Secret(secret))
        .await
        .with_context(|| format!("cannot connect to {}", socket.display()))
}

async fn run(global: &Global, cmd: Command) -> Result<ExitCode> {
    let client = connect(global).await?;
    match cmd {
        Command::Serve(_) => unreachable!("handled in main"),
        Command::Info => {
            let data = client.read_file("info").await?;
            print_json(global, &data, |v| {
                format!(
                    "platform: {}\narch: {}",
                    v["platform"].as_str().unwrap_or("?"),
                    v["arch"].as_str().unwrap_or("?")
                )
            })?;
        }
        Command::Ls { path } => {
            let path = path.unwrap_or_default();
            for st in client.list_dir(&path).await? {
                let kind = if st.mode & DMDIR != 0 { 'd' } else { '-' };
                println!("{kind}{} {:>8} {}", perms(st.mode), st.length, st.name);
            }
        }
        Command::Cat { path } => {
            use std::io::Write;
            let data = client.read_file(&path).await?;
            std::io::stdout().write_all(&data)?;
        }
    }
    Ok(ExitCode::SUCCESS)
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

/// Print JSON raw with `--json`, else through `human`.
fn print_json(
    global: &Global,
    data: &[u8],
    human: impl Fn(&serde_json::Value) -> String,
) -> Result<()> {
    if global.json {
        println!("{}", String::from_utf8_lossy(data).trim_end());
        return Ok(());
    }
    let v: serde_json::Value =
        serde_json::from_slice(data).context("the server sent JSON that does not parse")?;
    println!("{}", human(&v));
    Ok(())
}
