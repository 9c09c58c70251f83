//! Issue 18: toolsrv on another host over SSH, against a real sshd on
//! loopback (remote_util.rs). The "remote" is this machine seen through
//! sshd, with a HOME and runtime directory of its own.

use std::io::Read;
use std::path::Path;
use std::time::{Duration, Instant};

use crate::lifecycle_util::{kill_pids, read_pid_file};
use crate::remote_util::Sshd;
use crate::util::wait_until;

const TOOL_V1: &str = "#!/bin/sh\n# ---\n# description: Say which version of this tool runs.\n# params:\n#   who:\n#     type: string\n#     description: Whom to greet.\n# ---\necho \"greetings v1 to $ARG_WHO\"\n";

/// `config      <sent> of <files> files sent (...)` → (sent, files).
fn files_sent(up: &str) -> (usize, usize) {
    let line = up
        .lines()
        .find(|l| l.starts_with("config"))
        .unwrap_or_else(|| panic!("no config line in {up}"));
    let w: Vec<&str> = line.split_whitespace().collect();
    (w[1].parse().expect("sent"), w[3].parse().expect("files"))
}

/// `remote down`, after which no process of the test runs (5 s at most)
/// and no socket is left.
fn down_and_gone(s: &Sshd) {
    s.ok(&["remote", "down", "localhost"]);
    assert!(
        wait_until(Duration::from_secs(5), || s.processes().is_empty()),
        "left running: {:#?}",
        s.processes()
    );
    assert!(s.sockets().is_empty(), "sockets left: {:?}", s.sockets());
}

/// SIGKILL the process whose pid `pid_file` holds, then wait (5 s at most)
/// until the supervisor's log says `recovered`; how long that took.
fn kill_and_await(s: &Sshd, pid_file: &Path, recovered: &str) -> Duration {
    let pid = read_pid_file(pid_file);
    let killed = Instant::now();
    kill_pids(&[pid]);
    assert!(
        wait_until(Duration::from_secs(5), || s
            .supervisor_log()
            .contains(recovered)),
        "no {recovered:?} within 5 s:\n{}",
        s.supervisor_log()
    );
    killed.elapsed()
}

#[test]
fn up_installs_a_call_runs_remotely_and_only_changed_files_are_resent_and_down_cleans_up() {
    let Some(s) = Sshd::start() else { return };
    // No toolsrv on the remote PATH.
    let which = s.ssh("command -v toolsrv");
    assert!(!which.status.success(), "toolsrv is on the remote PATH");
    // The configuration to send: the built-in policy and tools plus one of ours.
    s.ok(&["init", "--dir", s.path("lcfg").to_str().expect("utf-8")]);
    std::fs::write(s.path("lcfg/tools/greet"), TOOL_V1).expect("tool");
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(
        s.path("lcfg/tools/greet"),
        std::fs::Permissions::from_mode(0o755),
    )
    .expect("chmod");

    let up = s.ok(&["remote", "up", "localhost"]);
    assert!(up.contains("installed now"), "{up}");
    let (sent, files) = files_sent(&up);
    assert_eq!(
        (sent, files),
        (8, 8),
        "policy + 6 built-in tools + greet: {up}"
    );
    let installed = s.path("rhome/.local/share/toolsrv/bin/toolsrv");
    assert!(installed.exists(), "installed under the remote data dir");

    // A call through ssh:// runs in the remote server's sandbox, in its --cwd.
    let out = s.ok(&[
        "--socket",
        "ssh://localhost",
        "call",
        "shell",
        // (/etc/shadow is refused, or masked by the filesystem view: empty.)
        "command=echo \"in $PWD\"; cat /etc/shadow 2>/dev/null | grep -q root: || echo sandboxed",
    ]);
    assert!(
        out.contains(&format!("in {}", s.path("proj").display())),
        "{out}"
    );
    assert!(out.contains("sandboxed"), "{out}");
    let out = s.ok(&["--socket", "ssh://localhost", "call", "greet", "who=me"]);
    assert_eq!(out.trim(), "greetings v1 to me");

    // The secret is pinned on the remote: 0600 files in 0700 directories.
    use std::os::unix::fs::MetadataExt;
    let mode = |p: &std::path::Path| std::fs::metadata(p).expect("stat").mode() & 0o777;
    let st = s.remote_state();
    assert_eq!(mode(&st), 0o700);
    assert_eq!(mode(&st.join("secret")), 0o600);
    assert_eq!(mode(&s.path("rrun/toolsrv/remote")), 0o700);
    let local = s.local_dir().expect("local dir");
    assert_eq!(mode(&local), 0o700);
    assert_eq!(mode(&local.join("toolsrv.sock")) & 0o077, 0);
    assert_eq!(mode(&local.join("toolsrv.sock.secret")), 0o600);
    assert_eq!(
        std::fs::read_to_string(st.join("secret"))
            .expect("remote secret")
            .trim(),
        std::fs::read_to_string(local.join("toolsrv.sock.secret"))
            .expect("local secret")
            .trim()
    );

    // Change one tool file: exactly that one is sent again, and the server
    // (kept running) serves the new version.
    std::fs::write(s.path("lcfg/tools/greet"), TOOL_V1.replace("v1", "v2")).expect("tool");
    let up2 = s.ok(&["remote", "up", "localhost"]);
    assert_eq!(files_sent(&up2), (1, 8), "{up2}");
    assert!(up2.contains("installed before"), "{up2}");
    assert!(up2.contains("Kept"), "the server keeps running: {up2}");
    let out = s.ok(&["--socket", "ssh://localhost", "call", "greet", "who=you"]);
    assert_eq!(out.trim(), "greetings v2 to you");
    // Nothing changed: nothing sent.
    assert_eq!(files_sent(&s.ok(&["remote", "up", "localhost"])), (0, 8));

    let status = s.ok(&["remote", "status", "localhost"]);
    for want in [
        "ssh://localhost",
        "toolsrv 0.1.0",
        "running, pid",
        "toolsrv.sock",
        "last",
    ] {
        assert!(status.contains(want), "{want:?} missing from:\n{status}");
    }
    // The working connection is reported as such, with the master's pid
    // (whose command line names its control socket only as
    // /proc/self/fd/0/ctl).
    let local = s.local_dir().expect("the local state directory");
    let master = read_pid_file(&local.join("ssh.pid"));
    assert!(
        status.contains(&format!(
            "ssh         connected (master pid {master}, supervisor pid "
        )),
        "{status}"
    );
    let pid = s.ok(&[
        "--socket",
        "ssh://localhost",
        "bg",
        "shell",
        "command=sleep 60",
    ]);
    assert!(pid.trim().parse::<u64>().is_ok(), "{pid}");
    down_and_gone(&s);
    assert!(!st.exists(), "remote state directory left");
    assert!(s.local_dir().is_none(), "local directory left");
    // The installed binary stays for the next `up`.
    assert!(installed.exists());
}

