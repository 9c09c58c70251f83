//! The bridge's shared state: the toolsrv connection, the agent it speaks for,
//! and the watch on the agent's `tools_rev`.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::Value;
use tokio::sync::watch;
use toolsrv_client::{Client, ClientError};

/// How the bridge calls tools.
#[derive(Debug, Clone)]
pub struct BridgeConfig {
    /// The agent ID whose loaded tools are served.
    pub agent: String,
    /// The session ID sent with every call.
    pub session: Option<String>,
    /// The working directory sent with every call (`None`: the server's `--cwd`).
    pub cwd: Option<String>,
    /// `cwd` is the bridge's own directory, not one the user named: when the
    /// server refuses it (outside its `--cwd`), calls run in the server's
    /// `--cwd` instead, as `toolsrv call` does.
    pub cwd_fallback: bool,
    /// How often `tools_rev` is read for `notifications/tools/list_changed`.
    pub poll_interval: Duration,
    /// How often progress notifications are sent (when the caller asked for them).
    pub progress_interval: Duration,
}

impl BridgeConfig {
    /// Defaults for `agent`: no session, the server's `--cwd`, a 250 ms poll
    /// and progress every second.
    pub fn new(agent: impl Into<String>) -> Self {
        BridgeConfig {
            agent: agent.into(),
            session: None,
            cwd: None,
            cwd_fallback: false,
            poll_interval: Duration::from_millis(250),
            progress_interval: Duration::from_secs(1),
        }
    }
}

/// An MCP server that is a toolsrv client underneath. Cheap to clone: every
/// MCP session (stdio, or each Streamable HTTP session) shares one
/// connection and one `tools_rev` watch.
#[derive(Clone)]
pub struct Bridge {
    pub(crate) inner: Arc<Inner>,
}

pub(crate) struct Inner {
    pub(crate) client: Client,
    pub(crate) cfg: BridgeConfig,
    /// The agent's registry revision, as last read.
    pub(crate) rev: watch::Receiver<u64>,
    /// Toolsrv pids that a running call of this bridge has taken as its own
    /// (for progress), so two calls do not follow the same process.
    pub(crate) claimed: Mutex<HashSet<u64>>,
    /// Set once the server refused `cfg.cwd` (with `cfg.cwd_fallback`).
    pub(crate) cwd_refused: std::sync::atomic::AtomicBool,
    /// The revision at which an empty `tools/list` was last explained in the
    /// log (`u64::MAX`: never), so the hint is logged once per revision.
    pub(crate) empty_hinted_at: std::sync::atomic::AtomicU64,
}

impl Bridge {
    /// A bridge over `client` for `cfg.agent`. Reads the revision once, then
    /// polls it every `cfg.poll_interval` in a task that ends with the last
    /// clone of the bridge.
    pub async fn new(client: Client, cfg: BridgeConfig) -> Result<Bridge, ClientError> {
        let first = client.revision(&cfg.agent).await?;
        let (tx, rx) = watch::channel(first);
        tokio::spawn(poll_revision(
            client.clone(),
            cfg.agent.clone(),
            cfg.poll_interval,
            tx,
        ));
        Ok(Bridge {
            inner: Arc::new(Inner {
                client,
                cfg,
                rev: rx,
                claimed: Mutex::new(HashSet::new()),
                cwd_refused: Default::default(),
                empty_hinted_at: std::sync::atomic::AtomicU64::new(u64::MAX),
            }),
        })
    }

    /// The toolsrv connection.
    pub fn client(&self) -> &Client {
        &self.inner.client
    }

    /// The agent's tools as MCP tool objects (`name`, `description`,
    /// `inputSchema`; a schema that is not an object is served as
    /// `{"type": "object"}`).
    pub(crate) async fn tool_values(&self) -> Result<Vec<Value>, ClientError> {
        let raw = self
            .inner
            .client
            .transact("tools", self.inner.cfg.agent.as_bytes())
            .await?;
        let mut tools: Vec<Value> = serde_json::from_slice(&raw)
            .map_err(|e| ClientError::Protocol(format!("tools: {e}")))?;
        for t in &mut tools {
            if let Some(obj) = t.as_object_mut() {
                if !obj.get("inputSchema").is_some_and(Value::is_object) {
                    obj.insert("inputSchema".into(), serde_json::json!({"type": "object"}));
                }
            }
        }
        Ok(tools)
    }

    /// Logs why `tools/list` is empty and what to do, once per registry
    /// revision: an MCP client shows an empty list without a word.
    pub(crate) fn hint_nothing_loaded(&self) {
        use std::sync::atomic::Ordering;
        let rev = *self.inner.rev.borrow();
        if self.inner.empty_hinted_at.swap(rev, Ordering::Relaxed) == rev {
            return;
        }
        let agent = &self.inner.cfg.agent;
        tracing::warn!(
            "tools/list is empty: no tools are loaded for agent {agent}; start `toolsrv mcp` with --load TOOL,... or run `toolsrv load {agent} TOOL...` (`toolsrv all` lists the tools)"
        );
    }

    /// The input schema of loaded tool `name`, if it is loaded.
    pub(crate) async fn schema_of(&self, name: &str) -> Result<Option<Value>, ClientError> {
        Ok(self
            .tool_values()
            .await?
            .into_iter()
            .find(|t| t.get("name").and_then(Value::as_str) == Some(name))
            .and_then(|mut t| t.get_mut("inputSchema").map(Value::take)))
    }

    /// A receiver that sees every later change of the agent's revision.
    pub(crate) fn revisions(&self) -> watch::Receiver<u64> {
        let mut rx = self.inner.rev.clone();
        rx.mark_unchanged();
        rx
    }
}

/// Reads `tools_rev` every `every` and publishes changes; ends when nobody
/// watches any more. A failed read (server restarting) is retried at the next
/// tick: the client reconnects by itself.
async fn poll_revision(client: Client, agent: String, every: Duration, tx: watch::Sender<u64>) {
    let mut tick = tokio::time::interval(every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = tx.closed() => return,
            _ = tick.tick() => {}
        }
        match client.revision(&agent).await {
            Ok(rev) => {
                tx.send_if_modified(|cur| {
                    let changed = *cur != rev;
                    *cur = rev;
                    changed
                });
            }
            Err(e) => tracing::debug!(error = %e, "tools_rev poll failed"),
        }
    }
}
