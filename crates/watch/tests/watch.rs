//! The tools PID namespace and the watcher, with real processes and real
//! fanotify (as root: a privileged group). Places are made in /dev/shm
//! (tmpfs): a filesystem mark there sees few other writers.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use toolsrv_watch::{Attribution, Event, EventKind, Events, Kinds, Origin, ToolsPidNs, Watcher};

/// How long any wait here may take.
const WAIT: Duration = Duration::from_secs(10);

fn shm_dir() -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix("toolsrv-watch-test-")
        .tempdir_in("/dev/shm")
        .expect("tempdir in /dev/shm")
}

/// A canonical path (what events name).
fn canon(p: &Path) -> PathBuf {
    std::fs::canonicalize(p).expect("canonicalize")
}

/// Runs `script` with `sh -c` as a tool would run: a child of a thread that
/// joined `ns`, waited for (and so reaped) before this returns.
fn tool(ns: &ToolsPidNs, cwd: &Path, script: &str) {
    let ns = ns.clone();
    let cwd = cwd.to_path_buf();
    let script_owned = script.to_string();
    // A thread of its own, so the test's thread never joins.
    let status = std::thread::spawn(move || {
        ns.enter_for_children().expect("enter the tools namespace");
        Command::new("/bin/sh")
            .arg("-c")
            .arg(&script_owned)
            .current_dir(&cwd)
            .status()
            .expect("run the tool")
    })
    .join()
    .expect("tool thread");
    assert!(status.success(), "{script}: {status}");
}

/// The events of `dir` received until `sync` returns, then what is queued.
fn drain(w: &Watcher, events: &Events, dir: &Path) -> Vec<Event> {
    w.sync(WAIT).expect("sync");
    let mut out = Vec::new();
    while let Some(e) = events.try_recv() {
        if e.dir.starts_with(dir) {
            out.push(e);
        }
    }
    out
}

fn find<'a>(evs: &'a [Event], kind: EventKind, name: &str) -> Option<&'a Event> {
    evs.iter()
        .find(|e| e.kind == kind && e.name == std::ffi::OsStr::new(name))
}

fn is_tool(o: Origin) -> bool {
    matches!(o, Origin::Tool { pid } if pid > 1)
}

fn setup() -> (ToolsPidNs, Watcher, Events, tempfile::TempDir, PathBuf) {
    let ns = ToolsPidNs::start().expect("start the tools namespace (as root)");
    let w = Watcher::new(Some(&ns)).expect("watcher");
    assert_eq!(w.attribution(), Attribution::Exact);
    let d = shm_dir();
    let dir = canon(d.path());
    w.watch_filesystem(&dir, Kinds::DEFAULT.with(Kinds::DELETED))
        .expect("filesystem mark");
    let events = w.subscribe();
    (ns, w, events, d, dir)
}

/// The state letter and parent pid of `pid` (from `/proc/<pid>/stat`).
fn stat(pid: i32) -> Option<(char, i32)> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &s[s.rfind(')')? + 1..];
    let mut f = rest.split_whitespace();
    Some((f.next()?.chars().next()?, f.next()?.parse().ok()?))
}

/// Host pids of the processes of the PID namespace with inode `ns`.
fn in_namespace(ns: u64) -> Vec<i32> {
    let mut v = Vec::new();
    for e in std::fs::read_dir("/proc").expect("/proc").flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<i32>().ok()) else {
            continue;
        };
        let ino = std::fs::metadata(format!("/proc/{pid}/ns/pid"))
            .ok()
            .map(|m| std::os::unix::fs::MetadataExt::ino(&m));
        if ino == Some(ns) {
            v.push(pid);
        }
    }
    v
}

