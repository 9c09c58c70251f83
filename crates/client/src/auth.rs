//! Authentication of a connection (docs/protocol.md, "Authentication"): the `Tauth` exchange, the
//! attach, and the check of whom the secret goes to (docs/cli.md, "The client").

use std::sync::Arc;

use toolsrv_wire::{Body, NOFID};

use crate::conn::{Conn, Req};
use crate::error::ClientError;
use crate::reply;

/// The user name sent in `Tauth` and `Tattach`.
const UNAME: &str = "agent";
/// The server's answer to `Tauth` when it runs with `--no-auth`.
const AUTH_NOT_REQUIRED: &str = "authentication not required";

/// How to authenticate when connecting.
#[derive(Clone)]
pub enum Auth {
    /// Authenticate with this shared secret (docs/protocol.md, "Authentication"); against a
    /// `--no-auth` server this falls back to an unauthenticated attach.
    Secret(String),
    /// Attach without authentication (`NOFID`).
    None,
}

impl std::fmt::Debug for Auth {
    // Never print the secret.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Auth::Secret(_) => f.write_str("Auth::Secret(..)"),
            Auth::None => f.write_str("Auth::None"),
        }
    }
}

/// Attach `fid` to the root with `afid`.
pub(crate) async fn attach(conn: &Arc<Conn>, fid: u32, afid: u32) -> Result<(), ClientError> {
    let body = conn
        .call(Req::body(Body::Tattach {
            fid,
            afid,
            uname: UNAME.into(),
            aname: String::new(),
        }))?
        .await?;
    reply::attach(body).map(|_| ())
}

/// The authentication exchange (docs/protocol.md, "Authentication"); returns the token, or `None` if the server does
/// not require authentication.
pub(crate) async fn authenticate(
    conn: &Arc<Conn>,
    root: u32,
    secret: &str,
) -> Result<Option<String>, ClientError> {
    if secret.is_empty() {
        return Err(ClientError::Auth("the secret is empty".into()));
    }
    check_server_uid(conn.peer_uid())?;
    let afid = conn.alloc_fid()?;
    let body = conn
        .call(Req::body(Body::Tauth {
            afid,
            uname: UNAME.into(),
            aname: String::new(),
        }))?
        .await?;
    match reply::auth(body) {
        Ok(_) => {}
        Err(ClientError::Server(e)) if e == AUTH_NOT_REQUIRED => {
            // The afid was never created; the clunk only releases our number.
            conn.send_detached(Req::clunk(afid));
            attach(conn, root, NOFID).await?;
            return Ok(None);
        }
        Err(ClientError::Server(e)) => return Err(ClientError::Auth(e)),
        Err(e) => return Err(e),
    }
    // The auth fid stays open for the life of the connection.
    let body = conn.call(Req::write(afid, 0, secret.as_bytes()))?.await?;
    match reply::write(body, secret.len()) {
        Ok(n) if n as usize == secret.len() => {}
        Ok(n) => {
            return Err(ClientError::Auth(format!(
                "server accepted only {n} of {} secret bytes",
                secret.len()
            )))
        }
        Err(ClientError::Server(e)) => return Err(ClientError::Auth(e)),
        Err(e) => return Err(e),
    }
    let body = conn.call(Req::read(afid, 0, 256))?.await?;
    let token = match reply::read(body) {
        Ok(t) => t,
        Err(ClientError::Server(e)) => return Err(ClientError::Auth(e)),
        Err(e) => return Err(e),
    };
    let token = String::from_utf8(token)
        .ok()
        .filter(|t| t.len() == 64 && t.bytes().all(|b| b.is_ascii_hexdigit()))
        .ok_or_else(|| {
            ClientError::Protocol("server sent a token that is not 64 hex characters".into())
        })?;
    match attach(conn, root, afid).await {
        Ok(()) => Ok(Some(token)),
        Err(ClientError::Server(e)) => Err(ClientError::Auth(e)),
        Err(e) => Err(e),
    }
}

/// The secret goes only to a server of this user or of root (docs/cli.md, "The client"):
/// whatever listens at a socket path of another user would collect it.
fn check_server_uid(peer: Option<u32>) -> Result<(), ClientError> {
    let me = toolsrv_base::effective_uid();
    match peer {
        Some(uid) if uid == me || uid == 0 => Ok(()),
        Some(uid) => Err(ClientError::Auth(format!(
            "the server runs as uid {uid}, not as this user (uid {me}) nor root; \
             refusing to send it the secret"
        ))),
        None => Err(ClientError::Auth(
            "cannot tell which user the server runs as (SO_PEERCRED failed); \
             refusing to send it the secret"
                .into(),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_secret_goes_only_to_this_user_or_root() {
        let me = toolsrv_base::effective_uid();
        assert!(check_server_uid(Some(me)).is_ok());
        assert!(check_server_uid(Some(0)).is_ok());
        let other = if me == 65534 { 65533 } else { 65534 };
        let err = check_server_uid(Some(other)).expect_err("another uid");
        assert!(err.to_string().contains(&format!("uid {other}")), "{err}");
        assert!(check_server_uid(None).is_err());
    }

    #[test]
    fn auth_debug_hides_the_secret() {
        let s = format!("{:?}", Auth::Secret("hunter2".into()));
        assert!(!s.contains("hunter2"), "{s}");
    }
}
