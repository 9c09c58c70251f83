//! The server's audit records (docs/audit.md), written through the
//! `toolsrv-audit` log when `serve --audit <file>` names one: each run's
//! start and end, each bypass approval or rejection with the approving
//! client's uid and pid, each distinct denial of a run. A record holds
//! what the process listing shows (the command as run, its working
//! directory), never an environment, a secret, a token or a placeholder.
//! Process records carry OCSF's Process Activity ids (`class_uid` 1007,
//! `activity_id` 1 launch, 2 terminate), network denials its Network
//! Activity ids (4001, 5 refuse).

use std::sync::Arc;

use serde_json::{json, Map, Value};
use toolsrv_audit::AuditLog;

use crate::exec::RunPlan;
use crate::procs::Proc;

/// The audit log, if the server keeps one.
#[derive(Debug, Default, Clone)]
pub(crate) struct Audit(Option<Arc<AuditLog>>);

/// OCSF Process Activity.
const PROCESS_ACTIVITY: u64 = 1007;
/// OCSF Network Activity.
const NETWORK_ACTIVITY: u64 = 4001;

fn fields(v: Value) -> Map<String, Value> {
    match v {
        Value::Object(m) => m,
        _ => Map::new(),
    }
}

impl Audit {
    /// The log at `path` (`None`: no audit log).
    pub(crate) fn open(path: Option<&std::path::Path>) -> Result<Audit, toolsrv_audit::AuditError> {
        Ok(Audit(match path {
            Some(p) => Some(Arc::new(AuditLog::open(p)?)),
            None => None,
        }))
    }

    /// A run starts (after its approval, for a bypass).
    pub(crate) fn run_start(&self, proc: &Proc, plan: &RunPlan) {
        let Some(log) = &self.0 else { return };
        let s = &proc.spec;
        log.append(
            "run_start",
            fields(json!({
                "class_uid": PROCESS_ACTIVITY,
                "activity_id": 1,
                "pid": proc.pid,
                "agent": s.agent,
                "session": s.session,
                "tool": s.tool,
                "command": s.command,
                "cwd": s.cwd.display().to_string(),
                "sandboxed": s.sandboxed,
                "background": s.background,
                "profile": plan.request.sandbox.as_deref().unwrap_or("default"),
                "grants": [],
            })),
        );
    }

    /// A run ended: its end, then each of its distinct denials.
    pub(crate) fn run_end(&self, proc: &Proc) {
        let Some(log) = &self.0 else { return };
        let stat = proc.stat();
        let denials = proc.denials();
        log.append(
            "run_end",
            fields(json!({
                "class_uid": PROCESS_ACTIVITY,
                "activity_id": 2,
                "pid": stat.pid,
                "agent": stat.agent,
                "state": stat.state.to_string(),
                "exit_code": stat.exit_code,
                "runtime_ms": stat.runtime_ms,
                "limits_reached": proc.limits_reached(),
                "denials": denials.iter().map(|d| d.count).sum::<u64>(),
            })),
        );
        for d in denials {
            log.append(
                "denial",
                fields(json!({
                    "class_uid": NETWORK_ACTIVITY,
                    "activity_id": 5,
                    "pid": stat.pid,
                    "agent": stat.agent,
                    "kind": d.kind,
                    "access": d.access,
                    "target": d.target,
                    "count": d.count,
                    "allow": d.allow,
                    "first": toolsrv_protocol::format_rfc3339_millis(d.time),
                })),
            );
        }
    }

    /// A human approved or rejected a bypass request from a client with
    /// `uid` and `pid` (`SO_PEERCRED`).
    pub(crate) fn decision(
        &self,
        id: &str,
        approve: bool,
        reason: Option<&str>,
        uid: Option<u32>,
        pid: Option<i32>,
    ) {
        let Some(log) = &self.0 else { return };
        log.append(
            if approve { "approval" } else { "rejection" },
            fields(json!({
                "id": id,
                "kind": "bypass",
                "scope": "once",
                "reason": reason,
                "approver_uid": uid,
                "approver_pid": pid,
            })),
        );
    }
}
