//! Why a tool could not be started: [`SpawnError`], and the error a child's
//! failed stage stands for.

use std::ffi::CStr;
use std::io;

use super::child::Stage;

/// Why a tool could not be started.
#[derive(Debug, thiserror::Error)]
pub enum SpawnError {
    /// `execve` failed.
    #[error("cannot start {program}: {source}")]
    Start {
        /// The program path.
        program: String,
        /// The OS error.
        source: io::Error,
    },
    /// `chdir` to the working directory failed.
    #[error("cannot chdir to {cwd}: {source}")]
    Chdir {
        /// The working directory.
        cwd: String,
        /// The OS error.
        source: io::Error,
    },
    /// `landlock_restrict_self` failed.
    #[error("cannot apply landlock ruleset: {0}")]
    Landlock(io::Error),
    /// Installing the seccomp filter failed.
    #[error("cannot apply seccomp filter: {0}")]
    Seccomp(io::Error),
    /// `PR_SET_NO_NEW_PRIVS` failed.
    #[error("cannot set no_new_privs: {0}")]
    NoNewPrivs(io::Error),
    /// The run could not get a session keyring of its own.
    #[error("cannot give the tool a session keyring of its own: {0} (\"Disk quota exceeded\" is this user's key quota: /proc/sys/kernel/keys/maxkeys and maxbytes)")]
    SessionKeyring(io::Error),
    /// Another step of the child setup failed.
    #[error("cannot set up the child process ({step}): {source}")]
    Setup {
        /// The step: signals, process group, death signal, stdio or close_range.
        step: &'static str,
        /// The OS error.
        source: io::Error,
    },
    /// The child failed and reported an unknown stage (should not happen).
    #[error("child process failed at unknown stage {0}")]
    UnknownStage(u32),
    /// Preparing the spawn in the parent failed.
    #[error("cannot prepare the child process ({step}): {source}")]
    Prepare {
        /// The step: /dev/null, descriptors, stack or clone.
        step: &'static str,
        /// The OS error.
        source: io::Error,
    },
}

/// The error of a child that failed at `stage` with `errno`.
pub(super) fn child_error(program: &CStr, cwd: &CStr, stage: u32, errno: i32) -> SpawnError {
    let source = io::Error::from_raw_os_error(errno);
    let setup = |step| SpawnError::Setup {
        step,
        source: io::Error::from_raw_os_error(errno),
    };
    match Stage::from_u32(stage) {
        Some(Stage::Exec) => SpawnError::Start {
            program: program.to_string_lossy().into_owned(),
            source,
        },
        Some(Stage::Chdir) => SpawnError::Chdir {
            cwd: cwd.to_string_lossy().into_owned(),
            source,
        },
        Some(Stage::Landlock) => SpawnError::Landlock(source),
        Some(Stage::Seccomp) => SpawnError::Seccomp(source),
        Some(Stage::NoNewPrivs) => SpawnError::NoNewPrivs(source),
        Some(Stage::Signals) => setup("signals"),
        Some(Stage::ProcessGroup) => setup("process group"),
        Some(Stage::DeathSignal) => setup("death signal"),
        Some(Stage::Stdio) => setup("stdio"),
        Some(Stage::CloseRange) => setup("close_range"),
        Some(Stage::Capabilities) => setup("capabilities"),
        Some(Stage::Contain) => setup("joining the run's cgroup"),
        Some(Stage::Limits) => setup("resource limits"),
        Some(Stage::Identity) => {
            setup("mapping the server's uid and gid in the run's user namespace")
        }
        Some(Stage::View) => setup("entering the filesystem view"),
        Some(Stage::Keyring) => SpawnError::SessionKeyring(source),
        Some(Stage::ToolIdentity) => setup("entering the tools' user namespace"),
        Some(Stage::Files) => setup("the argument files"),
        Some(Stage::Network) => setup("entering the run's network namespace"),
        None => SpawnError::UnknownStage(stage),
    }
}
