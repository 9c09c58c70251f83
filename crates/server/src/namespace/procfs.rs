//! `proc/`: `list`, `new`, `new.bg`, and the generated `{pid}/` directories.

use std::sync::Arc;

use async_trait::async_trait;
use tokio_util::sync::CancellationToken;
use toolsrv_vfs::tree::GENERATED_QID_BASE;
use toolsrv_vfs::{ConnInfo, Dir, Error, File, Handle, Node, NodeKind, OpenMode};

use crate::files::{slice_at, AfterAnswer, Request, Snapshot};
use crate::namespace::rerror;
use crate::procs::output::Cursor;
use crate::procs::{OpenFile, Proc};
use crate::server::Server;

fn to_json<T: serde::Serialize>(v: &T) -> Result<Vec<u8>, Error> {
    serde_json::to_vec(v).map_err(|e| Error::new(format!("internal error: {e}")))
}

/// `proc/list`: all processes, or one agent's (write its ID first).
pub(crate) struct ListRequest(pub(crate) Arc<Server>);

#[async_trait]
impl Request for ListRequest {
    async fn evaluate(
        self: Arc<Self>,
        request: Vec<u8>,
        _conn: ConnInfo,
        _cancel: CancellationToken,
    ) -> Result<Vec<u8>, Error> {
        let text = String::from_utf8(request).map_err(|_| Error::new("invalid agent ID"))?;
        let agent = text.trim_end_matches(['\n', '\r']);
        let filter = if agent.is_empty() {
            None
        } else {
            toolsrv_protocol::validate_agent_id(agent).map_err(rerror)?;
            Some(agent)
        };
        let stats: Vec<_> = self.0.procs.list(filter).iter().map(|p| p.stat()).collect();
        to_json(&stats)
    }

    fn evaluate_unwritten(&self) -> bool {
        true
    }
}

/// `proc/new` (blocking ToolResult) and `proc/new.bg` (pid).
pub(crate) struct NewRequest {
    /// The server.
    pub(crate) server: Arc<Server>,
    /// `new.bg`.
    pub(crate) background: bool,
}

#[async_trait]
impl Request for NewRequest {
    async fn evaluate(
        self: Arc<Self>,
        request: Vec<u8>,
        conn: ConnInfo,
        cancel: CancellationToken,
    ) -> Result<Vec<u8>, Error> {
        self.evaluate_answer(request, conn, cancel)
            .await
            .map(|(r, _)| r)
    }

    /// A synchronous call's entry is dismissed once its result was read and
    /// the fid clunked (docs/containment.md).
    async fn evaluate_answer(
        self: Arc<Self>,
        request: Vec<u8>,
        _conn: ConnInfo,
        cancel: CancellationToken,
    ) -> Result<(Vec<u8>, Option<AfterAnswer>), Error> {
        if self.background {
            let pid = self
                .server
                .start_background(&request)
                .await
                .map_err(rerror)?;
            Ok((pid.to_string().into_bytes(), None))
        } else {
            let (result, pid) = self.server.call_tracked(&request, cancel).await;
            let server = self.server.clone();
            let after =
                pid.map(|pid| -> AfterAnswer { Box::new(move || server.procs.release(pid)) });
            Ok((to_json(&result)?, after))
        }
    }

    fn unwritten(&self) -> Result<(), Error> {
        Err(Error::new("write a request payload first"))
    }
}

/// `proc/`: fixed files plus one directory per process.
pub(crate) struct ProcDir {
    server: Arc<Server>,
    fixed: Vec<Node>,
}

impl ProcDir {
    /// The directory with its fixed files.
    pub(crate) fn new(server: Arc<Server>, fixed: Vec<Node>) -> ProcDir {
        ProcDir { server, fixed }
    }

