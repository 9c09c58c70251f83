//! The proxy's listener: each connection is HTTP (a `CONNECT`, or a request
//! in absolute form) or SOCKS5 (its first byte is 5), decided by
//! [`crate::decide::destination`], then relayed to the one upstream it
//! checked with `TCP_NODELAY` on both sides.

use std::net::SocketAddr;
use std::sync::Arc;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use tokio_util::sync::CancellationToken;

use crate::allow::Allowlist;
use crate::decide::{Refusal, Target};
use crate::denial::Denials;
use crate::door::Door;
use crate::gate::{Credentials, Gate};
use crate::secret::Secrets;

/// The most a request head may hold.
const HEAD_LIMIT: usize = 64 * 1024;

/// How long a client may take to send its request head, by default.
pub const HEAD_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// A filtering proxy bound to its listener.
pub struct Proxy {
    listener: TcpListener,
    allow: Allowlist,
    head_timeout: std::time::Duration,
    denials: Denials,
    credentials: Option<Credentials>,
}

impl Proxy {
    /// A proxy serving `listener` under `allow`.
    pub fn new(listener: TcpListener, allow: Allowlist) -> Proxy {
        Proxy {
            listener,
            allow,
            head_timeout: HEAD_TIMEOUT,
            denials: Denials::default(),
            credentials: None,
        }
    }

    /// The proxy, closing a connection whose request head (or SOCKS
    /// greeting) has not come within `limit` ([`HEAD_TIMEOUT`] by default).
    pub fn with_head_timeout(mut self, limit: std::time::Duration) -> Proxy {
        self.head_timeout = limit;
        self
    }

    /// The proxy, refusing a client that does not show `credentials`
    /// (HTTP `407`, the SOCKS5 authentication failure).
    pub fn with_credentials(mut self, credentials: Credentials) -> Proxy {
        self.credentials = Some(credentials);
        self
    }

    /// Where it listens.
    pub fn local_addr(&self) -> std::io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    /// Its refusals.
    pub fn denials(&self) -> Denials {
        self.denials.clone()
    }

    /// Serves connections until the task is dropped; each on a task of its
    /// own. Its listening address is never a destination.
    pub async fn serve(self) {
        let gate = Arc::new(Gate {
            own: self.listener.local_addr().into_iter().collect(),
            allow: self.allow,
            head_timeout: self.head_timeout,
            denials: self.denials,
            names: Arc::default(),
            credentials: self.credentials,
            secrets: Secrets::default(),
            tls: None,
        });
        accept_loop(
            self.listener,
            Arc::new(Door::One(gate)),
            CancellationToken::new(),
            handle,
        )
        .await;
    }
}

/// Accepts connections on `listener` until `stop`, each handled by `on` on
/// a task of its own, which ends at `stop` too.
pub(crate) async fn accept_loop<S, F, Fut>(
    listener: TcpListener,
    state: Arc<S>,
    stop: CancellationToken,
    on: F,
) where
    S: Send + Sync + 'static,
    F: Fn(TcpStream, Arc<S>) -> Fut,
    Fut: std::future::Future<Output = std::io::Result<()>> + Send + 'static,
{
    loop {
        let accepted = tokio::select! {
            () = stop.cancelled() => return,
            a = listener.accept() => a,
        };
        let conn = match accepted {
            Ok((c, _)) => c,
            Err(e) => {
                tracing::warn!(error = %e, "network proxy: accept failed");
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                continue;
            }
        };
        let work = on(conn, state.clone());
        let stop = stop.clone();
        tokio::spawn(async move {
            tokio::select! {
                () = stop.cancelled() => {}
                r = work => if let Err(e) = r {
                    tracing::debug!(error = %e, "network proxy: connection ended");
                }
            }
        });
    }
}

/// One connection to the explicit proxy: SOCKS5 or HTTP.
pub(crate) async fn handle(conn: TcpStream, door: Arc<Door>) -> std::io::Result<()> {
    let door = &*door;
    conn.set_nodelay(true)?;
    let mut first = [0u8; 1];
    match tokio::time::timeout(door.head_timeout(), conn.peek(&mut first)).await {
        Ok(Ok(0)) | Err(_) => return Ok(()),
        Ok(r) => r?,
    };
    if first[0] == 5 {
        return crate::socks::handle(conn, door).await;
    }
    http(conn, door).await
}

