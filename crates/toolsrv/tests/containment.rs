//! docs/containment.md, first two points: every process of a run belongs to it and dies
//! with it (however it detached), and a run's limits hold.
//!
//! Each test is an attack a tool can make: descendants that call `setsid`,
//! double-fork or daemonize, a fork bomb, an allocation, a long write, a busy
//! loop. Before containment, every one of them outlived its run or took what it
//! wanted. These run on this project's machines (root, cgroup v1 controllers and
//! the unified v2 hierarchy); the PID-namespace path, which a server without a
//! writable cgroup uses, is forced with `TOOLSRV_CONTAINMENT` and tested too.

use std::path::{Path, PathBuf};
use std::time::Duration;

use toolsrv_wire::Body;

use crate::lifecycle_util::{all_dead_within, kill_pids, read_pid_file};
use crate::procs_util::{
    bg, call_shell, error_text, final_stat, is_cancelled_reply, load, payload, recv_tag, start_read,
};
use crate::util::{toolsrv_bin, wait_until, Launch, Raw, Server, WAIT};

/// How long a run's leftovers may take to die (docs/containment.md).
const RUN_END: Duration = Duration::from_secs(3);
/// How long they may take after the server stops or dies.
const SERVER_END: Duration = Duration::from_secs(5);

/// The built-in policy with its `limits:` block replaced by `limits`.
fn policy_with_limits(limits: &str) -> String {
    let default = include_str!("../../sandbox/default-sandbox.yaml");
    let at = default
        .find("\nlimits:")
        .expect("the default policy has a limits block");
    format!("{}\nlimits:\n{limits}\n", &default[..at])
}

/// A `--no-auth` server on the built-in tools with `shell` loaded for `a1`;
/// `limits` (YAML lines under `limits:`) replaces the policy's limits, and
/// `env` is added to the server's environment.
fn server(limits: Option<&str>, env: &[(&str, &str)], extra: &[&str]) -> (Server, Raw) {
    let dir = tempfile::tempdir().expect("tempdir");
    let cwd = dir.path().to_path_buf();
    // Tools write in `w/`: the cwd itself holds the socket and the policy,
    // which the sandbox carves out (a tool may not create files beside them).
    std::fs::create_dir(dir.path().join("w")).expect("w");
    let mut args: Vec<String> = vec!["--no-auth".into()];
    if let Some(l) = limits {
        let p = dir.path().join("sandbox.yaml");
        std::fs::write(&p, policy_with_limits(l)).expect("write policy");
        args.push("--sandbox".into());
        args.push(p.display().to_string());
    }
    args.extend(extra.iter().map(|s| s.to_string()));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let srv = Launch::new()
        .cwd_dir(dir)
        .listen(&cwd.join("toolsrv.sock"))
        .envs(env.iter().copied())
        .args(args)
        .start();
    let mut c = srv.attached();
    load(&mut c, "a1", "shell");
    (srv, c)
}

/// Shell text that starts three escapees, each recording its pid in
/// `<prefix>.<kind>` in the working directory, and waits until all three did:
/// one in a new session (`setsid`), one double-forked (its parent exits at
/// once, so it is re-parented), one daemonized (new session, double fork,
/// standard descriptors closed).
fn escapees(prefix: &str) -> String {
    let rec = |kind: &str| {
        format!("echo $! > w/{prefix}.{kind}.tmp && mv w/{prefix}.{kind}.tmp w/{prefix}.{kind}")
    };
    format!(
        "setsid sh -c 'sleep 300 & {setsid}' </dev/null >/dev/null 2>&1; \
         ( sh -c 'sleep 300 & {fork}' & ) ; \
         setsid sh -c '( exec 0<&- 1>&- 2>&-; sleep 300 & {daemon} ) &' </dev/null >/dev/null 2>&1; \
         while [ ! -e w/{prefix}.setsid ] || [ ! -e w/{prefix}.fork ] || [ ! -e w/{prefix}.daemon ]; do sleep 0.02; done",
        setsid = rec("setsid"),
        fork = rec("fork"),
        daemon = rec("daemon"),
    )
}

/// The pids the escapees of `prefix` recorded in `srv`'s cwd, as this
/// process sees them (they wrote their pids in the tools PID namespace).
fn escapee_pids(srv: &Server, prefix: &str) -> Vec<i32> {
    ["setsid", "fork", "daemon"]
        .iter()
        .map(|k| srv.host_pid(read_pid_file(&dir_of(srv).join(format!("w/{prefix}.{k}")))))
        .collect()
}

/// Asserts that `pids` are all dead within `limit` (and kills them either way,
/// so a failing test leaves nothing behind).
fn assert_all_dead(pids: &[i32], limit: Duration, what: &str) {
    let dead = all_dead_within(pids, limit);
    let alive: Vec<i32> = pids
        .iter()
        .copied()
        .filter(|p| !crate::procs_util::os_dead(*p))
        .collect();
    kill_pids(pids);
    assert!(dead, "{what}: still alive after {limit:?}: {alive:?}");
}

