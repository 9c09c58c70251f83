//! Policy handling over the socket: the Landlock ABI limit (hard vs best effort),
//! `--yolo`, profiles, and edits of the policy file while the server runs.

use serde_json::Value;

use crate::sandbox::{outside_dir, Fixture, Mode, Policy, EACCES};
use crate::util::wait_until;

fn with_policy(edit: impl FnOnce(&mut Policy), extra: &[&str]) -> Fixture {
    let outside = outside_dir();
    let mut policy = Policy::new(outside.path());
    edit(&mut policy);
    Fixture::start(outside, Mode::File(policy), extra, &[], None)
}

#[test]
fn sandbox_hard_policy_on_a_too_old_landlock_is_refused_with_a_clear_error() {
    let mut f = with_policy(|p| p.best_effort = false, &["--landlock-abi-limit", "2"]);
    let o = f.sh("touch marker");
    assert!(o.is_error, "{o:?}");
    assert!(
        o.text
            .contains("landlock ABI 3 required for truncate control")
            && o.text.contains("ABI 2"),
        "{o:?}"
    );
    assert!(!f.cwd().join("marker").exists(), "the tool ran");
    // The same policy on the real kernel runs.
    let mut real = with_policy(|p| p.best_effort = false, &[]);
    real.sh("touch marker").ok();
    assert!(real.cwd().join("marker").exists());
}

#[test]
fn sandbox_best_effort_on_a_too_old_landlock_runs_and_logs_what_is_missing() {
    let mut f = with_policy(|_| {}, &["--landlock-abi-limit", "2"]);
    f.sh("touch marker").ok();
    assert!(f.cwd().join("marker").exists());
    let log = f.srv.log_text();
    assert!(
        log.contains("not enforced") && log.contains("truncate control"),
        "{log}"
    );
    // What ABI 2 still enforces: reads outside the rules.
    let secret = f.out("secret/secret.txt").display().to_string();
    f.sh(&format!("cat {secret}")).denied(EACCES);
    // What it does not: truncate(2) of an ro file. The filesystem view's
    // read-only mount refuses it anyway (EROFS; a root server's tools, which
    // run as an unprivileged id and do not own the file, meet the permission
    // check first: EACCES); Landlock alone (the fallback, TOOLSRV_VIEW=off)
    // is honestly degraded, and says so in the log above.
    let probe = f.install_netprobe();
    let ro = f.out("ro/readme.txt").display().to_string();
    f.sh(&format!("{probe} truncate {ro}")).denied(EACCES);
    let outside = outside_dir();
    let policy = Policy::new(outside.path());
    let mut fallback = Fixture::start(
        outside,
        Mode::File(policy),
        &["--landlock-abi-limit", "2"],
        &[("TOOLSRV_VIEW", "off")],
        None,
    );
    let probe = fallback.install_netprobe();
    let ro = fallback.out("ro/readme.txt").display().to_string();
    assert_eq!(fallback.sh(&format!("{probe} truncate {ro}")).ok(), "ok\n");
}

/// Run `script` in the background and return its pid, after it ended.
fn bg_and_wait(f: &mut Fixture, script: &str) -> String {
    let payload =
        toolsrv_protocol::encode_payload(&[("tool", "sh"), ("agent", "a1"), ("script", script)]);
    let pid = f.conn().ask("proc/new.bg", &payload).expect("new.bg");
    let code = String::from_utf8(f.conn().read_file(&format!("proc/{pid}/wait"))).expect("utf8");
    assert_eq!(code, "0\n");
    pid
}

#[test]
fn sandbox_yolo_lifts_landlock_and_says_so_in_procstat() {
    let outside = outside_dir();
    let target = outside.path().join("secret/written-by-yolo.txt");
    let script = format!("echo yolo > {}", target.display());
    let mut y = Fixture::start(outside, Mode::EmbeddedDefault, &["--yolo"], &[], None);
    let pid = bg_and_wait(&mut y, &script);
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "yolo\n");
    let st: Value = y.conn().json(&format!("proc/{pid}/stat"));
    assert_eq!(st["sandboxed"], Value::Bool(false), "{st}");
    // Without --yolo the same write is denied and the process says sandboxed.
    let mut s = Fixture::new(Mode::EmbeddedDefault, &[]);
    let target = s.out("secret/written.txt");
    s.sh(&format!("echo no > {}", target.display()))
        .denied(EACCES);
    assert!(!target.exists());
    let pid = bg_and_wait(&mut s, "true");
    let st: Value = s.conn().json(&format!("proc/{pid}/stat"));
    assert_eq!(st["sandboxed"], Value::Bool(true), "{st}");
}

