//! `secrets:` over the socket (docs/network.md, "Secrets"): a run's
//! variable holds a placeholder shaped like the real value; the proxy puts
//! the value into the request headers to the secret's hosts only, over TLS
//! it terminated with the server's authority and verified upstream against
//! the server's `SSL_CERT_FILE` (a test authority here), or plain HTTP only
//! with `plaintext: true`. The upstreams answer what they saw, never the
//! value itself.

use std::io::{Read, Write};
use std::net::TcpListener;
use std::sync::Arc;

use serde_json::json;

use crate::sandbox::{outside_dir, Fixture, Mode, Policy};

/// The real token, in the server's environment only.
const REAL: &str = "ghp_RealValueRealValue0123456789abcdefgh";
/// The real key of the plain-HTTP secret.
const KEY: &str = "sk-plainkeyplainkey0123";

/// What an upstream answers for a request head: whether it carried a real
/// value, a placeholder or neither.
fn verdict(head: &str) -> &'static str {
    if head.contains(REAL) || head.contains(KEY) {
        "saw real"
    } else if head.contains("Bearer ghp_") || head.contains("Bearer sk-") {
        "saw placeholder"
    } else {
        "saw nothing"
    }
}

fn serve<S: Read + Write>(mut s: S) {
    let mut got = Vec::new();
    let mut b = [0u8; 4096];
    while !got.windows(4).any(|w| w == b"\r\n\r\n") {
        match s.read(&mut b) {
            Ok(0) | Err(_) => return,
            Ok(n) => got.extend_from_slice(&b[..n]),
        }
    }
    let v = verdict(&String::from_utf8_lossy(&got));
    let _ = write!(
        s,
        "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{v}",
        v.len()
    );
    let _ = s.flush();
}

/// A test authority (PEM) and a TLS upstream on loopback for `up.test`
/// and `other.test` signed by it; its port.
fn tls_upstream() -> (String, u16) {
    use rcgen::{BasicConstraints, CertificateParams, IsCa, Issuer, KeyPair};
    let mut ca = CertificateParams::new(Vec::<String>::new()).expect("params");
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca_key = KeyPair::generate().expect("key");
    let ca_pem = ca.self_signed(&ca_key).expect("ca").pem();
    let issuer = Issuer::new(ca, ca_key);
    let leaf = CertificateParams::new(vec!["up.test".to_string(), "other.test".to_string()])
        .expect("params");
    let key = KeyPair::generate().expect("key");
    let cert = leaf.signed_by(&key, &issuer).expect("leaf");
    let config = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .expect("versions")
    .with_no_client_auth()
    .with_single_cert(
        vec![cert.der().clone()],
        rustls_pki_types::PrivateKeyDer::Pkcs8(key.serialize_der().into()),
    )
    .expect("config");
    let config = Arc::new(config);
    let l = TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = l.local_addr().expect("addr").port();
    std::thread::spawn(move || {
        for c in l.incoming() {
            let Ok(mut c) = c else { continue };
            let config = config.clone();
            std::thread::spawn(move || {
                let Ok(conn) = rustls::ServerConnection::new(config) else {
                    return;
                };
                let mut tls = rustls::StreamOwned::new(conn, &mut c);
                serve(&mut tls);
                tls.conn.send_close_notify();
                let _ = tls.flush();
            });
        }
    });
    (ca_pem, port)
}

fn plain_upstream() -> u16 {
    let l = TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = l.local_addr().expect("addr").port();
    std::thread::spawn(move || {
        for c in l.incoming().flatten() {
            std::thread::spawn(move || serve(c));
        }
    });
    port
}

struct Setup {
    f: Fixture,
    tls_port: u16,
    plain_port: u16,
    _ca: tempfile::TempDir,
}

fn setup() -> Setup {
    let (ca_pem, tls_port) = tls_upstream();
    let plain_port = plain_upstream();
    let ca = tempfile::tempdir().expect("tempdir");
    let ca_file = ca.path().join("test-ca.pem");
    std::fs::write(&ca_file, ca_pem).expect("ca");
    let outside = outside_dir();
    let mut policy = Policy::new(outside.path());
    policy.domains = vec![
        format!("up.test:{tls_port}"),
        format!("other.test:{tls_port}"),
        format!("up.test:{plain_port}"),
        format!("other.test:{plain_port}"),
    ];
    policy.hosts = vec![
        ("up.test".into(), "127.0.0.1".into()),
        ("other.test".into(), "127.0.0.1".into()),
    ];
    policy.secrets = vec![
        json!({"env": "GH_TOKEN", "from": "env:TEST_REAL_TOKEN", "hosts": ["up.test"]}),
        json!({"env": "API_KEY", "from": "env:TEST_REAL_KEY", "hosts": [format!("up.test:{plain_port}")], "plaintext": true}),
    ];
    policy.env.push("TEST_REAL_TOKEN".into());
    policy.rwx.push(outside.path().display().to_string());
    let ca_path = ca_file.display().to_string();
    let f = Fixture::start(
        outside,
        Mode::File(policy),
        &[],
        &[
            ("TEST_REAL_TOKEN", REAL),
            ("TEST_REAL_KEY", KEY),
            ("SSL_CERT_FILE", &ca_path),
        ],
        None,
    );
    f.install_webprobe();
    Setup {
        f,
        tls_port,
        plain_port,
        _ca: ca,
    }
}