/// [`assert_all_dead`], and where `srv` has a tools PID namespace, that it
/// holds no process but its init within `limit` either: escapees whose pids
/// were read after their run ended (so that they could not be named any
/// more) are checked this way.
fn assert_run_left_nothing(srv: &Server, pids: &[i32], limit: Duration, what: &str) {
    assert_all_dead(pids, limit, what);
    if toolsrv_testkit::pids::tools_namespace(srv.pid()).is_some() {
        let mut left = Vec::new();
        assert!(
            wait_until(limit, || {
                left = toolsrv_testkit::pids::in_tools_namespace(srv.pid());
                left.is_empty()
            }),
            "{what}: left in the tools PID namespace after {limit:?}: {left:?}"
        );
    }
}

fn dir_of(srv: &Server) -> PathBuf {
    srv.cwd().to_path_buf()
}

#[test]
fn descendants_of_a_sync_call_die_when_it_returns_however_they_detached() {
    let (srv, mut c) = server(None, &[], &[]);
    let r = call_shell(&mut c, &format!("{}; echo returned", escapees("s")));
    assert_eq!(r["isError"], false, "{r}");
    let pids = escapee_pids(&srv, "s");
    assert_run_left_nothing(&srv, &pids, RUN_END, "escapees of a finished sync call");
}

#[test]
fn descendants_of_a_background_call_die_with_ctl_kill() {
    let (srv, mut c) = server(None, &[], &[]);
    let pid = bg(
        &mut c,
        &[
            ("tool", "shell"),
            ("agent", "a1"),
            ("command", &format!("{}; sleep 300", escapees("b"))),
        ],
    )
    .expect("bg");
    let pids = escapee_pids(&srv, "b");
    c.write(&format!("proc/{pid}/ctl"), "kill")
        .expect("ctl kill");
    let st = final_stat(&mut c, pid);
    assert_eq!(st["state"], "killed", "{st}");
    assert_run_left_nothing(&srv, &pids, RUN_END, "escapees of a killed background call");
}

#[test]
fn descendants_of_a_cancelled_call_die_with_it() {
    let (srv, mut c) = server(None, &[], &[]);
    let data = payload(&[
        ("tool", "shell"),
        ("agent", "a1"),
        ("command", &format!("{}; sleep 300", escapees("c"))),
    ]);
    let tag = start_read(&mut c, 20, "proc/new", &data);
    let pids = escapee_pids(&srv, "c");
    let ctag = c.tag();
    c.send(ctag, Body::Tclunk { fid: 20 });
    let reply = recv_tag(&mut c, tag, &mut Vec::new());
    assert!(is_cancelled_reply(&reply), "{reply:?}");
    assert_run_left_nothing(&srv, &pids, RUN_END, "escapees of a cancelled call");
}

#[test]
fn descendants_of_a_timed_out_call_die_with_it() {
    let (srv, mut c) = server(None, &[], &[]);
    let r = crate::procs_util::call(
        &mut c,
        &[
            ("tool", "shell"),
            ("agent", "a1"),
            ("timeout", "2s"),
            ("command", &format!("{}; sleep 300", escapees("t"))),
        ],
    );
    assert!(error_text(&r).contains("timed out"), "{r}");
    let pids = escapee_pids(&srv, "t");
    assert_run_left_nothing(&srv, &pids, RUN_END, "escapees of a timed-out call");
}

/// Starts a background run with escapees and returns their pids.
fn running_escapees(srv: &Server, c: &mut Raw, prefix: &str) -> Vec<i32> {
    bg(
        c,
        &[
            ("tool", "shell"),
            ("agent", "a1"),
            ("command", &format!("{}; sleep 300", escapees(prefix))),
        ],
    )
    .expect("bg");
    escapee_pids(srv, prefix)
}

/// Escapees of a running background call are dead within [`SERVER_END`] of
/// the server getting `sig` and exiting.
fn escapees_die_with_the_server(sig: i32, prefix: &str, what: &str) {
    let (mut srv, mut c) = server(None, &[], &[]);
    let pids = running_escapees(&srv, &mut c, prefix);
    // Safety: kill(2) of the server this test started.
    unsafe { libc::kill(srv.pid() as i32, sig) };
    let child = srv.child.as_mut().expect("child");
    assert!(wait_until(WAIT, || matches!(child.try_wait(), Ok(Some(_)))));
    assert_all_dead(&pids, SERVER_END, what);
}

#[test]
fn descendants_die_when_the_server_is_terminated() {
    escapees_die_with_the_server(
        libc::SIGTERM,
        "term",
        "escapees after SIGTERM of the server",
    );
}

#[test]
fn descendants_die_when_the_server_is_killed() {
    escapees_die_with_the_server(
        libc::SIGKILL,
        "kill",
        "escapees after SIGKILL of the server",
    );
}

/// The children of `pid` (from `/proc/<pid>/task/<pid>/children`).
fn children_of(pid: u32) -> Vec<i32> {
    std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children"))
        .unwrap_or_default()
        .split_whitespace()
        .filter_map(|p| p.parse().ok())
        .collect()
}

