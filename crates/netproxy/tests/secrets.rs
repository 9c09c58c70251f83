//! Secrets through the proxy: the real value goes into the request headers
//! to the secret's hosts only, over TLS the proxy terminated with its own
//! authority and verified upstream (a test authority here), or plain HTTP
//! only when the secret says `plaintext`; every other host gets the
//! placeholder untouched.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use rcgen::{BasicConstraints, CertificateParams, IsCa, Issuer, KeyPair};
use rustls_pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer, ServerName};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use toolsrv_netproxy::{
    Allowlist, Authority, Credentials, Interception, Secret, Secrets, SharedProxy, Upstream,
};

const LOOPBACK: IpAddr = IpAddr::V4(Ipv4Addr::LOCALHOST);
const WAIT: Duration = Duration::from_secs(10);
const VALUE: &str = "ghp_RealTokenRealToken1234567890abcdefgh";

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// A test authority's PEM and a TLS server config for `names` it signed.
fn test_pki(names: &[&str]) -> (String, Arc<rustls::ServerConfig>) {
    let mut ca = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca_key = KeyPair::generate().unwrap();
    let ca_cert = ca.self_signed(&ca_key).unwrap();
    let issuer = Issuer::new(ca, ca_key);
    let leaf =
        CertificateParams::new(names.iter().map(|s| s.to_string()).collect::<Vec<_>>()).unwrap();
    let key = KeyPair::generate().unwrap();
    let cert = leaf.signed_by(&key, &issuer).unwrap();
    let config = rustls::ServerConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(
            vec![cert.der().clone()],
            PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der())),
        )
        .unwrap();
    (ca_cert.pem(), Arc::new(config))
}

/// An upstream answering each request with the head it read, over TLS
/// with `tls`, else plain.
async fn echo(tls: Option<Arc<rustls::ServerConfig>>) -> SocketAddr {
    let l = TcpListener::bind((LOOPBACK, 0)).await.unwrap();
    let addr = l.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((c, _)) = l.accept().await {
            let tls = tls.clone();
            tokio::spawn(async move {
                match tls {
                    Some(cfg) => {
                        if let Ok(s) = tokio_rustls::TlsAcceptor::from(cfg).accept(c).await {
                            answer(s).await;
                        }
                    }
                    None => answer(c).await,
                }
            });
        }
    });
    addr
}

async fn answer<S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin>(mut s: S) {
    let mut got = Vec::new();
    let mut b = [0u8; 4096];
    while !got.windows(4).any(|w| w == b"\r\n\r\n") {
        match s.read(&mut b).await {
            Ok(0) | Err(_) => return,
            Ok(n) => got.extend_from_slice(&b[..n]),
        }
    }
    let body = String::from_utf8_lossy(&got).into_owned();
    let reply = format!(
        "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    let _ = s.write_all(reply.as_bytes()).await;
    let _ = s.shutdown().await;
}

fn basic(c: &Credentials) -> String {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.encode(format!("{}:{}", c.user, c.password))
}

async fn read_to_end<S: tokio::io::AsyncRead + Unpin>(s: &mut S) -> String {
    let mut out = Vec::new();
    let _ = tokio::time::timeout(WAIT, s.read_to_end(&mut out))
        .await
        .expect("an answer in time");
    String::from_utf8_lossy(&out).into_owned()
}

/// `GET /` with `Authorization: Bearer <token>` through a `CONNECT` to
/// `host:port`, in TLS trusting `roots`: what the upstream read.
async fn through_tls(
    proxy: SocketAddr,
    creds: &Credentials,
    host: &str,
    port: u16,
    roots: &str,
    token: &str,
) -> String {
    let mut c = TcpStream::connect(proxy).await.unwrap();
    let req = format!(
        "CONNECT {host}:{port} HTTP/1.1\r\nHost: {host}\r\nProxy-Authorization: Basic {}\r\n\r\n",
        basic(creds)
    );
    c.write_all(req.as_bytes()).await.unwrap();
    let mut head = Vec::new();
    let mut b = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        assert_eq!(c.read(&mut b).await.unwrap(), 1, "the proxy closed");
        head.push(b[0]);
    }
    assert!(
        head.starts_with(b"HTTP/1.1 200"),
        "{:?}",
        String::from_utf8_lossy(&head)
    );
    use rustls_pki_types::pem::PemObject;
    let mut store = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(roots.as_bytes()) {
        store.add(cert.unwrap()).unwrap();
    }
    let config = rustls::ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(store)
        .with_no_client_auth();
    let name = ServerName::try_from(host.to_string()).unwrap();
    let mut tls = tokio_rustls::TlsConnector::from(Arc::new(config))
        .connect(name, c)
        .await
        .expect("the TLS handshake");
    let req = format!(
        "GET / HTTP/1.1\r\nHost: {host}\r\nAuthorization: Bearer {token}\r\nConnection: close\r\n\r\n"
    );
    tls.write_all(req.as_bytes()).await.unwrap();
    read_to_end(&mut tls).await
}