#[test]
fn sandbox_profile_strict_uses_its_own_file() {
    let outside = outside_dir();
    let mut strict = Policy::new(outside.path());
    // strict: the cwd is read-only.
    strict.rwx.retain(|p| p != "{CWD}");
    strict.ro.push("{CWD}".into());
    std::fs::write(
        outside.path().join("policy/sandbox/strict.yaml"),
        strict.text(),
    )
    .unwrap();
    let policy = Policy::new(outside.path());
    let mut f = Fixture::start(outside, Mode::File(policy), &[], &[], None);
    std::fs::write(f.cwd().join("input.txt"), "input\n").unwrap();
    let strict = [("sandbox", "strict")];
    assert_eq!(f.call("a1", "sh", "cat input.txt", &strict).ok(), "input\n");
    f.call("a1", "sh", "echo x > strict.txt", &strict)
        .denied(EACCES);
    assert!(!f.cwd().join("strict.txt").exists());
    // The default policy still lets the cwd be written, explicitly or implicitly.
    f.call(
        "a1",
        "sh",
        "echo x > default.txt",
        &[("sandbox", "default")],
    )
    .ok();
    f.sh("echo x > implicit.txt").ok();
    assert!(f.cwd().join("default.txt").exists() && f.cwd().join("implicit.txt").exists());
    let o = f.call("a1", "sh", "touch nope.txt", &[("sandbox", "nope")]);
    assert!(o.is_error, "{o:?}");
    assert!(o.text.contains("unknown sandbox profile \"nope\""), "{o:?}");
    assert!(!f.cwd().join("nope.txt").exists());
    // Profile names cannot leave the sandbox/ directory.
    std::fs::write(
        f.out("policy/evil.yaml"),
        Policy::new(f.outside.path()).text(),
    )
    .unwrap();
    for name in ["../evil", "../sandbox", "/etc/passwd", ".hidden"] {
        let o = f.call("a1", "sh", "touch escaped.txt", &[("sandbox", name)]);
        assert!(o.is_error, "{name}: {o:?}");
        assert!(!f.cwd().join("escaped.txt").exists(), "{name} ran");
    }
}

#[test]
fn sandbox_policy_edits_apply_to_the_next_request_and_broken_edits_keep_the_last_good() {
    let outside = outside_dir();
    let mut policy = Policy::new(outside.path());
    let mut f = Fixture::start(outside, Mode::File(policy.clone()), &[], &[], None);
    let secret_dir = f.out("secret").display().to_string();
    let write = format!("echo edited > {secret_dir}/new.txt");
    f.sh(&write).denied(EACCES);
    // Edit: grant the secret dir rw and deny a word.
    policy.rw.push(secret_dir.clone());
    policy.deny.push("forbidden-word".into());
    std::fs::write(f.policy_file(), policy.text()).unwrap();
    f.sh(&write).ok();
    assert_eq!(
        std::fs::read_to_string(f.out("secret/new.txt")).unwrap(),
        "edited\n"
    );
    let o = f.sh("echo forbidden-word");
    assert!(
        o.is_error && o.text.contains("deny pattern forbidden-word"),
        "{o:?}"
    );
    // A broken edit: the last good policy stays in force, and the error is logged.
    std::fs::write(f.policy_file(), "filesystem:\n  rwxx: [\n").unwrap();
    f.sh(&format!("echo again >> {secret_dir}/new.txt")).ok();
    let o = f.sh("echo forbidden-word");
    assert!(
        o.is_error && o.text.contains("deny pattern forbidden-word"),
        "{o:?}"
    );
    assert!(
        wait_until(crate::util::WAIT, || f
            .srv
            .log_text()
            .contains("sandbox.yaml")
            && f.srv.log_text().to_lowercase().contains("error")),
        "the broken policy was not logged:\n{}",
        f.srv.log_text()
    );
    // Fixing it applies again (the original policy: the dir is denied again).
    policy.rw.pop();
    policy.deny.clear();
    std::fs::write(f.policy_file(), policy.text()).unwrap();
    f.sh(&format!("echo third >> {secret_dir}/new.txt"))
        .denied(EACCES);
    assert_eq!(f.sh("echo forbidden-word").ok(), "forbidden-word\n");
}