/// The attack of issue 13: a detached survivor of a killed server waits for
/// the next server on the same socket, to authenticate first with a secret of
/// its own (the first accepted secret wins) and own it. The old server *and*
/// its watchdog are killed with SIGKILL (as `pkill -9 toolsrv` does), so only
/// the new server's startup can stop it: the survivor must be dead before the
/// new server accepts its first connection, and the human's client then gets
/// in with its own secret.
#[test]
fn a_survivor_of_a_killed_server_cannot_take_over_the_next_one() {
    // --yolo: the survivor runs the toolsrv client, which lies outside the
    // default policy's executable paths; the attack is about surviving.
    let (mut srv, mut c) = server(None, &[], &["--yolo"]);
    let dir = dir_of(&srv);
    let socket = srv.socket.clone();
    let evil = dir.join("evil.secret");
    std::fs::write(&evil, "evil-secret-0123456789").expect("evil secret");
    // The survivor's loop: try the socket with its own secret until it works.
    let attack = format!(
        "setsid sh -c 'echo $$ > w/survivor.tmp && mv w/survivor.tmp w/survivor; \
         while :; do {bin} --socket {sock} --secret-file {evil} info >/dev/null 2>&1 && touch w/owned; sleep 0.02; done' \
         </dev/null >/dev/null 2>&1 & sleep 300",
        bin = toolsrv_bin().display(),
        sock = socket.display(),
        evil = evil.display()
    );
    bg(
        &mut c,
        &[("tool", "shell"), ("agent", "a1"), ("command", &attack)],
    )
    .expect("bg");
    let survivor = srv.host_pid(read_pid_file(&dir.join("w/survivor")));
    let server_pid = srv.pid();
    let watchdog = children_of(server_pid);
    assert!(!watchdog.is_empty(), "the server has no watchdog child");
    // Kill the watchdog first (it would otherwise clean up at once), then the server.
    kill_pids(&watchdog);
    // Safety: kill(2) of the server this test started.
    unsafe { libc::kill(server_pid as i32, libc::SIGKILL) };
    let child = srv.child.as_mut().expect("child");
    assert!(wait_until(WAIT, || matches!(child.try_wait(), Ok(Some(_)))));
    srv.child = None;
    // The old server took any client (--no-auth): what the survivor did
    // against it does not count.
    let _ = std::fs::remove_file(dir.join("w/owned"));
    assert!(
        !crate::procs_util::os_dead(survivor),
        "the survivor died with the old server already: the attack is not set up"
    );
    // A new server on the same socket, with a secret (auth on).
    let _ = std::fs::remove_file(&socket);
    let dir2 = tempfile::tempdir().expect("tempdir");
    let mut next = std::process::Command::new(toolsrv_bin())
        .arg("serve")
        .arg("--listen")
        .arg(&socket)
        .arg("--cwd")
        .arg(&dir)
        .arg("--log")
        .arg(dir2.path().join("server.log"))
        .env("OLLIE_CFG_PATH", dir2.path().join("cfg"))
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("start the next server");
    let came_up = wait_until(WAIT, || {
        std::os::unix::net::UnixStream::connect(&socket).is_ok()
    });
    let survivor_dead = crate::procs_util::os_dead(survivor);
    kill_pids(&[survivor]);
    let owned = dir.join("w/owned").exists();
    // The human's client: its own secret file, mode 0600.
    let mine = dir2.path().join("mine.secret");
    std::fs::write(&mine, "the-humans-secret-42").expect("secret");
    std::fs::set_permissions(&mine, std::os::unix::fs::PermissionsExt::from_mode(0o600))
        .expect("chmod");
    let out = std::process::Command::new(toolsrv_bin())
        .arg("--socket")
        .arg(&socket)
        .arg("--secret-file")
        .arg(&mine)
        .arg("info")
        .output()
        .expect("run the client");
    // Safety: kill(2) of the server this test started.
    unsafe { libc::kill(next.id() as i32, libc::SIGKILL) };
    let _ = next.wait();
    assert!(came_up, "the next server did not come up");
    assert!(
        survivor_dead,
        "the survivor was alive when the next server accepted connections"
    );
    assert!(!owned, "the survivor authenticated to the next server");
    assert!(
        out.status.success(),
        "the human's client was refused: {out:?}"
    );
}

/// Processes alive now whose command line is exactly `cmdline` (NUL-separated).
fn count_cmdline(cmdline: &[u8]) -> usize {
    let Ok(rd) = std::fs::read_dir("/proc") else {
        return 0;
    };
    rd.flatten()
        .filter(|e| {
            e.file_name()
                .to_str()
                .is_some_and(|s| s.bytes().all(|b| b.is_ascii_digit()))
        })
        .filter(|e| std::fs::read(e.path().join("cmdline")).is_ok_and(|c| c == cmdline))
        .filter(|e| {
            let pid: i32 = e
                .file_name()
                .to_str()
                .and_then(|s| s.parse().ok())
                .unwrap_or(0);
            !crate::procs_util::os_dead(pid)
        })
        .count()
}

