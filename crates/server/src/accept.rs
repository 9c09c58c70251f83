//! The accept loop (docs/protocol.md, "Connection"; docs/containment.md): every connection is served in its own
//! task, at most `--max-connections` at once (beyond that a new connection is
//! closed at once), each closed if it has not attached within `--auth-timeout`.
//! Connections from the server's own descendants (its tools and what they
//! started, the runs of the user's other servers, or a peer whose ancestry
//! cannot be told: `crate::runs`) do not count against
//! `--max-connections`: they have a budget of their own,
//! [`DESCENDANT_CONNECTIONS`], so a tool that floods the socket never takes
//! the slots the people and agents driving the server need.
//! When the descriptor limit is reached anyway, a reserve descriptor is given
//! up to accept and close one pending connection, so the loop neither spins on
//! `EMFILE` nor leaves clients hanging in the backlog. Warnings about either
//! are logged at most once a minute.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::net::UnixListener;
use tokio_util::sync::CancellationToken;
use toolsrv_vfs::{Auth, ConnInfo, Limits, Node};

use crate::fdlimit::Reserve;
use crate::server::Server;
use crate::socket;

/// The most connections the server's own descendants may hold at once, apart
/// from `--max-connections`.
pub const DESCENDANT_CONNECTIONS: usize = 64;

/// The shortest time between two warnings of one kind.
const WARN_PERIOD: Duration = Duration::from_secs(60);

/// A warning logged at most once per [`WARN_PERIOD`], counting what it skipped.
struct Every {
    last: Option<Instant>,
    since: u64,
}

impl Every {
    fn new() -> Every {
        Every {
            last: None,
            since: 0,
        }
    }

    /// One more event; `Some(n)` when a warning is due now, `n` events since the last one.
    fn hit(&mut self) -> Option<u64> {
        self.since += 1;
        if self.last.is_some_and(|t| t.elapsed() < WARN_PERIOD) {
            return None;
        }
        self.last = Some(Instant::now());
        Some(std::mem::take(&mut self.since))
    }
}

/// Whether `e` says the process (or system) is out of descriptors.
fn out_of_descriptors(e: &std::io::Error) -> bool {
    matches!(e.raw_os_error(), Some(libc::EMFILE) | Some(libc::ENFILE))
}

/// Accept connections until `shutdown` fires.
pub(crate) async fn accept_loop(
    server: &Arc<Server>,
    listener: &UnixListener,
    root: Node,
    auth: Arc<dyn Auth>,
    shutdown: &CancellationToken,
) {
    let my_uid = toolsrv_base::effective_uid();
    let limits = Limits {
        auth_timeout: Some(server.config.auth_timeout).filter(|d| !d.is_zero()),
        ..Limits::default()
    };
    let mut reserve = Reserve::new();
    let mut full = Every::new();
    let mut tools_full = Every::new();
    let mut exhausted = Every::new();
    loop {
        let stream = tokio::select! {
            _ = shutdown.cancelled() => break,
            r = listener.accept() => match r {
                Ok((s, _)) => s,
                Err(e) if out_of_descriptors(&e) => {
                    let shed = shed_one(listener, &mut reserve).await;
                    if let Some(n) = exhausted.hit() {
                        tracing::warn!(error = %e, connections = server.activity.open_connections(), since_last_warning = n,
                            "descriptor limit reached: closing new connections at once (warned at most once a minute)");
                    }
                    if !shed {
                        tokio::time::sleep(Duration::from_millis(10)).await;
                    }
                    continue;
                }
                Err(e) => {
                    tracing::warn!(error = %e, "accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
        };
        let (peer_uid, peer_pid) = socket::peer(&stream);
        if !socket::peer_allowed(peer_uid, my_uid) {
            tracing::warn!(?peer_uid, ?peer_pid, "refused connection from another user");
            continue;
        }
        // Decided now, while the peer certainly exists; unsure counts as a tool.
        let descendant = server.is_run(peer_pid);
        let activity = &server.activity;
        if descendant {
            if activity.descendant_connections() >= DESCENDANT_CONNECTIONS {
                drop(stream);
                if let Some(n) = tools_full.hit() {
                    tracing::warn!(
                        limit = DESCENDANT_CONNECTIONS,
                        ?peer_pid,
                        refused_since_last_warning = n,
                        "the server's own tools hold all the connections they may: closing their new connections at once (warned at most once a minute)"
                    );
                }
                continue;
            }
        } else if activity
            .open_connections()
            .saturating_sub(activity.descendant_connections())
            >= server.config.max_connections
        {
            drop(stream);
            if let Some(n) = full.hit() {
                tracing::warn!(
                    max_connections = server.config.max_connections,
                    refused_since_last_warning = n,
                    "--max-connections reached: closing new connections at once (warned at most once a minute)"
                );
            }
            continue;
        }
        socket::enlarge_send_buffer(&stream);
        let info = ConnInfo {
            id: server.next_conn.fetch_add(1, Ordering::Relaxed),
            peer_uid,
            peer_pid,
            peer_is_descendant: descendant,
            user: server.user.clone(),
            mtime: server.started,
            requests: Default::default(),
        };
        tracing::debug!(conn = info.id, ?peer_pid, "connection accepted");
        let (root, auth) = (root.clone(), auth.clone());
        let conn = server.activity.connection(descendant);
        tokio::spawn(async move {
            let id = info.id;
            toolsrv_vfs::serve_connection_with(stream, root, auth, info, limits).await;
            drop(conn);
            tracing::debug!(conn = id, "connection closed");
        });
    }
}

/// Out of descriptors: free the reserve, accept one pending connection and
/// close it, take the reserve again. Whether a connection was shed.
async fn shed_one(listener: &UnixListener, reserve: &mut Reserve) -> bool {
    reserve.release();
    let shed = matches!(
        tokio::time::timeout(Duration::from_millis(5), listener.accept()).await,
        Ok(Ok(_))
    );
    reserve.restore();
    shed
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn warnings_are_at_most_once_a_period_and_count_what_they_skipped() {
        let mut e = Every::new();
        assert_eq!(e.hit(), Some(1));
        assert_eq!(e.hit(), None);
        assert_eq!(e.hit(), None);
        e.last = Some(Instant::now() - WARN_PERIOD);
        assert_eq!(e.hit(), Some(3));
    }
}
