//! HTTP CONNECT, absolute-form HTTP and SOCKS5 through the proxy: allowed
//! targets reach their upstream and nothing else; refused ones never do,
//! and the refusal names the host and the line that would allow it.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use toolsrv_netproxy::{Allowlist, Denials, Proxy};

const WAIT: Duration = Duration::from_secs(10);
const LOOPBACK: IpAddr = IpAddr::V4(Ipv4Addr::LOCALHOST);

/// An upstream on loopback: it counts connections, reads one request head
/// (or 5 bytes, for a tunnel's raw greeting) and answers with what it read.
struct Upstream {
    addr: SocketAddr,
    accepted: Arc<AtomicUsize>,
}

async fn upstream() -> Upstream {
    let l = TcpListener::bind((LOOPBACK, 0)).await.unwrap();
    let addr = l.local_addr().unwrap();
    let accepted = Arc::new(AtomicUsize::new(0));
    let count = accepted.clone();
    tokio::spawn(async move {
        while let Ok((mut c, _)) = l.accept().await {
            count.fetch_add(1, Ordering::SeqCst);
            tokio::spawn(async move {
                let mut got = Vec::new();
                let mut b = [0u8; 1024];
                while !got.windows(4).any(|w| w == b"\r\n\r\n") && !got.starts_with(b"hello") {
                    match c.read(&mut b).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => got.extend_from_slice(&b[..n]),
                    }
                }
                let body = String::from_utf8_lossy(&got).into_owned();
                let reply = format!(
                    "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                    body.len()
                );
                let _ = c.write_all(reply.as_bytes()).await;
                let _ = c.shutdown().await;
            });
        }
    });
    Upstream { addr, accepted }
}

/// A proxy allowing `domains` with `pins` (name → loopback), serving on a
/// task; its address and its denials.
async fn proxy(domains: &[&str], pins: &[&str]) -> (SocketAddr, Denials) {
    let domains: Vec<String> = domains.iter().map(|s| s.to_string()).collect();
    let pins: Vec<(String, Vec<IpAddr>)> = pins
        .iter()
        .map(|n| (n.to_string(), vec![LOOPBACK]))
        .collect();
    let allow = Allowlist::new(&domains, &pins).unwrap();
    let l = TcpListener::bind((LOOPBACK, 0)).await.unwrap();
    let p = Proxy::new(l, allow);
    let addr = p.local_addr().unwrap();
    let denials = p.denials();
    tokio::spawn(p.serve());
    (addr, denials)
}

/// Sends `bytes` to the proxy and reads everything until it closes.
async fn exchange(proxy: SocketAddr, bytes: &[u8]) -> String {
    let mut c = TcpStream::connect(proxy).await.unwrap();
    c.write_all(bytes).await.unwrap();
    let mut out = Vec::new();
    tokio::time::timeout(WAIT, c.read_to_end(&mut out))
        .await
        .expect("the proxy answers in time")
        .unwrap();
    String::from_utf8_lossy(&out).into_owned()
}

#[tokio::test]
async fn a_connect_to_a_listed_name_is_tunnelled_to_its_pinned_upstream_whatever_host_it_names_inside(
) {
    let up = upstream().await;
    let port = up.addr.port();
    let (p, denials) = proxy(&[&format!("up.test:{port}")], &["up.test"]).await;
    let out = exchange(
        p,
        format!("CONNECT up.test:{port} HTTP/1.1\r\nHost: up.test\r\n\r\nGET / HTTP/1.1\r\nHost: evil.test\r\n\r\n").as_bytes(),
    )
    .await;
    assert!(
        out.starts_with("HTTP/1.1 200 Connection established\r\n\r\nHTTP/1.1 200 OK"),
        "{out}"
    );
    assert!(
        out.contains("Host: evil.test"),
        "the tunnel carried the bytes as sent: {out}"
    );
    assert_eq!(up.accepted.load(Ordering::SeqCst), 1);
    assert!(denials.list().is_empty());
}

