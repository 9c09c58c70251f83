//! What in a Git directory would make a git command the human runs later
//! execute something a sandboxed tool wrote.
//!
//! Pure logic plus bounded file reads, for the server's watcher of Git
//! directories (a repository's `.git`, or one a tool creates or plants in
//! the workspace), which restores the previous version of a file or
//! quarantines the repository on a finding:
//!
//! - [`Config`]: a git config reader that gives what git's own parser gives
//!   (differential-tested against `git config --list`);
//! - [`RULES`], [`dangerous`]: the keys through which git runs a program,
//!   takes configuration or hooks from elsewhere, or moves its work tree;
//! - [`check_config_change`], [`added_dangerous`]: what a new version of a
//!   config adds over the previous one (everyday `git config`, `remote add`,
//!   `branch -u`, `init`, `clone`, `commit`... add nothing of the kind);
//! - [`inspect`]: the hooks, redirections (`gitdir:`, `commondir`,
//!   `worktrees/`, `modules/`, `config.worktree`) and dangerous keys of a
//!   repository, read without following symbolic links and within
//!   [`Limits`].
//!
//! See `docs/git-guard.md` for the choices behind it.

#![forbid(unsafe_code)]
#![deny(missing_docs)]

mod change;
mod config;
mod fs;
mod inspect;
mod keys;

use std::borrow::Cow;
use std::path::PathBuf;

pub use change::{added_dangerous, added_dangerous_in, check_config_change};
pub use config::{is_boolean, Config, Entry, ParseError};
pub use inspect::{
    inspect, inspect_with, looks_like_git_dir, InspectOptions, Inspection, Limits, Note, HOOKS,
};
pub use keys::{dangerous, dangerous_in, rule_for, Base, Rule, Scope, When, RULES};

/// Something that would make the human's git run what a tool wrote, read
/// configuration or hooks from elsewhere, or that could not be checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    /// What kind of thing it is.
    pub kind: Kind,
    /// The file it is in or about; `None` from the change check on bytes.
    pub path: Option<PathBuf>,
    /// The config key's canonical name (`core.fsmonitor`,
    /// `diff.t.textconv`) for [`Kind::ConfigKey`]; otherwise a short label
    /// of the file (`hooks/pre-commit`, `commondir`, `.git`).
    pub key: String,
    /// The value: the config value, where a redirection points, a
    /// link's target, the command of an `exec` line.
    pub value: Option<String>,
    /// The 1-based line in the file, where there is one.
    pub line: Option<usize>,
    /// Why it matters, for the log and the denial message.
    pub reason: Cow<'static, str>,
    /// The file's identity and version for file findings (a hook, a link,
    /// an unparsable config), so that two inspections tell a rewritten file
    /// from the one already there; `None` for a config entry, which is
    /// identified by its key and value.
    pub stamp: Option<Stamp>,
}

/// What a [`Finding`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Kind {
    /// A config entry of [`RULES`] that runs, includes or redirects.
    ConfigKey,
    /// A config file git's parser rejects.
    Unparsable,
    /// A file in `hooks/` git runs (or runs once it is made executable).
    Hook,
    /// A file that makes git take its git directory, configuration or hooks
    /// from elsewhere: `commondir`, a `.git` file's `gitdir:` outside the
    /// workspace.
    Redirect,
    /// A symbolic link where git expects a file or a directory (git follows
    /// it; the inspection does not).
    Symlink,
    /// A FIFO, socket or device where git expects a regular file.
    NotRegular,
    /// A file over [`Limits::max_file_bytes`]: not read.
    TooLarge,
    /// More entries than the [`Limits`]: the rest were not examined.
    TooMany,
    /// An interrupted rebase or sequencer whose todo list runs a command at
    /// `--continue` (`exec`).
    PendingExec,
    /// A file or directory that could not be read.
    Unreadable,
}

/// A file's identity and version: device, inode, size, modification and
/// status-change times (the last cannot be set back by a program).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Stamp {
    /// Device.
    pub dev: u64,
    /// Inode.
    pub ino: u64,
    /// Size in bytes.
    pub size: u64,
    /// Modification time, nanoseconds since the epoch.
    pub mtime_ns: i128,
    /// Status-change time, nanoseconds since the epoch.
    pub ctime_ns: i128,
}

impl Finding {
    /// Whether `other` is the same finding, line numbers and wording aside:
    /// the same kind, file, key, value and file version.
    pub fn same_as(&self, other: &Finding) -> bool {
        self.kind == other.kind
            && self.path == other.path
            && self.key == other.key
            && self.value == other.value
            && self.stamp == other.stamp
    }
}

impl std::fmt::Display for Finding {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if let Some(p) = &self.path {
            write!(f, "{}", p.display())?;
            if let Some(l) = self.line {
                write!(f, ":{l}")?;
            }
            write!(f, ": ")?;
        }
        if !self.key.is_empty() {
            write!(f, "{}", self.key)?;
            if let Some(v) = &self.value {
                write!(f, " = {v:?}")?;
            }
            write!(f, ": ")?;
        }
        write!(f, "{}", self.reason)
    }
}