#[tokio::test]
async fn a_secret_goes_in_its_hosts_headers_over_verified_tls_and_nowhere_else() {
    let (test_ca, upstream_tls) = test_pki(&["up.test", "other.test"]);
    let up = echo(Some(upstream_tls)).await;
    let plain_up = echo(None).await;
    let pins = vec![
        ("up.test".to_string(), vec![LOOPBACK]),
        ("other.test".to_string(), vec![LOOPBACK]),
    ];
    let lines = vec![
        format!("up.test:{}", up.port()),
        format!("other.test:{}", up.port()),
        format!("up.test:{}", plain_up.port()),
    ];
    let allow = Allowlist::new(&lines, &pins).unwrap();
    let secret = Secret::new("GH_TOKEN", VALUE.into(), &["up.test".into()], false);
    let placeholder = secret.placeholder.clone();
    assert_eq!(placeholder.len(), VALUE.len());
    assert!(placeholder.starts_with("ghp_") && placeholder != VALUE);
    let authority = Arc::new(Authority::new().unwrap());
    let interception = Interception {
        authority: authority.clone(),
        upstream: Upstream::from_pem(&test_ca).unwrap(),
    };
    let shared = SharedProxy::start().await.unwrap();
    let creds = Credentials::fresh("run-1");
    let _r = shared.register(
        allow,
        creds.clone(),
        Secrets::new(vec![secret]),
        Some(interception),
    );
    let proxy = shared.local_addr();
    // Its host, through the proxy's own certificate: the value.
    let seen = through_tls(
        proxy,
        &creds,
        "up.test",
        up.port(),
        authority.certificate_pem(),
        &placeholder,
    )
    .await;
    assert!(seen.starts_with("HTTP/1.1 200"), "{seen}");
    assert!(seen.contains(&format!("Bearer {VALUE}")), "{seen}");
    assert!(!seen.contains(&placeholder), "{seen}");
    // Another host: tunnelled untouched (the upstream's own certificate).
    let seen = through_tls(
        proxy,
        &creds,
        "other.test",
        up.port(),
        &test_ca,
        &placeholder,
    )
    .await;
    assert!(seen.contains(&format!("Bearer {placeholder}")), "{seen}");
    assert!(!seen.contains(VALUE), "{seen}");
    // Plain HTTP to its host without `plaintext`: untouched.
    let mut c = TcpStream::connect(proxy).await.unwrap();
    let req = format!(
        "GET http://up.test:{}/ HTTP/1.1\r\nHost: up.test\r\nAuthorization: Bearer {placeholder}\r\nProxy-Authorization: Basic {}\r\nConnection: close\r\n\r\n",
        plain_up.port(),
        basic(&creds)
    );
    c.write_all(req.as_bytes()).await.unwrap();
    let seen = read_to_end(&mut c).await;
    assert!(seen.contains(&format!("Bearer {placeholder}")), "{seen}");
    assert!(
        !seen.contains(VALUE) && !seen.contains("Proxy-Authorization"),
        "{seen}"
    );
}

#[tokio::test]
async fn a_plaintext_secret_goes_into_plain_http_to_its_host_request_by_request() {
    let plain_up = echo(None).await;
    let pins = vec![("up.test".to_string(), vec![LOOPBACK])];
    let allow = Allowlist::new(&[format!("up.test:{}", plain_up.port())], &pins).unwrap();
    let secret = Secret::new(
        "API_KEY",
        "sk-live-abcdef123456".into(),
        &["up.test".into()],
        true,
    );
    let placeholder = secret.placeholder.clone();
    let shared = SharedProxy::start().await.unwrap();
    let creds = Credentials::fresh("run-2");
    let _r = shared.register(allow, creds.clone(), Secrets::new(vec![secret]), None);
    let mut c = TcpStream::connect(shared.local_addr()).await.unwrap();
    let req = format!(
        "GET http://up.test:{}/a HTTP/1.1\r\nHost: up.test\r\nX-Key: {placeholder}\r\nProxy-Authorization: Basic {}\r\nConnection: close\r\n\r\n",
        plain_up.port(),
        basic(&creds)
    );
    c.write_all(req.as_bytes()).await.unwrap();
    let seen = read_to_end(&mut c).await;
    assert!(seen.starts_with("HTTP/1.1 200"), "{seen}");
    assert!(seen.contains("GET /a HTTP/1.1"), "origin form: {seen}");
    assert!(seen.contains("X-Key: sk-live-abcdef123456"), "{seen}");
    assert!(
        !seen.to_ascii_lowercase().contains("proxy-authorization"),
        "{seen}"
    );
}
