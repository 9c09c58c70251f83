//! The background completion message written to Ollie's session prompt (docs/protocol.md, "Completion messages").

use crate::procstat::ProcState;

/// The one-line message announcing that background process `pid` ended, exactly:
///
/// `[toolsrv] background process <pid> (<tool>) for agent <agent> ended: <state>, exit code
/// <code>. Output: proc/<pid>/out`
///
/// No trailing newline is added.
pub fn completion_message(
    pid: u64,
    tool: &str,
    agent: &str,
    state: ProcState,
    exit_code: i32,
) -> String {
    format!(
        "[toolsrv] background process {pid} ({tool}) for agent {agent} ended: {state}, exit code {exit_code}. Output: proc/{pid}/out"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn message_is_exact() {
        assert_eq!(
            completion_message(12, "shell", "a1", ProcState::Exited, 0),
            "[toolsrv] background process 12 (shell) for agent a1 ended: exited, exit code 0. Output: proc/12/out"
        );
        assert_eq!(
            completion_message(3, "file_grep", "agent@x", ProcState::Killed, 143),
            "[toolsrv] background process 3 (file_grep) for agent agent@x ended: killed, exit code 143. Output: proc/3/out"
        );
    }
}
