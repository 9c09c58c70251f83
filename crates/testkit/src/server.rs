//! One launcher for the real `toolsrv serve`: every test and the bench start
//! their servers through [`Launch`].

use std::ffi::{OsStr, OsString};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use crate::{toolsrv_bin, wait_until, Raw, WAIT};

/// Why a server could not be started.
#[derive(Debug, thiserror::Error)]
pub enum LaunchError {
    /// A temp directory or a tool file could not be made.
    #[error("cannot prepare {path} for the server: {source}")]
    Prepare {
        /// The directory or file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The process could not be spawned.
    #[error("cannot start {path}: {source}")]
    Spawn {
        /// The binary.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The server exited before its socket answered.
    #[error("toolsrv exited with {status} before answering on {socket}; its log:\n{log}")]
    Exited {
        /// Its exit status.
        status: ExitStatus,
        /// The socket it was to listen on.
        socket: PathBuf,
        /// Its log.
        log: String,
    },
    /// The socket did not answer in time.
    #[error("toolsrv did not answer on {socket} within {limit:?}; its log:\n{log}")]
    NotUp {
        /// The socket.
        socket: PathBuf,
        /// How long was waited.
        limit: Duration,
        /// Its log.
        log: String,
    },
}

/// Where the server's `--cwd` is.
enum Cwd {
    /// `<home>/cwd`, made by the launcher.
    Sub,
    /// A directory the server owns and removes.
    Owned(tempfile::TempDir),
    /// A directory someone else owns.
    At(PathBuf),
}

/// What the launcher waits for before [`Launch::try_start`] returns.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Ready {
    /// A connection to the socket succeeds.
    Answers,
    /// The socket file exists (the test has not connected).
    Exists,
}

/// How to start one `toolsrv serve`.
///
/// The server's *home* is a temp directory holding the socket
/// (`toolsrv.sock`), the log (`server.log`), the Ollie config directory
/// (`cfg`), the tools (`tools/`) and its `$XDG_RUNTIME_DIR` (`run/`, so its
/// per-user directory, `run/toolsrv`, holding the registry of live servers,
/// is its own: servers of tests running at once never see each other, and
/// none rebuilds its view when another starts; a test that wants servers
/// to meet gives them one `XDG_RUNTIME_DIR` or `HOME` itself). Its `--cwd` is `<home>/cwd` unless
/// given: the socket, tools and config are kept out of the cwd because the
/// server carves them out of every sandbox rule (docs/containment.md), and inside
/// the cwd tools could not create files at its top level.
pub struct Launch {
    bin: PathBuf,
    args: Vec<OsString>,
    env: Vec<(OsString, Option<OsString>)>,
    cwd: Cwd,
    listen: Option<PathBuf>,
    log: Option<PathBuf>,
    tools: Option<Vec<(String, String)>>,
    ready: Ready,
    limit: Duration,
    prefix: &'static str,
    tweak: Option<Tweak>,
}

/// A change to the server's command just before it is spawned.
type Tweak = Box<dyn FnOnce(&mut Command)>;

impl Default for Launch {
    fn default() -> Self {
        Launch::new()
    }
}

impl Launch {
    /// The binary under test ([`toolsrv_bin`]), `RUST_LOG=debug` and no
    /// `$NAMESPACE` (no Ollie namespace), waiting until the socket answers.
    /// The server starts with every signal at its default disposition, as a
    /// service manager starts a daemon: what the test process ignores is not
    /// passed on.
    pub fn new() -> Launch {
        Launch::with_bin(toolsrv_bin())
    }

    /// Start `bin` instead of the binary under test.
    pub fn with_bin(bin: &Path) -> Launch {
        Launch {
            bin: bin.to_path_buf(),
            args: Vec::new(),
            env: vec![
                ("RUST_LOG".into(), Some("debug".into())),
                ("NAMESPACE".into(), None),
            ],
            cwd: Cwd::Sub,
            listen: None,
            log: None,
            tools: None,
            ready: Ready::Answers,
            limit: WAIT,
            prefix: ".tmp",
            tweak: None,
        }
    }

