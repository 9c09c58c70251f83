//! [`ConnInfo`]: what handlers know about the connection a request came on.

use std::sync::Arc;

use crate::limits::RequestBudget;

/// What handlers know about the connection a request came on.
#[derive(Debug, Clone)]
pub struct ConnInfo {
    /// A number unique per connection in this server run (for logs).
    pub id: u64,
    /// The peer's uid (`SO_PEERCRED`), when known.
    pub peer_uid: Option<u32>,
    /// The peer's pid (`SO_PEERCRED`), when known.
    pub peer_pid: Option<i32>,
    /// Whether the peer is (or may be) a descendant of this server, i.e. one of
    /// its tools: decided at accept, `true` when it could not be ruled out.
    pub peer_is_descendant: bool,
    /// Owner name shown in stat entries.
    pub user: Arc<str>,
    /// mtime/atime shown in stat entries (the server's start, in Unix seconds).
    pub mtime: u32,
    /// The connection's budget for request data written and not yet answered
    /// (set by [`serve_connection_with`](crate::serve_connection_with) from its [`Limits`](crate::limits::Limits)).
    pub requests: RequestBudget,
}
