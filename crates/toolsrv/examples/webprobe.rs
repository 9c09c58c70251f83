//! A probe run as a tool by the `network.domains` tests
//! (`tests/sandbox_domains.rs`): one request through the run's network, its
//! answer (or the OS error) printed.
//!
//! Usage:
//! - `webprobe resolve NAME`: the addresses `NAME` resolves to;
//! - `webprobe get HOST PORT`: `GET /` straight to `HOST:PORT` (a program
//!   that ignores the proxy variables), the response printed;
//! - `webprobe proxy-get HOST PORT [USER:PASSWORD]`: the same in absolute
//!   form through `$HTTP_PROXY`, with its credentials or the ones given;
//! - `webprobe proxy-connect HOST PORT`: a `CONNECT` through `$HTTP_PROXY`,
//!   then `GET /` inside the tunnel;
//! - `webprobe socks HOST PORT`: a SOCKS5 `CONNECT` through `$ALL_PROXY`
//!   (user name and password), then `GET /`; prints `socks reply N` when
//!   refused;
//! - `webprobe udp ADDRESS PORT`: one datagram to a literal address;
//! - `webprobe tls-get HOST PORT VAR [direct]`: `GET /` over TLS with
//!   `Authorization: Bearer $VAR`, through a `CONNECT` of `$HTTPS_PROXY`
//!   (or straight to `HOST:PORT` with `direct`), trusting only the bundle
//!   `$SSL_CERT_FILE` names; the response printed;
//! - `webprobe plain-get HOST PORT VAR`: `GET http://HOST:PORT/` through
//!   `$HTTP_PROXY` with `Authorization: Bearer $VAR`.

// Test code: an unexpected failure is a panic that names it.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::{self, Read, Write};
use std::net::{TcpStream, ToSocketAddrs, UdpSocket};
use std::process::ExitCode;
use std::time::Duration;

use base64::Engine;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let words: Vec<&str> = args.iter().map(String::as_str).collect();
    let result = match words.as_slice() {
        ["resolve", name] => (*name, 0)
            .to_socket_addrs()
            .map(|a| a.map(|a| a.ip().to_string()).collect::<Vec<_>>().join(" ")),
        ["get", host, port] => connect(&format!("{host}:{port}")).and_then(|s| get(s, host)),
        ["proxy-get", host, port, rest @ ..] => proxy_get(host, port, rest.first().copied()),
        ["proxy-connect", host, port] => proxy_connect(host, port),
        ["socks", host, port] => socks(host, port),
        ["tls-get", host, port, var, rest @ ..] => tls_get(host, port, var, rest == ["direct"]),
        ["plain-get", host, port, var] => plain_get(host, port, var),
        ["udp", addr, port] => UdpSocket::bind("0.0.0.0:0")
            .and_then(|s| s.send_to(b"probe", format!("{addr}:{port}")))
            .map(|n| format!("sent {n}")),
        _ => Err(io::Error::other(format!("unknown probe {words:?}"))),
    };
    match result {
        Ok(text) => {
            let _ = writeln!(io::stdout(), "{text}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            let _ = writeln!(io::stdout(), "{e}");
            ExitCode::FAILURE
        }
    }
}

fn connect(addr: &str) -> io::Result<TcpStream> {
    let s = TcpStream::connect(addr)?;
    s.set_read_timeout(Some(Duration::from_secs(10)))?;
    Ok(s)
}

/// `GET /` on `s` and the whole response.
fn get(mut s: TcpStream, host: &str) -> io::Result<String> {
    write!(s, "GET / HTTP/1.0\r\nHost: {host}\r\n\r\n")?;
    read_all(s)
}

fn read_all(mut s: TcpStream) -> io::Result<String> {
    let mut out = Vec::new();
    s.read_to_end(&mut out)?;
    if out.is_empty() {
        return Err(io::Error::other("closed without a response"));
    }
    Ok(String::from_utf8_lossy(&out).into_owned())
}

/// The proxy of `$NAME` (`scheme://user:password@host:port`): its address
/// and its user-info.
fn proxy(name: &str) -> io::Result<(String, String)> {
    let url = std::env::var(name).map_err(|_| io::Error::other(format!("{name} is not set")))?;
    let rest = url
        .split_once("://")
        .map(|(_, r)| r)
        .ok_or_else(|| io::Error::other(format!("{name}: no scheme")))?;
    let (auth, addr) = rest
        .rsplit_once('@')
        .ok_or_else(|| io::Error::other(format!("{name}: no user-info")))?;
    Ok((addr.trim_end_matches('/').to_string(), auth.to_string()))
}

fn basic(auth: &str) -> String {
    base64::engine::general_purpose::STANDARD.encode(auth)
}

fn proxy_get(host: &str, port: &str, auth: Option<&str>) -> io::Result<String> {
    let (addr, own) = proxy("HTTP_PROXY")?;
    let mut s = connect(&addr)?;
    write!(
        s,
        "GET http://{host}:{port}/ HTTP/1.0\r\nHost: {host}\r\nProxy-Authorization: Basic {}\r\n\r\n",
        basic(auth.unwrap_or(&own))
    )?;
    read_all(s)
}