    /// One more `serve` argument.
    pub fn arg(mut self, a: impl AsRef<OsStr>) -> Launch {
        self.args.push(a.as_ref().to_owned());
        self
    }

    /// More `serve` arguments.
    pub fn args<S: AsRef<OsStr>>(mut self, a: impl IntoIterator<Item = S>) -> Launch {
        self.args
            .extend(a.into_iter().map(|s| s.as_ref().to_owned()));
        self
    }

    /// Set `key=value` in the server's environment.
    pub fn env(mut self, key: impl AsRef<OsStr>, value: impl AsRef<OsStr>) -> Launch {
        self.env
            .push((key.as_ref().to_owned(), Some(value.as_ref().to_owned())));
        self
    }

    /// Set every `(key, value)` of `vars`.
    pub fn envs<K: AsRef<OsStr>, V: AsRef<OsStr>>(
        mut self,
        vars: impl IntoIterator<Item = (K, V)>,
    ) -> Launch {
        for (k, v) in vars {
            self = self.env(k, v);
        }
        self
    }

    /// Remove `key` from the server's environment.
    pub fn env_remove(mut self, key: impl AsRef<OsStr>) -> Launch {
        self.env.push((key.as_ref().to_owned(), None));
        self
    }

    /// `--cwd` is `dir`, which the server keeps (and removes when dropped).
    pub fn cwd_dir(mut self, dir: tempfile::TempDir) -> Launch {
        self.cwd = Cwd::Owned(dir);
        self
    }

    /// `--cwd` is `path`, owned by the caller.
    pub fn cwd(mut self, path: &Path) -> Launch {
        self.cwd = Cwd::At(path.to_path_buf());
        self
    }

    /// Listen on `path` instead of `<home>/toolsrv.sock`.
    pub fn listen(mut self, path: &Path) -> Launch {
        self.listen = Some(path.to_path_buf());
        self
    }

    /// Log to `path` instead of `<home>/server.log`.
    pub fn log(mut self, path: &Path) -> Launch {
        self.log = Some(path.to_path_buf());
        self
    }

    /// Write `(file name, text)` tool files into `<home>/tools` and pass it
    /// as `--tools` (scripts are made executable, `.yaml` files 0644).
    pub fn tools(mut self, tools: &[(&str, &str)]) -> Launch {
        self.tools = Some(
            tools
                .iter()
                .map(|(n, t)| (n.to_string(), t.to_string()))
                .collect(),
        );
        self
    }

    /// Return as soon as the socket file exists, without connecting.
    pub fn unconnected(mut self) -> Launch {
        self.ready = Ready::Exists;
        self
    }

    /// Wait at most `limit` for the server to come up.
    pub fn limit(mut self, limit: Duration) -> Launch {
        self.limit = limit;
        self
    }

    /// Name the home directory `<prefix>XXXX` in the temp directory.
    pub fn prefix(mut self, prefix: &'static str) -> Launch {
        self.prefix = prefix;
        self
    }

    /// Change the command just before it is spawned (after everything the
    /// launcher sets, so it may replace e.g. stderr).
    pub fn tweak(mut self, f: impl FnOnce(&mut Command) + 'static) -> Launch {
        self.tweak = Some(Box::new(f));
        self
    }

    /// Start the server and wait until it is up; panics (with its log) on failure.
    pub fn start(self) -> Server {
        self.try_start().unwrap_or_else(|e| panic!("{e}"))
    }

