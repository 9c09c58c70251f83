//! Helpers for the lifecycle tests (CONTRACT §1, §9, §11): servers started
//! without touching their socket, bounded waits for exit, pid files written by
//! tools, and a fake Ollie namespace server.

#![allow(dead_code)]

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use toolsrv_wire::Body;

use crate::procs_util::{os_dead, write_tool};
use crate::util::{bin, wait_until, Raw, WAIT};

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

/// A `toolsrv serve` child that the harness has not connected to.
pub struct Daemon {
    pub dir: tempfile::TempDir,
    pub socket: PathBuf,
    pub log: PathBuf,
    pub child: Option<Child>,
    pub started: Instant,
}

/// Options of [`Daemon::spawn`].
pub struct Opts<'a> {
    /// Tool files written to `<dir>/tools` (passed as `--tools`).
    pub tools: &'a [(&'a str, &'a str)],
    /// More flags.
    pub extra: &'a [&'a str],
    /// `RUST_LOG`.
    pub rust_log: &'a str,
    /// Listen here instead of `<dir>/toolsrv.sock`.
    pub listen: Option<&'a Path>,
}

impl Default for Opts<'_> {
    fn default() -> Self {
        Opts {
            tools: &[],
            extra: &[],
            rust_log: "debug",
            listen: None,
        }
    }
}

impl Daemon {
    /// Start `toolsrv serve` in a new temp dir (socket `toolsrv.sock`,
    /// `--log server.log`, `--cwd` its subdirectory `cwd`, see
    /// [`Daemon::cwd`]) without connecting to it.
    pub fn spawn(o: Opts<'_>) -> Daemon {
        let dir = tempfile::tempdir().expect("tempdir");
        // The cwd does not contain the socket, tools or config directory: the
        // server carves those out of every sandbox rule (CONTRACT §12), and a
        // cwd containing them would keep tools from creating files in it.
        let cwd = dir.path().join("cwd");
        std::fs::create_dir(&cwd).expect("cwd");
        let tdir = dir.path().join("tools");
        std::fs::create_dir(&tdir).expect("tools dir");
        for (name, text) in o.tools {
            write_tool(&tdir, name, text);
        }
        let socket = o
            .listen
            .map_or_else(|| dir.path().join("toolsrv.sock"), Path::to_path_buf);
        let log = dir.path().join("server.log");
        let child = Command::new(bin())
            .arg("serve")
            .arg("--listen")
            .arg(&socket)
            .arg("--cwd")
            .arg(&cwd)
            .arg("--log")
            .arg(&log)
            .arg("--tools")
            .arg(&tdir)
            .args(o.extra)
            .env("RUST_LOG", o.rust_log)
            .env("OLLIE_CFG_PATH", dir.path().join("cfg"))
            .env_remove("NAMESPACE")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn toolsrv");
        let d = Daemon {
            dir,
            socket,
            log,
            child: Some(child),
            started: Instant::now(),
        };
        assert!(
            wait_until(WAIT, || d.socket.exists()),
            "socket never appeared; log:\n{}",
            d.log_text()
        );
        d
    }

    /// Start and wait until the socket answers (this connects once).
    pub fn start(o: Opts<'_>) -> Daemon {
        let d = Daemon::spawn(o);
        assert!(
            wait_until(WAIT, || std::os::unix::net::UnixStream::connect(&d.socket)
                .is_ok()),
            "server did not answer; log:\n{}",
            d.log_text()
        );
        d
    }

    /// The log so far.
    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// The server's OS pid.
    pub fn pid(&self) -> i32 {
        self.child.as_ref().map(|c| c.id() as i32).unwrap_or(0)
    }

    /// A raw versioned connection attached without auth.
    pub fn attached(&self) -> Raw {
        let mut r = Raw::connect(&self.socket);
        r.version(65536);
        r.ok(Body::Tattach {
            fid: 0,
            afid: toolsrv_wire::NOFID,
            uname: "t".into(),
            aname: String::new(),
        });
        r
    }

    /// Send `sig` to the server.
    pub fn signal(&self, sig: i32) {
        // Safety: kill(2) of our own child process.
        unsafe { libc::kill(self.pid(), sig) };
    }

    /// Whether the server is still running.
    pub fn running(&mut self) -> bool {
        match self.child.as_mut() {
            Some(c) => matches!(c.try_wait(), Ok(None)),
            None => false,
        }
    }

    /// Wait at most `limit` for the server to exit; its status, or `None`.
    pub fn wait_exit(&mut self, limit: Duration) -> Option<ExitStatus> {
        let c = self.child.as_mut()?;
        let start = Instant::now();
        loop {
            if let Ok(Some(st)) = c.try_wait() {
                self.child = None;
                return Some(st);
            }
            if start.elapsed() >= limit {
                return None;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// Wait until the log contains `needle`.
    pub fn wait_log(&self, needle: &str) {
        assert!(
            wait_until(WAIT, || self.log_text().contains(needle)),
            "log never contained {needle:?}; log:\n{}",
            self.log_text()
        );
    }

    /// The server's `--cwd`: `<dir>/cwd`.
    pub fn cwd(&self) -> PathBuf {
        self.dir.path().join("cwd")
    }

    /// The pid a tool wrote to `<cwd>/<file>`, waiting for the file.
    pub fn pid_file(&self, file: &str) -> i32 {
        read_pid_file(&self.cwd().join(file))
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            // Safety: kill(2) of our own child.
            unsafe { libc::kill(c.id() as i32, libc::SIGKILL) };
            let _ = c.wait();
        }
    }
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
        let mut size = [0u8; 4];
        match c.s.read_exact(&mut size) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Outcome::Closed,
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => return Outcome::Closed,
            Err(e) => panic!("no reply and no close (a hang): {e}"),
        }
        let n = u32::from_le_bytes(size) as usize;
        let mut buf = vec![0u8; n];
        buf[..4].copy_from_slice(&size);
        if c.s.read_exact(&mut buf[4..]).is_err() {
            return Outcome::Closed;
        }
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
            .lock()
            .unwrap_or_else(|p| p.into_inner())
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
        self.inbox.lock().unwrap_or_else(|p| p.into_inner()).clone()
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
