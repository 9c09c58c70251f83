//! The local side's files, one private directory per remote address:
//! `$XDG_RUNTIME_DIR/toolsrv/remote/<key>/`, else
//! `${XDG_STATE_HOME:-~/.local/state}/toolsrv/remote/<key>/`, every level we
//! create 0700 and checked to be ours. Never under `{TOOLSRV_TMPDIR}`
//! (`/tmp/toolsrv-<uid>`), which the default policy hands to every tool: both
//! places are in the sandbox's protected list (`TOOLSRV_STATE`), so no rule
//! reaches the control socket, the forwarded socket or the secret.

use std::fs::File;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use toolsrv_client::SshAddress;

use crate::error::RemoteError;

/// The local directory of one remote address.
#[derive(Debug, Clone)]
pub struct LocalDir {
    path: PathBuf,
}

/// An environment variable that holds an absolute path (the XDG rule:
/// relative values are ignored).
fn abs_env(name: &str) -> Option<PathBuf> {
    std::env::var_os(name)
        .map(PathBuf::from)
        .filter(|p| p.is_absolute())
}

/// Where the per-address directories live: `$XDG_RUNTIME_DIR/toolsrv/remote`
/// when that variable names a directory, else
/// `${XDG_STATE_HOME:-$HOME/.local/state}/toolsrv/remote`.
pub fn base() -> Result<PathBuf, RemoteError> {
    if let Some(rt) = abs_env("XDG_RUNTIME_DIR").filter(|p| p.is_dir()) {
        return Ok(rt.join("toolsrv").join("remote"));
    }
    let state = match abs_env("XDG_STATE_HOME") {
        Some(s) => s,
        None => abs_env("HOME")
            .ok_or(RemoteError::NoStateDir)?
            .join(".local")
            .join("state"),
    };
    Ok(state.join("toolsrv").join("remote"))
}

/// Create `p` (and missing parents) with mode 0700; refuse a directory that
/// another uid owns or that group or others can enter (someone else's `/tmp`
/// squat).
fn private_dir(p: &Path) -> Result<(), RemoteError> {
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(p)
        .map_err(|e| RemoteError::io(format!("cannot create {}", p.display()), e))?;
    let m = std::fs::symlink_metadata(p)
        .map_err(|e| RemoteError::io(format!("cannot stat {}", p.display()), e))?;
    if !m.is_dir() || m.uid() != toolsrv_base::effective_uid() {
        return Err(RemoteError::NotOwnDir {
            path: p.to_path_buf(),
            uid: toolsrv_base::effective_uid(),
        });
    }
    if m.mode() & 0o077 != 0 {
        std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o700))
            .map_err(|e| RemoteError::io(format!("cannot chmod 700 {}", p.display()), e))?;
    }
    Ok(())
}

/// The file in a [`LocalDir`] that holds the control socket's name.
const CONTROL_NAME_FILE: &str = "ctl.name";

