//! Control and discovery files: `ctl`, `tools`, `all`, `info`, `tools_rev`.

use std::sync::Arc;

use async_trait::async_trait;
use tokio_util::sync::CancellationToken;
use toolsrv_protocol::validate_agent_id;
use toolsrv_vfs::{ConnInfo, Error, File, Handle, OpenMode};

use crate::files::{Generated, Request};
use crate::namespace::rerror;
use crate::registry::apply_ctl;
use crate::server::Server;

/// `info`: `{"platform": GOOS, "arch": GOARCH}` with Go's names.
pub(crate) fn info_file(
    server: &Arc<Server>,
) -> Generated<impl Fn() -> Result<Vec<u8>, Error> + Send + Sync> {
    let host = server.catalog.host();
    let body = serde_json::json!({"platform": host.platform, "arch": host.arch}).to_string();
    Generated(move || Ok(body.clone().into_bytes()))
}

/// `doctor`: what this server confines its tools with, held against its
/// current policy (docs/cli.md; the JSON of `toolsrv doctor --json`).
pub(crate) fn doctor_file(
    server: &Arc<Server>,
) -> Generated<impl Fn() -> Result<Vec<u8>, Error> + Send + Sync> {
    let server = server.clone();
    Generated(move || {
        let store = &server.executor.policies.store;
        let path = store.path().map(|p| p.display().to_string());
        let mut report =
            toolsrv_sandbox::Report::evaluate(&server.facts, &store.current(), path.as_deref());
        if let Some((why, loaded)) = store.not_reloaded() {
            report.policy_not_reloaded(&why, loaded);
        }
        to_json(&report)
    })
}

/// Run blocking catalog work (file I/O) off the connection's reader.
async fn blocking<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> Result<T, Error> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| Error::new(format!("internal error: {e}")))
}

fn to_json<T: serde::Serialize>(v: &T) -> Result<Vec<u8>, Error> {
    serde_json::to_vec(v).map_err(|e| Error::new(format!("internal error: {e}")))
}

/// The agent ID written to a write-then-read file (one trailing newline ignored).
fn agent_id(request: &[u8]) -> Result<String, Error> {
    let s = std::str::from_utf8(request).map_err(|_| Error::new("invalid agent ID"))?;
    let s = s.strip_suffix('\n').unwrap_or(s);
    let s = s.strip_suffix('\r').unwrap_or(s);
    validate_agent_id(s).map_err(rerror)?;
    Ok(s.to_string())
}

/// `all`: every tool available on this host, discovered now.
pub(crate) struct AllFile(pub(crate) Arc<Server>);

impl File for AllFile {
    fn open(&self, _mode: OpenMode, _conn: &ConnInfo) -> Result<Arc<dyn Handle>, Error> {
        Ok(Arc::new(AllHandle {
            server: self.0.clone(),
            body: tokio::sync::OnceCell::new(),
        }))
    }
}

struct AllHandle {
    server: Arc<Server>,
    body: tokio::sync::OnceCell<Vec<u8>>,
}

#[async_trait]
impl Handle for AllHandle {
    async fn read(&self, offset: u64, count: u32) -> Result<Vec<u8>, Error> {
        let body = self
            .body
            .get_or_try_init(|| async {
                let s = self.server.clone();
                let all = blocking(move || s.catalog.all()).await?;
                to_json(&all)
            })
            .await?;
        Ok(crate::files::slice_at(body, offset, count))
    }
}

/// `tools`: write an agent ID, read its loaded tools as ToolInfo JSON.
pub(crate) struct ToolsRequest(pub(crate) Arc<Server>);

#[async_trait]
impl Request for ToolsRequest {
    async fn evaluate(
        self: Arc<Self>,
        request: Vec<u8>,
        _conn: ConnInfo,
        _cancel: CancellationToken,
    ) -> Result<Vec<u8>, Error> {
        let agent = agent_id(&request)?;
        let infos: Vec<_> = self
            .0
            .registry
            .loaded(&agent)
            .iter()
            .map(|t| t.info())
            .collect();
        to_json(&infos)
    }
}

/// `tools_rev`: write an agent ID, read its registry revision.
pub(crate) struct RevRequest(pub(crate) Arc<Server>);

#[async_trait]
impl Request for RevRequest {
    async fn evaluate(
        self: Arc<Self>,
        request: Vec<u8>,
        _conn: ConnInfo,
        _cancel: CancellationToken,
    ) -> Result<Vec<u8>, Error> {
        let agent = agent_id(&request)?;
        Ok(self.0.registry.revision(&agent).to_string().into_bytes())
    }
}

/// `ctl`'s commands: `load <agent> <tool>` / `unload <agent> <tool>`.
pub(crate) struct RootCommands(pub(crate) Arc<Server>);

impl super::ctl::Commands for RootCommands {
    type Open = ();
    const BLOCKING: bool = true;

    fn opened(&self) {}

    fn apply(&self, line: &str) -> Result<(), Error> {
        apply_ctl(&self.0.registry, &self.0.catalog, line).map_err(rerror)
    }
}