/// One HTTP proxy connection: its head, then a tunnel or one upstream.
async fn http(mut conn: TcpStream, door: &Door) -> std::io::Result<()> {
    let read = tokio::time::timeout(door.head_timeout(), read_head(&mut conn)).await;
    let Ok(read) = read else {
        return respond(
            &mut conn,
            408,
            "toolsrv: the request head did not come in time",
        )
        .await;
    };
    let (head, rest) = match read? {
        Some(h) => h,
        None => {
            return respond(
                &mut conn,
                400,
                "toolsrv: the request head is too long or cut short",
            )
            .await
        }
    };
    let mut headers = [httparse::EMPTY_HEADER; 100];
    let mut req = httparse::Request::new(&mut headers);
    if !matches!(req.parse(&head), Ok(httparse::Status::Complete(_))) {
        return respond(
            &mut conn,
            400,
            "toolsrv: the request does not parse as HTTP/1.1",
        )
        .await;
    }
    let shown = req
        .headers
        .iter()
        .find(|h| h.name.eq_ignore_ascii_case("proxy-authorization"))
        .and_then(|h| basic_credentials(h.value));
    let gate = match shown {
        Some((user, password)) => door.admit(&user, &password),
        None => door.open(),
    };
    let Some(gate) = gate else {
        return respond(
            &mut conn,
            407,
            "toolsrv: this proxy takes only the credentials of a live run (the user-info of HTTP_PROXY in the run's environment)",
        )
        .await;
    };
    let shared = &*gate;
    let method = req.method.unwrap_or_default().to_string();
    let path = req.path.unwrap_or_default().to_string();
    let (target, origin) = match parse_target(&method, &path) {
        Ok(t) => t,
        Err(why) => {
            shared.record_malformed(path, why.to_string());
            return respond(&mut conn, 400, why).await;
        }
    };
    let mut up = match shared.connect(&target).await {
        Ok(u) => u,
        Err(r) => {
            let code = if matches!(r, Refusal::NoAddress { .. }) {
                502
            } else {
                403
            };
            return respond(&mut conn, code, &r.to_string()).await;
        }
    };
    if method.eq_ignore_ascii_case("CONNECT") {
        conn.write_all(b"HTTP/1.1 200 Connection established\r\n\r\n")
            .await?;
        return crate::intercept::tunnel(conn, rest, up, target, gate.clone()).await;
    }
    if gate
        .secrets
        .in_plain_http(&crate::allow::normalize(&target.host), target.port)
    {
        // A secret for plain HTTP to this host: its requests are read one
        // by one (this one first) to fill it in.
        let mut again = head;
        again.extend_from_slice(&rest);
        return crate::intercept::tunnel(conn, again, up, target, gate.clone()).await;
    }
    {
        let mut out = format!("{method} {origin} HTTP/1.1\r\n").into_bytes();
        for h in req.headers.iter() {
            let name = h.name.to_ascii_lowercase();
            if name == "proxy-connection" || name == "proxy-authorization" {
                continue;
            }
            out.extend_from_slice(h.name.as_bytes());
            out.extend_from_slice(b": ");
            out.extend_from_slice(h.value);
            out.extend_from_slice(b"\r\n");
        }
        out.extend_from_slice(b"\r\n");
        out.extend_from_slice(&rest);
        up.write_all(&out).await?;
    }
    crate::relay::relay(&mut conn, &mut up).await?;
    Ok(())
}

/// The target of a `CONNECT host:port` or an absolute-form `http://` URL,
/// and the origin-form path to send upstream.
fn parse_target(method: &str, path: &str) -> Result<(Target, String), &'static str> {
    if method.eq_ignore_ascii_case("CONNECT") {
        let t = authority(path, None).ok_or("toolsrv: CONNECT needs host:port")?;
        return Ok((t, String::new()));
    }
    let rest = path
        .strip_prefix("http://")
        .ok_or("toolsrv: this is a proxy: send an absolute http:// URL, or CONNECT for https")?;
    let (auth, origin) = match rest.find(['/', '?']) {
        Some(i) => (&rest[..i], rest[i..].to_string()),
        None => (rest, "/".to_string()),
    };
    let origin = if origin.starts_with('?') {
        format!("/{origin}")
    } else {
        origin
    };
    if auth.contains('@') {
        return Err("toolsrv: a URL with credentials in it is not proxied");
    }
    let t = authority(auth, Some(80)).ok_or("toolsrv: the URL names no host")?;
    Ok((t, origin))
}

