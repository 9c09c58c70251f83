//! The `proxy` bench's TLS part: a small HTTPS request (a new connection,
//! the handshake, `GET /`, a one-byte answer) to a host a secret is bound
//! to, through the proxy's interception (its own handshake with the
//! client, a verified one upstream, the placeholder filled in), beside the
//! same request straight to the upstream, on loopback, interleaved. A test
//! authority signs the upstream's certificate.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use rcgen::{BasicConstraints, CertificateParams, IsCa, Issuer, KeyPair};
use rustls_pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use toolsrv_netproxy::{
    Allowlist, Authority, Credentials, Interception, Secret, Secrets, SharedProxy, Upstream,
};

use crate::report::human;
use crate::stats::Summary;

const LOOPBACK: std::net::IpAddr = std::net::IpAddr::V4(std::net::Ipv4Addr::LOCALHOST);
/// Samples per side.
const SAMPLES: usize = 200;

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// Prints the interception line.
pub async fn run() -> Result<()> {
    let mut ca = CertificateParams::new(Vec::<String>::new())?;
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca_key = KeyPair::generate()?;
    let ca_cert = ca.self_signed(&ca_key)?;
    let issuer = Issuer::new(ca, ca_key);
    let key = KeyPair::generate()?;
    let leaf = CertificateParams::new(vec!["up.test".to_string()])?.signed_by(&key, &issuer)?;
    let server = rustls::ServerConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()?
        .with_no_client_auth()
        .with_single_cert(
            vec![leaf.der().clone()],
            PrivateKeyDer::Pkcs8(key.serialize_der().into()),
        )?;
    let up = tls_upstream(Arc::new(server)).await?;
    let authority = Arc::new(Authority::new()?);
    let pins = vec![("up.test".to_string(), vec![LOOPBACK])];
    let allow = Allowlist::new(&[format!("up.test:{}", up.port())], &pins)?;
    let secret = Secret::new(
        "TOKEN",
        "ghp_benchbenchbench0123456789".into(),
        &["up.test".into()],
        false,
    );
    let placeholder = secret.placeholder.clone();
    let shared = SharedProxy::start().await?;
    let creds = Credentials::fresh("bench");
    let _run = shared.register(
        allow,
        creds.clone(),
        Secrets::new(vec![secret]),
        Some(Interception {
            authority: authority.clone(),
            upstream: Upstream::from_pem(&ca_cert.pem())?,
        }),
    );
    let direct_client = client(&ca_cert.pem())?;
    let proxied_client = client(authority.certificate_pem())?;
    let (mut d, mut p) = (Vec::with_capacity(SAMPLES), Vec::with_capacity(SAMPLES));
    for _ in 0..SAMPLES {
        d.push(request(&direct_client, up, None, &placeholder).await?);
        p.push(
            request(
                &proxied_client,
                up,
                Some((shared.local_addr(), &creds)),
                &placeholder,
            )
            .await?,
        );
    }
    let (d, p) = (
        Summary::of(&d).context("no samples")?,
        Summary::of(&p).context("no samples")?,
    );
    println!(
        "small HTTPS request (new connection, handshake, GET, 1 byte) through interception: median {} (p90 {}) | baseline direct median {} (p90 {}) | ratio {:.2}x, +{}",
        human(p.median),
        human(p.p90),
        human(d.median),
        human(d.p90),
        p.median.as_secs_f64() / d.median.as_secs_f64().max(1e-9),
        human(p.median.saturating_sub(d.median)),
    );
    Ok(())
}

fn client(roots_pem: &str) -> Result<tokio_rustls::TlsConnector> {
    use rustls_pki_types::pem::PemObject;
    let mut roots = rustls::RootCertStore::empty();
    for c in CertificateDer::pem_slice_iter(roots_pem.as_bytes()) {
        roots.add(c?)?;
    }
    let config = rustls::ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()?
        .with_root_certificates(roots)
        .with_no_client_auth();
    Ok(tokio_rustls::TlsConnector::from(Arc::new(config)))
}

/// One request, straight or through a `CONNECT` of the proxy; how long it
/// took to the last byte of the answer.
async fn request(
    tls: &tokio_rustls::TlsConnector,
    up: SocketAddr,
    proxy: Option<(SocketAddr, &Credentials)>,
    token: &str,
) -> Result<Duration> {
    let t = Instant::now();
    let mut c = TcpStream::connect(proxy.map_or(up, |p| p.0)).await?;
    c.set_nodelay(true)?;
    if let Some((_, creds)) = proxy {
        use base64::Engine;
        let auth = base64::engine::general_purpose::STANDARD
            .encode(format!("{}:{}", creds.user, creds.password));
        let req = format!(
            "CONNECT up.test:{} HTTP/1.1\r\nProxy-Authorization: Basic {auth}\r\n\r\n",
            up.port()
        );
        c.write_all(req.as_bytes()).await?;
        let mut head = Vec::new();
        let mut b = [0u8; 1];
        while !head.ends_with(b"\r\n\r\n") {
            anyhow::ensure!(c.read(&mut b).await? == 1, "the proxy closed");
            head.push(b[0]);
        }
        anyhow::ensure!(head.starts_with(b"HTTP/1.1 200"), "CONNECT refused");
    }
    let mut s = tls.connect(ServerName::try_from("up.test")?, c).await?;
    let req = format!("GET / HTTP/1.1\r\nHost: up.test\r\nAuthorization: Bearer {token}\r\nConnection: close\r\n\r\n");
    s.write_all(req.as_bytes()).await?;
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out).await;
    anyhow::ensure!(out.ends_with(b"x"), "no answer");
    Ok(t.elapsed())
}

/// A TLS upstream on loopback answering every request with one byte.
async fn tls_upstream(config: Arc<rustls::ServerConfig>) -> Result<SocketAddr> {
    let l = TcpListener::bind((LOOPBACK, 0)).await?;
    let addr = l.local_addr()?;
    tokio::spawn(async move {
        let acceptor = tokio_rustls::TlsAcceptor::from(config);
        while let Ok((c, _)) = l.accept().await {
            let _ = c.set_nodelay(true);
            let acceptor = acceptor.clone();
            tokio::spawn(async move {
                let Ok(mut s) = acceptor.accept(c).await else {
                    return;
                };
                let mut got = Vec::new();
                let mut b = [0u8; 4096];
                while !got.windows(4).any(|w| w == b"\r\n\r\n") {
                    match s.read(&mut b).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => got.extend_from_slice(&b[..n]),
                    }
                }
                let _ = s
                    .write_all(
                        b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\nConnection: close\r\n\r\nx",
                    )
                    .await;
                let _ = s.shutdown().await;
            });
        }
    });
    Ok(addr)
}