#[test]
fn a_bounded_fork_bomb_never_has_more_processes_than_its_limit_and_leaves_none() {
    let (_srv, mut c) = server(Some("  processes: 32"), &[], &[]);
    // 200 sleepers; the shell itself counts too.
    let mut o = _srv.attached();
    let marker = b"sleep\x00313.5\x00";
    let pid = bg(
        &mut o,
        &[
            ("tool", "shell"),
            ("agent", "a1"),
            (
                "command",
                "for i in $(seq 200); do sleep 313.5 & done 2>/dev/null; sleep 2",
            ),
        ],
    )
    .expect("bg");
    let mut most = 0;
    let finished = wait_until(Duration::from_secs(15), || {
        most = most.max(count_cmdline(marker));
        crate::procs_util::stat(&mut c, pid)["state"] != "running"
    });
    assert!(finished, "the fork bomb did not finish");
    let st = final_stat(&mut c, pid);
    assert!(
        most <= 32,
        "{most} sleepers alive at once under processes: 32"
    );
    assert!(
        most >= 20,
        "only {most} sleepers ever ran: the test did not load the limit"
    );
    assert!(
        wait_until(RUN_END, || count_cmdline(marker) == 0),
        "sleepers left after the run: {}",
        count_cmdline(marker)
    );
    let out = String::from_utf8_lossy(&o.read_file(&format!("proc/{pid}/out"))).to_string();
    assert!(
        out.trim_end()
            .ends_with("[toolsrv: limit reached: processes 32]"),
        "{out:?} ({st})"
    );
}

#[test]
fn a_sync_result_ends_with_the_limit_line() {
    let (_srv, mut c) = server(Some("  processes: 8"), &[], &[]);
    let r = call_shell(
        &mut c,
        "for i in $(seq 20); do sleep 1 & done 2>/dev/null; echo spawned",
    );
    let text = crate::procs_util::text(&r);
    assert!(
        text.ends_with("[toolsrv: limit reached: processes 8]"),
        "{text:?}"
    );
}

#[test]
fn an_allocation_over_the_memory_limit_ends_the_run_as_killed() {
    let (srv, mut c) = server(Some("  memory: 64MiB"), &[], &[]);
    // The fid stays open so the entry stays (docs/containment.md) to be listed below.
    let r = crate::procs_util::call_held(
        &mut c,
        91,
        &[
            ("tool", "shell"),
            ("agent", "a1"),
            (
                "command",
                "perl -e '$x = \"a\" x (512*1024*1024); print length($x)'",
            ),
        ],
    );
    let text = error_text(&r);
    assert!(
        text.ends_with("[toolsrv: limit reached: memory 64MiB]"),
        "{text:?}"
    );
    let mut o = srv.attached();
    let procs = crate::procs_util::list(&mut o, None);
    assert_eq!(procs[0]["state"], "killed", "{}", procs[0]);
    c.ok(toolsrv_wire::Body::Tclunk { fid: 91 });
    // The server is unharmed and serves the next call.
    let r = call_shell(&mut c, "echo still here");
    assert_eq!(crate::procs_util::ok_text(&r).trim(), "still here");
}

#[test]
fn a_write_over_the_file_size_limit_stops_at_the_limit() {
    let (srv, mut c) = server(Some("  file_size: 1MiB"), &[], &[]);
    // `head` is a child of the tool's shell: it dies of SIGXFSZ (the shell
    // says so); the server sees only the shell's exit status.
    let r = call_shell(&mut c, "head -c 5242880 /dev/zero > w/big");
    let text = error_text(&r);
    assert!(text.contains("exit status 153"), "{text:?}");
    // A tool whose own process writes past the limit dies of SIGXFSZ, and
    // that the server can tell.
    let r = call_shell(&mut c, "exec head -c 5242880 /dev/zero > w/big2");
    let text = error_text(&r);
    assert!(
        text.ends_with("[toolsrv: limit reached: file_size 1MiB]"),
        "{text:?}"
    );
    let len = std::fs::metadata(dir_of(&srv).join("w/big2"))
        .expect("big2")
        .len();
    assert_eq!(len, 1 << 20, "the file grew past file_size");
    let len = std::fs::metadata(dir_of(&srv).join("w/big"))
        .expect("big")
        .len();
    assert_eq!(len, 1 << 20, "the file grew past file_size");
    // The limit reached is a denial of the run, with the line that allows more.
    let payload = toolsrv_protocol::encode_payload(&[
        ("tool", "shell"),
        ("agent", "a1"),
        ("command", "exec head -c 5242880 /dev/zero > w/big3"),
    ]);
    let pid = c.ask("proc/new.bg", &payload).expect("started");
    let pid = pid.trim();
    let _ = c.read_file(&format!("proc/{pid}/wait"));
    let file = String::from_utf8(c.read_file(&format!("proc/{pid}/denials"))).expect("utf8");
    let d: serde_json::Value = serde_json::from_str(file.trim()).expect("one JSON line");
    assert_eq!(d["kind"], "limit", "{file}");
    assert_eq!(d["access"], "file_size");
    assert_eq!(d["target"], "1MiB");
    assert_eq!(d["allow"], "limits.file_size: 2MiB");
}

