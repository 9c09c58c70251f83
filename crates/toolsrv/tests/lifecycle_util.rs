//! Helpers for the lifecycle tests (docs/cli.md; docs/protocol.md, "Completion messages"; docs/lifecycle.md): the tools they
//! run, pid files written by tools, outstanding reads of a dying server, and
//! a fake Ollie namespace server.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use toolsrv_base::LockUnpoisoned;
use toolsrv_wire::Body;

use crate::procs_util::os_dead;
use crate::util::{wait_until, Raw, Server, WAIT};

/// A script tool: writes its pid to `<name>.pid` and the pid of a background
/// child (a grandchild of toolsrv) to `<name>.gpid` in its cwd, then waits.
pub const PIDS_TOOL: &str = "#!/bin/sh\n# ---\n# description: Record pids, then sleep\n# params:\n#   name: {type: string, description: file prefix, required: true}\n# ---\nsleep 300 &\necho $! > \"$ARG_NAME.gpid.tmp\" && mv \"$ARG_NAME.gpid.tmp\" \"$ARG_NAME.gpid\"\necho $$ > \"$ARG_NAME.pid.tmp\" && mv \"$ARG_NAME.pid.tmp\" \"$ARG_NAME.pid\"\nwait\n";

/// Like [`PIDS_TOOL`] but the tool and its child ignore SIGTERM.
pub const STUBBORN_TOOL: &str = "#!/bin/sh\n# ---\n# description: Ignore TERM, record pids, sleep\n# params:\n#   name: {type: string, description: file prefix, required: true}\n# ---\ntrap '' TERM\nsleep 300 &\necho $! > \"$ARG_NAME.gpid.tmp\" && mv \"$ARG_NAME.gpid.tmp\" \"$ARG_NAME.gpid\"\necho $$ > \"$ARG_NAME.pid.tmp\" && mv \"$ARG_NAME.pid.tmp\" \"$ARG_NAME.pid\"\nwait\n";

/// A tool that escapes its process group: `setsid` + a background child whose
/// parent exits at once (a double fork); the escaped pid goes to `<name>.epid`.
pub const ESCAPE_TOOL: &str = "#!/bin/sh\n# ---\n# description: Escape the process group\n# params:\n#   name: {type: string, description: file prefix, required: true}\n# ---\nsetsid sh -c 'sleep 300 & echo $! > \"$0.epid.tmp\" && mv \"$0.epid.tmp\" \"$0.epid\"' \"$ARG_NAME\"\necho escaped\n";

/// A tool that ends at once.
pub const QUICK_TOOL: &str = "description: End at once\ncommand: \"true\"\n";

/// A tool that sleeps `s` seconds.
pub const NAP_TOOL: &str = "description: Sleep s seconds\nparams:\n  s: {type: string, description: seconds, required: true}\ncommand: \"sleep {s}\"\n";

/// The pid a tool wrote to `<cwd>/<file>` of `srv`, waiting for the file,
/// as this process sees it (a confined tool writes its pid in the server's
/// tools PID namespace; the process must be alive).
pub fn pid_file(srv: &Server, file: &str) -> i32 {
    srv.host_pid(read_pid_file(&srv.cwd().join(file)))
}

/// Wait for a pid file (written atomically by the tool) and parse it.
pub fn read_pid_file(p: &Path) -> i32 {
    let mut pid = None;
    let ok = wait_until(WAIT, || {
        pid = std::fs::read_to_string(p)
            .ok()
            .and_then(|s| s.trim().parse::<i32>().ok());
        pid.is_some()
    });
    assert!(ok, "{} was never written", p.display());
    pid.unwrap_or(0)
}

/// Kill OS processes a test left behind (escaped tools), ignoring errors.
pub fn kill_pids(pids: &[i32]) {
    for &p in pids {
        if p > 1 {
            // Safety: kill(2) of a process this test started (through a tool).
            unsafe { libc::kill(p, libc::SIGKILL) };
        }
    }
}

/// Whether all `pids` are dead within `limit`.
pub fn all_dead_within(pids: &[i32], limit: Duration) -> bool {
    wait_until(limit, || pids.iter().all(|&p| os_dead(p)))
}

/// What became of a read that was outstanding when the server went away.
#[derive(Debug, PartialEq, Eq)]
pub enum Outcome {
    /// A reply with the read's tag arrived.
    Answered(Body),
    /// The connection was closed without a reply.
    Closed,
}

