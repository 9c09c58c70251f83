//! toolsrv's per-user directory: `$XDG_RUNTIME_DIR/toolsrv` when that
//! variable names a directory, else `${XDG_STATE_HOME:-$HOME/.local/state}/toolsrv`.
//!
//! It holds what no tool may read: the secrets the client generates
//! (`secrets/`), the registry of live servers and bridges (`servers/`) and
//! the state of `toolsrv remote` (`remote/`). Every server hides both
//! possible places from its tools whole. Each level toolsrv creates is mode
//! 0700; the directory itself must be a real directory (not a symbolic
//! link) owned by this user.

use std::ffi::OsString;
use std::io;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// The directory's name under `$XDG_RUNTIME_DIR` or the state directory.
pub const NAME: &str = "toolsrv";

/// The per-user directory for this process's environment (not created);
/// `None` when neither `XDG_RUNTIME_DIR`, `XDG_STATE_HOME` nor `HOME` is an
/// absolute path.
pub fn user_dir() -> Option<PathBuf> {
    user_dir_from(|name| std::env::var_os(name))
}

/// [`user_dir`] with the environment read through `var`. Relative values
/// are ignored (the XDG rule); `XDG_RUNTIME_DIR` counts only when it names
/// an existing directory.
pub fn user_dir_from(var: impl Fn(&str) -> Option<OsString>) -> Option<PathBuf> {
    let abs = |name: &str| var(name).map(PathBuf::from).filter(|p| p.is_absolute());
    if let Some(rt) = abs("XDG_RUNTIME_DIR").filter(|p| p.is_dir()) {
        return Some(rt.join(NAME));
    }
    let state = abs("XDG_STATE_HOME").or_else(|| abs("HOME").map(|h| h.join(".local/state")))?;
    Some(state.join(NAME))
}

/// Makes `dir` a private directory of this user: creates it (and missing
/// parents) with mode 0700, then checks, on the directory opened without
/// following a symbolic link, that it is a directory this uid owns, and
/// takes group and other bits off its mode. The error names the path and
/// the reason (a symbolic link, another owner).
pub fn ensure_private_dir(dir: &Path) -> io::Result<()> {
    let named = |what: String| io::Error::other(format!("{}: {what}", dir.display()));
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(|e| named(format!("cannot create it: {e}")))?;
    let opened = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(dir)
        .map_err(|e| match e.raw_os_error() {
            Some(libc::ELOOP) | Some(libc::ENOTDIR) => {
                named("is a symbolic link or not a directory; refusing to use it".into())
            }
            _ => named(format!("cannot open it: {e}")),
        })?;
    let meta = opened
        .metadata()
        .map_err(|e| named(format!("cannot stat it: {e}")))?;
    let me = crate::effective_uid();
    if meta.uid() != me {
        return Err(named(format!(
            "is owned by uid {}, not by this user (uid {me}); refusing to use it",
            meta.uid()
        )));
    }
    if meta.mode() & 0o077 != 0 {
        opened
            .set_permissions(std::fs::Permissions::from_mode(0o700))
            .map_err(|e| named(format!("cannot make it mode 0700: {e}")))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env<'a>(vars: &'a [(&'a str, &'a Path)]) -> impl Fn(&str) -> Option<OsString> + 'a {
        move |name| {
            vars.iter()
                .find(|(n, _)| *n == name)
                .map(|(_, v)| v.as_os_str().to_owned())
        }
    }

    #[test]
    fn the_runtime_directory_wins_when_it_exists_else_the_state_directory() {
        let t = tempfile_dir("userdir");
        let home = t.join("home");
        let run = t.join("run");
        std::fs::create_dir_all(&run).unwrap();
        let got = user_dir_from(env(&[("XDG_RUNTIME_DIR", &run), ("HOME", &home)]));
        assert_eq!(got, Some(run.join("toolsrv")));
        let missing = t.join("nope");
        let got = user_dir_from(env(&[("XDG_RUNTIME_DIR", &missing), ("HOME", &home)]));
        assert_eq!(got, Some(home.join(".local/state/toolsrv")));
        let state = t.join("state");
        let got = user_dir_from(env(&[("XDG_STATE_HOME", &state), ("HOME", &home)]));
        assert_eq!(got, Some(state.join("toolsrv")));
        let rel = Path::new("relative");
        assert_eq!(
            user_dir_from(env(&[("XDG_RUNTIME_DIR", rel), ("HOME", rel)])),
            None
        );
        let _ = std::fs::remove_dir_all(t);
    }

    #[test]
    fn a_private_directory_is_made_0700_and_a_symlink_is_refused() {
        let t = tempfile_dir("private");
        let d = t.join("a/b/toolsrv");
        ensure_private_dir(&d).expect("create");
        let mode = |p: &Path| std::fs::metadata(p).unwrap().mode() & 0o777;
        assert_eq!(mode(&d), 0o700);
        assert_eq!(mode(&t.join("a")), 0o700, "missing parents are private too");
        std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o755)).unwrap();
        ensure_private_dir(&d).expect("again");
        assert_eq!(mode(&d), 0o700, "group and other bits are taken off");
        let link = t.join("link");
        std::os::unix::fs::symlink(&d, &link).unwrap();
        let err = ensure_private_dir(&link).expect_err("a symlink");
        assert!(err.to_string().contains("symbolic link"), "{err}");
        let _ = std::fs::remove_dir_all(t);
    }

    /// A fresh directory in the temporary directory (the crate has no
    /// dependency that makes one).
    fn tempfile_dir(name: &str) -> PathBuf {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        let d = std::env::temp_dir().join(format!(
            "toolsrv-base-{name}-{}-{nanos}",
            std::process::id()
        ));
        std::fs::create_dir_all(&d).unwrap();
        d
    }
}
