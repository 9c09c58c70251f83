//! Filesystem escapes over the socket: each blocked with EACCES inside the tool,
//! and the matching allowed operation succeeding.

use std::os::unix::fs::PermissionsExt;

use crate::sandbox::{Fixture, Mode, Policy, EACCES, SECRET};

fn with_policy() -> Fixture {
    let outside = crate::sandbox::outside_dir();
    let policy = Policy::new(outside.path());
    Fixture::start(outside, Mode::File(policy), &[], &[], None)
}

/// The two ways a server gets the default rules.
const MODES: [&str; 2] = ["embedded default", "policy file"];

/// A server with the embedded default policy, or with [`with_policy`].
fn fixture_for(mode: &str) -> Fixture {
    if mode == "policy file" {
        with_policy()
    } else {
        Fixture::new(Mode::EmbeddedDefault, &[])
    }
}

#[test]
fn sandbox_reading_a_secret_outside_all_rules_is_denied() {
    for mode in MODES {
        let mut f = fixture_for(mode);
        let secret = f.out("secret/secret.txt").display().to_string();
        f.sh(&format!("cat {secret}")).denied(EACCES);
        let dir = f.out("secret").display().to_string();
        f.sh(&format!("ls {dir}")).denied(EACCES);
        // The cwd itself is readable and writable.
        std::fs::write(f.cwd().join("mine.txt"), "in cwd\n").unwrap();
        assert_eq!(f.sh("cat mine.txt").ok(), "in cwd\n", "{mode}");
    }
}

#[test]
fn sandbox_ro_is_readable_but_not_writable() {
    let mut f = with_policy();
    let ro = f.out("ro").display().to_string();
    assert_eq!(f.sh(&format!("cat {ro}/readme.txt")).ok(), "readable\n");
    f.sh(&format!("echo x > {ro}/new.txt")).denied(EACCES);
    assert!(!f.out("ro/new.txt").exists());
    f.sh(&format!("echo x >> {ro}/readme.txt")).denied(EACCES);
    f.sh(&format!("mkdir {ro}/d")).denied(EACCES);
    f.sh(&format!("rm {ro}/readme.txt")).denied(EACCES);
    assert_eq!(
        std::fs::read_to_string(f.out("ro/readme.txt")).unwrap(),
        "readable\n"
    );
    // Under the embedded default too: /etc is ro.
    let mut d = Fixture::new(Mode::EmbeddedDefault, &[]);
    d.sh("echo x > /etc/toolsrv-escape-test").denied(EACCES);
    assert!(!std::path::Path::new("/etc/toolsrv-escape-test").exists());
    // rw is writable.
    let rw = f.out("rw").display().to_string();
    f.sh(&format!("echo written > {rw}/new.txt")).ok();
    assert_eq!(
        std::fs::read_to_string(f.out("rw/new.txt")).unwrap(),
        "written\n"
    );
}

