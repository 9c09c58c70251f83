//! The crate's error type.

use std::path::PathBuf;

/// Why a remote operation failed. Every variant names the value at fault;
/// its text is what the user reads.
#[derive(Debug, thiserror::Error)]
pub enum RemoteError {
    /// A local file or process operation failed.
    #[error("{context}: {source}")]
    Io {
        /// What was being done.
        context: String,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// The remote is not up (no state for this address).
    #[error("{0} is not up (run `toolsrv remote up {0}`)")]
    NotUp(String),

    // ssh itself.
    /// The SSH master exited before it connected.
    #[error("cannot connect to {address} ({status}): {log}")]
    SshExited {
        /// The remote address.
        address: String,
        /// How the master exited.
        status: std::process::ExitStatus,
        /// The end of the supervisor's log.
        log: String,
    },
    /// The SSH master did not connect in time.
    #[error("no SSH connection to {address} after {secs} s: {log}")]
    SshTimeout {
        /// The remote address.
        address: String,
        /// How long it was given.
        secs: u64,
        /// The end of the supervisor's log.
        log: String,
    },
    /// ssh could not reach the host (exit status 255).
    #[error("ssh {address}: {stderr}")]
    Ssh {
        /// The remote address.
        address: String,
        /// What ssh said.
        stderr: String,
    },
    /// A command run on the remote host failed.
    #[error("on {address}: {stderr}")]
    RemoteCommand {
        /// The remote address.
        address: String,
        /// What the command said.
        stderr: String,
    },
    /// The master refused to forward the socket.
    #[error("ssh -O forward -L {spec}: {stderr}")]
    Forward {
        /// The `-L` argument.
        spec: String,
        /// What ssh said.
        stderr: String,
    },
    /// The forwarded socket does not answer.
    #[error("the forwarded socket {} does not answer", .0.display())]
    ForwardSilent(PathBuf),

    // Local configuration and input.
    /// No environment variable gives a place for the remote state.
    #[error("neither XDG_RUNTIME_DIR, XDG_STATE_HOME nor HOME is set to an absolute path: no place for the remote state")]
    NoStateDir,
    /// A state directory is not this user's own.
    #[error("{} is not a directory owned by uid {uid}", .path.display())]
    NotOwnDir {
        /// The directory.
        path: PathBuf,
        /// This user's uid.
        uid: u32,
    },
    /// The control socket's name file names no directory.
    #[error("{}: no control directory name", .0.display())]
    NoControlDir(PathBuf),
    /// The blocking lock of a state directory was not granted.
    #[error("cannot lock {}", .0.display())]
    Lock(PathBuf),
    /// The control socket path has no directory or no file name.
    #[error("{}: not a control socket path", .0.display())]
    NotControlSocket(PathBuf),
    /// A socket path ssh cannot forward.
    #[error("cannot forward {local} to {remote}: ssh does not take ':' in socket paths")]
    ColonInSocket {
        /// The local socket.
        local: String,
        /// The remote socket.
        remote: String,
    },
    /// The remote socket would lie inside the remote working directory.
    #[error("the remote socket {socket} lies inside the remote --cwd {cwd}: the server would carve it out of the tools' working directory; pick another --cwd or socket")]
    SocketInCwd {
        /// The remote socket.
        socket: String,
        /// The remote --cwd.
        cwd: String,
    },
    /// `state.json` could not be parsed.
    #[error("{}: {source}", .path.display())]
    BadState {
        /// The state file.
        path: PathBuf,
        /// Why.
        source: serde_json::Error,
    },
    /// The state could not be encoded.
    #[error("cannot encode the state: {0}")]
    EncodeState(serde_json::Error),
    /// A configuration directory holds a file name that is not UTF-8.
    #[error("{}: a file name that is not UTF-8", .0.display())]
    NonUtf8Name(PathBuf),
    /// `--config` names no directory.
    #[error("--config {}: no such directory", .0.display())]
    NoConfigDir(PathBuf),
    /// Text with a newline or NUL cannot travel in a line-oriented script.
    #[error("{0:?} contains a newline or NUL")]
    NotOneLine(String),
    /// An `--env` name that is not a shell variable name.
    #[error("--env {0:?}: not a variable name")]
    BadEnvName(String),

    // The remote side.
    /// The supervisor did not end after SIGTERM.
    #[error("the supervisor (pid {pid}) did not finish within 30 s; see {}", .log.display())]
    SupervisorStuck {
        /// The supervisor's pid.
        pid: i32,
        /// Its log.
        log: PathBuf,
    },
    /// The remote start script did not report the server's process.
    #[error("the remote server started but its process was not recorded (output: {0:?})")]
    ServerNotRecorded(String),
    /// The remote start script's process record is malformed.
    #[error("the remote server's process record {0:?} is not `<pid> <start time> <executable>`")]
    BadProcessRecord(String),
    /// The remote host is of another platform and has no usable toolsrv.
    #[error("{0}")]
    OtherPlatform(Box<PlatformMismatch>),
    /// The probe script printed nothing usable.
    #[error("the remote probe gave no answer (output: {0:?})")]
    ProbeSilent(String),
    /// A remote directory the probe reported is relative.
    #[error("remote {what} directory {dir:?} is not absolute")]
    RelativeRemoteDir {
        /// Which directory (`home`, `data`, `runtime`).
        what: &'static str,
        /// What the probe said.
        dir: String,
    },
}

impl RemoteError {
    /// An [`RemoteError::Io`] with a context sentence.
    pub fn io(context: impl Into<String>, source: std::io::Error) -> RemoteError {
        RemoteError::Io {
            context: context.into(),
            source,
        }
    }
}

/// A remote host of another platform than this binary's, with no usable
/// toolsrv of its own ([`RemoteError::OtherPlatform`]).
#[derive(Debug, thiserror::Error)]
#[error("{address} is {os}/{arch} and this toolsrv is built for {local_os}/{local_arch}: install toolsrv {version} there yourself{found}")]
pub struct PlatformMismatch {
    /// The remote address.
    pub address: String,
    /// Its `GOOS`.
    pub os: String,
    /// Its `GOARCH`.
    pub arch: String,
    /// This binary's `GOOS`.
    pub local_os: String,
    /// This binary's `GOARCH`.
    pub local_arch: String,
    /// This binary's version.
    pub version: String,
    /// ` (<path> says <version>)` for a toolsrv found on the remote PATH, else empty.
    pub found: String,
}
