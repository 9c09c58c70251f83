//! Turning a finished process into a ToolResult (docs/protocol.md, "Requests and results").

use base64::Engine;
use toolsrv_metadata::OutputMode;
use toolsrv_protocol::image_mime;
use toolsrv_protocol::{ProcState, ToolResult};

/// Output text with `line` appended on a line of its own.
fn with_line(output: &[u8], line: &str) -> String {
    let mut s = String::from_utf8_lossy(output).into_owned();
    if !s.is_empty() && !s.ends_with('\n') {
        s.push('\n');
    }
    s.push_str(line);
    s
}

/// The result of a process that ended in `state` with `code`.
pub(crate) fn build(
    state: ProcState,
    code: i32,
    output: &[u8],
    mode: OutputMode,
    timeout: std::time::Duration,
) -> ToolResult {
    match state {
        ProcState::Exited if code == 0 => {
            let mime = match mode {
                OutputMode::Text => None,
                OutputMode::Image => Some(image_mime(output).unwrap_or("image/png")),
                OutputMode::Auto => image_mime(output),
            };
            match mime {
                Some(m) => ToolResult::image(
                    base64::engine::general_purpose::STANDARD.encode(output),
                    m.to_string(),
                ),
                None => ToolResult::text(String::from_utf8_lossy(output).into_owned()),
            }
        }
        ProcState::Exited | ProcState::Killed => {
            ToolResult::error(with_line(output, &format!("exit status {code}")))
        }
        ProcState::Timeout => ToolResult::error(with_line(
            output,
            &format!(
                "timed out after {}",
                toolsrv_protocol::format_duration(timeout)
            ),
        )),
        ProcState::Cancelled => ToolResult::error("cancelled"),
        ProcState::Rejected | ProcState::Failed => {
            ToolResult::error(String::from_utf8_lossy(output).into_owned())
        }
        ProcState::Running | ProcState::AwaitingApproval => {
            ToolResult::error("internal error: process still running")
        }
    }
}