/// Wait (bounded by the connection's read timeout) for the reply to `tag` or
/// for the connection to close; panics if neither happens (a hang).
pub fn answer_or_close(c: &mut Raw, tag: u16) -> Outcome {
    loop {
        let buf = match toolsrv_wire::read_frame(&mut c.s, 1 << 20) {
            Ok(buf) => buf,
            Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Outcome::Closed,
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => return Outcome::Closed,
            Err(e) => panic!("no reply and no close (a hang): {e}"),
        };
        let f = toolsrv_wire::decode(&buf).expect("decodable frame");
        if f.tag == tag {
            return Outcome::Answered(f.body);
        }
    }
}

/// Messages written to `s/<session>/prompt` of a [`FakeOllie`].
pub type Inbox = Arc<Mutex<Vec<(String, String)>>>;

/// A fake Ollie namespace server built from `toolsrv-vfs`: a tree
/// `s/<session>/prompt` (for each given session) whose handle records every
/// write as `(session, text)`. Runs on its own thread and runtime; stopped on drop.
pub struct FakeOllie {
    pub socket: PathBuf,
    pub inbox: Inbox,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
    _dir: tempfile::TempDir,
}

struct Prompt {
    session: String,
    inbox: Inbox,
}

struct PromptHandle {
    session: String,
    inbox: Inbox,
}

impl toolsrv_vfs::File for Prompt {
    fn open(
        &self,
        _mode: toolsrv_vfs::OpenMode,
        _conn: &toolsrv_vfs::ConnInfo,
    ) -> Result<Arc<dyn toolsrv_vfs::Handle>, toolsrv_vfs::Error> {
        Ok(Arc::new(PromptHandle {
            session: self.session.clone(),
            inbox: self.inbox.clone(),
        }))
    }
}

#[async_trait::async_trait]
impl toolsrv_vfs::Handle for PromptHandle {
    async fn write(&self, _offset: u64, data: Vec<u8>) -> Result<u32, toolsrv_vfs::Error> {
        let n = data.len() as u32;
        let text = String::from_utf8_lossy(&data).into_owned();
        self.inbox
            .lock_unpoisoned()
            .push((self.session.clone(), text));
        Ok(n)
    }
}

impl FakeOllie {
    /// Serve `s/<session>/prompt` for each of `sessions`.
    pub fn start(sessions: &[&str]) -> FakeOllie {
        use toolsrv_vfs::tree::{dir, file};
        let tmp = tempfile::tempdir().expect("tempdir");
        let socket = tmp.path().join("ollie");
        let inbox: Inbox = Arc::default();
        let per_session: Vec<_> = sessions
            .iter()
            .map(|s| {
                dir(
                    s,
                    0o555,
                    vec![file(
                        "prompt",
                        0o200,
                        Prompt {
                            session: s.to_string(),
                            inbox: inbox.clone(),
                        },
                    )],
                )
            })
            .collect();
        let root = dir("/", 0o555, vec![dir("s", 0o555, per_session)]);
        let listener = std::os::unix::net::UnixListener::bind(&socket).expect("bind fake ollie");
        listener.set_nonblocking(true).expect("nonblocking");
        let (stop, mut stopped) = tokio::sync::oneshot::channel::<()>();
        let thread = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("runtime");
            rt.block_on(async move {
                let listener = tokio::net::UnixListener::from_std(listener).expect("listener");
                let mut id = 0;
                loop {
                    let stream = tokio::select! {
                        _ = &mut stopped => return,
                        r = listener.accept() => match r {
                            Ok((s, _)) => s,
                            Err(_) => continue,
                        },
                    };
                    id += 1;
                    let info = toolsrv_vfs::ConnInfo {
                        id,
                        peer_uid: None,
                        peer_pid: None,
                        peer_is_descendant: false,
                        user: "ollie".into(),
                        mtime: 0,
                        requests: Default::default(),
                    };
                    let auth: Arc<dyn toolsrv_vfs::Auth> = Arc::new(toolsrv_vfs::NoAuth);
                    tokio::spawn(toolsrv_vfs::serve_connection(
                        stream,
                        root.clone(),
                        auth,
                        info,
                    ));
                }
            });
        });
        FakeOllie {
            socket,
            inbox,
            stop: Some(stop),
            thread: Some(thread),
            _dir: tmp,
        }
    }

    /// The messages received so far.
    pub fn messages(&self) -> Vec<(String, String)> {
        self.inbox.lock_unpoisoned().clone()
    }

    /// Wait until at least `n` messages arrived; returns them all.
    pub fn wait_for(&self, n: usize) -> Vec<(String, String)> {
        assert!(
            wait_until(WAIT, || self.messages().len() >= n),
            "expected {n} completion messages, got {:?}",
            self.messages()
        );
        self.messages()
    }
}

impl Drop for FakeOllie {
    fn drop(&mut self) {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