    fn pid_dir(&self, p: &Arc<Proc>) -> Node {
        let base = GENERATED_QID_BASE + p.pid * 8;
        let f = |name: &str, k: u64, perm: u32, file: Arc<dyn File>| Node {
            name: name.into(),
            qid_path: base + k,
            perm,
            kind: NodeKind::File(file),
        };
        let children = vec![
            f("out", 1, 0o444, Arc::new(OutFile(p.clone()))),
            f("wait", 2, 0o444, Arc::new(WaitFile(p.clone()))),
            f("stat", 3, 0o444, Arc::new(StatFile(p.clone()))),
            f(
                "ctl",
                4,
                0o200,
                Arc::new(super::ctl::LineCommands(Arc::new(ProcCommands {
                    server: self.server.clone(),
                    proc: p.clone(),
                }))),
            ),
            f("denials", 5, 0o444, Arc::new(DenialsFile(p.clone()))),
        ];
        Node {
            name: p.pid.to_string().into(),
            qid_path: base,
            perm: 0o555,
            kind: NodeKind::Dir(Arc::new(toolsrv_vfs::tree::StaticDir::new(children))),
        }
    }
}

impl Dir for ProcDir {
    fn lookup(&self, name: &str) -> Option<Node> {
        if let Some(n) = self.fixed.iter().find(|n| &*n.name == name) {
            return Some(n.clone());
        }
        // Only canonical decimal names walk: "03" is not pid 3.
        let pid: u64 = name.parse().ok().filter(|p: &u64| p.to_string() == name)?;
        self.server.procs.get(pid).map(|p| self.pid_dir(&p))
    }

    fn children(&self) -> Vec<Node> {
        let mut v = self.fixed.clone();
        v.extend(self.server.procs.list(None).iter().map(|p| self.pid_dir(p)));
        v
    }
}

/// `proc/{pid}/out`: the output, followed live.
struct OutFile(Arc<Proc>);

impl File for OutFile {
    fn open(&self, _m: OpenMode, _c: &ConnInfo) -> Result<Arc<dyn Handle>, Error> {
        Ok(Arc::new(OutHandle {
            follower: self.0.output.follow(),
            _open: self.0.open_file(),
            proc: self.0.clone(),
            cursor: tokio::sync::Mutex::new(Cursor::default()),
        }))
    }
}

struct OutHandle {
    proc: Arc<Proc>,
    _open: OpenFile,
    /// Registered with the output so the tool is paced to this reader.
    follower: u64,
    cursor: tokio::sync::Mutex<Cursor>,
}

#[async_trait]
impl Handle for OutHandle {
    async fn read(&self, offset: u64, count: u32) -> Result<Vec<u8>, Error> {
        let mut c = self.cursor.lock().await;
        Ok(self
            .proc
            .output
            .read_following(self.follower, &mut c, offset, count)
            .await)
    }

    fn clunk(&self) {
        self.proc.output.unfollow(self.follower);
    }
}

/// `proc/{pid}/denials`: what the sandbox refused the run, one JSON object
/// per line, as of the open.
struct DenialsFile(Arc<Proc>);

impl File for DenialsFile {
    fn open(&self, _m: OpenMode, _c: &ConnInfo) -> Result<Arc<dyn Handle>, Error> {
        Ok(Arc::new(OpenSnapshot {
            bytes: Snapshot(crate::procs::denials::json_lines(&self.0.denials())),
            _open: self.0.open_file(),
        }))
    }
}

/// `proc/{pid}/wait`: blocks until the end, then the exit code and a newline.
struct WaitFile(Arc<Proc>);

impl File for WaitFile {
    fn open(&self, _m: OpenMode, _c: &ConnInfo) -> Result<Arc<dyn Handle>, Error> {
        Ok(Arc::new(WaitHandle {
            proc: self.0.clone(),
            _open: self.0.open_file(),
        }))
    }
}

struct WaitHandle {
    proc: Arc<Proc>,
    _open: OpenFile,
}