#[test]
fn a_killed_ssh_and_a_killed_server_are_recovered_without_losing_output() {
    let Some(s) = Sshd::start() else { return };
    s.ok(&["remote", "up", "localhost"]);
    let local = s.local_dir().expect("local dir");
    let socket = local.join("toolsrv.sock");

    // A background process printing for ~5 s, followed with `out -f`.
    let n = 25;
    let pid = s.ok(&[
        "--socket",
        "ssh://localhost",
        "bg",
        "shell",
        &format!("command=for i in $(seq 1 {n}); do echo line $i; sleep 0.2; done"),
    ]);
    let pid = pid.trim().to_string();
    let mut follow = s
        .toolsrv()
        .args(["--socket", "ssh://localhost", "out", "-f", &pid])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("out -f");
    std::thread::sleep(Duration::from_millis(1200));

    // Kill the ssh master mid-follow.
    let recovered_in = kill_and_await(&s, &local.join("ssh.pid"), "forward restored");
    assert!(std::os::unix::net::UnixStream::connect(&socket).is_ok());

    let status = follow.wait().expect("out -f");
    let mut out = String::new();
    follow
        .stdout
        .take()
        .expect("stdout")
        .read_to_string(&mut out)
        .expect("read");
    let mut err = String::new();
    follow
        .stderr
        .take()
        .expect("stderr")
        .read_to_string(&mut err)
        .expect("read");
    assert!(status.success(), "out -f: {status}: {err}");
    let want: String = (1..=n).map(|i| format!("line {i}\n")).collect();
    assert_eq!(out, want, "output lost or repeated; stderr: {err}");
    assert!(err.contains("resuming at byte"), "{err}");
    eprintln!("ssh killed: forward restored in {recovered_in:?}");

    // A library client connected before the server dies (its reader task
    // runs on a worker thread, so it sees the connection close at once).
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .expect("runtime");
    let secret = toolsrv_client::secret::socket_secret(&socket).expect("secret");
    let client = rt
        .block_on(toolsrv_client::Client::connect(
            &socket,
            toolsrv_client::Auth::Secret(secret),
        ))
        .expect("connect");
    client.set_reconnect_timeout(toolsrv_client::remote::REMOTE_RECONNECT_WINDOW);
    let info = rt.block_on(client.read_file("info")).expect("info");
    assert!(String::from_utf8_lossy(&info).contains("platform"));

    // Kill the remote server: the supervisor restarts it with the same secret.
    let server_pid = read_pid_file(&s.remote_state().join("pid"));
    let took = kill_and_await(&s, &s.remote_state().join("pid"), "remote server restarted");
    eprintln!("server killed: restarted in {took:?}");
    let new_pid = std::fs::read_to_string(s.remote_state().join("pid")).expect("pid");
    assert_ne!(new_pid.trim(), server_pid.to_string());
    // The same client reconnects (same secret) and runs a call.
    let mut req = toolsrv_client::CallRequest::new("shell", "lib");
    req.args.push(("command".into(), "echo back".into()));
    rt.block_on(client.load("lib", &["shell"])).expect("load");
    let r = rt.block_on(client.call(&req)).expect("call");
    assert_eq!(r.joined_text().trim(), "back");
    let status = s.ok(&["remote", "status", "localhost"]);
    assert!(status.contains("remote server restarted"), "{status}");
    // The master started again after the kill is the one reported.
    let master = read_pid_file(&local.join("ssh.pid"));
    assert!(
        status.contains(&format!("connected (master pid {master}, ")),
        "{status}"
    );

    down_and_gone(&s);
}

#[test]
fn bad_addresses_and_unknown_hosts_fail_with_a_clear_message() {
    let Some(s) = Sshd::start() else { return };
    let out = s.run(&["--socket", "ssh://-oProxyCommand=x", "info"]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("starts with '-'"), "{err}");
    let out = s.run(&["remote", "status", "localhost"]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("is not up"), "{err}");
}
