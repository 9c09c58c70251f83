//! Issue 33 item 5 over the socket: a root server's confined tools run as
//! uid 0 of a user namespace of their own, mapped to unprivileged host ids,
//! with their writable rules bound through id-mapped mounts (docs/
//! containment.md, "Identity"). Ordinary permission checks then hide what
//! only root or another user may read under a read rule, with no scan budget
//! and no window.
//!
//! Each attack test succeeded while a root server's tools ran as root (with
//! `CAP_DAC_OVERRIDE`, and the bounded root-only scan at each view build):
//! run them with `TOOLSRV_USERNS=root` in the environment (the servers
//! inherit it) to see the files read. The last tests are controls: what a
//! root server's tools could do in the workspace they still do.

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::Value;

use crate::procs_util::{call, load};
use crate::util::{wait_until, Launch, Raw, Server};

/// What the secret files hold: it must never appear in a tool's output.
const SECRET: &str = "unprivileged-suite-secret-91b3";

/// Whether this test process is root (the suite's premise: a root server).
fn root() -> bool {
    // Safety: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

/// A canonical temporary directory (0700, as `tempfile` makes them: the
/// view's skeleton must let the tools through it).
fn tmp() -> (tempfile::TempDir, PathBuf) {
    let d = tempfile::tempdir().expect("tempdir");
    let p = std::fs::canonicalize(d.path()).expect("canonical");
    (d, p)
}

/// Single-quoted for sh.
fn q(p: &Path) -> String {
    format!("'{}'", p.display().to_string().replace('\'', r"'\''"))
}

/// Writes `text` to `path` with `mode`, owned by `uid`:`gid`.
fn file(path: &Path, text: &str, mode: u32, owner: (u32, u32)) {
    std::fs::write(path, text).expect("write");
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).expect("chmod");
    std::os::unix::fs::chown(path, Some(owner.0), Some(owner.1)).expect("chown");
}

/// A directory with `mode`.
fn dir(path: &Path, mode: u32) {
    std::fs::create_dir_all(path).expect("mkdir");
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).expect("chmod");
}

/// A policy file in `dir` with these `ro` rules besides the usual ones.
fn policy(dir: &Path, ro: &[&Path]) -> PathBuf {
    let mut ro: Vec<String> = ro.iter().map(|p| p.display().to_string()).collect();
    ro.push("/etc".into());
    let rules = serde_json::json!({
        "filesystem": {
            "ro": ro,
            "rox": ["/usr", "/bin", "/sbin", "/lib", "/lib64"],
            "rw": ["/dev/null"],
            "rwx": ["{CWD}"],
        },
        "advanced": {"add_exec": true},
    });
    let p = dir.join("sandbox.yaml");
    std::fs::write(&p, rules.to_string()).expect("policy");
    p
}

/// A server (`--no-auth`, `shell` loaded for `a1`) and a connection.
struct Session {
    srv: Server,
    c: Raw,
}

impl Session {
    fn start(launch: Launch) -> Session {
        let srv = launch.arg("--no-auth").start();
        let mut c = srv.attached();
        load(&mut c, "a1", "shell");
        Session { srv, c }
    }

    fn with_policy(policy: &Path) -> Session {
        let p = policy.display().to_string();
        Session::start(Launch::new().args(["--sandbox", &p]))
    }

    /// Runs `cmd` in the shell tool: (isError, text).
    fn sh(&mut self, cmd: &str) -> (bool, String) {
        let r: Value = call(
            &mut self.c,
            &[("tool", "shell"), ("agent", "a1"), ("command", cmd)],
        );
        (
            r["isError"] == true,
            r["content"][0]["text"]
                .as_str()
                .unwrap_or_default()
                .to_string(),
        )
    }

    /// Runs `cmd`, which must succeed; its text.
    #[track_caller]
    fn ok(&mut self, cmd: &str) -> String {
        let (err, text) = self.sh(cmd);
        assert!(!err, "{cmd}: {text}\n{}", self.srv.log_text());
        text
    }
}

/// Asserts that `cat` of `path` in a tool was refused by the permission
/// check, and the secret did not leak.
#[track_caller]
fn unreadable(s: &mut Session, path: &Path) {
    let (_, text) = s.sh(&format!("cat {}; echo end", q(path)));
    assert!(
        !text.contains(SECRET) && text.contains("Permission denied"),
        "{} was readable: {text}",
        path.display()
    );
}