/// An exclusive `flock` on the directory's `lock` file, released on drop.
pub struct Lock(#[allow(dead_code)] File);

impl LocalDir {
    /// The directory for `addr` (not created).
    pub fn for_address(addr: &SshAddress) -> Result<LocalDir, RemoteError> {
        Ok(LocalDir {
            path: base()?.join(addr.key()),
        })
    }

    /// Create the directory (and `base()`), 0700, ours. Missing levels above
    /// `toolsrv/` (`~/.local/state`, ...) are created 0700; existing ones are
    /// left as they are.
    pub fn create(&self) -> Result<(), RemoteError> {
        if let Some(parent) = self.path.parent() {
            // `.../toolsrv` and `.../toolsrv/remote`.
            if let Some(top) = parent.parent() {
                private_dir(top)?;
            }
            private_dir(parent)?;
        }
        private_dir(&self.path)?;
        let name = self.path.join(CONTROL_NAME_FILE);
        if !name.exists() {
            let random = hex::encode(rand::random::<[u8; 12]>());
            write_private(&name, format!("c-{random}").as_bytes())?;
        }
        match self.control().parent() {
            Some(d) if d != self.path => private_dir(d),
            _ => Err(RemoteError::NoControlDir(name.clone())),
        }
    }

    /// The directory.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Whether it exists.
    pub fn exists(&self) -> bool {
        self.path.is_dir()
    }

    /// The forwarded socket clients connect to.
    pub fn socket(&self) -> PathBuf {
        self.path.join("toolsrv.sock")
    }

    /// The secret pinned on the remote server (`<socket>.secret`, 0600).
    pub fn secret(&self) -> PathBuf {
        self.path.join("toolsrv.sock.secret")
    }

    /// ssh's control socket: `c-<96 random bits, hex>/ctl`, the directory
    /// name chosen by [`LocalDir::create`] and kept in `ctl.name` (before
    /// that, `ctl`, which never exists). A sandboxed tool that can name a
    /// Unix socket can connect to it whatever Landlock says (ABI < 9), and
    /// whoever reaches this socket runs commands on the remote host: the
    /// random directory keeps its path unknown to tools (they can neither
    /// list nor read this directory, and the master binds the socket so that
    /// the kernel never shows its path: [`crate::ssh::Ssh::master`]).
    pub fn control(&self) -> PathBuf {
        let name = std::fs::read_to_string(self.path.join(CONTROL_NAME_FILE))
            .ok()
            .map(|n| n.trim().to_string())
            .filter(|n| n.starts_with("c-") && !n.contains('/'));
        match name {
            Some(n) => self.path.join(n).join("ctl"),
            None => self.path.join("ctl"),
        }
    }

    /// What `up` recorded ([`crate::state::State`]).
    pub fn state(&self) -> PathBuf {
        self.path.join("state.json")
    }

    /// The supervisor's pid.
    pub fn supervisor_pid_file(&self) -> PathBuf {
        self.path.join("supervisor.pid")
    }

    /// The master ssh's pid.
    pub fn ssh_pid_file(&self) -> PathBuf {
        self.path.join("ssh.pid")
    }

    /// The supervisor's log: every recovery step, one line each.
    pub fn log(&self) -> PathBuf {
        self.path.join("supervisor.log")
    }

    /// The last recovery event (`status` shows it).
    pub fn last_event(&self) -> PathBuf {
        self.path.join("last-event")
    }

    /// Take the directory's lock (blocking): one deployment or recovery at a time.
    pub fn lock(&self) -> Result<Lock, RemoteError> {
        self.lock_with(libc::LOCK_EX)?
            .ok_or_else(|| RemoteError::Lock(self.path.clone()))
    }

    /// Take the lock if nobody holds it.
    pub fn try_lock(&self) -> Result<Option<Lock>, RemoteError> {
        self.lock_with(libc::LOCK_EX | libc::LOCK_NB)
    }

    fn lock_with(&self, how: libc::c_int) -> Result<Option<Lock>, RemoteError> {
        let p = self.path.join("lock");
        let f = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .mode(0o600)
            .open(&p)
            .map_err(|e| RemoteError::io(format!("cannot open {}", p.display()), e))?;
        use std::os::fd::AsFd;
        loop {
            let e = match crate::sys::flock(f.as_fd(), how) {
                Ok(()) => return Ok(Some(Lock(f))),
                Err(e) => e,
            };
            if e.kind() == std::io::ErrorKind::WouldBlock {
                return Ok(None);
            }
            if e.kind() != std::io::ErrorKind::Interrupted {
                return Err(RemoteError::io(format!("cannot lock {}", p.display()), e));
            }
        }
    }

    /// The supervisor's pid when it runs (its command line names this directory).
    pub fn supervisor(&self) -> Option<i32> {
        live_pid(&self.supervisor_pid_file(), &self.path)
    }

    /// The master ssh's pid when it runs. Its command line does not name
    /// the control socket (it binds it as `/proc/self/fd/0/ctl`, see
    /// [`crate::ssh::Ssh::master`]), but its standard input is the control
    /// socket's directory: that is what identifies it.
    pub fn ssh_master(&self) -> Option<i32> {
        let control = self.control();
        let pid = live_pid(
            &self.ssh_pid_file(),
            Path::new(crate::ssh::HIDDEN_CONTROL_DIR),
        )?;
        let stdin = std::fs::read_link(format!("/proc/{pid}/fd/0")).ok()?;
        (Some(stdin.as_path()) == control.parent()).then_some(pid)
    }
}

/// The pid in `file` if that process lives and its command line mentions
/// `marker` (a recycled pid does not).
fn live_pid(file: &Path, marker: &Path) -> Option<i32> {
    let pid: i32 = std::fs::read_to_string(file).ok()?.trim().parse().ok()?;
    // Never 0, 1 or a negative pid (a process group, or every process).
    if pid <= 1 {
        return None;
    }
    let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
    let marker = marker.to_string_lossy();
    let text = String::from_utf8_lossy(&cmdline);
    // A zombie has an empty command line: not alive for our purposes.
    text.contains(&*marker).then_some(pid)
}

/// Write `data` to `path` with mode 0600, atomically (temp file + rename).
pub fn write_private(path: &Path, data: &[u8]) -> Result<(), RemoteError> {
    use std::io::Write;
    let tmp = path.with_extension(format!("tmp.{}", std::process::id()));
    let res = (|| {
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .truncate(true)
            .write(true)
            .mode(0o600)
            .open(&tmp)?;
        f.write_all(data)?;
        f.sync_all()?;
        std::fs::rename(&tmp, path)
    })();
    res.map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        RemoteError::io(format!("cannot write {}", path.display()), e)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn private_dirs_are_0700_and_files_0600() {
        let t = tempfile::tempdir().expect("tempdir");
        let d = t.path().join("a/b");
        private_dir(&d).expect("create");
        let m = std::fs::metadata(&d).expect("stat");
        assert_eq!(m.mode() & 0o777, 0o700);
        let f = d.join("f");
        write_private(&f, b"x").expect("write");
        assert_eq!(std::fs::metadata(&f).expect("stat").mode() & 0o777, 0o600);
        // A group-accessible directory of ours is tightened.
        std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o755)).expect("chmod");
        private_dir(&d).expect("again");
        assert_eq!(std::fs::metadata(&d).expect("stat").mode() & 0o777, 0o700);
    }
}
