//! Streamable HTTP transport on a loopback TCP port or a Unix socket, behind
//! a bearer token.
//!
//! A connection must send a request's headers within [`HEADER_READ_TIMEOUT`]
//! (whenever it is waiting for one), and at most
//! [`crate::slots::MAX_CONNECTIONS`] are served at once, those that have not
//! yet shown the token giving way first (see `slots`).

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use subtle::ConstantTimeEq;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio_util::sync::CancellationToken;

use crate::bridge::Bridge;
use crate::error::BridgeError;
use crate::slots::{Slot, Slots, MAX_CONNECTIONS};

/// How long a connection may take to send a request's headers, counted from
/// when the server waits for them (after connecting, or after the previous
/// response on a kept-alive connection).
pub const HEADER_READ_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// The path the MCP endpoint is served at.
pub const ENDPOINT: &str = "/mcp";

/// Where the HTTP transport listens.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HttpListen {
    /// A loopback address and port (port 0: any free port).
    Tcp(SocketAddr),
    /// A Unix socket path (created with mode 0600).
    Unix(PathBuf),
}

impl HttpListen {
    /// `127.0.0.1:PORT`, `[::1]:PORT` or `localhost:PORT` is TCP (loopback
    /// only); anything with a `/` is a Unix socket path.
    pub fn parse(s: &str) -> Result<HttpListen, BridgeError> {
        if s.contains('/') {
            return Ok(HttpListen::Unix(PathBuf::from(s)));
        }
        let s2 = s
            .strip_prefix("localhost:")
            .map(|p| format!("127.0.0.1:{p}"));
        let addr: SocketAddr = s2.as_deref().unwrap_or(s).parse().map_err(|_| {
            BridgeError::Config(format!(
                "--http {s:?}: expected 127.0.0.1:PORT, [::1]:PORT or a Unix socket path"
            ))
        })?;
        if !addr.ip().is_loopback() {
            return Err(BridgeError::Config(format!(
                "--http {s:?}: only loopback addresses are served (127.0.0.1, ::1)"
            )));
        }
        Ok(HttpListen::Tcp(addr))
    }
}

/// A bound listener, before serving.
pub enum Listener {
    /// TCP, with the address actually bound.
    Tcp(tokio::net::TcpListener, SocketAddr),
    /// A Unix socket at this path.
    Unix(tokio::net::UnixListener, PathBuf),
}

impl Listener {
    /// Bind `listen`. A Unix socket path that exists and answers is in use
    /// (error); one that does not answer is stale and replaced.
    pub async fn bind(listen: &HttpListen) -> Result<Listener, BridgeError> {
        match listen {
            HttpListen::Tcp(addr) => {
                let l = tokio::net::TcpListener::bind(addr)
                    .await
                    .map_err(|e| BridgeError::io(format!("cannot listen on {addr}"), e))?;
                let local = l
                    .local_addr()
                    .map_err(|e| BridgeError::io("local address", e))?;
                Ok(Listener::Tcp(l, local))
            }
            HttpListen::Unix(path) => {
                remove_stale_socket(path)?;
                let l = tokio::net::UnixListener::bind(path).map_err(|e| {
                    BridgeError::io(format!("cannot listen on {}", path.display()), e)
                })?;
                set_mode(path, 0o600)?;
                Ok(Listener::Unix(l, path.clone()))
            }
        }
    }

    /// The URL clients use (`http://127.0.0.1:PORT/mcp`, or
    /// `http://localhost/mcp` over the Unix socket).
    pub fn url(&self) -> String {
        match self {
            Listener::Tcp(_, addr) => format!("http://{addr}{ENDPOINT}"),
            Listener::Unix(..) => format!("http://localhost{ENDPOINT}"),
        }
    }
}

