//! Landlock scoping (ABI 6) and toolsrv's own secrets: a tool cannot signal
//! toolsrv, connect to an abstract socket made outside its sandbox, or read the
//! secret or token from its environment or from `/proc/<toolsrv>/environ`.

use std::os::linux::net::SocketAddrExt;
use std::os::unix::net::{SocketAddr, UnixListener};
use std::time::Duration;

use crate::sandbox::{outside_dir, Fixture, Mode, Policy, EACCES, EPERM};

fn with_policy(edit: impl FnOnce(&mut Policy)) -> Fixture {
    let outside = outside_dir();
    let mut policy = Policy::new(outside.path());
    edit(&mut policy);
    Fixture::start(outside, Mode::File(policy), &[], &[], None)
}

#[test]
fn sandbox_a_tool_cannot_signal_toolsrv_and_the_server_survives() {
    for mode in ["embedded default", "policy file"] {
        let mut f = if mode == "policy file" {
            with_policy(|_| {})
        } else {
            Fixture::new(Mode::EmbeddedDefault, &[])
        };
        let pid = f.srv.pid();
        // In the server's tools PID namespace (docs/watch.md) the server has
        // no pid at all; elsewhere Landlock's scoping refuses.
        let tools_ns = toolsrv_testkit::pids::tools_namespace(pid);
        let refused = if tools_ns.is_some() {
            "No such process"
        } else {
            EPERM
        };
        f.sh(&format!("kill -TERM {pid}")).denied(refused);
        f.sh(&format!("kill -KILL {pid}")).denied(refused);
        // The namespace's init is pid 1 there, outside the tool's domain:
        // refused, and it lives on (and so do the namespace and the server).
        if let Some((_, init)) = tools_ns {
            f.sh("kill -TERM 1").denied(EPERM);
            f.sh("kill -KILL 1").denied(EPERM);
            assert_eq!(
                toolsrv_testkit::pids::tools_namespace(pid).map(|(_, i)| i),
                Some(init),
                "{mode}: the tools namespace's init died"
            );
        }
        // The server is still serving, and still the same process.
        assert_eq!(f.sh("echo still here").ok(), "still here\n", "{mode}");
        assert!(f.server_alive(), "{mode}: toolsrv died");
        assert!(
            !f.srv.log_text().contains("signal received"),
            "{mode}: the server got the signal"
        );
        // A tool may signal its own processes.
        let o = f.sh("sleep 30 & kill -TERM $! && wait $!; echo status $?");
        assert!(o.ok().ends_with("status 143\n"), "{mode}: {o:?}");
    }
}

#[test]
fn sandbox_a_tool_cannot_connect_to_an_abstract_socket_made_outside() {
    let name = format!("toolsrv-test-outside-{}", std::process::id());
    let addr = SocketAddr::from_abstract_name(name.as_bytes()).expect("abstract name");
    let listener = UnixListener::bind_addr(&addr).expect("bind abstract socket");
    listener.set_nonblocking(true).expect("nonblocking");
    for mode in ["embedded default", "policy file (network off)"] {
        let mut f = if mode == "embedded default" {
            Fixture::new(Mode::EmbeddedDefault, &[])
        } else {
            with_policy(|p| p.net = false)
        };
        let probe = f.install_netprobe();
        f.sh(&format!("{probe} abstract {name}")).denied(EPERM);
        assert!(
            listener.accept().is_err(),
            "{mode}: a connection reached the abstract socket"
        );
    }
    // Control: unsandboxed (--yolo) the same probe reaches it, so the name is right.
    let mut y = Fixture::new(Mode::EmbeddedDefault, &["--yolo"]);
    let probe = y.install_netprobe();
    assert_eq!(y.sh(&format!("{probe} abstract {name}")).ok(), "ok\n");
    assert!(crate::util::wait_until(Duration::from_secs(2), || listener
        .accept()
        .is_ok()));
}

const SERVER_SECRET: &str = "toolsrv-secret-value-5c7a";
const TOKEN_VAR: &str = "toolsrv-token-value-91e2";

const SECRET_ENV: [(&str, &str); 3] = [
    ("TOOLSRV_SECRET", SERVER_SECRET),
    ("TOOLSRV_TOKEN", TOKEN_VAR),
    ("TOOLSRV_SOCKET", "/nonexistent/toolsrv.sock"),
];

