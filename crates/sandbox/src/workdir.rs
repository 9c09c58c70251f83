//! A request's working directory, opened once.
//!
//! The `{CWD}` rule of a sandboxed run and the child's working directory
//! (`fchdir`) are both made from the descriptor opened here, beneath the
//! descriptor of the server's `--cwd`: whatever happens to the path
//! afterwards (a tool swapping the directory for a symbolic link to `/`, say)
//! changes neither (docs/containment.md; issue 14, hole 1).

use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Component, Path, PathBuf};

use crate::open::{current_path, identify, open_beneath, FileId};

/// Why a working directory was refused.
#[derive(Debug, thiserror::Error)]
pub enum WorkDirError {
    /// The directory is not beneath the base (`--cwd`), or is reached
    /// through a symbolic link that leaves it.
    #[error("working directory {requested:?} is outside the server's --cwd {base:?}")]
    Outside {
        /// The path as requested.
        requested: String,
        /// The base directory.
        base: String,
    },
    /// Nothing is there.
    #[error("working directory {0:?} does not exist")]
    Missing(String),
    /// Something other than a directory is there.
    #[error("working directory {0:?} is not a directory")]
    NotADirectory(String),
    /// The directory could not be opened or inspected.
    #[error("working directory {requested:?}: {source}")]
    Open {
        /// The path as requested.
        requested: String,
        /// The underlying error.
        source: std::io::Error,
    },
}

/// An opened directory: its descriptor (`O_PATH`), what it is, and the path
/// it had when opened (for messages and `PWD` only; never looked up again).
#[derive(Debug)]
pub struct WorkDir {
    fd: OwnedFd,
    id: FileId,
    path: PathBuf,
}

/// Two working directories are equal when they are the same directory.
impl PartialEq for WorkDir {
    fn eq(&self, other: &WorkDir) -> bool {
        self.id == other.id
    }
}

impl Eq for WorkDir {}

impl WorkDir {
    /// Opens `path` (symbolic links followed), for the server's `--cwd` and
    /// for runs without a sandbox.
    pub fn open(path: &Path) -> Result<WorkDir, WorkDirError> {
        let shown = || path.display().to_string();
        let file = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_PATH | libc::O_DIRECTORY)
            .open(path)
            .map_err(|e| classify(e, shown))?;
        WorkDir::from_fd(OwnedFd::from(file), path.to_path_buf(), shown)
    }

    /// Opens `requested` beneath this directory: a relative path from it, or
    /// an absolute one that starts with [`WorkDir::path`]. The lookup never
    /// leaves this directory and follows no magic link.
    pub fn beneath(&self, requested: &str) -> Result<WorkDir, WorkDirError> {
        let shown = || requested.to_string();
        let outside = || WorkDirError::Outside {
            requested: requested.to_string(),
            base: self.path.display().to_string(),
        };
        let asked = Path::new(requested);
        let rel = if asked.is_absolute() {
            strip_lexically(asked, &self.path).ok_or_else(outside)?
        } else {
            asked.to_path_buf()
        };
        let fd = open_beneath(self.fd.as_fd(), &rel).map_err(|e| match e.raw_os_error() {
            Some(libc::EXDEV) | Some(libc::ELOOP) => outside(),
            _ => classify(e, shown),
        })?;
        let lexical = self.path.join(&rel);
        let path = current_path(fd.as_fd()).unwrap_or(lexical);
        WorkDir::from_fd(fd, path, shown)
    }

    fn from_fd(
        fd: OwnedFd,
        path: PathBuf,
        shown: impl Fn() -> String,
    ) -> Result<WorkDir, WorkDirError> {
        let (id, kind) = identify(fd.as_fd()).map_err(|source| WorkDirError::Open {
            requested: shown(),
            source,
        })?;
        if kind != libc::S_IFDIR {
            return Err(WorkDirError::NotADirectory(shown()));
        }
        Ok(WorkDir { fd, id, path })
    }

    /// The descriptor (`O_PATH`, close-on-exec).
    pub fn fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }

    /// What the directory is.
    pub fn id(&self) -> FileId {
        self.id
    }

    /// The path it had when opened.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

/// `path` relative to `base` when it starts with it, component by component
/// (`/a/bc` does not start with `/a/b`).
fn strip_lexically(path: &Path, base: &Path) -> Option<PathBuf> {
    let rest = path.strip_prefix(base).ok()?;
    // `strip_prefix` compares components, so `..` after the base is kept
    // and left for the lookup beneath it to refuse.
    Some(rest.components().map(Component::as_os_str).collect())
}

/// The refusal for a failed open of the directory shown as `shown()`.
fn classify(e: std::io::Error, shown: impl Fn() -> String) -> WorkDirError {
    match e.raw_os_error() {
        Some(libc::ENOENT) => WorkDirError::Missing(shown()),
        Some(libc::ENOTDIR) => WorkDirError::NotADirectory(shown()),
        _ => WorkDirError::Open {
            requested: shown(),
            source: e,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_directory_is_opened_beneath_the_base_only() {
        let t = tempfile::tempdir().unwrap();
        let base_path = std::fs::canonicalize(t.path()).unwrap();
        std::fs::create_dir(base_path.join("sub")).unwrap();
        std::fs::write(base_path.join("file"), "").unwrap();
        std::os::unix::fs::symlink("/", base_path.join("root")).unwrap();
        let base = WorkDir::open(&base_path).unwrap();
        let sub = base.beneath("sub").unwrap();
        assert_eq!(sub.path(), base_path.join("sub"));
        let abs = base.beneath(&base_path.join("sub").display().to_string());
        assert_eq!(abs.unwrap(), sub);
        for bad in ["/", "..", "root", "sub/../..", "/etc"] {
            assert!(
                matches!(base.beneath(bad), Err(WorkDirError::Outside { .. })),
                "{bad}"
            );
        }
        assert!(matches!(
            base.beneath("nope"),
            Err(WorkDirError::Missing(_))
        ));
        assert!(matches!(
            base.beneath("file"),
            Err(WorkDirError::NotADirectory(_))
        ));
    }
}
