//! The server's own temporary directory, `{TOOLSRV_TMPDIR}`:
//! `<TMPDIR or /tmp>/toolsrv-<uid>/<server>/`, where `<server>` is the
//! server's pid and start time (`toolsrv_base::ProcessId`, `<pid>-<start>`).
//!
//! One per server, not one per user: tools of another server neither see
//! nor change it (their rules grant their own directory, never the parent),
//! and nothing one server's tools leave there reaches the next server. One
//! per server rather than per run: an agent writes a script to `$TMPDIR`
//! in one call and runs it in the next, and background tools outlive the
//! call that started them.
//!
//! The parent `toolsrv-<uid>` and the directory are mode 0700 and must be
//! real directories owned by this user. The server holds an exclusive
//! `flock` on `toolsrv-<uid>/<server>.lock` for its whole life: the
//! directory of a server that is gone (killed) is the one whose lock can be
//! taken, whatever PID namespace its server lived in, and the next server
//! that starts with the same `TMPDIR` removes it ([`remove_stale`]). A
//! server that stops removes its own ([`ServerTmp::remove`]).

mod sys;

use std::fs::File;
use std::io;
use std::os::fd::AsFd;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use toolsrv_base::ProcessId;

/// The variable of the server's environment snapshot (the one policy paths
/// expand against) that names its own temporary directory: `{TOOLSRV_TMPDIR}`
/// expands to it. Present and empty: the server has none (the rules naming
/// it are skipped).
pub const SERVER_TMPDIR_VAR: &str = "TOOLSRV_TMPDIR";

/// `<tmp>/toolsrv-<uid>`: the parent of every server's directory.
pub(crate) fn user_base(tmp: &Path) -> PathBuf {
    tmp.join(format!("toolsrv-{}", toolsrv_base::effective_uid()))
}

/// A server's temporary directory, locked while it lives.
#[derive(Debug)]
pub struct ServerTmp {
    path: PathBuf,
    lock_path: PathBuf,
    _lock: File,
}

impl ServerTmp {
    /// Makes `<tmp>/toolsrv-<uid>/<id>` (the parent private, see the module
    /// doc) and takes its lock. The error names the path and the reason.
    pub fn create(tmp: &Path, id: &ProcessId) -> io::Result<ServerTmp> {
        let base = user_base(tmp);
        ensure_private_dir(&base)?;
        let path = base.join(id.to_string());
        let lock_path = base.join(format!("{id}.lock"));
        let named = |what: &str, p: &Path, e: io::Error| {
            io::Error::new(e.kind(), format!("cannot {what} {}: {e}", p.display()))
        };
        let lock = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
            .open(&lock_path)
            .map_err(|e| named("open", &lock_path, e))?;
        if !sys::try_lock_exclusive(lock.as_fd()).map_err(|e| named("lock", &lock_path, e))? {
            return Err(io::Error::other(format!(
                "{} is locked by another server",
                lock_path.display()
            )));
        }
        // A directory of this very name is a leftover (the id is unique).
        if std::fs::symlink_metadata(&path).is_ok() {
            remove_entry(&path).map_err(|e| named("remove the leftover", &path, e))?;
        }
        std::fs::DirBuilder::new()
            .mode(0o700)
            .create(&path)
            .map_err(|e| named("create", &path, e))?;
        Ok(ServerTmp {
            path,
            lock_path,
            _lock: lock,
        })
    }

    /// The directory.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Removes the directory and everything in it, then the lock.
    pub fn remove(self) -> io::Result<()> {
        let removed = remove_entry(&self.path);
        let _ = std::fs::remove_file(&self.lock_path);
        removed
    }
}

/// Removes the directories that servers gone left in `<tmp>/toolsrv-<uid>`
/// (their lock can be taken); the number removed. An entry without a lock
/// file is never touched: a server makes its lock before its directory, so
/// that entry is not a server's (an older version's tools kept their files
/// directly in `toolsrv-<uid>`). What cannot be removed is left, with a
/// warning.
pub fn remove_stale(tmp: &Path) -> usize {
    let base = user_base(tmp);
    let Ok(rd) = std::fs::read_dir(&base) else {
        return 0;
    };
    let mut removed = 0;
    for e in rd.flatten() {
        let name = e.file_name();
        let Some(id) = name.to_str().and_then(ProcessId::parse) else {
            continue;
        };
        let lock_path = base.join(format!("{id}.lock"));
        let lock = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
            .open(&lock_path);
        let gone = match &lock {
            Ok(f) => sys::try_lock_exclusive(f.as_fd()).unwrap_or(false),
            Err(_) => false,
        };
        if !gone {
            continue;
        }
        match remove_entry(&e.path()) {
            Ok(()) => {
                removed += 1;
                let _ = std::fs::remove_file(&lock_path);
            }
            Err(err) => {
                tracing::warn!(path = %e.path().display(), error = %err, "cannot remove the temporary directory of a server that is gone")
            }
        }
    }
    removed
}

