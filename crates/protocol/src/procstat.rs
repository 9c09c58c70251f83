//! Process status as read from `proc/{pid}/stat` and `proc/list` (docs/protocol.md, "Processes").

use serde::{Deserialize, Serialize};

pub use crate::timestamp::format_rfc3339_millis;

/// The lifecycle state of a toolsrv process.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ProcState {
    /// A bypass request waiting for an observer to approve or reject it.
    AwaitingApproval,
    /// The tool is running.
    Running,
    /// The tool ended by itself with an exit status.
    Exited,
    /// The tool was ended by a signal (for example from `ctl`).
    Killed,
    /// The tool ran past its timeout and was killed.
    Timeout,
    /// The request was cancelled (its `proc/new` fid was clunked).
    Cancelled,
    /// The bypass request was refused (exit code 126).
    Rejected,
    /// The tool could not be started (exit code 127).
    Failed,
}

impl ProcState {
    /// Every state, in the order the protocol (docs/protocol.md) lists them.
    pub const ALL: [ProcState; 8] = [
        ProcState::AwaitingApproval,
        ProcState::Running,
        ProcState::Exited,
        ProcState::Killed,
        ProcState::Timeout,
        ProcState::Cancelled,
        ProcState::Rejected,
        ProcState::Failed,
    ];

    /// True once the process has ended (every state except `awaiting_approval` and `running`).
    pub fn is_finished(self) -> bool {
        !matches!(self, ProcState::AwaitingApproval | ProcState::Running)
    }

    /// The wire name, as it appears in JSON and completion messages (`awaiting_approval`, …).
    pub fn as_str(self) -> &'static str {
        match self {
            ProcState::AwaitingApproval => "awaiting_approval",
            ProcState::Running => "running",
            ProcState::Exited => "exited",
            ProcState::Killed => "killed",
            ProcState::Timeout => "timeout",
            ProcState::Cancelled => "cancelled",
            ProcState::Rejected => "rejected",
            ProcState::Failed => "failed",
        }
    }
}

impl std::fmt::Display for ProcState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One process's status; serializes exactly as docs/protocol.md, "Processes" shows, fields in that order, with
/// `session`, `exit_code` and `ended` as `null` when absent.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProcStat {
    /// toolsrv's own process number (1, 2, 3, … per server run).
    pub pid: u64,
    /// The tool name.
    pub tool: String,
    /// The requesting agent ID.
    pub agent: String,
    /// The request's session ID, if it had one.
    pub session: Option<String>,
    /// True when started through `proc/new.bg`.
    pub background: bool,
    /// The lifecycle state.
    pub state: ProcState,
    /// Exit status (128+N after signal N, 126 rejected, 127 failed); `None` while not finished.
    pub exit_code: Option<i32>,
    /// Start time, RFC 3339 UTC with milliseconds (see [`format_rfc3339_millis`]).
    pub started: String,
    /// End time in the same format; `None` while not finished.
    pub ended: Option<String>,
    /// Milliseconds run so far, or in total once finished.
    pub runtime_ms: u64,
    /// The command line as shown to users.
    pub command: String,
    /// The working directory.
    pub cwd: String,
    /// False under `--yolo` and for approved bypass runs.
    pub sandboxed: bool,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn states_serialize_snake_case() {
        let names: Vec<String> = ProcState::ALL
            .iter()
            .map(|s| serde_json::to_string(s).unwrap_or_default())
            .collect();
        assert_eq!(
            names,
            [
                "\"awaiting_approval\"",
                "\"running\"",
                "\"exited\"",
                "\"killed\"",
                "\"timeout\"",
                "\"cancelled\"",
                "\"rejected\"",
                "\"failed\""
            ]
        );
        for s in ProcState::ALL {
            assert_eq!(
                format!("\"{s}\""),
                serde_json::to_string(&s).unwrap_or_default()
            );
            let back: ProcState =
                serde_json::from_str(&format!("\"{}\"", s.as_str())).unwrap_or(ProcState::Running);
            assert_eq!(back, s);
        }
    }

    #[test]
    fn finished_states() {
        let finished: Vec<ProcState> = ProcState::ALL
            .into_iter()
            .filter(|s| s.is_finished())
            .collect();
        assert_eq!(
            finished,
            [
                ProcState::Exited,
                ProcState::Killed,
                ProcState::Timeout,
                ProcState::Cancelled,
                ProcState::Rejected,
                ProcState::Failed
            ]
        );
    }

    #[test]
    fn procstat_json_matches_contract() {
        let running = ProcStat {
            pid: 3,
            tool: "shell".into(),
            agent: "a1".into(),
            session: Some("s1".into()),
            background: true,
            state: ProcState::Running,
            exit_code: None,
            started: "2026-11-30T10:00:00.123Z".into(),
            ended: None,
            runtime_ms: 1520,
            command: "sh -c 'make test'".into(),
            cwd: "/home/u/project".into(),
            sandboxed: true,
        };
        let json = serde_json::to_string(&running).unwrap_or_default();
        assert_eq!(
            json,
            r#"{"pid":3,"tool":"shell","agent":"a1","session":"s1","background":true,"state":"running","exit_code":null,"started":"2026-11-30T10:00:00.123Z","ended":null,"runtime_ms":1520,"command":"sh -c 'make test'","cwd":"/home/u/project","sandboxed":true}"#
        );
        let back: Result<ProcStat, _> = serde_json::from_str(&json);
        assert_eq!(back.ok(), Some(running.clone()));

        let done = ProcStat {
            session: None,
            state: ProcState::Exited,
            exit_code: Some(2),
            ended: Some("2026-11-30T10:00:01.643Z".into()),
            ..running
        };
        let json = serde_json::to_string(&done).unwrap_or_default();
        assert!(json.contains(r#""session":null"#), "{json}");
        assert!(json.contains(r#""state":"exited","exit_code":2"#), "{json}");
        assert!(
            json.contains(r#""ended":"2026-11-30T10:00:01.643Z""#),
            "{json}"
        );
    }
}
