//! The environment a tool gets (docs/tools.md, "How arguments reach the tool";
//! sandbox policy `env`): the policy's allowlist from toolsrv's own environment,
//! then `OLLIE_AGENT_ID`, `OLLIE_SESSION_ID`, `PWD`, `TMPDIR`, the tool's
//! `TOOL_ARGS`/`ARG_*`, and last the request's `env.NAME` fields. Nothing named
//! `TOOLSRV_*` passes through from toolsrv's environment (secrets live there).

use std::collections::BTreeMap;
use std::path::Path;

/// The pieces of one tool's environment.
pub(crate) struct EnvParts<'a> {
    /// Allowlisted variables from toolsrv's own environment.
    pub(crate) passthrough: Vec<(String, String)>,
    /// The agent ID.
    pub(crate) agent: &'a str,
    /// The session ID, if any.
    pub(crate) session: Option<&'a str>,
    /// The working directory.
    pub(crate) cwd: &'a Path,
    /// The private temporary directory, if there is one.
    pub(crate) tmpdir: Option<&'a Path>,
    /// `TOOL_ARGS` and `ARG_*`.
    pub(crate) tool: &'a [(String, String)],
    /// The request's `env.NAME` fields.
    pub(crate) request: &'a [(String, String)],
}

/// A sorted, de-duplicated environment.
pub(crate) fn compose(p: EnvParts<'_>) -> BTreeMap<String, String> {
    let mut env: BTreeMap<String, String> = p
        .passthrough
        .into_iter()
        .filter(|(k, _)| !k.starts_with("TOOLSRV_"))
        .collect();
    env.entry("PATH".into())
        .or_insert_with(|| "/usr/local/bin:/usr/bin:/bin".into());
    env.insert("OLLIE_AGENT_ID".into(), p.agent.into());
    env.insert("OLLIE_SESSION_ID".into(), p.session.unwrap_or("").into());
    env.insert("PWD".into(), p.cwd.display().to_string());
    if let Some(t) = p.tmpdir {
        env.insert("TMPDIR".into(), t.display().to_string());
    }
    for (k, v) in p.tool.iter().chain(p.request) {
        env.insert(k.clone(), v.clone());
    }
    env
}