#[async_trait]
impl Handle for WaitHandle {
    async fn read(&self, offset: u64, count: u32) -> Result<Vec<u8>, Error> {
        let code = self.proc.wait().await;
        Ok(slice_at(format!("{code}\n").as_bytes(), offset, count))
    }
}

/// `proc/{pid}/stat`: ProcStat JSON as of the open.
struct StatFile(Arc<Proc>);

impl File for StatFile {
    fn open(&self, _m: OpenMode, _c: &ConnInfo) -> Result<Arc<dyn Handle>, Error> {
        Ok(Arc::new(OpenSnapshot {
            bytes: Snapshot(to_json(&self.0.stat())?),
            _open: self.0.open_file(),
        }))
    }
}

/// A file of a process's directory read as it was when opened (`stat`,
/// `denials`); the open keeps the directory.
struct OpenSnapshot {
    bytes: Snapshot,
    _open: OpenFile,
}

#[async_trait]
impl Handle for OpenSnapshot {
    async fn read(&self, offset: u64, count: u32) -> Result<Vec<u8>, Error> {
        self.bytes.read(offset, count).await
    }
}

/// `proc/{pid}/ctl`'s commands: `signal N|NAME`, `kill`, `dismiss`. An
/// open `ctl` keeps the process's directory (as any open file of it does).
struct ProcCommands {
    server: Arc<Server>,
    proc: Arc<Proc>,
}

impl super::ctl::Commands for ProcCommands {
    type Open = OpenFile;
    const BLOCKING: bool = false;

    fn opened(&self) -> OpenFile {
        self.proc.open_file()
    }

    fn apply(&self, line: &str) -> Result<(), Error> {
        let words: Vec<&str> = line.split_whitespace().collect();
        match words.as_slice() {
            ["signal", sig] => {
                let n = signal_number(sig)
                    .ok_or_else(|| Error::new(format!("unknown signal {sig:?}")))?;
                self.proc.signal(n).map_err(rerror)
            }
            ["kill"] => self.proc.signal(libc::SIGKILL).map_err(rerror),
            ["dismiss"] => self.server.procs.dismiss(self.proc.pid).map_err(rerror),
            _ => Err(Error::new(format!(
                "unknown process command {line:?}: want signal <N|NAME>, kill or dismiss"
            ))),
        }
    }
}

/// A signal by number (`15`), name (`TERM`) or full name (`SIGTERM`), in
/// any case (`term`, `sigterm`).
pub(crate) fn signal_number(s: &str) -> Option<i32> {
    if let Ok(n) = s.parse::<i32>() {
        return (1..=64).contains(&n).then_some(n);
    }
    let upper = s.to_ascii_uppercase();
    let name = upper.strip_prefix("SIG").unwrap_or(&upper);
    Some(match name {
        "HUP" => libc::SIGHUP,
        "INT" => libc::SIGINT,
        "QUIT" => libc::SIGQUIT,
        "KILL" => libc::SIGKILL,
        "USR1" => libc::SIGUSR1,
        "USR2" => libc::SIGUSR2,
        "PIPE" => libc::SIGPIPE,
        "ALRM" => libc::SIGALRM,
        "TERM" => libc::SIGTERM,
        "CONT" => libc::SIGCONT,
        "STOP" => libc::SIGSTOP,
        "TSTP" => libc::SIGTSTP,
        "WINCH" => libc::SIGWINCH,
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::signal_number;

    #[test]
    fn signals_are_named_by_number_short_or_full_name_in_any_case() {
        for s in ["15", "TERM", "SIGTERM", "term", "sigterm", "SigTerm"] {
            assert_eq!(signal_number(s), Some(libc::SIGTERM), "{s}");
        }
        assert_eq!(signal_number("sigkill"), Some(libc::SIGKILL));
        for s in ["0", "65", "SIG", "sig", "TERMS", "SIGSIGTERM", ""] {
            assert_eq!(signal_number(s), None, "{s}");
        }
    }
}