    /// Start the server and wait until it is up.
    pub fn try_start(self) -> Result<Server, LaunchError> {
        let home = tempfile::Builder::new()
            .prefix(self.prefix)
            .tempdir()
            .map_err(prepare(&std::env::temp_dir()))?;
        let (cwd, cwd_dir) = match self.cwd {
            Cwd::Sub => {
                let cwd = home.path().join("cwd");
                std::fs::create_dir(&cwd).map_err(prepare(&cwd))?;
                (cwd, None)
            }
            Cwd::Owned(d) => (d.path().to_path_buf(), Some(d)),
            Cwd::At(p) => (p, None),
        };
        let socket = self
            .listen
            .clone()
            .unwrap_or_else(|| home.path().join("toolsrv.sock"));
        let log = self
            .log
            .clone()
            .unwrap_or_else(|| home.path().join("server.log"));
        let mut cmd = Command::new(&self.bin);
        let mut server = Server {
            home,
            cwd,
            _cwd_dir: cwd_dir,
            socket,
            log,
            child: None,
            started: Instant::now(),
        };
        cmd.arg("serve")
            .arg("--listen")
            .arg(&server.socket)
            .arg("--cwd")
            .arg(server.cwd())
            .arg("--log")
            .arg(&server.log);
        if let Some(tools) = &self.tools {
            let dir = server.tools_dir();
            std::fs::create_dir(&dir).map_err(prepare(&dir))?;
            for (name, text) in tools {
                write_tool(&dir, name, text).map_err(prepare(&dir.join(name)))?;
            }
            cmd.arg("--tools").arg(dir);
        }
        let run = server.home().join("run");
        std::fs::create_dir(&run).map_err(prepare(&run))?;
        std::fs::set_permissions(&run, std::fs::Permissions::from_mode(0o700))
            .map_err(prepare(&run))?;
        cmd.args(&self.args)
            .env("OLLIE_CFG_PATH", server.home().join("cfg"))
            .env("XDG_RUNTIME_DIR", &run)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        for (k, v) in &self.env {
            match v {
                Some(v) => cmd.env(k, v),
                None => cmd.env_remove(k),
            };
        }
        // Safety: the closure makes only `rt_sigaction` system calls, which
        // are async-signal-safe, between fork and exec.
        unsafe {
            std::os::unix::process::CommandExt::pre_exec(&mut cmd, || {
                crate::sys::default_signal_dispositions();
                Ok(())
            });
        }
        if let Some(tweak) = self.tweak {
            tweak(&mut cmd);
        }
        server.started = Instant::now();
        server.child = Some(cmd.spawn().map_err(|source| LaunchError::Spawn {
            path: self.bin.clone(),
            source,
        })?);
        server.wait_ready(self.ready, self.limit)?;
        Ok(server)
    }
}

/// The [`LaunchError::Prepare`] of `path`.
fn prepare(path: &Path) -> impl FnOnce(std::io::Error) -> LaunchError + '_ {
    move |source| LaunchError::Prepare {
        path: path.to_path_buf(),
        source,
    }
}

/// Write the tool file `dir/name`: scripts executable, `.yaml` files 0644.
pub fn write_tool(dir: &Path, name: &str, text: &str) -> std::io::Result<()> {
    let p = dir.join(name);
    std::fs::write(&p, text)?;
    let mode = if name.ends_with(".yaml") {
        0o644
    } else {
        0o755
    };
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(mode))
}

/// A running `toolsrv serve`; killed (SIGKILL) and reaped on drop.
pub struct Server {
    home: tempfile::TempDir,
    cwd: PathBuf,
    /// The cwd's temp directory, when the server owns it.
    _cwd_dir: Option<tempfile::TempDir>,
    /// The socket it listens on.
    pub socket: PathBuf,
    /// Its `--log` file.
    pub log: PathBuf,
    /// The process; `None` once it has been waited for.
    pub child: Option<Child>,
    /// When it was spawned.
    pub started: Instant,
}

impl Server {
    /// A server with the built-in tools and `extra` flags (e.g. `--no-auth`).
    pub fn start(extra: &[&str]) -> Server {
        Launch::new().args(extra).start()
    }

    /// The home directory: socket, log, `cfg`, `tools`.
    pub fn home(&self) -> &Path {
        self.home.path()
    }