/// Makes way at `path` for a new socket: nothing there is fine, a socket
/// that does not answer is stale and removed; a socket that answers is in
/// use, and anything else (a regular file, a directory, a symbolic link) is
/// not ours to remove: both are errors naming the path.
fn remove_stale_socket(path: &Path) -> Result<(), BridgeError> {
    use std::os::unix::fs::FileTypeExt;
    let meta = match std::fs::symlink_metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => {
            return Err(BridgeError::io(
                format!("cannot inspect {}", path.display()),
                e,
            ))
        }
    };
    if !meta.file_type().is_socket() {
        return Err(BridgeError::Config(format!(
            "--http {}: exists and is not a socket; not replacing it (remove it, or choose another path)",
            path.display()
        )));
    }
    if std::os::unix::net::UnixStream::connect(path).is_ok() {
        return Err(BridgeError::Config(format!(
            "socket {} is in use",
            path.display()
        )));
    }
    std::fs::remove_file(path)
        .map_err(|e| BridgeError::io(format!("cannot remove stale socket {}", path.display()), e))
}

fn set_mode(path: &Path, mode: u32) -> Result<(), BridgeError> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
        .map_err(|e| BridgeError::io(format!("chmod {}", path.display()), e))
}

/// The largest request body taken over HTTP: the same as a message over
/// stdio ([`crate::MAX_MESSAGE`]); a larger one is answered `413 Payload Too
/// Large` (rmcp's default would be 4 MiB).
pub const MAX_HTTP_BODY: usize = crate::oversize::MAX_MESSAGE;

/// Serves MCP over Streamable HTTP on `listener` until `shutdown` is
/// cancelled. Every request must carry `Authorization: Bearer <token>`.
pub async fn serve_http(
    bridge: Bridge,
    listener: Listener,
    token: String,
    shutdown: CancellationToken,
) -> Result<(), BridgeError> {
    let config = StreamableHttpServerConfig::default()
        .with_max_request_body_bytes(MAX_HTTP_BODY)
        .with_cancellation_token(shutdown.child_token())
        .with_sse_keep_alive(Some(std::time::Duration::from_secs(15)));
    let service = StreamableHttpService::new(
        move || Ok(bridge.clone()),
        Arc::new(LocalSessionManager::default()),
        config,
    );
    let token: Arc<[u8]> = Arc::from(token.into_bytes());
    let slots = Slots::new(MAX_CONNECTIONS);
    let mut refused_since_warning = 0u64;
    let mut last_warning: Option<std::time::Instant> = None;
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => break,
            accepted = accept(&listener) => match accepted {
                Ok(io) => {
                    let Some(slot) = slots.admit() else {
                        drop(io);
                        refused_since_warning += 1;
                        if last_warning.is_none_or(|t| t.elapsed() >= std::time::Duration::from_secs(60)) {
                            last_warning = Some(std::time::Instant::now());
                            tracing::warn!(
                                max_connections = MAX_CONNECTIONS,
                                refused = std::mem::take(&mut refused_since_warning),
                                "MCP HTTP: every connection slot is held by an authorized client; closing new connections at once (warned at most once a minute)"
                            );
                        }
                        continue;
                    };
                    let slot = Arc::new(slot);
                    let service = service.clone();
                    let token = token.clone();
                    let stop = shutdown.clone();
                    tokio::spawn(async move {
                        let held = slot.clone();
                        let svc = hyper::service::service_fn(move |req| {
                            let service = service.clone();
                            let token = token.clone();
                            let slot = held.clone();
                            async move { Ok::<_, std::convert::Infallible>(route(&service, &token, &slot, req).await) }
                        });
                        let conn = hyper::server::conn::http1::Builder::new()
                            .timer(hyper_util::rt::TokioTimer::new())
                            .header_read_timeout(HEADER_READ_TIMEOUT)
                            .serve_connection(TokioIo::new(io), svc);
                        tokio::pin!(conn);
                        tokio::select! {
                            r = conn.as_mut() => if let Err(e) = r {
                                tracing::debug!(error = %e, "MCP HTTP connection ended");
                            },
                            _ = stop.cancelled() => conn.as_mut().graceful_shutdown(),
                            () = slot.evicted() => {
                                tracing::debug!("MCP HTTP connection closed to make room: it had not shown the token");
                            }
                        }
                    });
                }
                Err(e) => {
                    tracing::warn!(error = %e, "MCP HTTP accept failed");
                    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                }
            }
        }
    }
    if let Listener::Unix(_, path) = &listener {
        use std::os::unix::fs::FileTypeExt;
        // Only a socket: whatever replaced ours there is not ours to remove.
        if std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_socket()) {
            let _ = std::fs::remove_file(path);
        }
    }
    Ok(())
}