#[test]
fn a_busy_loop_over_the_cpu_limit_is_killed() {
    let (_srv, mut c) = server(Some("  cpu: 1s"), &[], &[]);
    let started = std::time::Instant::now();
    let r = call_shell(&mut c, "while :; do :; done");
    let text = error_text(&r);
    assert!(
        text.ends_with("[toolsrv: limit reached: cpu 1s]"),
        "{text:?}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "{:?}",
        started.elapsed()
    );
}

#[test]
fn open_files_bounds_each_process() {
    let (_srv, mut c) = server(Some("  open_files: 64"), &[], &[]);
    let r = call_shell(&mut c, "ulimit -n");
    assert_eq!(crate::procs_util::ok_text(&r).trim(), "64");
}

/// A tool whose metadata sets `limits:`; the policy allows 64 processes.
fn limits_tool_server(tool_limits: &str) -> (Server, Raw) {
    let dir = tempfile::tempdir().expect("tempdir");
    let tools = dir.path().join("tools");
    std::fs::create_dir(&tools).expect("tools");
    let meta = format!(
        "description: count what ulimit says\ncommand: \"ulimit -n\"\nlimits:\n{tool_limits}\n"
    );
    std::fs::write(tools.join("lim.yaml"), meta).expect("tool");
    let p = dir.path().join("sandbox.yaml");
    std::fs::write(&p, policy_with_limits("  processes: 64\n  open_files: 100")).expect("policy");
    let cwd = dir.path().to_path_buf();
    let args = [
        "--no-auth".to_string(),
        "--tools".into(),
        tools.display().to_string(),
        "--sandbox".into(),
        p.display().to_string(),
    ];
    let srv = Launch::new()
        .cwd_dir(dir)
        .listen(&cwd.join("toolsrv.sock"))
        .args(args)
        .start();
    let mut c = srv.attached();
    load(&mut c, "a1", "lim");
    (srv, c)
}

#[test]
fn a_tool_tightens_its_limits_but_never_loosens_them() {
    let (_srv, mut c) = limits_tool_server("  open_files: 50");
    let r = crate::procs_util::call(&mut c, &[("tool", "lim"), ("agent", "a1")]);
    assert_eq!(crate::procs_util::ok_text(&r).trim(), "50", "tightened");
    let (_srv, mut c) = limits_tool_server("  open_files: 5000");
    let r = crate::procs_util::call(&mut c, &[("tool", "lim"), ("agent", "a1")]);
    assert_eq!(crate::procs_util::ok_text(&r).trim(), "100", "not loosened");
}

/// `toolsrv serve` in `dir` with the policy `policy` and `env`, which must
/// refuse to start (exit 1); its stderr.
fn refused_at_start(dir: &Path, policy: &Path, env: &[(&str, &str)]) -> String {
    let out = std::process::Command::new(toolsrv_bin())
        .args(["serve", "--listen"])
        .arg(dir.join("s.sock"))
        .arg("--sandbox")
        .arg(policy)
        .env("OLLIE_CFG_PATH", dir.join("cfg"))
        .envs(env.iter().copied())
        .output()
        .expect("run");
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(1), "{err}");
    err
}

#[test]
fn a_bad_limit_in_the_policy_is_refused_with_its_name() {
    let dir = tempfile::tempdir().expect("tempdir");
    let p = dir.path().join("sandbox.yaml");
    std::fs::write(&p, policy_with_limits("  memory: lots")).expect("policy");
    let err = refused_at_start(dir.path(), &p, &[]);
    assert!(err.contains("invalid limit memory"), "{err}");
}

#[test]
fn the_startup_log_names_the_mechanism() {
    let (srv, _c) = server(None, &[], &[]);
    let log = srv.log_text();
    assert!(
        log.contains("containment") && log.contains("mechanism=Cgroup"),
        "{log}"
    );
}

/// The PID-namespace path (a server without a writable cgroup), forced.
#[test]
fn in_a_pid_namespace_descendants_of_a_sync_call_die_when_it_returns() {
    for mode in ["pidns", "userns"] {
        let (srv, mut c) = server(None, &[("TOOLSRV_CONTAINMENT", mode)], &[]);
        assert!(
            srv.log_text().contains("PidNamespace"),
            "{mode}: {}",
            srv.log_text()
        );
        let r = call_shell(&mut c, &format!("{}; echo $$", escapees("n")));
        assert_eq!(r["isError"], false, "{mode}: {r}");
        assert_eq!(
            crate::procs_util::ok_text(&r).trim(),
            "1",
            "{mode}: the tool is not the first process of its namespace"
        );
        // The escapees recorded pids as seen inside their namespace; outside
        // they are found as `sleep 300` in a PID namespace that is not ours.
        assert!(
            wait_until(RUN_END, || !any_sleeper_in_another_pid_ns()),
            "{mode}: escapees outlived the run"
        );
    }
}

