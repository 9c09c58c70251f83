//! The server's directory of copy-on-write cache layers
//! (`toolsrv_sandbox::caches`): `<XDG_CACHE_HOME>/toolsrv/layers/<pid>-<start>/`,
//! owner-only, one upper layer per cache a policy grants. It is hidden from
//! every tool of every server (the layers root is a hidden path), removed
//! when the server's views go, and the layers left by servers that died are
//! removed when the next server starts.

use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};

use toolsrv_sandbox::PathContext;

/// The layers of one server, removed when dropped.
pub(super) struct Layers {
    /// This server's directory.
    pub(super) dir: PathBuf,
    /// The root every server's directory is in (hidden from tools).
    pub(super) root: PathBuf,
}

impl Layers {
    /// Makes this server's directory (after removing those of dead
    /// servers); `None` (logged) when it cannot be made: caches are then
    /// bound as they are.
    pub(super) fn make(ctx: &PathContext) -> Option<Layers> {
        let root = ctx.expand("{XDG_CACHE_HOME}/toolsrv/layers").ok()?;
        let me = format!("{}-{}", std::process::id(), start_time(std::process::id())?);
        let dir = root.join(me);
        let made = std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&dir);
        if let Err(e) = made {
            tracing::warn!(path = %dir.display(), error = %e, "cannot make the directory of the copy-on-write cache layers; tools' caches are shared with the user's");
            return None;
        }
        remove_dead(&root);
        Some(Layers { dir, root })
    }
}

impl Drop for Layers {
    fn drop(&mut self) {
        if let Err(e) = std::fs::remove_dir_all(&self.dir) {
            tracing::debug!(path = %self.dir.display(), error = %e, "cannot remove the cache layers");
        }
    }
}

/// The start time of `pid` (`/proc/<pid>/stat`, field 22): a pid reused by
/// another process is another server.
fn start_time(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let after = &stat[stat.rfind(')')? + 1..];
    after.split_whitespace().nth(19)?.parse().ok()
}

/// Removes the directories under `root` whose server is gone.
fn remove_dead(root: &Path) {
    let Ok(rd) = std::fs::read_dir(root) else {
        return;
    };
    for e in rd.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let alive = name
            .split_once('-')
            .and_then(|(pid, start)| Some((pid.parse::<u32>().ok()?, start.parse::<u64>().ok()?)))
            .is_some_and(|(pid, start)| start_time(pid) == Some(start));
        if !alive {
            let _ = std::fs::remove_dir_all(e.path());
        }
    }
}
