//! The real `toolsrv` server process, started on a temp socket for a bench.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use toolsrv_testkit::{Launch, LaunchError, Server};

/// How long the server may take to answer on its socket.
const STARTUP_LIMIT: Duration = Duration::from_secs(20);

/// The shared secret used by authenticated runs.
pub const SECRET: &str = "toolsrv-bench-secret";

/// Why the server could not be found or started.
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
    /// The server did not come up (the test kit's launcher says why).
    #[error(transparent)]
    Launch(#[from] LaunchError),
    /// A binary given on the command line cannot be run.
    #[error("{flag} {path}: {reason}")]
    NotExecutable {
        /// The flag that named it, e.g. `--before`.
        flag: &'static str,
        /// The path as given.
        path: PathBuf,
        /// Why not.
        reason: String,
    },
}

/// A running `toolsrv serve` in its own temp directory; killed on drop.
pub struct ServerProcess {
    server: Server,
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
    /// `TOOLSRV_VIEW=off`: no filesystem view, Landlock carving only (the
    /// figure without the view's protection).
    pub view_off: bool,
    /// `TOOLSRV_TOOLS_PIDNS=off`: confined runs stay in the server's own PID
    /// namespace (the figure without the tools PID namespace).
    pub tools_pidns_off: bool,
    /// `TOOLSRV_USERNS` for the server (`Some("root")`: a root server's tools
    /// run as root, the figure before they ran in their own user namespace).
    pub userns: Option<&'static str>,
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

    /// Start `bin` as `opts` says (through the test kit's launcher, without
    /// `RUST_LOG`), and wait until its socket answers.
    pub fn start_with(bin: &Path, opts: &ServerOpts) -> Result<ServerProcess, ServerError> {
        let mut launch = Launch::with_bin(bin)
            .prefix("toolsrv-bench")
            .limit(STARTUP_LIMIT)
            .env_remove("RUST_LOG");
        if !opts.auth {
            launch = launch.arg("--no-auth");
        }
        if opts.yolo {
            launch = launch.arg("--yolo");
        }
        if let Some(t) = &opts.tools {
            launch = launch.arg("--tools").arg(t);
        }
        launch = launch.args(&opts.extra);
        launch = if opts.view_off {
            launch.env("TOOLSRV_VIEW", "off")
        } else {
            launch.env_remove("TOOLSRV_VIEW")
        };
        launch = if opts.tools_pidns_off {
            launch.env("TOOLSRV_TOOLS_PIDNS", "off")
        } else {
            launch.env_remove("TOOLSRV_TOOLS_PIDNS")
        };
        launch = match opts.containment {
            Some(c) => launch.env("TOOLSRV_CONTAINMENT", c),
            None => launch.env_remove("TOOLSRV_CONTAINMENT"),
        };
        launch = match opts.userns {
            Some(u) => launch.env("TOOLSRV_USERNS", u),
            None => launch.env_remove("TOOLSRV_USERNS"),
        };
        Ok(ServerProcess {
            server: launch.try_start()?,
        })
    }

    /// Start `bin` sandboxed, with auth on and the tools in `tools`.
    pub fn authed_with_tools(bin: &Path, tools: &Path) -> Result<ServerProcess, ServerError> {
        ServerProcess::start_with(
            bin,
            &ServerOpts {
                auth: true,
                tools: Some(tools.to_path_buf()),
                ..ServerOpts::default()
            },
        )
    }

    /// The socket the server listens on.
    pub fn socket(&self) -> &Path {
        &self.server.socket
    }

    /// The server's OS pid.
    /// The server's `--cwd` (the tools' workspace).
    pub fn cwd(&self) -> &Path {
        self.server.cwd()
    }

    pub fn pid(&self) -> u32 {
        self.server.pid()
    }

    /// Its log so far.
    pub fn log_text(&self) -> String {
        self.server.log_text()
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

/// `path` (given with `flag`) as an absolute path, if it is an executable
/// file; else why not, naming the flag and the path.
pub fn executable(flag: &'static str, path: &Path) -> Result<PathBuf, ServerError> {
    use std::os::unix::fs::PermissionsExt;
    let bad = |reason: String| ServerError::NotExecutable {
        flag,
        path: path.to_path_buf(),
        reason,
    };
    let meta = std::fs::metadata(path).map_err(|e| bad(e.to_string()))?;
    if !meta.is_file() {
        return Err(bad("not a regular file".into()));
    }
    if meta.permissions().mode() & 0o111 == 0 {
        return Err(bad(format!(
            "not executable (mode {:o})",
            meta.permissions().mode() & 0o7777
        )));
    }
    std::fs::canonicalize(path).map_err(|e| bad(e.to_string()))
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn executable_names_the_flag_and_the_path() {
        let sh = executable("--before", Path::new("/bin/sh")).expect("/bin/sh runs");
        assert!(sh.is_absolute(), "{}", sh.display());
        let missing = executable("--before", Path::new("/nonexistent/toolsrv")).unwrap_err();
        assert!(
            missing
                .to_string()
                .starts_with("--before /nonexistent/toolsrv: No such file"),
            "{missing}"
        );
        let dir = executable("--before", Path::new("/")).unwrap_err();
        assert_eq!(dir.to_string(), "--before /: not a regular file");
        let d = tempfile::tempdir().expect("tempdir");
        let plain = d.path().join("toolsrv");
        std::fs::write(&plain, "").expect("write");
        let e = executable("--before", &plain).unwrap_err().to_string();
        assert!(e.contains("/toolsrv: not executable (mode "), "{e}");
    }
}