/// Attack: a 0600 root file created under an `ro` rule after the server
/// started (after its view was built and scanned) was readable: the scan
/// ran once per build. Now the permission check refuses it.
#[test]
fn a_root_file_made_after_startup_under_a_read_rule_is_unreadable() {
    if !root() {
        return;
    }
    let (_d, d) = tmp();
    let conf = d.join("conf");
    dir(&conf, 0o755);
    file(&conf.join("open.txt"), "open\n", 0o644, (0, 0));
    let mut s = Session::with_policy(&policy(&d, &[&conf]));
    assert_eq!(
        s.ok(&format!("cat {}", q(&conf.join("open.txt")))),
        "open\n"
    );
    let late = conf.join("late.key");
    file(&late, SECRET, 0o600, (0, 0));
    unreadable(&mut s, &late);
    // Also a root-only directory made later, and what is in it.
    dir(&conf.join("private"), 0o700);
    file(&conf.join("private/k"), SECRET, 0o644, (0, 0));
    unreadable(&mut s, &conf.join("private/k"));
}

/// Attack: a 0600 file of another user under an `ro` rule (PostgreSQL's
/// `pg_hba.conf`, owner postgres) was readable: root's `CAP_DAC_OVERRIDE`.
/// Now only its owner may read it, and the tool is not its owner.
#[test]
fn another_users_0600_file_under_a_read_rule_is_unreadable() {
    if !root() {
        return;
    }
    let (_d, d) = tmp();
    let conf = d.join("postgresql");
    dir(&conf, 0o755);
    let hba = conf.join("pg_hba.conf");
    file(&hba, SECRET, 0o600, (4321, 4321));
    // Its group may read the next one: the tool is not in it.
    file(&conf.join("group.conf"), SECRET, 0o640, (4321, 4321));
    let mut s = Session::with_policy(&policy(&d, &[&conf]));
    unreadable(&mut s, &hba);
    unreadable(&mut s, &conf.join("group.conf"));
}

/// Attack: with `/proc` listed before the directory, the root-only scan's
/// budget (20,000 entries, `ro` rules first) went to `/proc` and a big
/// directory, and the root-only file after them was readable. Now there is
/// no budget to exhaust.
#[test]
fn a_root_only_file_after_proc_and_a_big_directory_is_unreadable() {
    if !root() {
        return;
    }
    let (_d, d) = tmp();
    let big = d.join("big");
    dir(&big, 0o755);
    for i in 0..21_000 {
        std::fs::write(big.join(format!("f{i}")), "").expect("file");
    }
    let conf = d.join("etc");
    dir(&conf, 0o755);
    let key = conf.join("key");
    file(&key, SECRET, 0o600, (0, 0));
    let proc = PathBuf::from("/proc");
    let mut s = Session::with_policy(&policy(&d, &[&proc, &big, &conf]));
    unreadable(&mut s, &key);
    // The build did not walk anything for it: no scan was logged.
    let log = s.srv.log_text();
    assert!(
        !log.contains("root-only files under read rules"),
        "a root-only scan ran: {log}"
    );
}

/// Control: a rule that names a root-only file grants it (the rule is how a
/// policy hands it out: its bind gets the tools' id maps), and so does one
/// naming a root-only directory: everything in it reads as its owner sees
/// it, the root-only files inside included (a rule on a directory only
/// others may not enter is read as handing over what its owner may read).
#[test]
fn a_rule_naming_a_root_only_file_or_directory_grants_it() {
    if !root() {
        return;
    }
    let (_d, d) = tmp();
    let conf = d.join("conf");
    dir(&conf, 0o755);
    let named = conf.join("named.key");
    file(&named, "named\n", 0o600, (0, 0));
    file(&conf.join("other.key"), SECRET, 0o600, (0, 0));
    let private = d.join("private");
    dir(&private, 0o700);
    file(&private.join("inner.key"), "inner\n", 0o600, (0, 0));
    let mut s = Session::with_policy(&policy(&d, &[&conf, &named, &private]));
    assert_eq!(s.ok(&format!("cat {}", q(&named))), "named\n");
    assert_eq!(
        s.ok(&format!("cat {}", q(&private.join("inner.key")))),
        "inner\n"
    );
    // Its siblings under the directory rule stay unreadable.
    unreadable(&mut s, &conf.join("other.key"));
}

/// The reading of `/proc/<pid>/status` line `name` (its first field).
fn status_field(pid: u32, name: &str) -> Option<String> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    text.lines()
        .find_map(|l| l.strip_prefix(name))
        .map(|v| v.split_whitespace().next().unwrap_or_default().to_string())
}