#[tokio::test]
async fn an_absolute_form_request_reaches_its_upstream_in_origin_form_without_proxy_headers() {
    let up = upstream().await;
    let port = up.addr.port();
    let (p, _) = proxy(&[&format!("up.test:{port}")], &["up.test"]).await;
    let out = exchange(
        p,
        format!("GET http://up.test:{port}/simple/six/?x=1 HTTP/1.1\r\nHost: up.test\r\nProxy-Connection: keep-alive\r\nProxy-Authorization: Basic eA==\r\n\r\n").as_bytes(),
    )
    .await;
    assert!(out.starts_with("HTTP/1.1 200 OK"), "{out}");
    assert!(out.contains("GET /simple/six/?x=1 HTTP/1.1\r\n"), "{out}");
    assert!(!out.to_ascii_lowercase().contains("proxy-"), "{out}");
}

#[tokio::test]
async fn an_unlisted_host_is_refused_with_the_line_that_would_allow_it_and_its_upstream_is_never_reached(
) {
    let up = upstream().await;
    let port = up.addr.port();
    let (p, denials) = proxy(&["pypi.org"], &["evil.test"]).await;
    for request in [
        format!("CONNECT evil.test:{port} HTTP/1.1\r\n\r\n"),
        format!("GET http://evil.test:{port}/ HTTP/1.1\r\nHost: pypi.org\r\n\r\n"),
    ] {
        let out = exchange(p, request.as_bytes()).await;
        assert!(out.starts_with("HTTP/1.1 403 Forbidden"), "{out}");
        assert!(
            out.contains(&format!("evil.test:{port} is not allowed by the sandbox's network.domains; the line \"evil.test:{port}\" there would allow it")),
            "{out}"
        );
    }
    assert_eq!(
        up.accepted.load(Ordering::SeqCst),
        0,
        "the upstream was reached"
    );
    let d = denials.list();
    assert_eq!(d.len(), 2, "{d:?}");
    assert_eq!(d[0].target, format!("evil.test:{port}"));
}

#[tokio::test]
async fn an_address_an_unpinned_name_on_loopback_and_the_proxy_itself_are_refused() {
    let up = upstream().await;
    let port = up.addr.port();
    let (p, _) = proxy(&[&format!("localhost:{port}"), "self.test:1"], &[]).await;
    for (authority, said) in [
        (format!("127.0.0.1:{port}"), "is an address"),
        (format!("[::ffff:127.0.0.1]:{port}"), "is an address"),
        (
            format!("localhost:{port}"),
            "a loopback address, which the sandbox does not connect to; pin the name in network.hosts",
        ),
    ] {
        let out = exchange(p, format!("CONNECT {authority} HTTP/1.1\r\n\r\n").as_bytes()).await;
        assert!(out.starts_with("HTTP/1.1 403") && out.contains(said), "{authority}: {out}");
    }
    assert_eq!(up.accepted.load(Ordering::SeqCst), 0);
    // A name pinned to the proxy's own address: a request that would come back.
    let l = TcpListener::bind((LOOPBACK, 0)).await.unwrap();
    let own = l.local_addr().unwrap();
    let allow = Allowlist::new(
        &[format!("self.test:{}", own.port())],
        &[("self.test".into(), vec![LOOPBACK])],
    )
    .unwrap();
    let px = Proxy::new(l, allow);
    tokio::spawn(px.serve());
    let back = exchange(
        own,
        format!("CONNECT self.test:{} HTTP/1.1\r\n\r\n", own.port()).as_bytes(),
    )
    .await;
    assert!(
        back.starts_with("HTTP/1.1 403") && back.contains("is this proxy"),
        "{back}"
    );
}

