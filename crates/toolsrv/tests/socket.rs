//! docs/protocol.md, "Connection": socket mode, live sockets never stolen, stale ones replaced.

use std::os::unix::fs::PermissionsExt;
use std::process::Command;

use crate::util::{toolsrv_bin, Launch, Server};

#[test]
fn socket_is_created_with_mode_0600() {
    let srv = Server::start(&["--no-auth"]);
    let mode = std::fs::metadata(&srv.socket).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600);
}

#[test]
fn a_live_socket_is_never_stolen() {
    let srv = Server::start(&["--no-auth"]);
    let out = Command::new(toolsrv_bin())
        .args(["serve", "--no-auth", "--listen"])
        .arg(&srv.socket)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(&format!("socket {} is in use", srv.socket.display())),
        "{err}"
    );
    // The first server still serves.
    let mut c = srv.attached();
    assert!(!c.read_file("info").is_empty());
}

#[test]
fn a_stale_socket_is_replaced() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("toolsrv.sock");
    drop(std::os::unix::net::UnixListener::bind(&path).unwrap());
    assert!(path.exists(), "stale socket file left behind");
    let srv = Launch::new().listen(&path).arg("--no-auth").start();
    let mut c = srv.attached();
    assert!(!c.read_file("info").is_empty());
}

#[test]
fn a_path_that_is_not_a_socket_is_left_alone() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("precious.txt");
    std::fs::write(&path, "data").unwrap();
    let out = Command::new(toolsrv_bin())
        .args(["serve", "--no-auth", "--listen"])
        .arg(&path)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(std::fs::read_to_string(&path).unwrap(), "data");
}

#[test]
fn missing_listen_is_a_usage_error() {
    let out = Command::new(toolsrv_bin()).arg("serve").output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--listen"));
    let out = Command::new(toolsrv_bin()).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn a_missing_cwd_is_a_configuration_error() {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(toolsrv_bin())
        .args([
            "serve",
            "--no-auth",
            "--cwd",
            "/definitely/not/here",
            "--listen",
        ])
        .arg(dir.path().join("s"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("/definitely/not/here"));
}

#[test]
fn sigterm_removes_the_socket_and_exits_0() {
    let mut srv = Server::start(&["--no-auth"]);
    let mut child = srv.child.take().unwrap();
    // Safety: kill(2) of our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(0));
    assert!(!srv.socket.exists());
}