    /// The server's `--cwd`.
    pub fn cwd(&self) -> &Path {
        &self.cwd
    }

    /// `<home>/run`: the `$XDG_RUNTIME_DIR` the launcher gives the server
    /// (unless the test set its own), whose `toolsrv/` is its per-user
    /// directory.
    pub fn runtime_dir(&self) -> PathBuf {
        self.home.path().join("run")
    }

    /// `<home>/tools`: where [`Launch::tools`] writes the tool files.
    pub fn tools_dir(&self) -> PathBuf {
        self.home.path().join("tools")
    }

    /// The log so far.
    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Wait until the log contains `needle`; panics with the log otherwise.
    pub fn wait_log(&self, needle: &str) {
        assert!(
            wait_until(WAIT, || self.log_text().contains(needle)),
            "log never contained {needle:?}; log:\n{}",
            self.log_text()
        );
    }

    /// The server's OS pid (0 once it has been waited for).
    pub fn pid(&self) -> u32 {
        self.child.as_ref().map_or(0, Child::id)
    }

    /// The pid, as this process sees it, of the live process one of this
    /// server's tools knows as `tool_pid` (`$$`, `$!` in a confined run are
    /// pids of the server's tools PID namespace); 0 when there is none
    /// ([`crate::pids::host_pid`]).
    pub fn host_pid(&self, tool_pid: i32) -> i32 {
        crate::pids::host_pid(self.pid(), tool_pid)
    }

    /// Send `sig` to the server.
    pub fn signal(&self, sig: i32) {
        if let Ok(pid) = i32::try_from(self.pid()) {
            if pid > 0 {
                // Our own, not yet reaped, child.
                crate::sys::kill(pid, sig);
            }
        }
    }

    /// Whether the server is still running.
    pub fn running(&mut self) -> bool {
        match self.child.as_mut() {
            Some(c) => matches!(c.try_wait(), Ok(None)),
            None => false,
        }
    }

    /// Wait at most `limit` for the server to exit: its status, or `None`.
    pub fn wait_exit(&mut self, limit: Duration) -> Option<ExitStatus> {
        let start = Instant::now();
        loop {
            let c = self.child.as_mut()?;
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

    /// Send `sig` and wait (bounded by [`WAIT`]) for the exit; panics on a hang.
    pub fn stop(&mut self, sig: i32) -> ExitStatus {
        self.signal(sig);
        self.wait_exit(WAIT)
            .unwrap_or_else(|| panic!("server did not exit after signal {sig}"))
    }

    /// Kill the server (SIGKILL) and reap it.
    pub fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// A raw connection, versioned.
    pub fn raw(&self) -> Raw {
        let mut r = Raw::connect(&self.socket);
        r.version(65536);
        r
    }

    /// A raw connection, versioned and attached as fid 0 (`--no-auth` servers).
    pub fn attached(&self) -> Raw {
        let mut r = self.raw();
        r.attach();
        r
    }

    /// A raw connection authenticated with `secret` and attached as fid 0;
    /// with the token.
    pub fn authed(&self, secret: &str) -> (Raw, String) {
        let mut r = self.raw();
        let token = r.authenticate(secret).expect("authentication");
        (r, token)
    }

    fn wait_ready(&mut self, ready: Ready, limit: Duration) -> Result<(), LaunchError> {
        let start = Instant::now();
        loop {
            let up = match ready {
                Ready::Answers => UnixStream::connect(&self.socket).is_ok(),
                Ready::Exists => self.socket.exists(),
            };
            if up {
                return Ok(());
            }
            if let Some(Ok(Some(status))) = self.child.as_mut().map(Child::try_wait) {
                self.child = None;
                return Err(LaunchError::Exited {
                    status,
                    socket: self.socket.clone(),
                    log: self.log_text(),
                });
            }
            if start.elapsed() > limit {
                return Err(LaunchError::NotUp {
                    socket: self.socket.clone(),
                    limit,
                    log: self.log_text(),
                });
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.kill();
    }
}