/// Whether any `sleep 300` runs in a PID namespace other than ours (only the
/// runs of the PID-namespace test make such processes).
fn any_sleeper_in_another_pid_ns() -> bool {
    let ours = std::fs::read_link("/proc/self/ns/pid").ok();
    let Ok(rd) = std::fs::read_dir("/proc") else {
        return false;
    };
    rd.flatten().any(|e| {
        let p = e.path();
        std::fs::read(p.join("cmdline")).is_ok_and(|c| c == b"sleep\x00300\x00")
            && std::fs::read_link(p.join("ns/pid")).ok() != ours
            && e.file_name()
                .to_str()
                .and_then(|s| s.parse::<i32>().ok())
                .is_some_and(|pid| !crate::procs_util::os_dead(pid))
    })
}

#[test]
fn without_any_containment_a_strict_policy_refuses_to_start() {
    let dir = tempfile::tempdir().expect("tempdir");
    let p = dir.path().join("sandbox.yaml");
    let strict =
        policy_with_limits("  processes: 64").replace("best_effort: true", "best_effort: false");
    std::fs::write(&p, strict).expect("policy");
    let err = refused_at_start(dir.path(), &p, &[("TOOLSRV_CONTAINMENT", "none")]);
    assert!(err.contains("no mechanism can contain a run"), "{err}");
}

/// The attack of issue 23, hole 3, as a tool of a PID-namespace run: the
/// namespace's first process tries to clear its parent-death signal with a
/// credential change (`setegid(1); setegid(0)`), clears it outright
/// (`prctl(PR_SET_PDEATHSIG, 0)`), forks a child into a group of its own,
/// tries to move into that group (so a `kill(-pgid)` of the run would miss
/// it), records which of the two moves worked and waits. `marker` is in both
/// processes' command lines.
fn pidns_attack(marker: &str) -> String {
    let script = "import os, sys, time, ctypes\n\
        cred = \"no-setegid\"\n\
        try:\n    os.setegid(1); os.setegid(0); cred = \"setegid\"\n\
        except OSError:\n    pass\n\
        ctypes.CDLL(None).prctl(1, 0, 0, 0, 0)\n\
        r, w = os.pipe()\n\
        pid = os.fork()\n\
        if pid == 0:\n    os.setpgid(0, 0); os.write(w, b\"x\"); time.sleep(300); os._exit(0)\n\
        os.read(r, 1)\n\
        group = \"own-group\"\n\
        try:\n    os.setpgid(0, pid); group = \"left-group\"\n\
        except OSError:\n    pass\n\
        open(\"w/attack.tmp\", \"w\").write(cred + \" \" + group)\n\
        os.rename(\"w/attack.tmp\", \"w/attack\")\n\
        time.sleep(300)\n";
    format!("exec /usr/bin/python3 -c '{script}' {marker}")
}

/// The pids (as this test sees them) of processes whose command line holds `marker`.
fn pids_with_marker(marker: &str) -> Vec<i32> {
    let Ok(rd) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    rd.flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline"))
                .is_ok_and(|c| c.split(|&b| b == 0).any(|arg| arg == marker.as_bytes()))
                && !crate::procs_util::os_dead(*pid)
        })
        .collect()
}

/// Whether `pid` is gone (or a zombie).
fn gone(pid: i32) -> bool {
    crate::procs_util::os_dead(pid)
}

/// Field `n` (1-based) of `/proc/<pid>/stat`, fields after the command name only.
fn stat_field(pid: i32, n: usize) -> Option<i64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_whitespace().nth(n - 3)?.parse().ok()
}

/// Starts the attack in a background run of a server forced into PID-namespace
/// containment; returns the run's pid and the attack's two (host) pids once
/// it is in place, after checking that the first process left its process
/// group and could not change its credentials.
fn pidns_attack_in_place(srv: &Server, c: &mut Raw, marker: &str) -> (u64, Vec<i32>) {
    let run = bg(
        c,
        &[
            ("tool", "shell"),
            ("agent", "a1"),
            ("command", &pidns_attack(marker)),
        ],
    )
    .expect("bg");
    let done = dir_of(srv).join("w/attack");
    let ready = wait_until(WAIT, || {
        done.exists() && pids_with_marker(marker).len() == 2
    });
    let pids = pids_with_marker(marker);
    if !ready {
        kill_pids(&pids);
        panic!(
            "the attack did not get in place: {pids:?}, log: {}",
            srv.log_text()
        );
    }
    let first = pids
        .iter()
        .copied()
        .find(|p| {
            std::fs::read_to_string(format!("/proc/{p}/status")).is_ok_and(|s| {
                s.lines()
                    .any(|l| l.starts_with("NSpid:") && l.trim_end().ends_with("\t1"))
            })
        })
        .expect("the first process of the run's namespace");
    let outcome = std::fs::read_to_string(&done).unwrap_or_default();
    let in_own_group = stat_field(first, 5) == Some(i64::from(first));
    if outcome != "no-setegid own-group" || !in_own_group {
        kill_pids(&pids);
    }
    assert_eq!(
        outcome, "no-setegid own-group",
        "the namespace's first process changed its effective gid or left its process group"
    );
    assert!(in_own_group, "the first process left its group");
    (run, pids)
}

