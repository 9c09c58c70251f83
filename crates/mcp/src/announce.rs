//! Telling every toolsrv server of this user what the bridge keeps from
//! tools: its token file and the Unix socket it serves HTTP on. The bridge
//! registers them in the per-user registry (`toolsrv_base::registry`, kind
//! bridge) before it writes the token file; every server's filesystem view
//! hides what a live entry names from the next rescan on (about a second),
//! and the Landlock-only fallback carves it. The entry goes with the
//! bridge (removed when it stops, ignored once it is gone).

use std::path::PathBuf;

use toolsrv_base::registry::{self, Entry, Kind, Registration};

/// Registers `sockets` and `files` (made absolute) for this process; `None`
/// (with a warning) when there is no per-user directory or the entry cannot
/// be written: then only the bridge's own server hides its default token
/// file.
pub fn announce(sockets: &[PathBuf], files: &[PathBuf]) -> Option<Registration> {
    let absolute = |v: &[PathBuf]| -> Vec<PathBuf> {
        v.iter()
            .filter_map(|p| std::path::absolute(p).ok())
            .collect()
    };
    let Some(user_dir) = toolsrv_base::userdir::user_dir() else {
        tracing::warn!("no per-user directory (XDG_RUNTIME_DIR, XDG_STATE_HOME, HOME): toolsrv servers are not told to hide the token file");
        return None;
    };
    let id = match toolsrv_base::ProcessId::current() {
        Ok(id) => id,
        Err(e) => {
            tracing::warn!(error = %e, "cannot read this process's start time: toolsrv servers are not told to hide the token file");
            return None;
        }
    };
    let entry = Entry {
        kind: Kind::Bridge,
        id,
        sockets: absolute(sockets),
        hidden: absolute(files),
    };
    let made = toolsrv_base::userdir::ensure_private_dir(&user_dir)
        .and_then(|()| registry::register(&registry::dir(&user_dir), &entry));
    match made {
        Ok(r) => Some(r),
        Err(e) => {
            tracing::warn!(error = %e, "cannot register the token file: toolsrv servers are not told to hide it");
            None
        }
    }
}
