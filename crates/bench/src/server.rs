//! The real `toolsrv` server process, started on a temp socket for a bench.

use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

/// How long the server may take to answer on its socket.
const STARTUP_LIMIT: Duration = Duration::from_secs(20);

/// The shared secret used by authenticated runs.
pub const SECRET: &str = "toolsrv-bench-secret";

/// Why the server could not be started.
#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    /// No binary where it was looked for, and building it was not possible.
    #[error("toolsrv binary not found at {0}; build it with `cargo build --release -p toolsrv` or set TOOLSRV_BIN")]
    NotFound(PathBuf),
    /// `cargo build` of the server failed.
    #[error("building toolsrv with `{command}` failed: {reason}")]
    BuildFailed {
        /// The command that was run.
        command: String,
        /// Its exit status or spawn error.
        reason: String,
    },
    /// The location of this executable is unknown.
    #[error("cannot locate this executable to find toolsrv next to it: {0}")]
    NoExe(std::io::Error),
    /// A temp directory could not be made.
    #[error("cannot create a temp directory for the server: {0}")]
    TempDir(std::io::Error),
    /// The process could not be spawned.
    #[error("cannot start {path}: {source}")]
    Spawn {
        /// The binary.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The server exited before answering.
    #[error("toolsrv exited with {status} before answering on {socket}; its log:\n{log}")]
    Exited {
        /// Its exit status.
        status: ExitStatus,
        /// The socket it was to listen on.
        socket: PathBuf,
        /// Its log file's contents.
        log: String,
    },
    /// The socket never answered.
    #[error("toolsrv did not answer on {socket} within {limit:?}; its log:\n{log}")]
    NotUp {
        /// The socket.
        socket: PathBuf,
        /// How long was waited.
        limit: Duration,
        /// Its log file's contents.
        log: String,
    },
}

/// A running `toolsrv serve` in its own temp directory; killed on drop.
#[derive(Debug)]
pub struct ServerProcess {
    dir: tempfile::TempDir,
    socket: PathBuf,
    child: Child,
}

/// How a bench wants its server started.
#[derive(Debug, Clone, Default)]
pub struct ServerOpts {
    /// Authenticate with [`SECRET`] (false: `--no-auth`).
    pub auth: bool,
    /// Run tools without the sandbox (`--yolo`).
    pub yolo: bool,
    /// The tools directory (`--tools`); `None`: the built-in tools.
    pub tools: Option<PathBuf>,
    /// `TOOLSRV_CONTAINMENT` for the server (`Some("none")`: runs are not put
    /// in kernel groups, the figure before containment existed).
    pub containment: Option<&'static str>,
    /// More `serve` flags.
    pub extra: Vec<&'static str>,
}

impl ServerProcess {
    /// Start `bin` with auth on (`auth`) or `--no-auth`, and wait until its socket answers.
    pub fn start(bin: &Path, auth: bool) -> Result<ServerProcess, ServerError> {
        ServerProcess::start_with(
            bin,
            &ServerOpts {
                auth,
                ..ServerOpts::default()
            },
        )
    }

    /// Start `bin` as `opts` says, and wait until its socket answers.
    pub fn start_with(bin: &Path, opts: &ServerOpts) -> Result<ServerProcess, ServerError> {
        let dir = tempfile::Builder::new()
            .prefix("toolsrv-bench")
            .tempdir()
            .map_err(ServerError::TempDir)?;
        let socket = dir.path().join("toolsrv.sock");
        let mut cmd = Command::new(bin);
        cmd.arg("serve")
            .arg("--listen")
            .arg(&socket)
            .arg("--cwd")
            .arg(dir.path())
            .arg("--log")
            .arg(dir.path().join("server.log"))
            .env_remove("RUST_LOG")
            .env("OLLIE_CFG_PATH", dir.path().join("cfg"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        if !opts.auth {
            cmd.arg("--no-auth");
        }
        if opts.yolo {
            cmd.arg("--yolo");
        }
        if let Some(t) = &opts.tools {
            cmd.arg("--tools").arg(t);
        }
        cmd.args(&opts.extra);
        match opts.containment {
            Some(c) => cmd.env("TOOLSRV_CONTAINMENT", c),
            None => cmd.env_remove("TOOLSRV_CONTAINMENT"),
        };
        let child = cmd.spawn().map_err(|source| ServerError::Spawn {
            path: bin.to_path_buf(),
            source,
        })?;
        let mut s = ServerProcess { dir, socket, child };
        s.wait_up()?;
        Ok(s)
    }

    /// The socket the server listens on.
    pub fn socket(&self) -> &Path {
        &self.socket
    }

    /// The server's OS pid.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("server.log")).unwrap_or_default()
    }

    fn wait_up(&mut self) -> Result<(), ServerError> {
        let start = Instant::now();
        loop {
            if UnixStream::connect(&self.socket).is_ok() {
                return Ok(());
            }
            if let Ok(Some(status)) = self.child.try_wait() {
                return Err(ServerError::Exited {
                    status,
                    socket: self.socket.clone(),
                    log: self.log(),
                });
            }
            if start.elapsed() > STARTUP_LIMIT {
                return Err(ServerError::NotUp {
                    socket: self.socket.clone(),
                    limit: STARTUP_LIMIT,
                    log: self.log(),
                });
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }
}

impl Drop for ServerProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The server binary: `$TOOLSRV_BIN`, else `toolsrv` next to this executable
/// (both live in the same target dir under `cargo run -p toolsrv-bench`).
/// When it is missing there, it is built with cargo in the matching profile.
pub fn locate_binary() -> Result<PathBuf, ServerError> {
    if let Some(p) = std::env::var_os("TOOLSRV_BIN") {
        let p = PathBuf::from(p);
        return if p.is_file() {
            Ok(p)
        } else {
            Err(ServerError::NotFound(p))
        };
    }
    let exe = std::env::current_exe().map_err(ServerError::NoExe)?;
    let dir = exe
        .parent()
        .ok_or_else(|| ServerError::NotFound(exe.clone()))?;
    let bin = dir.join("toolsrv");
    if bin.is_file() {
        return Ok(bin);
    }
    let profile = dir.file_name().and_then(|n| n.to_str()).unwrap_or("");
    if profile != "release" && profile != "debug" {
        return Err(ServerError::NotFound(bin));
    }
    build(profile == "release")?;
    if bin.is_file() {
        Ok(bin)
    } else {
        Err(ServerError::NotFound(bin))
    }
}

/// `cargo build [--release] -p toolsrv` in this workspace.
fn build(release: bool) -> Result<(), ServerError> {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR")).join("../toolsrv/Cargo.toml");
    let mut cmd = Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()));
    cmd.arg("build").arg("--manifest-path").arg(&manifest);
    if release {
        cmd.arg("--release");
    }
    let command = format!("{cmd:?}");
    eprintln!("toolsrv-bench: the toolsrv binary is missing; building it: {command}");
    match cmd.status() {
        Ok(s) if s.success() => Ok(()),
        Ok(s) => Err(ServerError::BuildFailed {
            command,
            reason: s.to_string(),
        }),
        Err(e) => Err(ServerError::BuildFailed {
            command,
            reason: e.to_string(),
        }),
    }
}