/// `host:port`, `[v6]:port`, or a host alone with `default` as its port.
fn authority(s: &str, default: Option<u16>) -> Option<Target> {
    let (host, port) = if let Some(v6) = s.strip_prefix('[') {
        let (h, after) = v6.split_once(']')?;
        let port = match after.strip_prefix(':') {
            Some(p) => p.parse().ok()?,
            None if after.is_empty() => default?,
            None => return None,
        };
        (h.to_string(), port)
    } else {
        match s.rsplit_once(':') {
            Some((h, p)) => (h.to_string(), p.parse().ok()?),
            None => (s.to_string(), default?),
        }
    };
    (!host.is_empty() && port != 0).then_some(Target { host, port })
}

/// Reads up to the end of the head (`\r\n\r\n`): the head and what came
/// after it. `None` when the head is over [`HEAD_LIMIT`] or the peer closed.
async fn read_head(conn: &mut TcpStream) -> std::io::Result<Option<(Vec<u8>, Vec<u8>)>> {
    let mut buf = Vec::with_capacity(4096);
    let mut chunk = [0u8; 4096];
    loop {
        let n = conn.read(&mut chunk).await?;
        if n == 0 {
            return Ok(None);
        }
        let from = buf.len().saturating_sub(3);
        buf.extend_from_slice(&chunk[..n]);
        if let Some(i) = buf[from..].windows(4).position(|w| w == b"\r\n\r\n") {
            let end = from + i + 4;
            let rest = buf.split_off(end);
            return Ok(Some((buf, rest)));
        }
        if buf.len() > HEAD_LIMIT {
            return Ok(None);
        }
    }
}

/// The user name and password of a `Proxy-Authorization: Basic` value.
fn basic_credentials(value: &[u8]) -> Option<(Vec<u8>, Vec<u8>)> {
    use base64::Engine;
    let value = std::str::from_utf8(value).ok()?;
    let (scheme, token) = value.trim().split_once(' ')?;
    if !scheme.eq_ignore_ascii_case("basic") {
        return None;
    }
    let mut decoded = base64::engine::general_purpose::STANDARD
        .decode(token.trim())
        .ok()?;
    let colon = decoded.iter().position(|&b| b == b':')?;
    let password = decoded.split_off(colon + 1);
    decoded.pop();
    Some((decoded, password))
}

/// A short plain-text response that closes the connection.
async fn respond(conn: &mut TcpStream, code: u16, text: &str) -> std::io::Result<()> {
    let reason = match code {
        400 => "Bad Request",
        403 => "Forbidden",
        407 => "Proxy Authentication Required",
        408 => "Request Timeout",
        _ => "Bad Gateway",
    };
    let challenge = if code == 407 {
        "Proxy-Authenticate: Basic realm=\"toolsrv\"\r\n"
    } else {
        ""
    };
    let body = format!("{text}\n");
    let head = format!(
        "HTTP/1.1 {code} {reason}\r\n{challenge}Content-Type: text/plain; charset=utf-8\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    conn.write_all(head.as_bytes()).await?;
    conn.write_all(body.as_bytes()).await?;
    conn.shutdown().await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets_come_from_the_request_line() {
        let t = |m, p| parse_target(m, p).map(|(t, o)| (t.to_string(), o));
        assert_eq!(
            t("CONNECT", "pypi.org:443"),
            Ok(("pypi.org:443".into(), String::new()))
        );
        assert_eq!(
            t("CONNECT", "[::1]:8080"),
            Ok(("[::1]:8080".into(), String::new()))
        );
        assert_eq!(
            t("GET", "http://a.test/x?y"),
            Ok(("a.test:80".into(), "/x?y".into()))
        );
        assert_eq!(
            t("GET", "http://a.test:8080"),
            Ok(("a.test:8080".into(), "/".into()))
        );
        assert_eq!(
            t("GET", "http://a.test?q"),
            Ok(("a.test:80".into(), "/?q".into()))
        );
        assert!(t("GET", "/index.html").is_err());
        assert!(t("GET", "https://a.test/").is_err());
        assert!(t("GET", "http://u:p@a.test/").is_err());
        assert!(t("CONNECT", "pypi.org").is_err());
        assert!(t("CONNECT", "pypi.org:0").is_err());
    }
}
