//! Background completion messages (docs/protocol.md, "Completion messages"): when a background process with
//! a session and an agent ends, one line goes to `s/<session>/prompt` on the
//! Ollie namespace socket, through the project's own 9P client, unauthenticated.
//! Delivery runs in its own task, is bounded in time, and a failure is only logged.

use std::path::PathBuf;
use std::time::Duration;

use toolsrv_client::{Auth, Client};
use toolsrv_protocol::{completion_message, validate_agent_id, ProcStat};

/// How long one delivery may take (connect + write).
const DELIVERY_TIMEOUT: Duration = Duration::from_secs(5);

/// Send the completion message for `stat` to `ollie`, if it has a session and an agent.
pub(crate) fn notify(ollie: Option<PathBuf>, stat: ProcStat) {
    let (Some(ollie), Some(session)) = (ollie, stat.session.clone()) else {
        return;
    };
    if stat.agent.is_empty() {
        return;
    }
    // The session becomes one path element: the same rule as agent IDs keeps
    // it from walking anywhere else.
    if validate_agent_id(&session).is_err() {
        tracing::warn!(pid = stat.pid, session = %session, "session ID is not a valid path element; completion message not sent");
        return;
    }
    let msg = completion_message(
        stat.pid,
        &stat.tool,
        &stat.agent,
        stat.state,
        stat.exit_code.unwrap_or(-1),
    );
    tokio::spawn(async move {
        let path = format!("s/{session}/prompt");
        let send = async {
            let c = Client::connect(&ollie, Auth::None).await?;
            c.write_file(&path, msg.as_bytes()).await
        };
        match tokio::time::timeout(DELIVERY_TIMEOUT, send).await {
            Ok(Ok(())) => {
                tracing::debug!(pid = stat.pid, session = %session, "completion message delivered")
            }
            Ok(Err(e)) => {
                tracing::warn!(pid = stat.pid, ollie = %ollie.display(), error = %e, "completion message not delivered")
            }
            Err(_) => {
                tracing::warn!(pid = stat.pid, ollie = %ollie.display(), "completion message not delivered: timed out")
            }
        }
    });
}
