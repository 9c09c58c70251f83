//! The bypass broker's JSON messages: `bypass/pending` requests and `bypass/resolve`
//! resolutions (docs/protocol.md, "Bypass requests").

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// A pending request for unsandboxed execution, one per read of `bypass/pending`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BypassRequest {
    /// The request ID, e.g. `b7`.
    pub id: String,
    /// The toolsrv pid of the waiting process.
    pub pid: u64,
    /// The requesting agent ID.
    pub agent: String,
    /// The request's session ID (`null` when none).
    pub session: Option<String>,
    /// The tool name.
    pub tool: String,
    /// The command line that would run.
    pub command: String,
    /// The working directory it would run in.
    pub cwd: String,
    /// The complete environment the tool would get.
    pub env: BTreeMap<String, String>,
    /// Only the request's own `env.NAME` fields (a subset of `env`), so an observer sees
    /// what the agent added.
    #[serde(default)]
    pub request_env: BTreeMap<String, String>,
    /// The values of the tool's `file: true` arguments, which the command
    /// names only by their files' paths (`--content-file /proc/self/fd/3`);
    /// omitted when there are none.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub files: BTreeMap<String, String>,
    /// When the request was made, RFC 3339 UTC.
    pub created: String,
}

/// An observer's decision, written to `bypass/resolve`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Resolution {
    /// The [`BypassRequest::id`] being resolved.
    pub id: String,
    /// True to run the tool unsandboxed, false to reject it.
    pub approve: bool,
    /// Why it was rejected (shown as `bypass rejected: <reason>`); omitted when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_json_matches_contract() {
        let req = BypassRequest {
            id: "b7".into(),
            pid: 9,
            agent: "a1".into(),
            session: Some("s1".into()),
            tool: "shell".into(),
            command: "sh -c 'ls'".into(),
            cwd: "/tmp".into(),
            env: BTreeMap::from([("PATH".into(), "/bin".into()), ("A".into(), "1".into())]),
            request_env: BTreeMap::from([("A".into(), "1".into())]),
            files: BTreeMap::new(),
            created: "2026-11-30T10:00:00.123Z".into(),
        };
        let json = serde_json::to_string(&req).unwrap_or_default();
        assert_eq!(
            json,
            r#"{"id":"b7","pid":9,"agent":"a1","session":"s1","tool":"shell","command":"sh -c 'ls'","cwd":"/tmp","env":{"A":"1","PATH":"/bin"},"request_env":{"A":"1"},"created":"2026-11-30T10:00:00.123Z"}"#
        );
        let back: Result<BypassRequest, _> = serde_json::from_str(&json);
        assert_eq!(back.ok(), Some(req.clone()));
        let none = BypassRequest {
            session: None,
            ..req
        };
        let json = serde_json::to_string(&none).unwrap_or_default();
        assert!(json.contains(r#""session":null"#), "{json}");
    }

    #[test]
    fn resolution_json_both_forms() {
        let approve: Result<Resolution, _> =
            serde_json::from_str(r#"{"id": "b7", "approve": true}"#);
        assert_eq!(
            approve.ok(),
            Some(Resolution {
                id: "b7".into(),
                approve: true,
                reason: None
            })
        );
        let reject: Result<Resolution, _> =
            serde_json::from_str(r#"{"id": "b7", "approve": false, "reason": "not now"}"#);
        let reject = reject.ok();
        assert_eq!(
            reject,
            Some(Resolution {
                id: "b7".into(),
                approve: false,
                reason: Some("not now".into())
            })
        );
        assert_eq!(
            serde_json::to_string(&Resolution {
                id: "b7".into(),
                approve: true,
                reason: None
            })
            .unwrap_or_default(),
            r#"{"id":"b7","approve":true}"#
        );
        let bad: Result<Resolution, _> = serde_json::from_str(r#"{"id": "b7"}"#);
        assert!(bad.is_err_and(|e| e.to_string().contains("approve")));
    }
}