#[tokio::test]
async fn a_request_that_is_not_for_a_proxy_gets_400() {
    let (p, denials) = proxy(&["pypi.org"], &[]).await;
    let out = exchange(p, b"GET /index.html HTTP/1.1\r\nHost: pypi.org\r\n\r\n").await;
    assert!(
        out.starts_with("HTTP/1.1 400") && out.contains("absolute http:// URL"),
        "{out}"
    );
    let out = exchange(p, b"GET https://pypi.org/ HTTP/1.1\r\n\r\n").await;
    assert!(out.starts_with("HTTP/1.1 400"), "{out}");
    // Each is recorded with the text the client read.
    let d = denials.list();
    assert_eq!(d.len(), 2, "{d:?}");
    assert_eq!(d[0].target, "/index.html");
    assert!(out.contains(&d[1].reason), "{d:?}");
}

/// A SOCKS5 CONNECT for `host` (a name, `socks5h`) and `port`: the reply's
/// code, and what came after it.
async fn socks(proxy: SocketAddr, host: &[u8], atyp: u8, port: u16) -> (u8, String) {
    let mut c = TcpStream::connect(proxy).await.unwrap();
    c.write_all(&[5, 1, 0]).await.unwrap();
    let mut hello = [0u8; 2];
    c.read_exact(&mut hello).await.unwrap();
    assert_eq!(hello, [5, 0]);
    let mut req = vec![5, 1, 0, atyp];
    if atyp == 3 {
        req.push(u8::try_from(host.len()).unwrap());
    }
    req.extend_from_slice(host);
    req.extend_from_slice(&port.to_be_bytes());
    c.write_all(&req).await.unwrap();
    let mut reply = [0u8; 10];
    c.read_exact(&mut reply).await.unwrap();
    if reply[1] == 0 {
        c.write_all(b"hello").await.unwrap();
    }
    let mut rest = Vec::new();
    tokio::time::timeout(WAIT, c.read_to_end(&mut rest))
        .await
        .expect("in time")
        .unwrap();
    (reply[1], String::from_utf8_lossy(&rest).into_owned())
}

#[tokio::test]
async fn socks5_connects_a_listed_name_and_refuses_an_unlisted_one_and_an_address() {
    let up = upstream().await;
    let port = up.addr.port();
    let (p, denials) = proxy(&[&format!("up.test:{port}")], &["up.test", "evil.test"]).await;
    let (code, rest) = socks(p, b"up.test", 3, port).await;
    assert_eq!(code, 0);
    assert!(rest.ends_with("hello"), "{rest}");
    let (code, _) = socks(p, b"evil.test", 3, port).await;
    assert_eq!(code, 2, "not allowed by ruleset");
    let (code, _) = socks(p, &[127, 0, 0, 1], 1, port).await;
    assert_eq!(code, 2);
    assert_eq!(up.accepted.load(Ordering::SeqCst), 1);
    assert_eq!(denials.list().len(), 2);
}

#[tokio::test]
async fn a_client_that_never_sends_its_head_is_answered_408_and_closed() {
    let l = TcpListener::bind((LOOPBACK, 0)).await.unwrap();
    let addr = l.local_addr().unwrap();
    let p = Proxy::new(l, Allowlist::default()).with_head_timeout(Duration::from_millis(200));
    tokio::spawn(p.serve());
    let out = exchange(addr, b"CONNECT pypi.org:443 HTTP/1.1\r\n").await;
    assert!(out.starts_with("HTTP/1.1 408 Request Timeout"), "{out}");
    // A SOCKS client that stops after its greeting is closed too.
    let mut c = TcpStream::connect(addr).await.unwrap();
    c.write_all(&[5, 1, 0]).await.unwrap();
    let mut out = Vec::new();
    tokio::time::timeout(WAIT, c.read_to_end(&mut out))
        .await
        .expect("closed in time")
        .unwrap();
    assert_eq!(out, [5, 0]);
}