/// A `CONNECT` to `host:port` through the proxy of `$var`: the tunnel, or
/// the proxy's answer when it refused (its head and body).
fn tunnel(var: &str, host: &str, port: &str) -> io::Result<Result<TcpStream, String>> {
    let (addr, own) = proxy(var)?;
    let mut s = connect(&addr)?;
    write!(
        s,
        "CONNECT {host}:{port} HTTP/1.1\r\nHost: {host}:{port}\r\nProxy-Authorization: Basic {}\r\n\r\n",
        basic(&own)
    )?;
    let mut head = Vec::new();
    let mut b = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        if s.read(&mut b)? == 0 {
            break;
        }
        head.push(b[0]);
    }
    let head = String::from_utf8_lossy(&head).into_owned();
    if !head.starts_with("HTTP/1.1 200") {
        let rest = read_all(s).unwrap_or_default();
        return Ok(Err(format!("{head}{rest}")));
    }
    Ok(Ok(s))
}

fn proxy_connect(host: &str, port: &str) -> io::Result<String> {
    match tunnel("HTTP_PROXY", host, port)? {
        Ok(s) => get(s, host),
        Err(refused) => Ok(refused),
    }
}

fn socks(host: &str, port: &str) -> io::Result<String> {
    let (addr, auth) = proxy("ALL_PROXY")?;
    let (user, password) = auth.split_once(':').unwrap_or((&auth, ""));
    let port: u16 = port.parse().map_err(io::Error::other)?;
    let mut s = connect(&addr)?;
    s.write_all(&[5, 1, 2])?;
    let mut r = [0u8; 2];
    s.read_exact(&mut r)?;
    let mut login = vec![1, user.len() as u8];
    login.extend_from_slice(user.as_bytes());
    login.push(password.len() as u8);
    login.extend_from_slice(password.as_bytes());
    s.write_all(&login)?;
    s.read_exact(&mut r)?;
    if r != [1, 0] {
        return Ok(format!("socks login refused {r:?}"));
    }
    let mut req = vec![5, 1, 0, 3, host.len() as u8];
    req.extend_from_slice(host.as_bytes());
    req.extend_from_slice(&port.to_be_bytes());
    s.write_all(&req)?;
    let mut reply = [0u8; 10];
    s.read_exact(&mut reply)?;
    if reply[1] != 0 {
        return Ok(format!("socks reply {}", reply[1]));
    }
    get(s, host)
}

/// The token in `$VAR`.
fn token(var: &str) -> io::Result<String> {
    std::env::var(var).map_err(|_| io::Error::other(format!("{var} is not set")))
}

fn plain_get(host: &str, port: &str, var: &str) -> io::Result<String> {
    let (addr, own) = proxy("HTTP_PROXY")?;
    let mut s = connect(&addr)?;
    write!(
        s,
        "GET http://{host}:{port}/ HTTP/1.1\r\nHost: {host}\r\nAuthorization: Bearer {}\r\nProxy-Authorization: Basic {}\r\nConnection: close\r\n\r\n",
        token(var)?,
        basic(&own)
    )?;
    read_all(s)
}

fn tls_get(host: &str, port: &str, var: &str, direct: bool) -> io::Result<String> {
    use rustls_pki_types::pem::PemObject;
    let bundle =
        std::env::var("SSL_CERT_FILE").map_err(|_| io::Error::other("SSL_CERT_FILE is not set"))?;
    let pem = std::fs::read(&bundle)?;
    let mut roots = rustls::RootCertStore::empty();
    for c in rustls_pki_types::CertificateDer::pem_slice_iter(&pem).flatten() {
        let _ = roots.add(c);
    }
    let config = rustls::ClientConfig::builder_with_provider(std::sync::Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .map_err(io::Error::other)?
    .with_root_certificates(roots)
    .with_no_client_auth();
    let mut sock = if direct {
        connect(&format!("{host}:{port}"))?
    } else {
        match tunnel("HTTPS_PROXY", host, port)? {
            Ok(s) => s,
            Err(refused) => return Ok(refused),
        }
    };
    let name =
        rustls_pki_types::ServerName::try_from(host.to_string()).map_err(io::Error::other)?;
    let conn = rustls::ClientConnection::new(std::sync::Arc::new(config), name)
        .map_err(io::Error::other)?;
    let mut tls = rustls::StreamOwned::new(conn, &mut sock);
    write!(
        tls,
        "GET / HTTP/1.1\r\nHost: {host}\r\nAuthorization: Bearer {}\r\nConnection: close\r\n\r\n",
        token(var)?
    )?;
    let mut out = Vec::new();
    match tls.read_to_end(&mut out) {
        Ok(_) => {}
        Err(e) if !out.is_empty() && e.kind() == io::ErrorKind::UnexpectedEof => {}
        Err(e) => return Err(e),
    }
    Ok(String::from_utf8_lossy(&out).into_owned())
}
