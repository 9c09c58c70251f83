//! What a server keeps in its user's shared places while it runs, and takes
//! away when it stops (issue 33):
//!
//! - its **registry entry** (`toolsrv_base::registry`): its socket and the
//!   files it hides from its own tools, so every other server of the user
//!   hides them from theirs and takes this server's runs for tools;
//! - its **temporary directory**, `{TOOLSRV_TMPDIR}`
//!   (`toolsrv_sandbox::ServerTmp`): `<TMPDIR>/toolsrv-<uid>/<pid>-<start>`.
//!
//! At startup, before its first view is built, it makes the per-user
//! directory (so that the view hides it from the start, the secrets a
//! client writes there later included), removes the registry entries and
//! generated secrets that servers gone left behind, registers, and makes
//! its temporary directory; the temporary directories of servers gone are
//! removed on a thread of their own, so a large one does not delay serving. Nothing here stops the server: a step that
//! fails is logged and the server runs without it.

use std::path::{Path, PathBuf};
use std::sync::Mutex;

use toolsrv_base::registry::{self, Registration};
use toolsrv_base::{LockUnpoisoned, ProcessId};
use toolsrv_sandbox::ServerTmp;

/// A server's registry entry and temporary directory.
#[derive(Debug, Default)]
pub(crate) struct Presence {
    /// The per-user directory (made private), if there is one.
    pub(crate) user_dir: Option<PathBuf>,
    /// The registry's directory, if it could be made.
    pub(crate) registry: Option<PathBuf>,
    /// The server's temporary directory, if it could be made.
    pub(crate) tmpdir: Option<PathBuf>,
    registration: Mutex<Option<Registration>>,
    tmp: Mutex<Option<ServerTmp>>,
}

impl Presence {
    /// Sets up the presence of the server listening on `socket` that hides
    /// `hidden` from its tools; `tmp` is `$TMPDIR` (else `/tmp`).
    pub(crate) fn start(socket: &Path, hidden: &[PathBuf], tmp: &Path) -> Presence {
        let mut p = Presence::default();
        let id = match ProcessId::current() {
            Ok(id) => id,
            Err(e) => {
                tracing::warn!(error = %e, "cannot read this process's start time: not registered, no temporary directory of its own");
                return p;
            }
        };
        p.user_dir = toolsrv_base::userdir::user_dir().filter(|d| {
            toolsrv_base::userdir::ensure_private_dir(d)
                .map_err(|e| tracing::warn!(error = %e, "the per-user directory is unusable: other servers do not learn of this one"))
                .is_ok()
        });
        if let Some(user_dir) = &p.user_dir {
            let dir = registry::dir(user_dir);
            let gone = registry::clean(&dir);
            let secrets = toolsrv_client::secret_store::remove_stale(
                user_dir,
                &[socket.to_path_buf()],
                toolsrv_client::secret_store::STALE_AFTER,
            );
            if !gone.is_empty() || secrets > 0 {
                tracing::info!(
                    servers = gone.len(),
                    secrets,
                    "removed what toolsrv processes that are gone left in the per-user directory"
                );
            }
            let socket = std::path::absolute(socket).unwrap_or_else(|_| socket.to_path_buf());
            let entry = registry::Entry {
                kind: registry::Kind::Server,
                id,
                hidden: hidden
                    .iter()
                    .filter_map(|h| std::path::absolute(h).ok())
                    .filter(|h| *h != socket)
                    .collect(),
                sockets: vec![socket],
            };
            match registry::register(&dir, &entry) {
                Ok(r) => {
                    tracing::debug!(entry = ?r.path(), "registered in the per-user registry");
                    p.registration = Mutex::new(Some(r));
                    p.registry = Some(dir);
                }
                Err(e) => {
                    tracing::warn!(error = %e, "cannot register: other servers do not hide this one's socket from their tools")
                }
            }
        }
        // Removing what killed servers left may take long (a build's
        // temporary files): not while this server is not yet serving.
        let base = tmp.to_path_buf();
        let cleanup = std::thread::Builder::new()
            .name("toolsrv-tmp-cleanup".into())
            .spawn(move || {
                let stale = toolsrv_sandbox::remove_stale(&base);
                if stale > 0 {
                    tracing::info!(
                        removed = stale,
                        "removed the temporary directories of servers that are gone"
                    );
                }
            });
        if let Err(e) = cleanup {
            tracing::warn!(error = %e, "cannot start removing the temporary directories of servers that are gone");
        }
        match ServerTmp::create(tmp, &id) {
            Ok(t) => {
                p.tmpdir = Some(t.path().to_path_buf());
                p.tmp = Mutex::new(Some(t));
            }
            Err(e) => {
                tracing::warn!(error = %e, "no temporary directory of its own: rules naming {{TOOLSRV_TMPDIR}} are skipped")
            }
        }
        p
    }

    /// Removes the registry entry and the temporary directory (once; after
    /// every process of the server was stopped).
    pub(crate) fn leave(&self) {
        if let Some(r) = self.registration.lock_unpoisoned().take() {
            r.remove();
        }
        if let Some(t) = self.tmp.lock_unpoisoned().take() {
            let path = t.path().to_path_buf();
            if let Err(e) = t.remove() {
                tracing::warn!(path = %path.display(), error = %e, "cannot remove the temporary directory");
            }
        }
    }
}