trait Io: AsyncRead + AsyncWrite + Unpin + Send + 'static {}
impl<T: AsyncRead + AsyncWrite + Unpin + Send + 'static> Io for T {}

async fn accept(listener: &Listener) -> std::io::Result<Box<dyn Io>> {
    Ok(match listener {
        Listener::Tcp(l, _) => {
            let (s, _) = l.accept().await?;
            let _ = s.set_nodelay(true);
            Box::new(s)
        }
        Listener::Unix(l, _) => Box::new(l.accept().await?.0),
    })
}

type Body = http_body_util::combinators::BoxBody<Bytes, std::convert::Infallible>;

async fn route(
    service: &StreamableHttpService<Bridge, LocalSessionManager>,
    token: &[u8],
    slot: &Slot,
    req: Request<Incoming>,
) -> Response<Body> {
    if req.uri().path() != ENDPOINT {
        return plain(
            StatusCode::NOT_FOUND,
            "not found: the MCP endpoint is /mcp\n",
        );
    }
    if !authorized(&req, token) {
        let mut r = plain(StatusCode::UNAUTHORIZED, "missing or wrong bearer token\n");
        r.headers_mut().insert(
            hyper::header::WWW_AUTHENTICATE,
            hyper::header::HeaderValue::from_static("Bearer realm=\"toolsrv\""),
        );
        return r;
    }
    slot.proven();
    let delete = req.method() == hyper::Method::DELETE;
    let mut resp = service.handle(req).await;
    // rmcp answers a session DELETE with 202; clients (the Python SDK among
    // them) expect a 2xx with no body to mean "terminated" and warn on 202.
    if delete && resp.status() == StatusCode::ACCEPTED {
        *resp.status_mut() = StatusCode::OK;
    }
    resp
}

fn authorized(req: &Request<Incoming>, token: &[u8]) -> bool {
    let Some(value) = req.headers().get(hyper::header::AUTHORIZATION) else {
        return false;
    };
    let bytes = value.as_bytes();
    let Some(given) = bytes
        .get(..7)
        .filter(|p| p.eq_ignore_ascii_case(b"bearer "))
        .and_then(|_| bytes.get(7..))
    else {
        return false;
    };
    bool::from(given.ct_eq(token))
}

fn plain(status: StatusCode, text: &'static str) -> Response<Body> {
    let mut r = Response::new(Full::new(Bytes::from_static(text.as_bytes())).boxed());
    *r.status_mut() = status;
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn listen_addresses() {
        assert!(matches!(
            HttpListen::parse("127.0.0.1:0"),
            Ok(HttpListen::Tcp(_))
        ));
        assert!(matches!(
            HttpListen::parse("[::1]:8080"),
            Ok(HttpListen::Tcp(_))
        ));
        assert!(matches!(
            HttpListen::parse("localhost:9"),
            Ok(HttpListen::Tcp(_))
        ));
        assert!(matches!(
            HttpListen::parse("/tmp/x.sock"),
            Ok(HttpListen::Unix(_))
        ));
        assert!(matches!(
            HttpListen::parse("./x.sock"),
            Ok(HttpListen::Unix(_))
        ));
        for bad in ["0.0.0.0:80", "192.168.1.1:80", "example.com:80", "8080", ""] {
            assert!(HttpListen::parse(bad).is_err(), "{bad}");
        }
    }
}
