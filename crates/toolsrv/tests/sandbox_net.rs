//! Network confinement over the socket: `network.enabled: false` (Landlock TCP
//! rules plus the seccomp filter on socket(2)), the `connect_tcp` and `bind_tcp`
//! allow-lists, and Unix sockets still working.

use std::net::{TcpListener, UdpSocket};
use std::time::Duration;

use crate::sandbox::{outside_dir, Fixture, Mode, Policy, EACCES};

fn fixture(edit: impl FnOnce(&mut Policy)) -> Fixture {
    let outside = outside_dir();
    let mut policy = Policy::new(outside.path());
    edit(&mut policy);
    Fixture::start(outside, Mode::File(policy), &[], &[], None)
}

fn listener() -> (TcpListener, u16) {
    let l = TcpListener::bind("127.0.0.1:0").expect("bind loopback");
    let port = l.local_addr().expect("addr").port();
    (l, port)
}

/// A free loopback port (bound and released).
fn free_port() -> u16 {
    listener().1
}

/// Whether a connection reached `l` (non-blocking accept, retried briefly).
fn accepted(l: &TcpListener) -> bool {
    l.set_nonblocking(true).expect("nonblocking");
    crate::util::wait_until(Duration::from_millis(500), || l.accept().is_ok())
}

#[test]
fn sandbox_tcp_connect_to_loopback_is_denied_when_network_is_off() {
    let (l, port) = listener();
    let mut f = fixture(|p| p.net = false);
    let probe = f.install_netprobe();
    f.bash(&format!("echo x > /dev/tcp/127.0.0.1/{port}"))
        .denied(EACCES);
    f.sh(&format!("{probe} tcp {port}")).denied(EACCES);
    assert!(!accepted(&l), "a connection reached the listener");
    // The same with the network on: both reach the listener.
    let mut on = fixture(|_| {});
    let probe = on.install_netprobe();
    on.bash(&format!("echo x > /dev/tcp/127.0.0.1/{port}")).ok();
    assert_eq!(on.sh(&format!("{probe} tcp {port}")).ok(), "ok\n");
    assert!(accepted(&l));
}

#[test]
fn sandbox_udp_and_mptcp_are_denied_when_network_is_off_and_unix_sockets_work() {
    let udp = UdpSocket::bind("127.0.0.1:0").expect("udp");
    let uport = udp.local_addr().expect("addr").port();
    udp.set_read_timeout(Some(Duration::from_millis(300)))
        .expect("timeout");
    let mut f = fixture(|p| p.net = false);
    let probe = f.install_netprobe();
    f.sh(&format!("{probe} udp-send {uport}")).denied(EACCES);
    let mut buf = [0u8; 16];
    assert!(udp.recv(&mut buf).is_err(), "a datagram got through");
    f.sh(&format!("{probe} mptcp")).denied(EACCES);
    // AF_UNIX keeps working: a socket pair and an abstract socket of its own.
    assert_eq!(f.sh(&format!("{probe} unix-pair")).ok(), "ok\n");
    let name = format!("toolsrv-test-self-{}", std::process::id());
    assert_eq!(f.sh(&format!("{probe} abstract-self {name}")).ok(), "ok\n");
    // With the network on the datagram arrives.
    let mut on = fixture(|_| {});
    let probe = on.install_netprobe();
    assert_eq!(on.sh(&format!("{probe} udp-send {uport}")).ok(), "ok\n");
    udp.set_read_timeout(Some(Duration::from_secs(5)))
        .expect("timeout");
    let n = udp.recv(&mut buf).expect("datagram");
    assert_eq!(&buf[..n], b"probe");
    // MPTCP with the network on: allowed, unless this kernel lacks MPTCP (then a
    // protocol error, never EACCES).
    let m = on.sh(&format!("{probe} mptcp"));
    assert!(!m.text.contains(EACCES), "{m:?}");
}

#[test]
fn sandbox_connect_tcp_allows_only_the_listed_ports() {
    let (a, port_a) = listener();
    let (b, port_b) = listener();
    let mut f = fixture(|p| p.connect_tcp = vec![port_a]);
    let probe = f.install_netprobe();
    assert_eq!(f.sh(&format!("{probe} tcp {port_a}")).ok(), "ok\n");
    assert!(accepted(&a));
    f.sh(&format!("{probe} tcp {port_b}")).denied(EACCES);
    f.bash(&format!("echo x > /dev/tcp/127.0.0.1/{port_b}"))
        .denied(EACCES);
    assert!(!accepted(&b), "a connection reached the unlisted port");
}

#[test]
fn sandbox_bind_tcp_allows_only_the_listed_ports() {
    let (port_a, port_b) = (free_port(), free_port());
    let mut f = fixture(|p| p.bind_tcp = vec![port_a]);
    let probe = f.install_netprobe();
    assert_eq!(f.sh(&format!("{probe} bind {port_a}")).ok(), "ok\n");
    f.sh(&format!("{probe} bind {port_b}")).denied(EACCES);
}