/// Issue 23, hole 3: the first process of a PID-namespace run that cleared
/// its parent-death signal and tried to leave its process group still dies
/// with a server killed by SIGKILL (it leads a session, so it cannot leave
/// its group; and the watchdog kills it by pidfd as well).
#[test]
fn in_a_pid_namespace_an_attacking_first_process_dies_with_a_killed_server() {
    let (mut srv, mut c) = server(None, &[("TOOLSRV_CONTAINMENT", "pidns")], &[]);
    let (_, pids) = pidns_attack_in_place(&srv, &mut c, "pidns-watchdog-7f3a");
    // Safety: kill(2) of the server this test started.
    unsafe { libc::kill(srv.pid() as i32, libc::SIGKILL) };
    let child = srv.child.as_mut().expect("child");
    assert!(wait_until(WAIT, || matches!(child.try_wait(), Ok(Some(_)))));
    srv.child = None;
    let dead = wait_until(SERVER_END, || pids.iter().all(|p| gone(*p)));
    let alive: Vec<i32> = pids.iter().copied().filter(|p| !gone(*p)).collect();
    kill_pids(&pids);
    assert!(
        dead,
        "the attack's processes after SIGKILL of the server: still alive after {SERVER_END:?}: {alive:?}"
    );
}

/// Issue 23, hole 3, with the watchdog killed too (as `pkill -9 toolsrv`
/// does): the next server on the same socket kills the survivors it finds in
/// the dead server's record before it accepts a connection, and the human's
/// client then gets in with its own secret.
#[test]
fn in_a_pid_namespace_the_next_server_kills_the_survivors_before_it_binds() {
    let (mut srv, mut c) = server(None, &[("TOOLSRV_CONTAINMENT", "pidns")], &[]);
    let dir = dir_of(&srv);
    let socket = srv.socket.clone();
    let (_, pids) = pidns_attack_in_place(&srv, &mut c, "pidns-restart-9c1e");
    let server_pid = srv.pid();
    let watchdog = children_of(server_pid)
        .into_iter()
        .filter(|p| !pids.contains(p))
        .collect::<Vec<_>>();
    assert!(!watchdog.is_empty(), "the server has no watchdog child");
    kill_pids(&watchdog);
    // Safety: kill(2) of the server this test started.
    unsafe { libc::kill(server_pid as i32, libc::SIGKILL) };
    let child = srv.child.as_mut().expect("child");
    assert!(wait_until(WAIT, || matches!(child.try_wait(), Ok(Some(_)))));
    srv.child = None;
    if pids.iter().any(|p| gone(*p)) {
        kill_pids(&pids);
        panic!("the attack died with the old server already: the test is not set up");
    }
    let _ = std::fs::remove_file(&socket);
    let dir2 = tempfile::tempdir().expect("tempdir");
    let mut next = std::process::Command::new(toolsrv_bin())
        .arg("serve")
        .arg("--listen")
        .arg(&socket)
        .arg("--cwd")
        .arg(&dir)
        .arg("--log")
        .arg(dir2.path().join("server.log"))
        .env("OLLIE_CFG_PATH", dir2.path().join("cfg"))
        .env("TOOLSRV_CONTAINMENT", "pidns")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("start the next server");
    let came_up = wait_until(WAIT, || {
        std::os::unix::net::UnixStream::connect(&socket).is_ok()
    });
    let alive: Vec<i32> = pids.iter().copied().filter(|p| !gone(*p)).collect();
    kill_pids(&pids);
    let mine = dir2.path().join("mine.secret");
    std::fs::write(&mine, "the-humans-secret-42").expect("secret");
    std::fs::set_permissions(&mine, std::os::unix::fs::PermissionsExt::from_mode(0o600))
        .expect("chmod");
    let out = std::process::Command::new(toolsrv_bin())
        .arg("--socket")
        .arg(&socket)
        .arg("--secret-file")
        .arg(&mine)
        .arg("info")
        .output()
        .expect("run the client");
    let log = std::fs::read_to_string(dir2.path().join("server.log")).unwrap_or_default();
    // Safety: kill(2) of the server this test started.
    unsafe { libc::kill(next.id() as i32, libc::SIGTERM) };
    let _ = next.wait();
    assert!(came_up, "the next server did not come up: {log}");
    assert!(
        alive.is_empty(),
        "survivors alive when the next server accepted connections: {alive:?}; {log}"
    );
    assert!(
        log.contains("killed the runs a dead server on this socket left"),
        "{log}"
    );
    assert!(
        out.status.success(),
        "the human's client was refused: {out:?}"
    );
}

