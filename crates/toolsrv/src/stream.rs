//! `toolsrv call` with its output streamed: the tool runs as a background
//! process whose `out` is followed, so output appears as the tool writes it
//! and Ctrl-C keeps what was printed (the process is killed, then dismissed).

use std::process::ExitCode;

use anyhow::Result;
use toolsrv_client::Client;
use toolsrv_protocol::ProcState;
use toolsrv_wire::OREAD;

use crate::cli::CallArgs;
use crate::logwriter::say;
use crate::output::{outln, write_raw};

/// Run `a`, printing its output as it comes; the exit code as `call`'s.
pub async fn call(client: &Client, global: &crate::cli::Global, a: &CallArgs) -> Result<ExitCode> {
    let pid = crate::request::start_bg(client, global, a).await?;
    let outcome = tokio::select! {
        r = follow(client, pid) => r,
        _ = tokio::signal::ctrl_c() => {
            let _ = client.kill(pid).await;
            say!("toolsrv: cancelled");
            let _ = client.wait(pid).await;
            let _ = client.dismiss(pid).await;
            return Ok(ExitCode::from(130));
        }
    };
    let result = match outcome {
        Ok(()) => finish(client, pid, a).await,
        Err(e) => Err(e),
    };
    let _ = client.dismiss(pid).await;
    result
}

/// Copy `proc/<pid>/out` to stdout until the process ended. An image (by
/// its first bytes) is not printed raw: a line says what it was.
async fn follow(client: &Client, pid: u64) -> Result<()> {
    let f = client.open(&format!("proc/{pid}/out"), OREAD).await?;
    let mut offset = 0u64;
    let mut image: Option<&'static str> = None;
    loop {
        let data = f.read_at(offset, f.max_io()).await?;
        if data.is_empty() {
            break;
        }
        if offset == 0 {
            image = toolsrv_protocol::image_mime(&data);
        }
        offset += data.len() as u64;
        if image.is_none() {
            write_raw(&data)?;
        }
    }
    f.clunk().await?;
    if let Some(kind) = image {
        outln!("[image {kind}, {offset} bytes]")?;
    }
    Ok(())
}

/// How the process ended, said as the synchronous result would say it.
async fn finish(client: &Client, pid: u64, a: &CallArgs) -> Result<ExitCode> {
    let st = client.proc_stat(pid).await?;
    let code = st.exit_code.unwrap_or(-1);
    let line = match st.state {
        ProcState::Exited if code == 0 => return Ok(ExitCode::SUCCESS),
        ProcState::Exited | ProcState::Killed => format!("exit status {code}"),
        ProcState::Timeout => match a.timeout {
            Some(t) => format!("timed out after {}", toolsrv_protocol::format_duration(t)),
            None => "timed out".to_string(),
        },
        ProcState::Cancelled => "cancelled".to_string(),
        // The reason is in the output already.
        ProcState::Rejected | ProcState::Failed => return Ok(ExitCode::from(1)),
        ProcState::Running | ProcState::AwaitingApproval => {
            "internal error: process still running".to_string()
        }
    };
    outln!("{line}")?;
    Ok(ExitCode::from(1))
}
