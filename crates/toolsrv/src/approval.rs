//! The hint `call` prints while its run waits for a human: a bypass (or any
//! other request an observer must approve) is pending, and nothing else would
//! say so until `--bypass-timeout` rejects it.

use toolsrv_client::Client;
use toolsrv_protocol::{BypassRequest, ProcState};

use crate::logwriter::say;
use crate::output::for_terminal;

/// The line printed once on stderr, naming the pending request's id.
pub(crate) fn hint_line(id: &str) -> String {
    format!(
        "waiting for approval: run `toolsrv approve {}` (or reject it)",
        for_terminal(id)
    )
}

/// When process `pid` awaits approval, finds its pending request and prints
/// [`hint_line`] once; returns as soon as it has been printed or is not
/// needed (the process is not waiting). Errors are not the call's: they
/// leave the hint out.
pub(crate) async fn hint_for_pid(client: &Client, pid: u64) {
    let waiting = client
        .proc_stat(pid)
        .await
        .is_ok_and(|st| st.state == ProcState::AwaitingApproval);
    if waiting {
        hint_when(client, |r| r.pid == pid).await;
    }
}

/// Prints [`hint_line`] for the first pending request `matches` accepts,
/// waiting for it to appear (the caller drops this future when the run
/// ends first).
pub(crate) async fn hint_when(client: &Client, matches: impl Fn(&BypassRequest) -> bool) {
    let Ok(mut watch) = client.pending().await else {
        return;
    };
    while let Ok(request) = watch.next().await {
        if matches(&request) {
            say!("{}", hint_line(&request.id));
            return;
        }
    }
}
