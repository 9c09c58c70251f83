//! High-level operations of the toolsrv namespace (docs/protocol.md, "Namespace"; docs/protocol.md, "Requests and results"; docs/protocol.md, "Processes"): tool
//! discovery and loading, calls, background processes.
//!
//! Cancellation: [`Client::call`] keeps its request open on `proc/new` while it
//! waits; dropping the future closes it (the read is flushed and the fid
//! clunked), and the server kills the tool's process group.

use toolsrv_protocol::{Payload, ProcStat, ToolInfo, ToolResult, ToolSummary};

use crate::client::Client;
use crate::error::ClientError;

/// A tool request: what `proc/new` and `proc/new.bg` take. The client fills in
/// its session token when it sends one.
pub type CallRequest = Payload;

/// `req` with this connection's token, encoded.
fn with_token(req: &CallRequest, token: Option<&str>) -> String {
    let mut p = req.clone();
    p.token = token.map(String::from);
    p.encode()
}

fn json<T: serde::de::DeserializeOwned>(what: &str, data: &[u8]) -> Result<T, ClientError> {
    serde_json::from_slice(data).map_err(|e| {
        ClientError::Protocol(format!(
            "{what}: the server sent JSON that does not parse: {e}"
        ))
    })
}

fn decimal<T: std::str::FromStr>(what: &str, data: &[u8]) -> Result<T, ClientError> {
    let s = String::from_utf8_lossy(data);
    s.trim()
        .parse()
        .map_err(|_| ClientError::Protocol(format!("{what}: expected a number, got {s:?}")))
}

impl Client {
    /// Every tool available on the server's host (`all`).
    pub async fn all(&self) -> Result<Vec<ToolSummary>, ClientError> {
        json("all", &self.read_file("all").await?)
    }

    /// The tools loaded for `agent` (`tools`).
    pub async fn tools(&self, agent: &str) -> Result<Vec<ToolInfo>, ClientError> {
        json("tools", &self.transact("tools", agent.as_bytes()).await?)
    }

    /// `agent`'s registry revision (`tools_rev`).
    pub async fn revision(&self, agent: &str) -> Result<u64, ClientError> {
        decimal(
            "tools_rev",
            &self.transact("tools_rev", agent.as_bytes()).await?,
        )
    }

    /// Load `tools` for `agent` (one `ctl` write; stops at the first error).
    pub async fn load(&self, agent: &str, tools: &[&str]) -> Result<(), ClientError> {
        self.ctl_all("load", agent, tools).await
    }

    /// Unload `tools` for `agent`.
    pub async fn unload(&self, agent: &str, tools: &[&str]) -> Result<(), ClientError> {
        self.ctl_all("unload", agent, tools).await
    }

    async fn ctl_all(&self, verb: &str, agent: &str, tools: &[&str]) -> Result<(), ClientError> {
        let cmds: String = tools
            .iter()
            .map(|t| format!("{verb} {agent} {t}\n"))
            .collect();
        self.write_file("ctl", cmds.as_bytes()).await
    }

    /// Run a tool and wait for its result. Dropping the future cancels the run.
    pub async fn call(&self, req: &CallRequest) -> Result<ToolResult, ClientError> {
        let out = self
            .transact_with_token("proc/new", |t| with_token(req, t))
            .await?;
        json("proc/new", &out)
    }

    /// [`Client::call`], returning the result's JSON as the server sent it
    /// (MCP's `CallToolResult` shape, for bridges that pass it on).
    pub async fn call_raw(&self, req: &CallRequest) -> Result<Vec<u8>, ClientError> {
        self.transact_with_token("proc/new", |t| with_token(req, t))
            .await
    }

    /// Start a tool in the background; returns its pid.
    pub async fn spawn(&self, req: &CallRequest) -> Result<u64, ClientError> {
        let out = self
            .transact_with_token("proc/new.bg", |t| with_token(req, t))
            .await?;
        decimal("proc/new.bg", &out)
    }