#[test]
fn a_secret_reaches_its_host_over_tls_as_the_real_value_and_is_nowhere_else() {
    let Setup {
        mut f,
        tls_port,
        plain_port,
        _ca,
    } = setup();
    // What the tool holds: a placeholder of the same shape, and no value.
    let env = f.sh("echo \"$GH_TOKEN\"; env");
    let text = env.ok().to_string();
    let placeholder = text.lines().next().unwrap_or_default().to_string();
    assert_eq!(placeholder.len(), REAL.len(), "{text}");
    assert!(
        placeholder.starts_with("ghp_") && placeholder != REAL,
        "{text}"
    );
    assert!(
        !text.contains(REAL) && !text.contains(KEY),
        "a value reached the tool: {text}"
    );
    assert!(
        !text.contains("TEST_REAL_TOKEN="),
        "the value's source variable was passed through: {text}"
    );
    // Its host over TLS through the proxy, and directly: the real value.
    for how in ["", " direct"] {
        let out = f.sh(&format!(
            "./webprobe tls-get up.test {tls_port} GH_TOKEN{how}"
        ));
        assert!(
            !out.is_error && out.text.trim_end().ends_with("saw real"),
            "{how}: {out:?}\n{}",
            f.srv.log_text()
        );
    }
    // Another host: tunnelled untouched.
    let out = f.sh(&format!(
        "./webprobe tls-get other.test {tls_port} GH_TOKEN"
    ));
    assert!(out.ok().trim_end().ends_with("saw placeholder"), "{out:?}");
    // Plain HTTP: GH_TOKEN is TLS only; API_KEY says plaintext.
    let out = f.sh(&format!(
        "./webprobe plain-get up.test {plain_port} GH_TOKEN"
    ));
    assert!(out.ok().trim_end().ends_with("saw placeholder"), "{out:?}");
    let out = f.sh(&format!(
        "./webprobe plain-get up.test {plain_port} API_KEY"
    ));
    assert!(out.ok().trim_end().ends_with("saw real"), "{out:?}");
    let out = f.sh(&format!(
        "./webprobe plain-get other.test {plain_port} API_KEY"
    ));
    assert!(out.ok().trim_end().ends_with("saw placeholder"), "{out:?}");
    let log = f.srv.log_text();
    assert!(
        !log.contains(REAL) && !log.contains(KEY),
        "a value reached the log"
    );
}

#[test]
fn a_missing_secret_refuses_the_run_naming_it_and_not_its_value() {
    let (_, tls_port) = tls_upstream();
    let outside = outside_dir();
    let mut policy = Policy::new(outside.path());
    policy.domains = vec![format!("up.test:{tls_port}")];
    policy.secrets =
        vec![json!({"env": "GH_TOKEN", "from": "env:TEST_UNSET_TOKEN", "hosts": ["up.test"]})];
    let mut f = Fixture::start(outside, Mode::File(policy), &[], &[], None);
    let out = f.sh("echo ran");
    assert!(
        out.is_error
            && out
                .text
                .contains("secrets: GH_TOKEN: toolsrv's environment has no TEST_UNSET_TOKEN"),
        "{out:?}"
    );
}

#[test]
fn a_secret_from_a_file_under_a_read_rule_is_hidden_from_the_run_and_still_used() {
    let (ca_pem, tls_port) = tls_upstream();
    let ca = tempfile::tempdir().expect("tempdir");
    let ca_file = ca.path().join("test-ca.pem");
    std::fs::write(&ca_file, ca_pem).expect("ca");
    let outside = outside_dir();
    // Under the `ro` rule of every policy here.
    let token = outside.path().join("ro/gh-token");
    std::fs::write(&token, format!("{REAL}\n")).expect("token");
    let mut policy = Policy::new(outside.path());
    policy.domains = vec![format!("up.test:{tls_port}")];
    policy.hosts = vec![("up.test".into(), "127.0.0.1".into())];
    policy.secrets = vec![json!({
        "env": "GH_TOKEN",
        "from": format!("file:{}", token.display()),
        "hosts": ["up.test"],
    })];
    let ca_path = ca_file.display().to_string();
    let mut f = Fixture::start(
        outside,
        Mode::File(policy),
        &[],
        &[("SSL_CERT_FILE", &ca_path)],
        None,
    );
    f.install_webprobe();
    let read = f.sh(&format!("cat {}", token.display()));
    assert!(
        !read.text.contains(REAL),
        "the run read the secret's file: {read:?}"
    );
    read.hidden();
    let out = f.sh(&format!("./webprobe tls-get up.test {tls_port} GH_TOKEN"));
    assert!(out.ok().trim_end().ends_with("saw real"), "{out:?}");
}