/// Removes `p`: a directory with everything in it (symbolic links are
/// removed, never followed), or a file.
fn remove_entry(p: &Path) -> io::Result<()> {
    match std::fs::symlink_metadata(p) {
        Ok(m) if m.is_dir() => std::fs::remove_dir_all(p),
        Ok(_) => std::fs::remove_file(p),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(e),
    }
}

/// Creates `dir` with mode 0700 if absent; accepts it only if it is a real
/// directory (not a symlink) owned by this user, and takes group and other
/// bits off its mode.
pub(crate) fn ensure_private_dir(dir: &Path) -> io::Result<()> {
    let named = |what: String| io::Error::other(format!("{}: {what}", dir.display()));
    match std::fs::DirBuilder::new().mode(0o700).create(dir) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(named(format!("cannot create it: {e}"))),
    }
    let meta = std::fs::symlink_metadata(dir).map_err(|e| named(e.to_string()))?;
    if !meta.file_type().is_dir() {
        return Err(named("not a directory".into()));
    }
    let uid = toolsrv_base::effective_uid();
    if meta.uid() != uid {
        return Err(named(format!("owned by uid {}, not {uid}", meta.uid())));
    }
    if meta.permissions().mode() & 0o077 != 0 {
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))
            .map_err(|e| named(format!("cannot make it mode 0700: {e}")))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_servers_directory_is_private_locked_and_removed() {
        let t = tempfile::tempdir().unwrap();
        let me = ProcessId::current().unwrap();
        let tmp = ServerTmp::create(t.path(), &me).expect("create");
        assert_eq!(tmp.path(), user_base(t.path()).join(me.to_string()));
        let mode = |p: &Path| std::fs::metadata(p).unwrap().mode() & 0o777;
        assert_eq!(mode(tmp.path()), 0o700);
        assert_eq!(mode(&user_base(t.path())), 0o700);
        std::fs::write(tmp.path().join("f"), "x").unwrap();
        assert_eq!(remove_stale(t.path()), 0, "a locked directory is alive");
        let again = ServerTmp::create(t.path(), &me);
        assert!(again.is_err(), "one lock holder");
        let p = tmp.path().to_path_buf();
        tmp.remove().unwrap();
        assert!(!p.exists());
    }

    #[test]
    fn directories_of_servers_gone_are_removed_and_links_not_followed() {
        let t = tempfile::tempdir().unwrap();
        let outside = t.path().join("outside");
        std::fs::create_dir(&outside).unwrap();
        std::fs::write(outside.join("keep"), "x").unwrap();
        let me = ProcessId::current().unwrap();
        let gone = ProcessId {
            start: me.start + 1,
            ..me
        };
        // Left by a killed server: its lock file is there, nobody holds it.
        let dead = ServerTmp::create(t.path(), &gone).unwrap();
        std::os::unix::fs::symlink(&outside, dead.path().join("link")).unwrap();
        let dead_path = dead.path().to_path_buf();
        drop(dead);
        // No lock file: not a server's, whatever its name (a tool of an
        // older version may have made it).
        let unlocked = user_base(t.path()).join(
            ProcessId {
                start: me.start + 2,
                ..me
            }
            .to_string(),
        );
        std::fs::create_dir(&unlocked).unwrap();
        std::fs::create_dir(user_base(t.path()).join("not-a-server")).unwrap();
        let live = ServerTmp::create(t.path(), &me).unwrap();
        // A child another test forks in that moment holds a copy of the
        // dead one's lock descriptor until it closes it: try for a while.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        let mut removed = remove_stale(t.path());
        while removed == 0 && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(10));
            removed = remove_stale(t.path());
        }
        assert_eq!(removed, 1);
        assert!(!dead_path.exists() && unlocked.exists());
        assert!(live.path().exists());
        assert!(user_base(t.path()).join("not-a-server").exists());
        assert!(outside.join("keep").exists(), "a link is not followed");
    }
}