    /// Processes, all or one agent's (`proc/list`).
    pub async fn ps(&self, agent: Option<&str>) -> Result<Vec<ProcStat>, ClientError> {
        let data = match agent {
            Some(a) => self.transact("proc/list", a.as_bytes()).await?,
            None => self.read_file("proc/list").await?,
        };
        json("proc/list", &data)
    }

    /// One process's state.
    pub async fn proc_stat(&self, pid: u64) -> Result<ProcStat, ClientError> {
        json("stat", &self.read_file(&format!("proc/{pid}/stat")).await?)
    }

    /// Wait for a process to end; returns its exit code.
    pub async fn wait(&self, pid: u64) -> Result<i32, ClientError> {
        decimal("wait", &self.read_file(&format!("proc/{pid}/wait")).await?)
    }

    /// A process's output so far (waits until it ends, like `cat proc/<pid>/out`).
    pub async fn output(&self, pid: u64) -> Result<Vec<u8>, ClientError> {
        self.read_file(&format!("proc/{pid}/out")).await
    }

    /// Signal a process's group (`signal <N|NAME>`).
    pub async fn signal(&self, pid: u64, signal: &str) -> Result<(), ClientError> {
        self.write_file(
            &format!("proc/{pid}/ctl"),
            format!("signal {signal}").as_bytes(),
        )
        .await
    }

    /// Kill a process's group.
    pub async fn kill(&self, pid: u64) -> Result<(), ClientError> {
        self.write_file(&format!("proc/{pid}/ctl"), b"kill").await
    }

    /// Remove a finished process.
    pub async fn dismiss(&self, pid: u64) -> Result<(), ClientError> {
        self.write_file(&format!("proc/{pid}/ctl"), b"dismiss")
            .await
    }
}

/// An observer's view of `bypass/pending`: every pending request once, oldest first.
pub struct PendingWatch {
    file: crate::file::RemoteFile,
    buf: Vec<u8>,
    offset: u64,
}

impl PendingWatch {
    /// The next pending request this observer has not seen; waits while there is
    /// none. Dropping the future abandons the wait.
    pub async fn next(&mut self) -> Result<toolsrv_protocol::BypassRequest, ClientError> {
        loop {
            if let Some(i) = self.buf.iter().position(|&b| b == b'\n') {
                let line: Vec<u8> = self.buf.drain(..=i).collect();
                return json("bypass/pending", &line);
            }
            let data = self.file.read_at(self.offset, self.file.max_io()).await?;
            if data.is_empty() {
                return Err(ClientError::Protocol("bypass/pending ended".into()));
            }
            self.offset += data.len() as u64;
            self.buf.extend_from_slice(&data);
        }
    }
}

impl Client {
    /// Watch `bypass/pending` as an observer.
    pub async fn pending(&self) -> Result<PendingWatch, ClientError> {
        Ok(PendingWatch {
            file: self.open("bypass/pending", toolsrv_wire::OREAD).await?,
            buf: Vec::new(),
            offset: 0,
        })
    }

    /// Approve bypass request `id`.
    pub async fn approve(&self, id: &str) -> Result<(), ClientError> {
        let r = toolsrv_protocol::Resolution {
            id: id.into(),
            approve: true,
            reason: None,
        };
        self.resolve(&r).await
    }

    /// Reject bypass request `id` with `reason`.
    pub async fn reject(&self, id: &str, reason: &str) -> Result<(), ClientError> {
        let r = toolsrv_protocol::Resolution {
            id: id.into(),
            approve: false,
            reason: Some(reason.into()),
        };
        self.resolve(&r).await
    }

    async fn resolve(&self, r: &toolsrv_protocol::Resolution) -> Result<(), ClientError> {
        let body = serde_json::to_vec(r).map_err(|e| ClientError::Protocol(e.to_string()))?;
        self.write_file("bypass/resolve", &body).await
    }
}
