//! Connections to a host some secret is bound to (docs/network.md,
//! "Secrets"): the proxy reads their requests to put the real values in
//! place of the placeholders in the headers. TLS (a first byte of 22, a
//! handshake record) is terminated with a certificate of the server's
//! authority and re-made upstream, verified; plain HTTP only for a secret
//! that says `plaintext`. Each request goes on as it came, its body
//! streamed through untouched; every other connection is relayed byte for
//! byte (`relay.rs`).

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::Bytes;
use http_body_util::{combinators::BoxBody, BodyExt, Full};
use hyper::body::Incoming;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use rustls_pki_types::ServerName;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;

use crate::allow::normalize;
use crate::decide::Target;
use crate::gate::Gate;

/// A TLS record's first byte: a handshake.
const TLS_HANDSHAKE: u8 = 22;

/// A stream that first yields bytes already read from it.
pub(crate) struct Prefixed {
    head: Vec<u8>,
    at: usize,
    inner: TcpStream,
}

impl Prefixed {
    pub(crate) fn new(head: Vec<u8>, inner: TcpStream) -> Prefixed {
        Prefixed { head, at: 0, inner }
    }
}

impl AsyncRead for Prefixed {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        if self.at < self.head.len() {
            let n = (self.head.len() - self.at).min(buf.remaining());
            let at = self.at;
            buf.put_slice(&self.head[at..at + n]);
            self.at += n;
            return Poll::Ready(Ok(()));
        }
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl AsyncWrite for Prefixed {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

/// A tunnel to `target` (`up`, connected and checked): intercepted when a
/// secret is bound to it, else relayed. `head` is what the client sent
/// already.
pub(crate) async fn tunnel(
    mut client: TcpStream,
    head: Vec<u8>,
    mut up: TcpStream,
    target: Target,
    gate: Arc<Gate>,
) -> std::io::Result<()> {
    let host = normalize(&target.host);
    let first = if gate.secrets.intercepts(&host, target.port) {
        match head.first() {
            Some(b) => Some(*b),
            None => {
                let mut b = [0u8; 1];
                let n = tokio::time::timeout(gate.head_timeout, client.peek(&mut b))
                    .await
                    .unwrap_or(Ok(0))?;
                if n == 0 {
                    return Ok(());
                }
                Some(b[0])
            }
        }
    } else {
        None
    };
    match (&gate.tls, first) {
        (Some(tls), Some(TLS_HANDSHAKE)) => {
            let config = tls
                .authority
                .server_config(&host)
                .map_err(std::io::Error::other)?;
            let client = tokio_rustls::TlsAcceptor::from(config)
                .accept(Prefixed::new(head, client))
                .await?;
            let name = ServerName::try_from(host).map_err(std::io::Error::other)?;
            let up = tokio_rustls::TlsConnector::from(tls.upstream.config())
                .connect(name, up)
                .await?;
            forward(TokioIo::new(client), TokioIo::new(up), target, gate, true).await
        }
        (_, Some(_)) if gate.secrets.in_plain_http(&host, target.port) => {
            let client = Prefixed::new(head, client);
            forward(TokioIo::new(client), TokioIo::new(up), target, gate, false).await
        }
        _ => {
            if !head.is_empty() {
                tokio::io::AsyncWriteExt::write_all(&mut up, &head).await?;
            }
            crate::relay::relay(&mut client, &mut up).await
        }
    }
}

type Body = BoxBody<Bytes, hyper::Error>;

/// Serves the client's requests one by one, each sent upstream with the
/// secrets bound to `target` filled in (over `tls` or plain HTTP).
async fn forward<C, U>(
    client: C,
    up: U,
    target: Target,
    gate: Arc<Gate>,
    tls: bool,
) -> std::io::Result<()>
where
    C: hyper::rt::Read + hyper::rt::Write + Unpin + Send + 'static,
    U: hyper::rt::Read + hyper::rt::Write + Unpin + Send + 'static,
{
    // Header names go on as the client wrote them.
    let (sender, conn) = hyper::client::conn::http1::Builder::new()
        .preserve_header_case(true)
        .handshake::<_, Incoming>(up)
        .await
        .map_err(std::io::Error::other)?;
    tokio::spawn(async move {
        let _ = conn.await;
    });
    let sender = Arc::new(tokio::sync::Mutex::new(sender));
    let service = hyper::service::service_fn(move |req: Request<Incoming>| {
        let (sender, gate, target) = (sender.clone(), gate.clone(), target.clone());
        async move { Ok::<_, std::convert::Infallible>(one(req, &sender, &gate, &target, tls).await) }
    });
    // The response goes back as the upstream sent it: no `Date` added.
    hyper::server::conn::http1::Builder::new()
        .preserve_header_case(true)
        .auto_date_header(false)
        .serve_connection(client, service)
        .await
        .map_err(std::io::Error::other)
}

/// One request: to `target` only, in origin form, without the proxy's
/// headers, the secrets filled in.
async fn one(
    mut req: Request<Incoming>,
    sender: &tokio::sync::Mutex<hyper::client::conn::http1::SendRequest<Incoming>>,
    gate: &Gate,
    target: &Target,
    tls: bool,
) -> Response<Body> {
    if let Some(authority) = req.uri().authority() {
        let port = authority.port_u16().unwrap_or(if tls { 443 } else { 80 });
        if normalize(authority.host()) != normalize(&target.host) || port != target.port {
            return text(
                StatusCode::BAD_REQUEST,
                format!("toolsrv: this connection goes to {target}; a request for {authority} needs a connection of its own"),
            );
        }
        let origin = req
            .uri()
            .path_and_query()
            .map_or("/", |p| p.as_str())
            .to_string();
        if let Ok(uri) = origin.parse() {
            *req.uri_mut() = uri;
        }
    }
    let headers = req.headers_mut();
    headers.remove(hyper::header::PROXY_AUTHORIZATION);
    headers.remove("proxy-connection");
    gate.secrets.fill(headers, &target.host, target.port, tls);
    let mut sender = sender.lock().await;
    if sender.ready().await.is_err() {
        return text(
            StatusCode::BAD_GATEWAY,
            format!("toolsrv: {target} closed the connection"),
        );
    }
    match sender.send_request(req).await {
        Ok(r) => r.map(BodyExt::boxed),
        Err(e) => text(
            StatusCode::BAD_GATEWAY,
            format!("toolsrv: {target} did not answer: {e}"),
        ),
    }
}

fn text(code: StatusCode, body: String) -> Response<Body> {
    let mut r = Response::new(
        Full::new(Bytes::from(format!("{body}\n")))
            .map_err(|never| match never {})
            .boxed(),
    );
    *r.status_mut() = code;
    r
}