#[test]
fn sandbox_exec_needs_rox_not_just_ro() {
    let mut f = with_policy();
    let echo = std::fs::canonicalize("/bin/echo").expect("/bin/echo");
    for d in ["ro", "rox"] {
        let dst = f.out(d).join("myecho");
        std::fs::copy(&echo, &dst).unwrap();
        std::fs::set_permissions(&dst, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let ro = f.out("ro/myecho").display().to_string();
    let rox = f.out("rox/myecho").display().to_string();
    f.sh(&format!("{ro} escaped")).denied(EACCES);
    assert_eq!(f.sh(&format!("{rox} allowed")).ok(), "allowed\n");
    // Reading the same binary from ro works: only execute is missing.
    f.sh(&format!("cat {ro} > /dev/null")).ok();
}

#[test]
fn sandbox_link_and_rename_from_rw_into_ro_are_denied() {
    let mut f = with_policy();
    let rw = f.out("rw").display().to_string();
    let ro = f.out("ro").display().to_string();
    f.sh(&format!("ln {rw}/file.txt {ro}/linked.txt"))
        .denied(EACCES);
    f.sh(&format!("mv {rw}/file.txt {ro}/moved.txt"))
        .denied(EACCES);
    assert!(!f.out("ro/linked.txt").exists());
    assert!(!f.out("ro/moved.txt").exists());
    assert!(f.out("rw/file.txt").exists());
    // Within rw, across directories, both work.
    f.sh(&format!("ln {rw}/file.txt {rw}/sub/linked.txt")).ok();
    f.sh(&format!("mv {rw}/file.txt {rw}/sub/moved.txt")).ok();
    assert_eq!(
        std::fs::read_to_string(f.out("rw/sub/moved.txt")).unwrap(),
        "movable\n"
    );
    // Out of ro into rw: removing from ro is denied.
    f.sh(&format!("mv {ro}/readme.txt {rw}/stolen.txt"))
        .denied(EACCES);
    assert!(f.out("ro/readme.txt").exists());
}

#[test]
fn sandbox_truncating_an_ro_file_is_denied() {
    let mut f = with_policy();
    let probe = f.install_netprobe();
    let ro = f.out("ro/readme.txt").display().to_string();
    f.sh(&format!("truncate -s 0 {ro}")).denied(EACCES);
    // truncate(2) by path: Landlock's truncate right (ABI 3).
    f.sh(&format!("{probe} truncate {ro}")).denied(EACCES);
    assert_eq!(std::fs::read_to_string(&ro).unwrap(), "readable\n");
    let rw = f.out("rw/file.txt").display().to_string();
    assert_eq!(f.sh(&format!("{probe} truncate {rw}")).ok(), "ok\n");
    assert_eq!(std::fs::read_to_string(&rw).unwrap(), "");
}

#[test]
fn sandbox_symlinks_in_rw_pointing_outside_do_not_escape() {
    for mode in MODES {
        let mut f = fixture_for(mode);
        let secret_dir = f.out("secret");
        // Created by the test before the run.
        std::os::unix::fs::symlink(secret_dir.join("secret.txt"), f.cwd().join("pre")).unwrap();
        f.sh("cat pre").denied(EACCES);
        // Created by the tool itself.
        let sd = secret_dir.display().to_string();
        f.sh(&format!("ln -s {sd} dirlink && cat dirlink/secret.txt"))
            .denied(EACCES);
        f.sh("echo planted > dirlink/planted.txt").denied(EACCES);
        assert!(!secret_dir.join("planted.txt").exists(), "{mode}");
        f.sh("echo overwritten > pre").denied(EACCES);
        assert_eq!(
            std::fs::read_to_string(secret_dir.join("secret.txt")).unwrap(),
            SECRET
        );
    }
    // A symlink into an ro dir grants reading what ro grants, no more.
    let mut f = with_policy();
    let ro = f.out("ro/readme.txt").display().to_string();
    assert_eq!(f.sh(&format!("ln -s {ro} l && cat l")).ok(), "readable\n");
    f.sh("echo x > l").denied(EACCES);
}

#[test]
fn sandbox_a_request_cannot_widen_its_sandbox_with_cwd() {
    let mut f = Fixture::new(Mode::EmbeddedDefault, &[]);
    let target = f.out("secret").display().to_string();
    // `{CWD}` is rwx in the default policy: naming `/` (or any tree outside the
    // server's --cwd) as the request's cwd would grant it. It is refused before
    // anything runs.
    for cwd in ["/", target.as_str(), ".."] {
        let o = f.call("a1", "sh", "touch escaped", &[("cwd", cwd)]);
        assert!(o.is_error, "cwd {cwd}: {o:?}");
        assert!(
            o.text.contains("is outside the server's --cwd"),
            "cwd {cwd}: {}",
            o.text
        );
    }
    assert!(!std::path::Path::new("/escaped").exists());
    assert!(!f.out("secret/escaped").exists());
    // A directory under --cwd is fine.
    std::fs::create_dir_all(f.cwd().join("sub")).unwrap();
    let o = f.call("a1", "sh", "pwd", &[("cwd", "sub")]);
    assert!(o.ok().trim_end().ends_with("/sub"), "{o:?}");
}

/// Whether this test process may read `/etc/shadow` itself (it runs as root):
/// only then does a denial inside the sandbox show that Landlock refused it.
fn shadow_readable_here() -> bool {
    let readable = std::fs::read("/etc/shadow").is_ok();
    if !readable {
        toolsrv_testkit::skip::cannot_run_here(
            "/etc/shadow is missing or unreadable here: its denial proves nothing",
        );
    }
    readable
}

#[test]
fn sandbox_a_rule_on_etc_does_not_hand_out_its_credential_files() {
    for mode in MODES {
        let mut f = fixture_for(mode);
        if shadow_readable_here() {
            f.sh("cat /etc/shadow").hidden();
            if std::path::Path::new("/etc/gshadow").exists() {
                f.sh("cat /etc/gshadow").hidden();
            }
        }
        // The rest of /etc stays readable, and /etc listable.
        assert!(f.sh("cat /etc/passwd").ok().contains("root:"), "{mode}");
        let listing = f.sh("ls /etc").ok().to_string();
        assert!(
            listing.lines().any(|l| l == "passwd") && listing.lines().any(|l| l == "shadow"),
            "{mode}: {listing}"
        );
        // Beside a protected directory (/etc/ssl/private), the rest of its
        // parent stays readable: TLS certificates, for one.
        if std::path::Path::new("/etc/ssl/openssl.cnf").exists() {
            assert!(!f.sh("cat /etc/ssl/openssl.cnf").ok().is_empty(), "{mode}");
            f.sh("ls /etc/ssl/certs >/dev/null").ok();
        }
    }
}

#[test]
fn sandbox_a_rule_that_names_a_credential_file_grants_it() {
    if !shadow_readable_here() {
        return;
    }
    let outside = crate::sandbox::outside_dir();
    let mut policy = Policy::new(outside.path());
    policy.ro.push("/etc/shadow".into());
    let mut f = Fixture::start(outside, Mode::File(policy), &[], &[], None);
    // Other tests add and remove users while this one runs: the root line,
    // which none of them changes, stands for the file.
    let shadow = std::fs::read_to_string("/etc/shadow").unwrap();
    let root = shadow
        .lines()
        .find(|l| l.starts_with("root:"))
        .expect("a root line in /etc/shadow");
    let got: String = f.sh("cat /etc/shadow").ok().to_string();
    assert!(got.lines().any(|l| l == root), "{got}");
}
