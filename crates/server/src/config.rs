//! The validated settings of `toolsrv serve` (CONTRACT §1).

use std::path::PathBuf;
use std::time::Duration;

/// Everything `serve` needs, resolved and validated by the CLI.
#[derive(Debug, Clone)]
pub struct ServeConfig {
    /// The Unix socket to listen on.
    pub listen: PathBuf,
    /// The default working directory of tools (absolute, exists).
    pub cwd: PathBuf,
    /// Run tools without Landlock (development only).
    pub yolo: bool,
    /// Disable authentication (debugging only).
    pub no_auth: bool,
    /// Exit after this long without connections and processes.
    pub idle_timeout: Option<Duration>,
    /// With `idle_timeout`: exit if nobody connects within this long of startup.
    pub idle_grace: Duration,
    /// The tools directory.
    pub tools_dir: PathBuf,
    /// The sandbox policy file.
    pub sandbox: PathBuf,
    /// The Ollie namespace socket for completion messages.
    pub ollie: Option<PathBuf>,
    /// The log file (stderr when absent).
    pub log: Option<PathBuf>,
    /// A tool's timeout when neither its metadata nor the request sets one.
    pub default_timeout: Duration,
    /// Finished processes are dismissed this long after they end.
    pub gc_age: Duration,
    /// Unresolved bypass requests are rejected after this long.
    pub bypass_timeout: Duration,
    /// The per-process output safety limit, in bytes.
    pub max_output: u64,
    /// Pretend the kernel supports at most this Landlock ABI (a test hook).
    pub landlock_abi_limit: Option<i32>,
    /// Where the built-in tool set is installed (once, content-addressed) when
    /// the tools directory does not exist; `None`: a temporary directory per run.
    pub builtin_cache: Option<PathBuf>,
    /// `--secret-file`: where the pinned secret was read from (carved out of
    /// every sandbox rule).
    pub secret_file: Option<PathBuf>,
    /// The pinned secret read from `secret_file`; `None`: the first accepted
    /// secret is stored.
    pub pinned_secret: Option<crate::secret_file::Secret>,
    /// At most this many connections served at once.
    pub max_connections: usize,
    /// A connection that has not attached within this long is closed.
    pub auth_timeout: Duration,
    /// Bounds on finished processes and running background processes.
    pub retention: crate::procs::Retention,
    /// What this server set up to confine its tools with (the `doctor`
    /// file); `None`: probed when the server starts.
    pub facts: Option<toolsrv_sandbox::doctor::Facts>,
    /// How the filesystem is protected for sandboxed runs (probed at
    /// startup by `toolsrv serve`; `LandlockOnly` here by default).
    pub filesystem: toolsrv_sandbox::view::Mechanism,
}

impl ServeConfig {
    /// Defaults for everything but the socket and the working directory: the
    /// base that `toolsrv serve` fills from its flags.
    pub fn new(listen: PathBuf, cwd: PathBuf) -> ServeConfig {
        ServeConfig {
            listen,
            cwd,
            yolo: false,
            no_auth: false,
            idle_timeout: None,
            idle_grace: Duration::from_secs(60),
            tools_dir: PathBuf::from("tools"),
            sandbox: PathBuf::from("sandbox.yaml"),
            ollie: None,
            log: None,
            default_timeout: Duration::from_secs(120),
            gc_age: Duration::from_secs(30 * 60),
            bypass_timeout: Duration::from_secs(10 * 60),
            max_output: 8 << 20,
            landlock_abi_limit: None,
            builtin_cache: None,
            secret_file: None,
            pinned_secret: None,
            max_connections: 1024,
            auth_timeout: Duration::from_secs(10),
            retention: crate::procs::Retention::default(),
            facts: None,
            filesystem: toolsrv_sandbox::view::Mechanism::LandlockOnly("not probed".to_string()),
        }
    }
}
