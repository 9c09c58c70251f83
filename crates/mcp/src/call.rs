//! `tools/call`: one `proc/new` request. Cancellation (`notifications/cancelled`
//! or the end of the session) drops the request, which clunks its fid: the
//! server kills every process of the run.

use std::sync::atomic::Ordering;
use std::time::Instant;

use rmcp::model::{CallToolRequestParams, CallToolResult, ContentBlock, ResultType};
use rmcp::service::RequestContext;
use rmcp::RoleServer;
use serde_json::{json, Map, Value};
use toolsrv_protocol::Payload;

use crate::bridge::Bridge;
use crate::progress::{Tracker, TrackerState};

/// The `_meta` key that asks for a bypass.
pub const BYPASS_META: &str = "toolsrv/bypass";

pub(crate) async fn call(
    bridge: &Bridge,
    request: CallToolRequestParams,
    context: RequestContext<RoleServer>,
) -> CallToolResult {
    let started = Instant::now();
    let cfg = &bridge.inner.cfg;
    let name = request.name.to_string();
    if let Err(e) = toolsrv_protocol::validate_tool_name(&name) {
        return error(format!("invalid tool name {name:?}: {e}"));
    }
    let bypass = context.meta.get(BYPASS_META) == Some(&Value::Bool(true))
        || request
            .meta
            .as_ref()
            .is_some_and(|m| m.get(BYPASS_META) == Some(&Value::Bool(true)));
    let mut req = Payload::new(&name, &cfg.agent);
    req.session = cfg.session.clone();
    req.cwd = cfg.cwd.clone();
    if bridge.inner.cwd_refused.load(Ordering::Relaxed) {
        req.cwd = None;
    }
    req.bypass = bypass;
    let args = request.arguments.unwrap_or_default();
    let schema = if args.values().any(Value::is_null) {
        bridge.schema_of(&name).await.ok().flatten()
    } else {
        None
    };
    if let Err(e) =
        crate::args::add_arguments(&mut req, &args, schema.as_ref().unwrap_or(&Value::Null))
    {
        return error(e.to_string());
    }

    let token = context.meta.get_progress_token();
    let state = TrackerState::default();
    // Progress and the bypass request id need the run's pid; a plain call
    // without a progress token needs neither and costs one round trip.
    let tracker = (token.is_some() || bypass).then(|| Tracker {
        bridge: bridge.clone(),
        tool: name.clone(),
        token,
        peer: context.peer.clone(),
        started,
        state: state.clone(),
    });
    let run = async {
        let first = bridge.client().call_raw(&req).await;
        if req.cwd.is_none() || !cfg.cwd_fallback || !first.as_ref().is_ok_and(|r| outside_cwd(r)) {
            return first;
        }
        if !bridge.inner.cwd_refused.swap(true, Ordering::Relaxed) {
            tracing::warn!(
                cwd = req.cwd.as_deref().unwrap_or(""),
                "this directory lies outside the server's --cwd; tools run in the server's --cwd (pass --cwd DIR for a directory inside it)"
            );
        }
        let mut again = req.clone();
        again.cwd = None;
        bridge.client().call_raw(&again).await
    };
    let raw = tokio::select! {
        r = run => r,
        _ = context.ct.cancelled() => return error("cancelled".to_string()),
        _ = async { match tracker { Some(t) => t.run().await, None => std::future::pending().await } } => {
            return error("cancelled".to_string())
        }
    };
    let mut result = match raw {
        Ok(raw) => match serde_json::from_slice::<CallToolResult>(&raw) {
            Ok(r) => r,
            Err(e) => return error(format!("toolsrv sent a result that does not parse: {e}")),
        },
        Err(e) => return error(format!("toolsrv: {e}")),
    };
    result.result_type = Some(ResultType::COMPLETE);
    if bypass {
        add_decision(&mut result, &state);
    }
    result
}

/// Whether a raw result is the server refusing the working directory because
/// it lies outside its `--cwd` (or does not exist there).
fn outside_cwd(raw: &[u8]) -> bool {
    // Refusals are short; a tool's (long) output is not parsed twice.
    if raw.len() > 4096 {
        return false;
    }
    let Ok(r) = serde_json::from_slice::<toolsrv_protocol::ToolResult>(raw) else {
        return false;
    };
    let text = r.joined_text();
    r.is_error
        && text.starts_with("working directory ")
        && (text.contains("outside the server's --cwd") || text.contains("does not exist"))
}

fn error(text: String) -> CallToolResult {
    CallToolResult::error(vec![ContentBlock::text(text)])
}

/// Who decided a bypass request and why: a text block after the tool's own
/// output and `_meta["toolsrv/bypass"]`.
fn add_decision(result: &mut CallToolResult, state: &TrackerState) {
    let text: String = result
        .content
        .iter()
        .filter_map(|c| c.as_text().map(|t| t.text.as_str()))
        .collect();
    let id = state.bypass_id();
    let what = match &id {
        Some(id) => format!("bypass request {id}"),
        None => "the bypass request".to_string(),
    };
    let (approved, by, reason, line) = match text.strip_prefix("bypass rejected: ") {
        Some(reason) if result.is_error == Some(true) => {
            let reason = reason.trim_end().to_string();
            if reason == "timed out" {
                let line = format!("[toolsrv: {what} was rejected by toolsrv: no observer answered within the server's --bypass-timeout]");
                (false, "toolsrv", Some(reason), line)
            } else {
                let line = format!("[toolsrv: {what} was rejected by an observer (bypass/resolve, e.g. `toolsrv reject`): {reason}]");
                (false, "observer", Some(reason), line)
            }
        }
        _ => {
            let line = format!("[toolsrv: {what} was approved by an observer (bypass/resolve, e.g. `toolsrv approve`): the tool ran without the sandbox]");
            (true, "observer", None, line)
        }
    };
    result.content.push(ContentBlock::text(line));
    let mut info = Map::new();
    info.insert("request".into(), json!(id));
    info.insert("approved".into(), json!(approved));
    info.insert("decidedBy".into(), json!(by));
    if let Some(r) = reason {
        info.insert("reason".into(), json!(r));
    }
    let meta = result.meta.get_or_insert_with(Default::default);
    meta.insert(BYPASS_META.into(), Value::Object(info));
}
