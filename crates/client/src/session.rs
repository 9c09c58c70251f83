//! The client's connection slot: the current [`Session`] (one 9P connection,
//! versioned, authenticated and attached) and the reconnect logic that replaces
//! it once the server went away (docs/protocol.md, "Authentication"; docs/cli.md, "The client"; an agent runtime survives a
//! toolsrv restart).
//!
//! - Every request asks the slot for the current session; a dead one is
//!   replaced by a new connection, authenticated again with the saved secret
//!   (a restarted server stores it anew and issues a new token).
//! - Reconnection is lazy (done by the next request, never in the background),
//!   serialised (concurrent requests wait for one attempt), and bounded: tries
//!   with exponential backoff for at most [`DEFAULT_RECONNECT_WINDOW`].
//! - Requests in flight when the connection died fail with
//!   [`ClientError::Disconnected`]; they are never retried (a `proc/new` might
//!   have run). [`crate::RemoteFile`]s keep their old session and fail the same way.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use toolsrv_base::LockUnpoisoned;
use toolsrv_wire::NOFID;

use crate::auth::{attach, authenticate, Auth};
use crate::conn::Conn;
use crate::error::ClientError;

/// How long a request keeps trying to reconnect by default.
pub(crate) const DEFAULT_RECONNECT_WINDOW: Duration = Duration::from_secs(5);
/// The first pause between reconnect attempts; doubled after each failure.
const FIRST_BACKOFF: Duration = Duration::from_millis(20);
/// The longest pause between reconnect attempts.
const MAX_BACKOFF: Duration = Duration::from_millis(500);

/// One connection, attached as `root`, with the token read while authenticating.
pub(crate) struct Session {
    pub(crate) conn: Arc<Conn>,
    pub(crate) root: u32,
    pub(crate) token: Option<Arc<str>>,
}

impl Drop for Session {
    fn drop(&mut self) {
        // The reader task holds the connection too: close it explicitly.
        self.conn.shutdown();
    }
}

impl Session {
    /// Connect, negotiate at most `msize`, and attach per `auth`.
    pub(crate) async fn open(
        socket: &Path,
        auth: &Auth,
        msize: u32,
    ) -> Result<Session, ClientError> {
        let conn = Conn::connect(socket, msize).await?;
        let root = conn.alloc_fid()?;
        // Owned by a Session from here on, so any failure below closes the socket.
        let mut s = Session {
            conn,
            root,
            token: None,
        };
        s.token = match auth {
            Auth::None => {
                attach(&s.conn, root, NOFID).await?;
                None
            }
            Auth::Secret(secret) => authenticate(&s.conn, root, secret).await?.map(Arc::from),
        };
        Ok(s)
    }

    /// Whether the connection is closed.
    pub(crate) fn is_dead(&self) -> bool {
        self.conn.is_dead()
    }

    /// The token as a string slice.
    pub(crate) fn token(&self) -> Option<&str> {
        self.token.as_deref()
    }
}

/// Where a client connects, how it authenticates, and its current session.
pub(crate) struct Slot {
    socket: PathBuf,
    auth: Auth,
    msize: u32,
    current: Mutex<Arc<Session>>,
    /// Held while one request reconnects; others wait and reuse its result.
    reconnecting: tokio::sync::Mutex<()>,
    /// The reconnect window in milliseconds (0: never reconnect).
    window_ms: AtomicU64,
}

impl Slot {
    /// A slot whose first session is `first`.
    pub(crate) fn new(socket: &Path, auth: Auth, msize: u32, first: Session) -> Slot {
        Slot {
            socket: socket.to_path_buf(),
            auth,
            msize,
            current: Mutex::new(Arc::new(first)),
            reconnecting: tokio::sync::Mutex::new(()),
            window_ms: AtomicU64::new(DEFAULT_RECONNECT_WINDOW.as_millis() as u64),
        }
    }

    /// The current session, dead or alive.
    pub(crate) fn current(&self) -> Arc<Session> {
        self.current.lock_unpoisoned().clone()
    }

    /// Set how long a request keeps trying to reconnect (`ZERO`: never).
    pub(crate) fn set_window(&self, d: Duration) {
        self.window_ms.store(
            d.as_millis().min(u64::MAX as u128) as u64,
            Ordering::Relaxed,
        );
    }

    /// The current session's token (a shared handle: no copy of the string).
    pub(crate) fn token(&self) -> Option<Arc<str>> {
        self.current().token.clone()
    }

    /// A live session: the current one, or a new connection if it is dead.
    pub(crate) async fn session(&self) -> Result<Arc<Session>, ClientError> {
        let cur = self.current();
        if !cur.is_dead() {
            return Ok(cur);
        }
        self.reconnect(&cur).await
    }

    /// Replace the dead session `dead` (unless another request did already).
    pub(crate) async fn reconnect(&self, dead: &Arc<Session>) -> Result<Arc<Session>, ClientError> {
        let _one_at_a_time = self.reconnecting.lock().await;
        let cur = self.current();
        if !Arc::ptr_eq(&cur, dead) && !cur.is_dead() {
            return Ok(cur);
        }
        let window = Duration::from_millis(self.window_ms.load(Ordering::Relaxed));
        if window.is_zero() {
            return Err(ClientError::Disconnected);
        }
        let start = Instant::now();
        let mut pause = FIRST_BACKOFF;
        let mut attempts = 0u32;
        let last = loop {
            attempts += 1;
            let err = match Session::open(&self.socket, &self.auth, self.msize).await {
                Ok(s) => return Ok(self.install(s, attempts)),
                // Reachable but refusing us (wrong secret, not 9P): retrying cannot help.
                Err(
                    e @ (ClientError::Auth(_) | ClientError::Protocol(_) | ClientError::Server(_)),
                ) => return Err(e),
                Err(e) => e,
            };
            tracing::debug!(socket = %self.socket.display(), attempt = attempts, error = %err, "reconnect failed");
            let Some(left) = window.checked_sub(start.elapsed()).filter(|l| !l.is_zero()) else {
                break err;
            };
            // The last attempt comes at the end of the window.
            tokio::time::sleep(pause.min(left)).await;
            pause = (pause * 2).min(MAX_BACKOFF);
        };
        Err(match last {
            ClientError::Io { source, .. } => ClientError::Io {
                context: format!(
                    "cannot reconnect to {} ({attempts} attempts in {:.1} s)",
                    self.socket.display(),
                    start.elapsed().as_secs_f64()
                ),
                source,
            },
            other => other,
        })
    }

    /// Make `s` the current session.
    fn install(&self, s: Session, attempts: u32) -> Arc<Session> {
        let s = Arc::new(s);
        *self.current.lock_unpoisoned() = s.clone();
        tracing::info!(socket = %self.socket.display(), attempts, "reconnected to the server");
        s
    }
}
