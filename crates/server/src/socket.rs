//! The listening socket (docs/protocol.md, "Connection"): mode 0600, a live socket is never stolen,
//! a stale one is replaced; peers are checked with `SO_PEERCRED`.

use std::io;
use std::os::unix::fs::{FileTypeExt, PermissionsExt};
use std::path::{Path, PathBuf};

use tokio::net::{UnixListener, UnixStream};

/// Why the socket could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum SocketError {
    /// Another server answers on the path.
    #[error("socket {0} is in use")]
    InUse(PathBuf),
    /// The path exists and is not a socket: never removed.
    #[error("{0} exists and is not a socket; refusing to replace it")]
    NotASocket(PathBuf),
    /// Any other failure, with the step that failed.
    #[error("cannot {what} {path}: {source}")]
    Io {
        /// The step (`bind`, `remove stale socket`, ...).
        what: &'static str,
        /// The socket path.
        path: PathBuf,
        /// The OS error.
        source: io::Error,
    },
}

fn io_err<'a>(what: &'static str, path: &'a Path) -> impl FnOnce(io::Error) -> SocketError + 'a {
    move |source| SocketError::Io {
        what,
        path: path.to_path_buf(),
        source,
    }
}

/// A bound listening socket and the identity of the file it created.
pub struct Bound {
    /// The listener.
    pub(crate) listener: UnixListener,
    path: PathBuf,
    /// (device, inode) of the socket file we created.
    id: Option<(u64, u64)>,
}

impl Bound {
    /// Stop listening and remove the socket file, but only if it is still the
    /// one we created: a successor that replaced it (our socket looked stale to
    /// it once we stopped accepting) keeps its own.
    pub(crate) fn close(self) {
        use std::os::unix::fs::MetadataExt;
        drop(self.listener);
        let ours = std::fs::symlink_metadata(&self.path)
            .ok()
            .map(|m| (m.dev(), m.ino()));
        if ours.is_some() && ours == self.id {
            if let Err(e) = std::fs::remove_file(&self.path) {
                tracing::warn!(socket = %self.path.display(), error = %e, "cannot remove socket");
            }
        } else {
            tracing::info!(socket = %self.path.display(), "socket file was replaced; leaving it");
        }
    }
}

/// The listening socket systemd passed (socket activation: `LISTEN_FDS`
/// names descriptor 3), for the socket at `path`. The socket file belongs to
/// systemd: `Bound::close` leaves it in place.
///
/// Descriptor 3 must be a listening Unix stream socket bound to `path`;
/// anything else is an error naming what it is.
pub fn inherited(path: &Path) -> Result<Bound, SocketError> {
    use std::os::fd::FromRawFd;
    const FD: i32 = 3;
    let bad = |why: String| SocketError::Io {
        what: "use the socket passed by the service manager for",
        path: path.to_path_buf(),
        source: io::Error::new(io::ErrorKind::InvalidInput, why),
    };
    match crate::sys::is_socket(FD) {
        Err(e) => {
            return Err(bad(format!(
                "LISTEN_FDS is set but descriptor 3 is not open ({e})"
            )))
        }
        Ok(false) => return Err(bad("descriptor 3 is not a socket".into())),
        Ok(true) => {}
    }
    // Safety: descriptor 3 is open and ours from now on (nothing else in
    // this process uses it); it is a socket (checked above).
    let std_listener = unsafe { std::os::unix::net::UnixListener::from_raw_fd(FD) };
    let bound_to = std_listener
        .local_addr()
        .ok()
        .and_then(|a| a.as_pathname().map(Path::to_path_buf));
    if bound_to.as_deref() != Some(path) {
        return Err(bad(format!(
            "descriptor 3 is bound to {}, not to --listen",
            bound_to.map_or_else(|| "no path".to_string(), |p| p.display().to_string())
        )));
    }
    let _ = crate::sys::set_cloexec(std::os::fd::AsFd::as_fd(&std_listener));
    std_listener
        .set_nonblocking(true)
        .map_err(io_err("configure", path))?;
    Ok(Bound {
        listener: UnixListener::from_std(std_listener).map_err(io_err("listen on", path))?,
        path: path.to_path_buf(),
        id: None,
    })
}

/// Bind the server socket at `path` with mode 0600. An existing path is replaced
/// only if it is a socket nobody answers on.
pub fn bind(path: &Path) -> Result<Bound, SocketError> {
    use std::os::unix::fs::MetadataExt;
    let listener = bind_listener(path)?;
    let id = std::fs::symlink_metadata(path)
        .ok()
        .map(|m| (m.dev(), m.ino()));
    Ok(Bound {
        listener,
        path: path.to_path_buf(),
        id,
    })
}

fn bind_listener(path: &Path) -> Result<UnixListener, SocketError> {
    if let Ok(meta) = std::fs::symlink_metadata(path) {
        if !meta.file_type().is_socket() {
            return Err(SocketError::NotASocket(path.to_path_buf()));
        }
        match std::os::unix::net::UnixStream::connect(path) {
            Ok(_) => return Err(SocketError::InUse(path.to_path_buf())),
            Err(_) => {
                tracing::info!(socket = %path.display(), "removing stale socket");
                std::fs::remove_file(path).map_err(io_err("remove stale socket", path))?;
            }
        }
    }
    // The umask makes the socket 0600 from the moment it exists; the chmod
    // below is a second guard. Startup is single-threaded at this point.
    let old = crate::sys::umask(0o177);
    let std_listener = std::os::unix::net::UnixListener::bind(path);
    crate::sys::umask(old);
    let std_listener = std_listener.map_err(io_err("bind", path))?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))
        .map_err(io_err("chmod", path))?;
    std_listener
        .set_nonblocking(true)
        .map_err(io_err("configure", path))?;
    UnixListener::from_std(std_listener).map_err(io_err("listen on", path))
}

/// The peer's uid and pid, if the kernel tells.
pub(crate) fn peer(stream: &UnixStream) -> (Option<u32>, Option<i32>) {
    match stream.peer_cred() {
        Ok(c) => (Some(c.uid()), c.pid()),
        Err(_) => (None, None),
    }
}

/// The send buffer asked for on each connection: room for two of the largest
/// `Rread`s (msize is at most 1 MiB), so a streamed `out` read is written in
/// one go instead of in pieces, each waiting for the client to drain some. The
/// kernel caps it at `net.core.wmem_max` (often 208 KiB); memory is only used
/// while replies are queued.
pub(crate) const SEND_BUFFER: i32 = 2 << 20;

/// Ask for a [`SEND_BUFFER`]-byte send buffer on `stream` (best effort).
pub(crate) fn enlarge_send_buffer(stream: &UnixStream) {
    use std::os::fd::AsFd;
    if let Err(e) = crate::sys::set_send_buffer(stream.as_fd(), SEND_BUFFER) {
        tracing::debug!(error = %e, "cannot enlarge the send buffer");
    }
}

/// Whether a peer with `peer_uid` may talk to a server running as `my_uid`:
/// same uid, or the server runs as root.
pub(crate) fn peer_allowed(peer_uid: Option<u32>, my_uid: u32) -> bool {
    my_uid == 0 || peer_uid == Some(my_uid)
}
