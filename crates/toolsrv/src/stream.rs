//! `toolsrv call` with its output streamed: the tool runs as a background
//! process whose `out` is followed, so output appears as the tool writes it.
//! Ctrl-C, SIGTERM and SIGHUP keep what was printed and cancel the run: the
//! process is killed (or, still awaiting approval, its request withdrawn),
//! then dismissed.

use std::process::ExitCode;
use std::time::Duration;

use anyhow::Result;
use toolsrv_client::Client;
use toolsrv_protocol::ProcState;
use toolsrv_wire::OREAD;

use crate::cli::CallArgs;
use crate::interrupt::Interrupts;
use crate::logwriter::say;
use crate::output::{outln, write_raw};

/// How long a cancelled call waits for the server to report the run ended.
const CANCEL_WAIT: Duration = Duration::from_secs(10);

/// Run `a`, printing its output as it comes; the exit code as `call`'s.
pub async fn call(client: &Client, global: &crate::cli::Global, a: &CallArgs) -> Result<ExitCode> {
    // Caught before the run exists: a signal from here on cancels it.
    let mut interrupts = Interrupts::listen()?;
    let pid = crate::request::start_bg(client, global, a).await?;
    let watched = async {
        let follow = follow(client, pid);
        tokio::pin!(follow);
        tokio::select! {
            r = &mut follow => return r,
            () = crate::approval::hint_for_pid(client, pid) => {}
        }
        follow.await
    };
    let outcome = tokio::select! {
        r = watched => r,
        signal = interrupts.recv() => {
            let _ = client.kill(pid).await;
            say!("toolsrv: cancelled");
            let _ = tokio::time::timeout(CANCEL_WAIT, client.wait(pid)).await;
            let _ = client.dismiss(pid).await;
            return Ok(signal.exit_code());
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
