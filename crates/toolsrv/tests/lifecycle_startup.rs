//! Startup (docs/cli.md): configuration errors exit 1 with a clear message,
//! usage errors exit 2; the startup log line names the configuration; process
//! start/end lines carry agent, tool and pid; the secret is never logged.

use std::io::Read;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::lifecycle_util::QUICK_TOOL;
use crate::procs_util::{bg, final_stat, load};
use crate::util::{toolsrv_bin, wait_until, Raw, WAIT};
use crate::util::{Launch, Server};

/// Run `toolsrv <args>` to its end (bounded); returns (exit code, stderr).
fn run(args: &[&str], dir: &std::path::Path) -> (Option<i32>, String) {
    let mut child = Command::new(toolsrv_bin())
        .args(args)
        .env("OLLIE_CFG_PATH", dir.join("cfg"))
        .env_remove("NAMESPACE")
        .env_remove("TOOLSRV_SOCKET")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn toolsrv");
    let start = Instant::now();
    let status = loop {
        if let Some(st) = child.try_wait().expect("try_wait") {
            break st;
        }
        if start.elapsed() > WAIT {
            let _ = child.kill();
            let _ = child.wait();
            panic!("toolsrv {args:?} did not exit");
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    let mut err = String::new();
    if let Some(mut e) = child.stderr.take() {
        let _ = e.read_to_string(&mut err);
    }
    (status.code(), err)
}

#[test]
fn a_malformed_policy_stops_startup_naming_file_and_line() {
    let dir = tempfile::tempdir().expect("tempdir");
    let policy = dir.path().join("sandbox.yaml");
    std::fs::write(
        &policy,
        "general:\n  best_effort: true\nfilesystem:\n  ro: [unclosed\n",
    )
    .expect("write policy");
    let sock = dir.path().join("s.sock");
    let (code, err) = run(
        &[
            "serve",
            "--listen",
            sock.to_str().expect("utf8"),
            "--cwd",
            dir.path().to_str().expect("utf8"),
            "--sandbox",
            policy.to_str().expect("utf8"),
        ],
        dir.path(),
    );
    assert_eq!(code, Some(1), "stderr: {err}");
    let want = format!("{}:", policy.display());
    assert!(err.contains(&want), "names the file: {err}");
    let after = &err[err.find(&want).map(|i| i + want.len()).unwrap_or(0)..];
    assert!(
        after.chars().next().is_some_and(|c| c.is_ascii_digit()),
        "names the line after the file: {err}"
    );
    assert!(!sock.exists(), "no socket left behind");
}

#[test]
fn a_missing_cwd_exits_1_naming_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    let sock = dir.path().join("s.sock");
    let missing = dir.path().join("no-such-dir");
    let (code, err) = run(
        &[
            "serve",
            "--listen",
            sock.to_str().expect("utf8"),
            "--cwd",
            missing.to_str().expect("utf8"),
        ],
        dir.path(),
    );
    assert_eq!(code, Some(1), "stderr: {err}");
    // Said once, with the path: not "does not exist" and the OS error again.
    assert_eq!(
        err.trim_end(),
        format!("toolsrv: --cwd {}: no such directory", missing.display()),
        "{err}"
    );
    assert!(!sock.exists());
}

#[test]
fn usage_errors_exit_2() {
    let dir = tempfile::tempdir().expect("tempdir");
    let sock = dir.path().join("s.sock");
    let s = sock.to_str().expect("utf8");
    let cases: Vec<Vec<&str>> = vec![
        vec!["serve"],
        vec![],
        vec!["--listen", s],
        vec!["serve", "--listen", s, "--no-such-flag"],
        vec!["serve", "--listen", s, "--idle-timeout", "soon"],
        vec!["serve", "--listen", s, "--max-output", "lots"],
    ];
    for args in cases {
        let (code, err) = run(&args, dir.path());
        assert_eq!(code, Some(2), "{args:?}: stderr {err}");
        assert!(!err.trim().is_empty(), "{args:?}: usage on stderr");
        assert!(!sock.exists(), "{args:?}: no socket");
    }
}

/// The log lines (ANSI-free) containing `needle`.
fn lines_with<'a>(log: &'a str, needle: &str) -> Vec<&'a str> {
    log.lines().filter(|l| l.contains(needle)).collect()
}

/// A server logging at `rust_log`, authenticated with `secret`, that ran the
/// quick tool once in the background to its end; `between` runs after the
/// authentication. Returns the server and the process's pid.
fn one_background_run(
    rust_log: &str,
    secret: &str,
    between: impl FnOnce(&Server),
) -> (Server, u64) {
    let d = Launch::new()
        .tools(&[("quick.yaml", QUICK_TOOL)])
        .env("RUST_LOG", rust_log)
        .start();
    let mut c = Raw::connect(&d.socket);
    c.version(65536);
    let token = c.authenticate(secret).expect("auth");
    between(&d);
    load(&mut c, "a1", "quick");
    let pid = bg(
        &mut c,
        &[("token", &token), ("tool", "quick"), ("agent", "a1")],
    )
    .expect("bg");
    final_stat(&mut c, pid);
    (d, pid)
}

#[test]
fn log_lines_name_the_configuration_and_each_process_and_never_the_secret() {
    let secret = format!("lifecycle-secret-{}", std::process::id());
    let (d, pid) = one_background_run("info", &secret, |_| {});
    assert!(
        wait_until(WAIT, || d.log_text().contains("process ended")),
        "{}",
        d.log_text()
    );
    let log = d.log_text();

    let serving = lines_with(&log, "toolsrv serving");
    assert_eq!(serving.len(), 1, "{log}");
    let tools_dir = d.tools_dir();
    for field in [
        format!("socket={}", d.socket.display()),
        format!("cwd={}", d.cwd().canonicalize().expect("cwd").display()),
        format!("tools={}", tools_dir.display()),
        format!("policy={}", d.home().join("cfg/sandbox.yaml").display()),
        "auth=\"secret\"".to_string(),
        "yolo=false".to_string(),
        "landlock_abi=".to_string(),
    ] {
        let plain = field.replace('"', "");
        assert!(
            serving[0].contains(&field) || serving[0].contains(&plain),
            "startup line lacks {field}: {}",
            serving[0]
        );
    }
    for what in ["process started", "process ended"] {
        let l = lines_with(&log, what);
        assert_eq!(l.len(), 1, "{what}: {log}");
        for field in [format!("pid={pid}"), "agent=a1".into(), "tool=quick".into()] {
            assert!(l[0].contains(&field), "{what} line lacks {field}: {}", l[0]);
        }
    }
    assert!(!log.contains(&secret), "the secret is in the log:\n{log}");
}

#[test]
fn the_secret_is_not_logged_even_at_trace_level() {
    let secret = format!("trace-secret-{}", std::process::id());
    let (d, _) = one_background_run("trace", &secret, |d| {
        let mut bad = Raw::connect(&d.socket);
        bad.version(65536);
        assert!(bad.authenticate(&format!("{secret}-wrong")).is_err());
    });
    let log = d.log_text();
    assert!(!log.is_empty());
    assert!(!log.contains(&secret), "the secret is in the log:\n{log}");
}