/// The same attack against `kill`: `ctl kill` ends the run, and everything
/// in its namespace.
#[test]
fn in_a_pid_namespace_an_attacking_first_process_dies_with_ctl_kill() {
    let (_srv, mut c) = server(None, &[("TOOLSRV_CONTAINMENT", "pidns")], &[]);
    let (run, pids) = pidns_attack_in_place(&_srv, &mut c, "pidns-ctlkill-4d2b");
    c.write(&format!("proc/{run}/ctl"), "kill")
        .expect("ctl kill");
    let dead = wait_until(RUN_END, || pids.iter().all(|p| gone(*p)));
    let alive: Vec<i32> = pids.iter().copied().filter(|p| !gone(*p)).collect();
    kill_pids(&pids);
    assert!(
        dead,
        "the attack's processes after ctl kill: still alive: {alive:?}"
    );
    let st = final_stat(&mut c, run);
    assert_eq!(st["state"], "killed", "{st}");
}

/// A tool whose first process moves into its child's process group, so that
/// a signal to the run's group misses it, then records `w/<marker>` and
/// waits. `marker` is in both processes' command lines.
fn group_leaver(marker: &str) -> String {
    let script = "import os, sys, time\n\
        r, w = os.pipe()\n\
        pid = os.fork()\n\
        if pid == 0:\n    os.setpgid(0, 0); os.write(w, b\"x\"); time.sleep(300); os._exit(0)\n\
        os.read(r, 1)\n\
        os.setpgid(0, pid)\n\
        open(\"w/\" + sys.argv[1], \"w\").write(\"left\")\n\
        time.sleep(300)\n";
    format!("exec /usr/bin/python3 -c '{script}' {marker}")
}

/// The pids of a [`group_leaver`] once it has left its group.
fn left_group(srv: &Server, marker: &str) -> Vec<i32> {
    let done = dir_of(srv).join(format!("w/{marker}"));
    let ready = wait_until(WAIT, || {
        done.exists() && pids_with_marker(marker).len() == 2
    });
    let pids = pids_with_marker(marker);
    if !ready {
        kill_pids(&pids);
        panic!("the tool did not leave its group: {pids:?}");
    }
    pids
}

/// A tool's first process that moved out of its process group is still
/// reached by `ctl kill` and by the timeout (the group signal goes to it
/// through its pidfd too): before, both missed it and the run never ended.
#[test]
fn a_tool_that_left_its_process_group_dies_with_ctl_kill_and_its_timeout() {
    let (srv, mut c) = server(None, &[], &[]);
    let run = bg(
        &mut c,
        &[
            ("tool", "shell"),
            ("agent", "a1"),
            ("command", &group_leaver("leaver-kill-31b7")),
        ],
    )
    .expect("bg");
    let pids = left_group(&srv, "leaver-kill-31b7");
    c.write(&format!("proc/{run}/ctl"), "kill")
        .expect("ctl kill");
    let dead = wait_until(RUN_END, || pids.iter().all(|p| gone(*p)));
    kill_pids(&pids);
    assert!(dead, "ctl kill missed a tool that left its group");
    let st = final_stat(&mut c, run);
    assert_eq!(st["state"], "killed", "{st}");

    let r = crate::procs_util::call(
        &mut c,
        &[
            ("tool", "shell"),
            ("agent", "a1"),
            ("timeout", "2s"),
            ("command", &group_leaver("leaver-timeout-31b7")),
        ],
    );
    assert!(error_text(&r).contains("timed out"), "{r}");
    assert!(
        pids_with_marker("leaver-timeout-31b7").is_empty(),
        "the timed-out tool is still alive"
    );
}

/// A second server started by mistake on the socket of a live PID-namespace
/// server refuses to start, and leaves the live server's runs and record alone.
#[test]
fn in_a_pid_namespace_a_second_server_on_a_live_socket_kills_nothing() {
    let (srv, mut c) = server(None, &[("TOOLSRV_CONTAINMENT", "pidns")], &[]);
    let marker = "pidns-live-6e0d";
    bg(
        &mut c,
        &[
            ("tool", "shell"),
            ("agent", "a1"),
            (
                "command",
                &format!("exec /usr/bin/python3 -c 'import time; time.sleep(300)' {marker}"),
            ),
        ],
    )
    .expect("bg");
    assert!(wait_until(WAIT, || pids_with_marker(marker).len() == 1));
    let pids = pids_with_marker(marker);
    let dir2 = tempfile::tempdir().expect("tempdir");
    let mut out = std::process::Command::new(toolsrv_bin())
        .arg("serve")
        .arg("--listen")
        .arg(&srv.socket)
        .arg("--cwd")
        .arg(dir_of(&srv))
        .arg("--log")
        .arg(dir2.path().join("server.log"))
        .env("OLLIE_CFG_PATH", dir2.path().join("cfg"))
        .env("TOOLSRV_CONTAINMENT", "pidns")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("run the second server");
    let mut status = None;
    wait_until(WAIT, || {
        status = out.try_wait().ok().flatten();
        status.is_some()
    });
    if status.is_none() {
        let _ = out.kill();
        let _ = out.wait();
    }
    let alive = pids.iter().all(|p| !gone(*p));
    kill_pids(&pids);
    assert!(
        status.is_some_and(|s| !s.success()),
        "the second server did not refuse to start: {status:?}"
    );
    assert!(alive, "the second server killed the live server's run");
}