/// A server with [`SECRET_ENV`] in its environment, authenticated with
/// [`SERVER_SECRET`], confined by `policy`.
fn secret_fixture(outside: tempfile::TempDir, policy: Policy) -> Fixture {
    Fixture::start(
        outside,
        Mode::File(policy),
        &[],
        &SECRET_ENV,
        Some(SERVER_SECRET),
    )
}

#[test]
fn sandbox_the_secret_and_token_never_reach_a_tool() {
    let outside = outside_dir();
    let mut policy = Policy::new(outside.path());
    // The allowlist tries to pass them through.
    for v in ["TOOLSRV_SECRET", "TOOLSRV_TOKEN", "TOOLSRV_SOCKET"] {
        policy.env.push(v.to_string());
    }
    let mut f = secret_fixture(outside, policy);
    let token = f.token.clone().expect("token");
    let out = f.sh("env").ok().to_string();
    assert!(out.contains("OLLIE_AGENT_ID=a1"), "{out}");
    for leaked in [SERVER_SECRET, TOKEN_VAR, token.as_str(), "TOOLSRV_"] {
        assert!(
            !out.contains(leaked),
            "{leaked:?} in the tool's env:\n{out}"
        );
    }
    // /proc is not granted: toolsrv's environ cannot be opened.
    let pid = f.srv.pid();
    f.sh(&format!("cat /proc/{pid}/environ")).denied(EACCES);
    // The same under the embedded default policy.
    let mut d = Fixture::with_env(Mode::EmbeddedDefault, &[], &SECRET_ENV, None);
    d.sh(&format!("cat /proc/{}/environ", d.srv.pid()))
        .denied(EACCES);
    let out = d.sh("env").ok().to_string();
    assert!(
        !out.contains(SERVER_SECRET) && !out.contains(TOKEN_VAR),
        "{out}"
    );
}

/// A policy that grants `/proc` read-only (so `ps` works) must still not let a
/// tool read toolsrv's secret out of `/proc/<toolsrv>/environ`.
#[test]
fn sandbox_toolsrv_environ_stays_secret_when_proc_is_granted() {
    let outside = outside_dir();
    let mut policy = Policy::new(outside.path());
    policy.ro.push("/proc".into());
    let mut f = secret_fixture(outside, policy);
    // The tool's own environ is readable.
    assert_eq!(
        f.sh("cat /proc/self/environ | tr '\\0' '\\n' | grep -c '^OLLIE_AGENT_ID='")
            .ok(),
        "1\n"
    );
    let pid = f.srv.pid();
    let o = f.sh(&format!("cat /proc/{pid}/environ"));
    assert!(
        !o.text.contains(SERVER_SECRET) && !o.text.contains(TOKEN_VAR),
        "a sandboxed tool read toolsrv's secret from /proc/{pid}/environ: {o:?}"
    );
}

#[test]
fn sandbox_a_tool_of_a_root_server_loses_the_capabilities_landlock_cannot_contain() {
    // Meaningful as root (as CI runs): otherwise nobody holds CAP_SYS_NICE.
    let probe = std::process::Command::new("nice")
        .args(["-n", "-5", "true"])
        .output()
        .expect("run nice");
    if !probe.status.success() || !probe.stderr.is_empty() {
        toolsrv_testkit::skip::cannot_run_here(
            "not privileged (no CAP_SYS_NICE): no capability to drop, nothing to check",
        );
        return;
    }
    // CAP_SYS_NICE and CAP_MKNOD are dropped in the sandbox (the working
    // directory is rwx, so Landlock would allow the device node) ...
    let mut f = Fixture::new(Mode::EmbeddedDefault, &[]);
    let o = f.sh("nice -n -5 true; mknod blk b 7 0");
    assert!(
        o.text.contains("cannot set niceness") && o.text.contains(EPERM),
        "{o:?}"
    );
    // ... CAP_CHOWN is kept ...
    assert_eq!(
        f.sh("echo x > f && chown 12345 f && stat -c %u f").ok(),
        "12345\n"
    );
    // ... and --yolo keeps everything.
    let outside = outside_dir();
    let mut y = Fixture::start(outside, Mode::EmbeddedDefault, &["--yolo"], &[], None);
    assert_eq!(
        y.sh("nice -n -5 true && mknod blk b 7 0 && rm blk && echo ok")
            .ok(),
        "ok\n"
    );
}