/// 8 MiB of a pattern through a tunnel to an echo upstream and back: every
/// byte arrives in order both ways, and the client's half close reaches
/// the upstream (which then closes, ending the tunnel).
#[tokio::test]
async fn a_tunnel_carries_megabytes_both_ways_in_order_and_passes_a_half_close_on() {
    let l = TcpListener::bind((LOOPBACK, 0)).await.unwrap();
    let port = l.local_addr().unwrap().port();
    tokio::spawn(async move {
        let (mut c, _) = l.accept().await.unwrap();
        let (mut r, mut w) = c.split();
        tokio::io::copy(&mut r, &mut w).await.unwrap();
        w.shutdown().await.unwrap();
    });
    let (p, _) = proxy(&[&format!("echo.test:{port}")], &["echo.test"]).await;
    let mut c = TcpStream::connect(p).await.unwrap();
    c.write_all(format!("CONNECT echo.test:{port} HTTP/1.1\r\n\r\n").as_bytes())
        .await
        .unwrap();
    let want = b"HTTP/1.1 200 Connection established\r\n\r\n";
    let mut got = vec![0u8; want.len()];
    c.read_exact(&mut got).await.unwrap();
    assert_eq!(got, want);
    let data: Vec<u8> = (0..8u32 << 20).map(|i| (i % 251) as u8).collect();
    let (mut r, mut w) = c.into_split();
    let sent = data.clone();
    let writer = tokio::spawn(async move {
        w.write_all(&sent).await.unwrap();
        w.shutdown().await.unwrap();
    });
    let mut back = Vec::new();
    tokio::time::timeout(WAIT, r.read_to_end(&mut back))
        .await
        .expect("the echo ends in time")
        .unwrap();
    writer.await.unwrap();
    assert_eq!(back.len(), data.len());
    assert!(back == data, "the bytes came back changed");
}

/// `Proxy-Authorization: Basic` of `user:password`.
fn basic(user: &str, password: &str) -> String {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"))
}

#[tokio::test]
async fn the_shared_proxy_admits_each_run_by_its_own_credentials_under_its_own_list_and_an_ended_run_not_at_all(
) {
    use toolsrv_netproxy::{Credentials, SharedProxy};
    let up = upstream().await;
    let port = up.addr.port();
    let shared = SharedProxy::start().await.unwrap();
    let pins = vec![("up.test".to_string(), vec![LOOPBACK])];
    let allowed = Allowlist::new(&[format!("up.test:{port}")], &pins).unwrap();
    let other = Allowlist::new(&["pypi.org".to_string()], &pins).unwrap();
    let a = Credentials::fresh("run-a");
    let b = Credentials::fresh("run-b");
    let ra = shared.register(allowed, a.clone(), Default::default(), None);
    let rb = shared.register(other, b.clone(), Default::default(), None);
    let get = |c: &Credentials| {
        format!(
            "GET http://up.test:{port}/ HTTP/1.1\r\nHost: up.test\r\nProxy-Authorization: Basic {}\r\n\r\n",
            basic(&c.user, &c.password)
        )
    };
    let addr = shared.local_addr();
    assert!(exchange(addr, get(&a).as_bytes())
        .await
        .starts_with("HTTP/1.1 200"));
    // Run b's list does not name up.test: its own rules, not a's.
    let out = exchange(addr, get(&b).as_bytes()).await;
    assert!(out.starts_with("HTTP/1.1 403"), "{out}");
    assert_eq!(rb.denials().list().len(), 1);
    assert!(ra.denials().list().is_empty());
    // a's user name with b's password, no credentials, and a after its end.
    let mixed = Credentials {
        user: a.user.clone(),
        password: b.password.clone(),
    };
    let bare = format!("GET http://up.test:{port}/ HTTP/1.1\r\nHost: up.test\r\n\r\n");
    for req in [get(&mixed), bare] {
        let out = exchange(addr, req.as_bytes()).await;
        assert!(out.starts_with("HTTP/1.1 407"), "{out}");
    }
    drop(ra);
    let out = exchange(addr, get(&a).as_bytes()).await;
    assert!(out.starts_with("HTTP/1.1 407"), "{out}");
    assert_eq!(up.accepted.load(Ordering::SeqCst), 1);
}
