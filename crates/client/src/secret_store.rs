//! Where the client keeps the secrets it generates: one per socket in
//! `<user dir>/secrets/` (the user dir is `$XDG_RUNTIME_DIR/toolsrv`, else
//! `~/.local/state/toolsrv`: `toolsrv_base::userdir`), never beside the
//! socket, where a tool whose rules cover the socket's directory could read
//! it.
//!
//! A secret's file is named by the socket's **key**: the SHA-256 of the
//! socket's canonical path (its bytes), in lowercase hex. The canonical path
//! is the socket resolved through every symbolic link, so two spellings of
//! one socket share a secret; a socket that does not exist yet is its
//! canonical directory joined with its name. Beside it, `<key>.socket`
//! holds that path, so a server starting later, or a client generating a
//! secret, can tell a secret whose socket is gone ([`remove_stale`]: after
//! an hour, [`STALE_AFTER`]).
//!
//! Every level is a private directory (mode 0700, owned by this user, not a
//! symbolic link); every toolsrv server hides the whole user directory from
//! its tools.

use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::FileTypeExt;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

/// The secrets' directory in a user directory.
pub fn secrets_dir(user_dir: &Path) -> PathBuf {
    user_dir.join("secrets")
}

/// `socket` resolved through every symbolic link; a missing socket is its
/// canonical directory joined with its name, and a path whose directory is
/// missing too is only made absolute.
pub fn canonical_socket(socket: &Path) -> PathBuf {
    if let Ok(c) = std::fs::canonicalize(socket) {
        return c;
    }
    let absolute = std::path::absolute(socket).unwrap_or_else(|_| socket.to_path_buf());
    match (absolute.parent(), absolute.file_name()) {
        (Some(dir), Some(name)) => std::fs::canonicalize(dir)
            .map(|d| d.join(name))
            .unwrap_or(absolute),
        _ => absolute,
    }
}

/// The key of `socket`: SHA-256 of its canonical path, lowercase hex.
pub fn socket_key(socket: &Path) -> String {
    let canonical = canonical_socket(socket);
    hex::encode(Sha256::digest(canonical.as_os_str().as_bytes()))
}

/// The file that holds the generated secret of `socket` in `user_dir`.
pub fn secret_path(user_dir: &Path, socket: &Path) -> PathBuf {
    secrets_dir(user_dir).join(socket_key(socket))
}

/// Records which socket the secret at `secret` is for (`<key>.socket`).
/// Best effort: without it the secret is only never collected.
pub(crate) fn record_socket(secret: &Path, socket: &Path) {
    let mut p = secret.as_os_str().to_owned();
    p.push(".socket");
    let canonical = canonical_socket(socket);
    let _ = std::fs::write(PathBuf::from(p), canonical.as_os_str().as_bytes());
}

/// How long a secret whose socket is gone is kept: a server restarted
/// within it finds the secret its reconnecting clients still send (they keep
/// it in memory) and the one a new client reads from the file, the same.
pub const STALE_AFTER: std::time::Duration = std::time::Duration::from_secs(3600);

/// Removes the secrets in `user_dir` whose socket is no longer there (the
/// path recorded beside each is not a socket) and that are older than
/// `min_age`, except those of `keep`; the number removed. A secret is worth
/// nothing once its server is gone for good: the next server takes the
/// first secret a client sends.
pub fn remove_stale(user_dir: &Path, keep: &[PathBuf], min_age: std::time::Duration) -> usize {
    let keep: Vec<PathBuf> = keep.iter().map(|s| canonical_socket(s)).collect();
    let dir = secrets_dir(user_dir);
    let Ok(rd) = std::fs::read_dir(&dir) else {
        return 0;
    };
    let mut removed = 0;
    for e in rd.flatten() {
        let name = e.file_name();
        let Some(key) = name.to_str().and_then(|n| n.strip_suffix(".socket")) else {
            continue;
        };
        let Ok(recorded) = std::fs::read(e.path()) else {
            continue;
        };
        let socket = PathBuf::from(std::ffi::OsStr::from_bytes(&recorded));
        let present = std::fs::symlink_metadata(&socket).is_ok_and(|m| m.file_type().is_socket());
        let young = std::fs::metadata(dir.join(key))
            .and_then(|m| m.modified())
            .ok()
            .and_then(|t| t.elapsed().ok())
            .is_some_and(|age| age < min_age);
        if present || young || keep.contains(&socket) {
            continue;
        }
        if std::fs::remove_file(dir.join(key)).is_ok() {
            removed += 1;
        }
        let _ = std::fs::remove_file(e.path());
    }
    removed
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_key_is_the_hash_of_the_canonical_path_whatever_the_spelling() {
        let t = tempfile::tempdir().unwrap();
        let real = std::fs::canonicalize(t.path()).unwrap();
        std::fs::create_dir(real.join("run")).unwrap();
        std::os::unix::fs::symlink(real.join("run"), real.join("link")).unwrap();
        let a = real.join("run/s.sock");
        let b = real.join("link/s.sock");
        assert_eq!(canonical_socket(&b), a);
        assert_eq!(socket_key(&a), socket_key(&b));
        assert_eq!(socket_key(&a).len(), 64);
        assert_ne!(socket_key(&a), socket_key(&real.join("run/t.sock")));
        let expected = hex::encode(Sha256::digest(a.as_os_str().as_bytes()));
        assert_eq!(socket_key(&a), expected);
    }

    #[test]
    fn secrets_whose_socket_is_gone_are_removed_others_kept() {
        let t = tempfile::tempdir().unwrap();
        let user = t.path().join("user");
        std::fs::create_dir_all(secrets_dir(&user)).unwrap();
        let live = t.path().join("live.sock");
        let _listener = std::os::unix::net::UnixListener::bind(&live).unwrap();
        let gone = t.path().join("gone.sock");
        let kept = t.path().join("kept.sock");
        for s in [&live, &gone, &kept] {
            let p = secret_path(&user, s);
            std::fs::write(&p, "x").unwrap();
            record_socket(&p, s);
        }
        let hour = std::time::Duration::from_secs(3600);
        assert_eq!(remove_stale(&user, &[], hour), 0, "all young");
        assert_eq!(
            remove_stale(
                &user,
                std::slice::from_ref(&kept),
                std::time::Duration::ZERO
            ),
            1
        );
        assert!(secret_path(&user, &live).exists());
        assert!(secret_path(&user, &kept).exists());
        assert!(!secret_path(&user, &gone).exists());
    }
}
