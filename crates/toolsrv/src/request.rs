//! What `call`, `bg` and `describe` do before a tool runs: the request built
//! from the command line, the tool loaded for the agent, and the retry without
//! the client's working directory when the server refuses it.

use anyhow::Result;
use toolsrv_client::{CallRequest, Client};
use toolsrv_protocol::CwdRefusal;

use crate::cli::{CallArgs, Global};
use crate::output::for_terminal;

/// The request for `call`/`bg`. Without `--cwd` it asks for the client's own
/// working directory (docs/cli.md, "The client"); [`outside_cwd`] tells when the server
/// refused that, and the caller then asks again without it. Against a
/// remote server (`ssh://`) the local directory means nothing there: the
/// tool runs in the server's `--cwd` unless `--cwd` says otherwise.
pub(crate) fn request(a: &CallArgs, global: &Global) -> Result<CallRequest> {
    let mut req = CallRequest::new(&a.tool, &a.agent);
    req.session = a.session.clone();
    let remote = crate::connect::is_remote(global);
    req.cwd = a.cwd.clone().or_else(|| {
        if remote {
            return None;
        }
        std::env::current_dir()
            .ok()
            .and_then(|d| d.to_str().map(str::to_string))
    });
    req.timeout = a.timeout;
    req.sandbox = a.sandbox.clone();
    req.bypass = a.bypass;
    req.args = crate::tool_args::parse(&a.args)?;
    Ok(req)
}

/// Load the tool for the agent unless it is loaded already.
pub(crate) async fn ensure_loaded(client: &Client, agent: &str, tool: &str) -> Result<()> {
    if !client.tools(agent).await?.iter().any(|t| t.name == tool) {
        client.load(agent, &[tool]).await?;
    }
    Ok(())
}

/// Whether `message` is the server refusing the client's own working
/// directory (it lies outside the server's `--cwd`, or the server cannot see
/// it): then the request goes again without `cwd`.
pub(crate) fn outside_cwd(message: &str) -> bool {
    matches!(
        CwdRefusal::of_message(message),
        Some(CwdRefusal::OutsideServerCwd | CwdRefusal::Missing)
    )
}

/// Says on stderr (never stdout) where the tool ran instead of here.
pub(crate) fn note_server_cwd(req: &CallRequest) {
    crate::logwriter::say!(
        "toolsrv: note: {} lies outside the server's --cwd; the tool runs in the server's working directory (pass --cwd DIR for a directory inside it)",
        for_terminal(req.cwd.as_deref().unwrap_or("."))
    );
}

/// Start `a` in the background (in the caller's directory when the server
/// accepts it); its pid.
pub(crate) async fn start_bg(client: &Client, global: &Global, a: &CallArgs) -> Result<u64> {
    let mut req = request(a, global)?;
    ensure_loaded(client, &a.agent, &a.tool).await?;
    let pid = match client.spawn(&req).await {
        Err(e) if a.cwd.is_none() && e.server_message().is_some_and(outside_cwd) => {
            note_server_cwd(&req);
            req.cwd = None;
            client.spawn(&req).await?
        }
        r => r?,
    };
    Ok(pid)
}

#[cfg(test)]
mod tests {
    use super::*;
    use toolsrv_sandbox::WorkDirError;

    /// The server's texts are the sandbox's `WorkDirError`: the two it may
    /// retry are recognised, the others are not.
    #[test]
    fn the_sandbox_refusals_of_a_working_directory_are_recognised() {
        let outside = WorkDirError::Outside {
            requested: "/home/u/elsewhere".into(),
            base: "/srv/work".into(),
        };
        assert!(outside_cwd(&outside.to_string()), "{outside}");
        let missing = WorkDirError::Missing("/gone".into());
        assert!(outside_cwd(&missing.to_string()), "{missing}");
        let file = WorkDirError::NotADirectory("/etc/passwd".into());
        assert!(!outside_cwd(&file.to_string()), "{file}");
    }
}
