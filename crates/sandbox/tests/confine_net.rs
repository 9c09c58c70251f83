//! Network, signal and abstract-socket confinement against real sockets and processes.

use std::net::TcpListener;
use std::os::linux::net::SocketAddrExt;
use std::os::unix::net::{SocketAddr, UnixListener};

use crate::spawn_support::{base_rules, confine, run_probe, sh};

const EACCES: &str = "Permission denied (os error 13)";
const EPERM: &str = "Operation not permitted (os error 1)";

fn listener() -> (TcpListener, String) {
    let l = TcpListener::bind("127.0.0.1:0").expect("bind loopback");
    let port = l.local_addr().expect("addr").port().to_string();
    (l, port)
}

#[test]
fn tcp_connect_is_denied_when_network_disabled() {
    let (_l, port) = listener();
    let mut rules = base_rules();
    rules.network.enabled = false;
    let off = confine(&rules);
    assert_eq!(run_probe(&["tcp", &port], Some(&off)), EACCES);
    let (status, out) = sh(
        &format!("bash -c 'echo x > /dev/tcp/127.0.0.1/{port}'"),
        "/",
        Some(&off),
    );
    assert_ne!(status.code(), 0);
    assert!(out.contains("Permission denied"), "{out}");
    let on = confine(&base_rules());
    assert_eq!(run_probe(&["tcp", &port], Some(&on)), "ok");
}

#[test]
fn udp_netlink_and_io_uring_are_denied_when_network_disabled() {
    let mut rules = base_rules();
    rules.network.enabled = false;
    let off = confine(&rules);
    assert_eq!(run_probe(&["udp"], Some(&off)), EACCES);
    assert_eq!(run_probe(&["netlink"], Some(&off)), EACCES);
    assert_eq!(run_probe(&["io-uring"], Some(&off)), EACCES);
    // Unix sockets keep working.
    assert_eq!(run_probe(&["unix-pair"], Some(&off)), "ok");
    assert_eq!(
        run_probe(&["abstract-self", "toolsrv-off-self"], Some(&off)),
        "ok"
    );
    let on = confine(&base_rules());
    assert_eq!(run_probe(&["udp"], Some(&on)), "ok");
    assert_eq!(run_probe(&["netlink"], Some(&on)), "ok");
}

#[test]
fn connect_tcp_allow_list_is_enforced() {
    let (_a, port_a) = listener();
    let (_b, port_b) = listener();
    let mut rules = base_rules();
    rules.network.connect_tcp = vec![port_a.parse().expect("port")];
    let c = confine(&rules);
    assert_eq!(run_probe(&["tcp", &port_a], Some(&c)), "ok");
    assert_eq!(run_probe(&["tcp", &port_b], Some(&c)), EACCES);
    // UDP is not affected by TCP port rules.
    assert_eq!(run_probe(&["udp"], Some(&c)), "ok");
}

#[test]
fn bind_tcp_allow_list_is_enforced() {
    // Two free ports: bind and release them so the probe can bind them again.
    let (a, port_a) = listener();
    let (b, port_b) = listener();
    drop((a, b));
    let mut rules = base_rules();
    rules.network.bind_tcp = vec![port_a.parse().expect("port")];
    let c = confine(&rules);
    assert_eq!(run_probe(&["bind", &port_a], Some(&c)), "ok");
    assert_eq!(run_probe(&["bind", &port_b], Some(&c)), EACCES);
    assert_eq!(run_probe(&["bind", &port_b], None), "ok");
}

#[test]
fn signals_to_processes_outside_the_sandbox_are_denied() {
    let mut victim = std::process::Command::new("/bin/sleep")
        .arg("60")
        .spawn()
        .expect("spawn victim");
    let c = confine(&base_rules());
    let victim_pid = victim.id().to_string();
    assert_eq!(run_probe(&["kill", &victim_pid, "15"], Some(&c)), EPERM);
    assert!(
        victim.try_wait().expect("try_wait").is_none(),
        "victim was killed"
    );
    let me = std::process::id().to_string();
    assert_eq!(run_probe(&["kill", &me, "0"], Some(&c)), EPERM);
    let (_, out) = sh(&format!("kill -TERM {me}"), "/", Some(&c));
    assert!(out.contains("Operation not permitted"), "{out}");
    // Unconfined, the same probe may signal it.
    assert_eq!(run_probe(&["kill", &victim_pid, "0"], None), "ok");
    // Inside the sandbox, signalling its own children works.
    let (status, out) = sh("sleep 60 & kill -TERM $!; wait $!; echo $?", "/", Some(&c));
    assert_eq!(status.code(), 0);
    assert!(out.trim_end().ends_with("143"), "{out}");
    victim.kill().expect("kill victim");
    victim.wait().expect("reap victim");
}

#[test]
fn abstract_unix_sockets_outside_the_sandbox_are_unreachable() {
    let name = format!("toolsrv-test-{}", std::process::id());
    let addr = SocketAddr::from_abstract_name(name.as_bytes()).expect("abstract addr");
    let _l = UnixListener::bind_addr(&addr).expect("bind abstract");
    let c = confine(&base_rules());
    assert_eq!(run_probe(&["abstract", &name], Some(&c)), EPERM);
    assert_eq!(run_probe(&["abstract", &name], None), "ok");
    assert_eq!(
        run_probe(&["abstract-self", &format!("{name}-in")], Some(&c)),
        "ok"
    );
}