fn wait_until(limit: Duration, mut f: impl FnMut() -> bool) -> bool {
    let end = Instant::now() + limit;
    loop {
        if f() {
            return true;
        }
        if Instant::now() >= end {
            return false;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn a_tool_reaped_before_its_event_is_read_is_the_tools_and_the_tests_own_is_other() {
    let (ns, w, events, _d, dir) = setup();
    w.report_others(true).expect("others");
    let reader = ns.reader_pid().expect("reader");
    // Stop the reader, so the tool's event is read only after the tool
    // was reaped (and its pid freed).
    // Safety: kill(2) of the reader this test made.
    assert_eq!(unsafe { libc::kill(reader, libc::SIGSTOP) }, 0);
    tool(&ns, &dir, "echo tool > x");
    std::fs::write(dir.join("y"), "test").expect("write y");
    // Safety: as above.
    assert_eq!(unsafe { libc::kill(reader, libc::SIGCONT) }, 0);
    let evs = drain(&w, &events, &dir);
    let x = find(&evs, EventKind::Created, "x").expect("x created");
    assert!(is_tool(x.origin), "{x:?}");
    assert_eq!(x.dir, dir);
    assert!(!x.is_dir);
    let y = find(&evs, EventKind::Created, "y").expect("y created");
    assert_eq!(y.origin, Origin::Other, "{y:?}");
    assert!(find(&evs, EventKind::ClosedWrite, "x").is_some_and(|e| is_tool(e.origin)));
}

#[test]
fn others_are_not_delivered_unless_asked() {
    let (ns, w, events, _d, dir) = setup();
    std::fs::write(dir.join("mine"), "test").expect("write");
    tool(&ns, &dir, ": > theirs");
    let evs = drain(&w, &events, &dir);
    assert!(
        find(&evs, EventKind::Created, "theirs").is_some(),
        "{evs:?}"
    );
    assert!(evs.iter().all(|e| is_tool(e.origin)), "{evs:?}");
}

#[test]
fn renames_into_place_mkdir_symlink_and_link_are_each_reported() {
    let (ns, w, events, _d, dir) = setup();
    tool(
        &ns,
        &dir,
        "mkdir d && ln -s /etc/passwd s && echo a > f && ln f l && echo b > d/t && mv d/t r && mkdir -p g/.git/hooks",
    );
    let evs = drain(&w, &events, &dir);
    let d = find(&evs, EventKind::Created, "d").expect("mkdir");
    assert!(d.is_dir && is_tool(d.origin));
    assert!(
        find(&evs, EventKind::Created, "s").is_some(),
        "symlink: {evs:?}"
    );
    assert!(
        find(&evs, EventKind::Created, "l").is_some(),
        "link: {evs:?}"
    );
    let r = find(&evs, EventKind::MovedTo, "r").expect("rename into place");
    assert_eq!(r.dir, dir);
    let t = find(&evs, EventKind::Created, "t").expect("a file in a new directory");
    assert_eq!(t.dir, dir.join("d"));
    let hooks = find(&evs, EventKind::Created, "hooks").expect("nested mkdir");
    assert_eq!(hooks.path(), dir.join("g/.git/hooks"));
    assert!(evs.iter().all(|e| is_tool(e.origin)), "{evs:?}");
}

#[test]
fn a_directory_mark_sees_its_entries_only() {
    let ns = ToolsPidNs::start().expect("ns");
    let w = Watcher::new(Some(&ns)).expect("watcher");
    let d = shm_dir();
    let dir = canon(d.path());
    std::fs::create_dir(dir.join("sub")).expect("sub");
    w.watch_dir(&dir, Kinds::DEFAULT).expect("inode mark");
    let events = w.subscribe();
    tool(&ns, &dir, ": > top && : > sub/deep");
    let evs = drain(&w, &events, &dir);
    assert!(find(&evs, EventKind::Created, "top").is_some(), "{evs:?}");
    assert!(find(&evs, EventKind::Created, "deep").is_none(), "{evs:?}");
    w.unwatch_dir(&dir).expect("unmark");
    tool(&ns, &dir, ": > later");
    let evs = drain(&w, &events, &dir);
    assert!(find(&evs, EventKind::Created, "later").is_none(), "{evs:?}");
}

#[test]
fn without_a_namespace_origins_are_unknown_but_our_own() {
    let w = Watcher::new(None).expect("watcher");
    assert_eq!(w.attribution(), Attribution::Unknown);
    let d = shm_dir();
    let dir = canon(d.path());
    w.watch_dir(&dir, Kinds::DEFAULT).expect("inode mark");
    w.report_others(true).expect("others");
    let events = w.subscribe();
    std::fs::write(dir.join("mine"), "x").expect("write");
    let st = Command::new("/bin/sh")
        .arg("-c")
        .arg(": > theirs")
        .current_dir(&dir)
        .status()
        .expect("sh");
    assert!(st.success());
    let evs = drain(&w, &events, &dir);
    assert_eq!(
        find(&evs, EventKind::Created, "mine").map(|e| e.origin),
        Some(Origin::Other)
    );
    assert_eq!(
        find(&evs, EventKind::Created, "theirs").map(|e| e.origin),
        Some(Origin::Unknown)
    );
}

#[test]
fn orphans_in_the_namespace_leave_no_zombie() {
    let ns = ToolsPidNs::start().expect("ns");
    let reader = ns.reader_pid().expect("reader");
    let inode = ns.inode().expect("inode");
    let d = shm_dir();
    // Ten orphans that end at once, ten that end a little later.
    tool(
        &ns,
        d.path(),
        "for i in 1 2 3 4 5 6 7 8 9 10; do (true &) ; (sleep 0.2 &) ; done",
    );
    let gone = wait_until(WAIT, || in_namespace(inode) == vec![reader]);
    let left = in_namespace(inode);
    let zombies: Vec<i32> = left
        .iter()
        .copied()
        .filter(|&p| stat(p).is_some_and(|(s, ppid)| s == 'Z' && ppid == reader))
        .collect();
    assert!(
        gone,
        "processes left in the namespace: {left:?}, zombies {zombies:?}"
    );
}

#[test]
fn stopping_kills_every_process_of_the_namespace() {
    let ns = ToolsPidNs::start().expect("ns");
    let inode = ns.inode().expect("inode");
    let d = shm_dir();
    // Detached sleepers in sessions of their own.
    tool(
        &ns,
        d.path(),
        "for i in 1 2 3; do setsid sleep 300 </dev/null >/dev/null 2>&1 & done",
    );
    assert!(wait_until(WAIT, || in_namespace(inode).len() >= 4));
    assert!(ns.stop(Duration::from_secs(3)), "the reader outlived stop");
    assert!(
        wait_until(Duration::from_secs(3), || in_namespace(inode).is_empty()),
        "left: {:?}",
        in_namespace(inode)
    );
    assert!(ns.enter_for_children().is_err());
}

#[test]
fn a_killed_reader_takes_the_namespace_with_it_and_a_new_one_is_made() {
    let (ns, w, events, _d, dir) = setup();
    let first = ns.reader_pid().expect("reader");
    let inode = ns.inode().expect("inode");
    tool(&ns, &dir, "setsid sleep 300 </dev/null >/dev/null 2>&1 &");
    assert!(wait_until(WAIT, || in_namespace(inode).len() == 2));
    // These, not whatever is in a namespace of that inode later: the
    // kernel hands a dead namespace's inode number to the next one made
    // (other tests make some meanwhile).
    let members = in_namespace(inode);
    // A thread that joined the first namespace (before its init is killed).
    let (tx, rx) = std::sync::mpsc::channel::<()>();
    let (entered_tx, entered_rx) = std::sync::mpsc::channel::<()>();
    let (done_tx, done_rx) = std::sync::mpsc::channel();
    let ns2 = ns.clone();
    let dir2 = dir.clone();
    let joined = std::thread::spawn(move || {
        ns2.enter_for_children().expect("enter");
        entered_tx.send(()).expect("entered");
        rx.recv().expect("go");
        // Its namespace is dead: fork fails with ENOMEM until it joins the new one.
        let first_try = Command::new("/bin/true").status();
        let enomem = matches!(&first_try, Err(e) if e.raw_os_error() == Some(libc::ENOMEM));
        let revived = ns2.revive(WAIT).expect("revive");
        let st = Command::new("/bin/sh")
            .arg("-c")
            .arg(": > after")
            .current_dir(&dir2)
            .status()
            .expect("spawn after revive");
        done_tx.send((enomem, revived, st.success())).expect("send");
    });
    entered_rx.recv_timeout(WAIT).expect("the thread joined");
    // Safety: kill(2) of the reader this test made.
    assert_eq!(unsafe { libc::kill(first, libc::SIGKILL) }, 0);
    let alive = || {
        members
            .iter()
            .copied()
            .filter(|p| in_namespace(inode).contains(p))
            .collect::<Vec<i32>>()
    };
    assert!(
        wait_until(WAIT, || alive().is_empty()),
        "the namespace outlived its init: {:?}",
        alive()
    );
    assert!(wait_until(WAIT, || ns
        .reader_pid()
        .is_some_and(|p| p != first)));
    assert_eq!(ns.deaths(), 1);
    tx.send(()).expect("go");
    let (enomem, revived, ok) = done_rx.recv_timeout(WAIT).expect("the joined thread");
    joined.join().expect("thread");
    assert!(
        enomem,
        "a fork into the dead namespace did not fail with ENOMEM"
    );
    assert!(revived && ok);
    let evs = drain(&w, &events, &dir);
    let after = find(&evs, EventKind::Created, "after").expect("after");
    assert!(is_tool(after.origin), "{after:?}");
}

#[test]
fn the_readers_descriptors_are_only_its_own() {
    let ns = ToolsPidNs::start().expect("ns");
    let _w = Watcher::new(Some(&ns)).expect("watcher");
    let reader = ns.reader_pid().expect("reader");
    // Its control socket and the group: nothing of this process's.
    let fds: Vec<String> = std::fs::read_dir(format!("/proc/{reader}/fd"))
        .expect("fds")
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    assert!(
        wait_until(WAIT, || std::fs::read_dir(format!("/proc/{reader}/fd"))
            .map(|d| d.count() == 2)
            .unwrap_or(false)),
        "{fds:?}"
    );
    let status = std::fs::read_to_string(format!("/proc/{reader}/status")).expect("status");
    assert!(
        status.contains("NSpid:")
            && status
                .lines()
                .any(|l| l.starts_with("NSpid:") && l.trim_end().ends_with("\t1")),
        "{status}"
    );
}

/// The use the server's policy makes of this crate, in small: protected
/// paths that do not exist yet; what a tool creates there is quarantined as
/// soon as it is seen, and in any case before the run is reported ended
/// (after `sync`); what anyone else creates there stays.
#[test]
fn example_policy_a_tools_creation_of_a_protected_path_is_quarantined_the_humans_stays() {
    let (ns, w, events, _d, dir) = setup();
    let state = shm_dir();
    let quarantine = toolsrv_watch::Quarantine::new(state.path()).expect("quarantine");
    let protected = [dir.join(".mcp.json"), dir.join(".vscode")];
    let is_protected = |p: &Path| protected.iter().any(|q| p == q || p.starts_with(q));
    let mut moved = Vec::new();
    let mut act = |events: &Events| {
        while let Some(e) = events.try_recv() {
            let p = e.path();
            if matches!(e.origin, Origin::Tool { .. })
                && matches!(e.kind, EventKind::Created | EventKind::MovedTo)
                && is_protected(&p)
            {
                // The first protected component is what goes (a tool's
                // `.vscode/` with what it holds).
                let top = protected
                    .iter()
                    .find(|q| p.starts_with(q))
                    .cloned()
                    .unwrap_or(p);
                match quarantine.move_in_noted(&top, Some("created by a tool")) {
                    Ok(r) => moved.push(r),
                    Err(toolsrv_watch::QuarantineError::Missing(_)) => {}
                    Err(e) => panic!("{e}"),
                }
            }
        }
    };
    // The human's file, made while the run is under way.
    std::fs::create_dir(dir.join(".claude")).expect("human dir");
    tool(
        &ns,
        &dir,
        "echo '{\"mcpServers\":{}}' > .mcp.json && mkdir -p .vscode && echo '{}' > .vscode/tasks.json && echo ok > README",
    );
    std::fs::write(dir.join(".claude/settings.json"), "{}").expect("human file");
    // The run ended: bring the events up to date, act on them.
    w.sync(WAIT).expect("sync");
    act(&events);
    assert!(!dir.join(".mcp.json").exists());
    assert!(!dir.join(".vscode").exists());
    assert!(
        dir.join("README").exists(),
        "an ordinary file of the tool stays"
    );
    assert!(
        dir.join(".claude/settings.json").exists(),
        "the human's file stays"
    );
    let listed = quarantine.list().expect("list");
    let originals: Vec<PathBuf> = listed.iter().map(|r| r.original_path()).collect();
    assert!(originals.contains(&dir.join(".mcp.json")), "{originals:?}");
    assert!(originals.contains(&dir.join(".vscode")), "{originals:?}");
    assert!(listed
        .iter()
        .all(|r| r.note.as_deref() == Some("created by a tool")));
    let tasks = listed
        .iter()
        .find(|r| r.original_path() == dir.join(".vscode"))
        .expect("vscode record");
    assert_eq!(
        std::fs::read_to_string(tasks.path.join("tasks.json")).expect("kept"),
        "{}\n"
    );
    assert_eq!(moved.len(), listed.len());
}

#[test]
fn a_process_started_outside_from_a_joined_thread_is_not_a_tool() {
    let (ns, w, events, _d, dir) = setup();
    w.report_others(true).expect("others");
    let inode = ns.inode().expect("inode");
    let ns2 = ns.clone();
    let dir2 = dir.clone();
    std::thread::spawn(move || {
        ns2.enter_for_children().expect("enter");
        let outside = toolsrv_watch::outside_tools_namespace(|| {
            Command::new("/bin/sh")
                .arg("-c")
                .arg(": > helper")
                .current_dir(&dir2)
                .status()
                .expect("helper")
        });
        assert!(outside.success());
        // And the thread's children are the namespace's again.
        let st = Command::new("/bin/sh")
            .arg("-c")
            .arg(": > tool")
            .current_dir(&dir2)
            .status()
            .expect("tool");
        assert!(st.success());
        assert!(toolsrv_watch::joined_this_thread());
    })
    .join()
    .expect("thread");
    let evs = drain(&w, &events, &dir);
    assert_eq!(
        find(&evs, EventKind::Created, "helper").map(|e| e.origin),
        Some(Origin::Other),
        "{evs:?}"
    );
    assert!(find(&evs, EventKind::Created, "tool").is_some_and(|e| is_tool(e.origin)));
    assert!(in_namespace(inode).len() <= 1);
}

/// A tool in another mount namespace (the filesystem view is one) writes
/// through a bind mount: the event names the directory as this process's
/// namespace names it.
#[test]
fn a_creation_through_a_bind_mount_in_another_mount_namespace_is_named_here() {
    let (ns, w, events, _d, dir) = setup();
    std::fs::create_dir(dir.join("real")).expect("real");
    std::fs::create_dir(dir.join("mnt")).expect("mnt");
    tool(
        &ns,
        &dir,
        "unshare -m --propagation private sh -c 'mount --bind real mnt && : > mnt/through-the-view'",
    );
    let evs = drain(&w, &events, &dir);
    let e = find(&evs, EventKind::Created, "through-the-view").expect("the creation");
    assert_eq!(e.dir, dir.join("real"), "{e:?}");
    assert!(is_tool(e.origin));
    assert!(dir.join("real/through-the-view").exists());
    assert!(!dir.join("mnt/through-the-view").exists());
}

/// `Watcher::quiet` (what a run's end checks instead of a flush): once a
/// tool's creation returned, either its event has been delivered or the
/// watcher is not quiet. Each round a tool makes a file and the test looks
/// at once; a `quiet` that said so with the event still on its way (in the
/// group, the reader, the socket or the delivering thread) fails the round.
/// Both answers are counted: a `quiet` that is never true would be useless
/// (every run would pay the flush), so at least one round must find it so.
#[test]
fn quiet_is_never_said_while_an_event_is_on_its_way() {
    let (ns, w, events, _d, dir) = setup();
    let (mut quiet, mut busy) = (0, 0);
    for i in 0..200 {
        tool(&ns, &dir, &format!(": > f{i}"));
        let name = format!("f{i}");
        if w.quiet() {
            quiet += 1;
            let mut seen = false;
            while let Some(e) = events.try_recv() {
                seen |= e.name == std::ffi::OsStr::new(&name);
            }
            assert!(
                seen,
                "round {i}: quiet, but the event of {name} was not delivered"
            );
        } else {
            busy += 1;
            let got = drain(&w, &events, &dir);
            assert!(find(&got, EventKind::Created, &name).is_some(), "round {i}");
        }
    }
    eprintln!("quiet {quiet}, not yet {busy} of 200");
    assert!(quiet > 0, "quiet was never true");
}