/// A tool sees itself as root (`id -u` 0, `id -un` root) while the host
/// sees its process as the unprivileged id tool uid 0 maps to (the
/// `doctor` file's `identity.tools.host_uid`), with no supplementary group;
/// host root's files under a read-only rule show as `nobody`.
#[test]
fn a_tool_is_uid_0_inside_and_an_unprivileged_id_on_the_host() {
    if !root() {
        return;
    }
    let mut s = Session::start(Launch::new());
    let doctor: Value = serde_json::from_slice(&s.c.read_file("doctor")).expect("doctor");
    let host_uid = doctor["identity"]["tools"]["host_uid"]
        .as_u64()
        .unwrap_or_else(|| panic!("no tools' host uid: {doctor}")) as u32;
    assert!(host_uid >= 65_536, "{doctor}");
    let pid_file = s.srv.cwd().join("pid");
    let mut c = s.srv.attached();
    load(&mut c, "a1", "shell");
    let script = "id -u; id -un; id -g; stat -c %U /usr/bin; echo $$ > pid; sleep 3";
    let run = std::thread::spawn(move || {
        call(
            &mut c,
            &[("tool", "shell"), ("agent", "a1"), ("command", script)],
        )
    });
    assert!(
        wait_until(Duration::from_secs(10), || std::fs::read_to_string(
            &pid_file
        )
        .is_ok_and(|t| t.ends_with('\n'))),
        "the tool never wrote its pid"
    );
    let tool_pid: i32 = std::fs::read_to_string(&pid_file)
        .expect("pid")
        .trim()
        .parse()
        .expect("a pid");
    // The tool's `$$` is its pid in the tools PID namespace.
    let pid = u32::try_from(s.srv.host_pid(tool_pid)).expect("the tool's pid on the host");
    let uid = status_field(pid, "Uid:");
    let gid = status_field(pid, "Gid:");
    let groups = std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|t| {
            t.lines()
                .find(|l| l.starts_with("Groups:"))
                .map(str::to_string)
        });
    let r = run.join().expect("the call");
    let text = r["content"][0]["text"].as_str().unwrap_or_default();
    assert_eq!(text, "0\nroot\n0\nnobody\n", "{r}");
    assert_eq!(
        uid,
        Some(host_uid.to_string()),
        "the host's view of the tool"
    );
    assert_eq!(gid, Some(host_uid.to_string()));
    assert_eq!(groups.as_deref().map(str::trim_end), Some("Groups:"));
    // The file the tool made in the workspace is root's on the host.
    let m = std::fs::metadata(s.srv.cwd().join("pid")).expect("pid file");
    assert_eq!((m.uid(), m.gid()), (0, 0));
}

/// Control: in the workspace (a writable rule, id-mapped) a tool works as
/// root did: what it makes is owned by root on the host, it writes a 0600
/// file owned by uid 1000, and it `chown`s a file to 1000 (owned by 1000 on
/// the host).
#[test]
fn in_the_workspace_a_tool_makes_root_files_and_writes_and_chowns_any_owners() {
    if !root() {
        return;
    }
    let mut s = Session::start(Launch::new());
    let ws = s.srv.cwd().to_path_buf();
    file(&ws.join("theirs"), "theirs\n", 0o600, (1000, 1000));
    file(&ws.join("give"), "give\n", 0o644, (0, 0));
    let text = s.ok(
        "mkdir -p made/sub && echo new > made/sub/new && echo more >> theirs && cat theirs \
         && chown 1000:1000 give && stat -c '%u:%g' made/sub/new give theirs",
    );
    assert_eq!(text, "theirs\nmore\n0:0\n1000:1000\n1000:1000\n");
    for p in ["made", "made/sub", "made/sub/new"] {
        let m = std::fs::metadata(ws.join(p)).expect("made");
        assert_eq!((m.uid(), m.gid()), (0, 0), "{p}");
    }
    let m = std::fs::metadata(ws.join("give")).expect("give");
    assert_eq!((m.uid(), m.gid()), (1000, 1000));
    assert_eq!(
        std::fs::read_to_string(ws.join("theirs")).expect("theirs"),
        "theirs\nmore\n"
    );
}

/// Control: a tool file only its owner (root) may read and run, in a tools
/// directory only root may enter, still runs: the view shows the tools
/// directories through the tools' id maps.
#[test]
fn a_root_only_tool_file_still_runs() {
    if !root() {
        return;
    }
    let srv = Launch::new()
        .tools(&[(
            "mine",
            "#!/bin/sh\n# ---\n# description: Say who runs it\n# ---\necho ran as $(id -u)\n",
        )])
        .arg("--no-auth")
        .start();
    let tools = srv.tools_dir();
    std::fs::set_permissions(tools.join("mine"), std::fs::Permissions::from_mode(0o700))
        .expect("chmod");
    std::fs::set_permissions(&tools, std::fs::Permissions::from_mode(0o700)).expect("chmod");
    let mut c = srv.attached();
    load(&mut c, "a1", "mine");
    let r = call(&mut c, &[("tool", "mine"), ("agent", "a1")]);
    assert_eq!(r["isError"], false, "{r}\n{}", srv.log_text());
    assert_eq!(r["content"][0]["text"], "ran as 0\n", "{r}");
}
