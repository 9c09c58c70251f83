//! [`Config`]: the settings of `toolsrv serve` (docs/cli.md), each default
//! written once.

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::procs::Retention;
use crate::secret_file::{Secret, SecretFileError};

/// Everything the daemon needs; [`Config::new`] fills in every default, the
/// command line (or a test) overrides what it was given.
#[derive(Debug, Clone)]
pub struct Config {
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
    /// The audit log (`--audit`, docs/audit.md): none when absent.
    pub audit: Option<PathBuf>,
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
    /// every sandbox rule); set with [`Config::pin_secret`].
    pub(crate) secret_file: Option<PathBuf>,
    /// The pinned secret read from `secret_file`; `None`: the first accepted
    /// secret is stored.
    pub(crate) pinned_secret: Option<Secret>,
    /// At most this many connections served at once.
    pub max_connections: usize,
    /// A connection that has not attached within this long is closed.
    pub auth_timeout: Duration,
    /// Bounds on finished processes and running background processes.
    pub retention: Retention,
    /// What this server set up to confine its tools with (the `doctor`
    /// file); `None`: probed when the server starts. Set by
    /// [`crate::Daemon::prepare`].
    pub(crate) facts: Option<toolsrv_sandbox::Facts>,
    /// How the filesystem is protected for sandboxed runs (probed by
    /// [`crate::Daemon::prepare`]; `LandlockOnly` here by default).
    pub(crate) filesystem: toolsrv_sandbox::ViewMechanism,
    /// How runs under `network.domains` get their network (probed by
    /// `Daemon::prepare`).
    pub(crate) network: toolsrv_sandbox::NetworkMechanism,
    /// Whether the server registers in the per-user registry and makes a
    /// temporary directory of its own (`crate::presence`): set by
    /// [`crate::Daemon::prepare`]; a server made in-process (tests) shares
    /// its process with others and does neither.
    pub(crate) presence: bool,
}

impl Config {
    /// `--default-timeout`'s default.
    pub const DEFAULT_TIMEOUT: &'static str = "120s";
    /// `--gc-age`'s default.
    pub const GC_AGE: &'static str = "30m";
    /// `--bypass-timeout`'s default.
    pub const BYPASS_TIMEOUT: &'static str = "10m";
    /// `--idle-grace`'s default.
    pub const IDLE_GRACE: &'static str = "60s";
    /// `--max-output`'s default.
    pub const MAX_OUTPUT: &'static str = "8MiB";
    /// `--max-connections`'s default.
    pub const MAX_CONNECTIONS: u32 = 1024;
    /// `--auth-timeout`'s default.
    pub const AUTH_TIMEOUT: &'static str = "10s";
    /// `--max-finished-output`'s default.
    pub const MAX_FINISHED_OUTPUT: &'static str = "128MiB";
    /// `--max-finished`'s default.
    pub const MAX_FINISHED: usize = 10_000;
    /// `--max-background`'s default.
    pub const MAX_BACKGROUND: u32 = 1024;

    /// Every default, for a server on `listen` whose tools run in `cwd`, are
    /// found in `tools_dir` and are confined by the policy file `sandbox`:
    /// the four settings without a fixed default (`toolsrv serve` finds the
    /// last two in the Ollie configuration directory; where either does not
    /// exist, the built-in tools or policy are served).
    pub fn new(listen: PathBuf, cwd: PathBuf, tools_dir: PathBuf, sandbox: PathBuf) -> Config {
        Config {
            listen,
            cwd,
            yolo: false,
            no_auth: false,
            idle_timeout: None,
            idle_grace: duration(Self::IDLE_GRACE),
            tools_dir,
            sandbox,
            ollie: None,
            log: None,
            default_timeout: duration(Self::DEFAULT_TIMEOUT),
            gc_age: duration(Self::GC_AGE),
            bypass_timeout: duration(Self::BYPASS_TIMEOUT),
            max_output: size(Self::MAX_OUTPUT),
            landlock_abi_limit: None,
            builtin_cache: None,
            secret_file: None,
            pinned_secret: None,
            audit: None,
            max_connections: Self::MAX_CONNECTIONS as usize,
            auth_timeout: duration(Self::AUTH_TIMEOUT),
            retention: Retention {
                max_output_bytes: size(Self::MAX_FINISHED_OUTPUT),
                max_finished: Self::MAX_FINISHED,
                max_background_per_agent: Self::MAX_BACKGROUND as usize,
            },
            facts: None,
            filesystem: toolsrv_sandbox::ViewMechanism::LandlockOnly("not probed".to_string()),
            network: toolsrv_sandbox::NetworkMechanism::Namespace,
            presence: false,
        }
    }

    /// `--secret-file`: read the secret from `file` (owned by this uid, no
    /// group or other permission bits) and pin it: only it is accepted.
    pub fn pin_secret(&mut self, file: &Path) -> Result<(), SecretFileError> {
        self.pinned_secret = Some(crate::secret_file::load(
            file,
            toolsrv_base::effective_uid(),
        )?);
        self.secret_file = Some(std::path::absolute(file).unwrap_or_else(|_| file.to_path_buf()));
        Ok(())
    }
}

/// One of the default durations above (written as the flags take them).
fn duration(text: &str) -> Duration {
    toolsrv_protocol::parse_duration(text)
        .unwrap_or_else(|e| unreachable!("the default {text:?} is not a duration: {e}"))
}

/// One of the default sizes above (written as the flags take them).
fn size(text: &str) -> u64 {
    toolsrv_protocol::parse_size(text)
        .unwrap_or_else(|e| unreachable!("the default {text:?} is not a size: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_written_defaults_are_the_values() {
        let c = Config::new("s".into(), "/".into(), "t".into(), "p".into());
        assert_eq!(c.default_timeout, Duration::from_secs(120));
        assert_eq!(c.gc_age, Duration::from_secs(30 * 60));
        assert_eq!(c.bypass_timeout, Duration::from_secs(10 * 60));
        assert_eq!(c.idle_grace, Duration::from_secs(60));
        assert_eq!(c.max_output, 8 << 20);
        assert_eq!(c.auth_timeout, Duration::from_secs(10));
        assert_eq!(c.retention.max_output_bytes, 128 << 20);
        assert_eq!(c.max_connections, 1024);
    }
}
