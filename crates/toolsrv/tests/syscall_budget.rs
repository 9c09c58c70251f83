//! The call path's system-call budget (docs/benchmarks.md, "System calls per
//! call"): `strace -f` attached to a sandboxed, contained server counts what
//! the server's threads and each tool's process before its `execve` make
//! during a known number of synchronous calls of `/bin/true`, cuts the trace
//! into one segment per call, and fails when the median call makes more than
//! 10 % more system calls than the documented budget, or one system call's
//! median is more than 10 % (and half a call) over its row. The median call
//! is the steady state: periodic upkeep (the sandbox rules resolved again
//! every 2 s, the orphan scan) lands in a few calls' segments, and its share
//! per call depends on how fast the calls go under `strace`.
//!
//! The counts are the call path's alone, whatever else the machine and the
//! test process do (the full suite runs other tests beside this one, on 2
//! shared cores):
//! - the server is started by the test kit with every signal at its default
//!   disposition, so the child resets only what toolsrv itself ignores
//!   (`SIGPIPE`), not what the test process happens to ignore by then;
//! - an `epoll_wait` that ended because a timer was due, or for the client's
//!   next request alone, is reported in its own row and not counted: how
//!   often either happens depends on how long a call takes and how quickly
//!   the client sends the next one, not on the call path; a poll that neither
//!   waited nor found anything counts in the total but not in the
//!   `epoll_wait` row (the runtime checks its driver before running tasks
//!   woken meanwhile, which depends on the interleaving).
//!
//! `TOOLSRV_BUDGET_TRACE=<file>` keeps the trace for reading.
//!
//! The budget is read from the table in docs/benchmarks.md itself, so the
//! documented figures and the checked ones cannot drift apart. The client
//! pipelines each call as the C bench does (`Twalk`, `Topen`, `Twrite`,
//! `Tread` in one write, the previous call's `Tclunk` riding with it).
//!
//! Needs `strace` (.ci/run installs it); without it the test says so and
//! passes, like the remote tests without sshd.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use toolsrv_wire::{encode, Body, Frame, ORDWR};

use crate::procs_util::{load, payload};
use crate::util::{wait_until, Launch, Raw, WAIT};

/// Calls counted (after [`WARM_UP`] uncounted ones).
const CALLS: usize = 300;
const WARM_UP: usize = 50;
/// How far over the documented figures a count may be.
const SLACK: f64 = 1.10;
/// A single system call's row may also be over by this much per call (rows
/// of 0.1 or less would otherwise fail on one stray call).
const ROW_SLACK: f64 = 0.5;

/// One `strace -f` line: the pid, the system call's name, whether it failed
/// (with an errno other than `EAGAIN`), and whether the line is the start of
/// a call (not a `<... resumed>` continuation, an exit or a signal notice).
#[derive(Debug, PartialEq)]
struct Line<'a> {
    pid: u32,
    name: &'a str,
    failed: bool,
    /// It failed with `EAGAIN` (nothing to read).
    again: bool,
}

fn parse_line(line: &str) -> Option<Line<'_>> {
    let (pid, rest) = line.split_once(' ')?;
    let pid: u32 = pid.parse().ok()?;
    let rest = rest.trim_start();
    if rest.starts_with("<...") || rest.starts_with("+++") || rest.starts_with("---") {
        return None;
    }
    let name = &rest[..rest.find('(')?];
    if name.is_empty() || !name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_') {
        return None;
    }
    // Debug builds of std check a descriptor with F_GETFD before closing it
    // (`OwnedFd`'s drop); release builds, which the budget is for, do not.
    if name == "fcntl" && (rest.contains("F_GETFD)") || rest.contains("F_GETFD <unfinished")) {
        return None;
    }
    let errno = rest.rsplit_once(") = -1 ").map(|(_, errno)| errno);
    let again = errno.is_some_and(|e| e.starts_with("EAGAIN"));
    Some(Line {
        pid,
        name,
        failed: errno.is_some() && !again,
        again,
    })
}

/// The system calls of one call: per name, how many, and how many failed.
type Segment = BTreeMap<String, (usize, usize)>;

/// The trace cut into one segment per call, counting every line of a thread
/// of the server and of each child until (and with) its `execve` (what a
/// child does after its `execve` is the tool's). A call's segment starts at
/// the `recvfrom` that brings its request (the client sends each call in
/// one write) and ends before the next one's; what comes before the first is
/// dropped. Periodic upkeep falls into whichever call it ran during, which
/// is why the budget is checked on the median call.
fn segments(trace: &str) -> Vec<Segment> {
    let mut out = Vec::new();
    let mut current: Option<Segment> = None;
    let mut execd = std::collections::HashSet::new();
    // Threads whose last call was interrupted to be restarted: a traced
    // process gets even the signals it ignores (each tool's SIGCHLD), so an
    // idle thread's wait is interrupted and started again, which does not
    // happen without the tracer. The restart is not counted.
    let mut restarting = std::collections::HashSet::new();
    for line in trace.lines() {
        let Some(l) = parse_line(line) else {
            if let Some(pid) = interrupted(line) {
                restarting.insert(pid);
            }
            // A wait that started as an `epoll_wait` and ended on a timer or
            // for the client: counted in that row, not the call path's.
            if let Some(row) = wait_end(line).filter(|row| *row != "epoll_wait") {
                if let Some(seg) = current.as_mut() {
                    if let Some(e) = seg.get_mut("epoll_wait").filter(|e| e.0 > 0) {
                        e.0 -= 1;
                    }
                    seg.entry(row.to_string()).or_default().0 += 1;
                }
            }
            continue;
        };
        let restart = restarting.remove(&l.pid) || l.name == "restart_syscall";
        if interrupted(line).is_some() {
            restarting.insert(l.pid);
        }
        if execd.contains(&l.pid) || restart {
            continue;
        }
        if l.name == "execve" {
            execd.insert(l.pid);
        }
        if l.name == "recvfrom" && !l.again {
            out.extend(current.take());
            current = Some(Segment::new());
        }
        let name = match wait_end(line) {
            Some(row) if l.name == "epoll_wait" => row,
            _ => l.name,
        };
        if let Some(seg) = current.as_mut() {
            let e = seg.entry(name.to_string()).or_default();
            e.0 += 1;
            e.1 += usize::from(l.failed);
        }
    }
    out.extend(current);
    out
}

/// The row of the waits that ended because a timer was due, not because a
/// descriptor was ready: how many there are per call depends on how long a
/// call takes (the connection's 20 ms reply-hold timer is moved forward, and
/// tokio wakes at its old deadline once; the upkeep's timers), so on a loaded
/// machine or under a slow tracer it grows, while the call path stays the
/// same. Reported beside the budget, not checked against it.
const TIMER: &str = "(epoll_wait: a timer)";

/// The row of the waits that ended for the client alone: every event they
/// returned is a connection's (a socket, registered for writing too, so its
/// events carry `EPOLLOUT`), here the next request. Whether the server waits
/// for it depends on how quickly the client (the test process, sharing the
/// CPUs with whatever else runs) sends it: when it is already there, the turn
/// after the reply finds it. Reported, not checked.
const CLIENT: &str = "(epoll_wait: the client)";

/// The row of the polls that neither waited nor found an event: the
/// runtime looks at its driver without blocking before it runs tasks that
/// were woken meanwhile (by another thread, or when the tool's end and the
/// runtime's turn cross), which depends on the interleaving, not on what the
/// call does. Counted in the call's total, not checked against the
/// `epoll_wait` row.
const CHECK: &str = "(epoll_wait: a check, no event)";

/// The row an ended `epoll_wait` counts in, from its line
/// (`epoll_wait(4, [...], 1024, 3) = 0`) or its `<... epoll_wait resumed>`
/// line: [`TIMER`] when it returned no event after waiting, [`CHECK`] when
/// it returned none without waiting, [`CLIENT`] when it returned only
/// connections' events, else `epoll_wait`. `None` for other
/// lines and for a wait not ended on this line.
fn wait_end(line: &str) -> Option<&'static str> {
    if !line.contains("epoll_wait") || line.contains("<unfinished") {
        return None;
    }
    let (call, result) = line.rsplit_once('=')?;
    let returned: usize = result.trim().parse().ok()?;
    // `…, [<events>], <maxevents>, <timeout>)`
    let call = call.trim_end().strip_suffix(')')?;
    let mut parts = call.rsplitn(3, ", ");
    let (timeout, _, events) = (parts.next()?, parts.next()?, parts.next()?);
    let timeout: i64 = timeout.trim().parse().ok()?;
    let events = &events[events.find('[')?..];
    let kinds: Vec<&str> = events
        .split("events=")
        .skip(1)
        .map(|e| e.split(',').next().unwrap_or(""))
        .collect();
    Some(if returned == 0 && timeout > 0 {
        TIMER
    } else if returned == 0 {
        CHECK
    } else if returned > 0 && kinds.iter().all(|k| k.contains("EPOLLOUT")) {
        CLIENT
    } else {
        "epoll_wait"
    })
}

/// The system calls of the call path in `seg`: all but the timers' waits.
fn call_path_total(seg: &Segment) -> usize {
    seg.iter()
        .filter(|(name, _)| name.as_str() != TIMER && name.as_str() != CLIENT)
        .map(|(_, v)| v.0)
        .sum()
}

/// The pid of a line whose system call was interrupted to be restarted
/// (`= ? ERESTARTSYS` and its kin).
fn interrupted(line: &str) -> Option<u32> {
    if !line.contains("= ? ERESTART") {
        return None;
    }
    line.split_once(' ')?.0.parse().ok()
}

/// The median of `v` (sorted here); 0 when empty.
fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    match v.len() {
        0 => 0.0,
        n if n % 2 == 1 => v[n / 2],
        n => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

/// The budget table of docs/benchmarks.md: per system call, its calls per
/// call, and the `total` row.
fn documented_budget() -> (BTreeMap<String, f64>, f64) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/benchmarks.md");
    let text =
        std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()));
    let section = text
        .split("<!-- syscall-budget -->")
        .nth(1)
        .unwrap_or_else(|| panic!("{} has no <!-- syscall-budget --> table", path.display()));
    let mut rows = BTreeMap::new();
    let mut total = None;
    for line in section.lines().skip_while(|l| !l.starts_with('|')) {
        if !line.starts_with('|') {
            break;
        }
        let cells: Vec<&str> = line.split('|').map(str::trim).collect();
        let (Some(name), Some(n)) = (cells.get(1), cells.get(2)) else {
            continue;
        };
        let Ok(n) = n.trim_matches('*').parse::<f64>() else {
            continue;
        };
        let name = name.trim_matches(|c| c == '`' || c == '*');
        if name == "total" {
            total = Some(n);
        } else {
            rows.insert(name.to_string(), n);
        }
    }
    let total = total.unwrap_or_else(|| panic!("the budget table has no total row"));
    assert!(
        rows.len() > 10,
        "the budget table lists {} rows",
        rows.len()
    );
    (rows, total)
}

/// `Twalk` to `proc/new`, `Topen`, `Twrite` of the payload and `Tread` in one
/// write (with the previous call's `Tclunk`, if any); checks every reply and
/// returns the fid to clunk next time.
fn pipelined_call(c: &mut Raw, body: &str, clunk: Option<u32>) -> u32 {
    let fid = c.fid();
    let mut buf = Vec::new();
    let mut frames = Vec::new();
    if let Some(old) = clunk {
        frames.push(Body::Tclunk { fid: old });
    }
    frames.push(Body::Twalk {
        fid: 0,
        newfid: fid,
        wnames: vec!["proc".into(), "new".into()],
    });
    frames.push(Body::Topen { fid, mode: ORDWR });
    frames.push(Body::Twrite {
        fid,
        offset: 0,
        data: body.as_bytes().to_vec(),
    });
    frames.push(Body::Tread {
        fid,
        offset: 0,
        count: 8_000,
    });
    let n = frames.len();
    for body in frames {
        let tag = c.tag();
        encode(&Frame { tag, body }, &mut buf);
    }
    c.send_bytes(&buf);
    for _ in 0..n {
        match c.recv().body {
            Body::Rerror { ename } => panic!("call failed: {ename}"),
            Body::Rread { data } => {
                let text = String::from_utf8_lossy(&data);
                assert!(text.contains("\"isError\":false"), "{text}");
            }
            _ => {}
        }
    }
    fid
}

/// Whether every thread of `pid` is traced now.
fn all_threads_traced(pid: u32) -> bool {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return false;
    };
    tasks.flatten().all(|t| {
        std::fs::read_to_string(t.path().join("status")).is_ok_and(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("TracerPid:"))
                .is_some_and(|v| v.trim() != "0")
        })
    })
}

#[test]
fn strace_lines_are_cut_into_calls_and_attributed() {
    let trace = "\
10 epoll_wait(4, [], 1024, 12) = 0
10 recvfrom(15, \"x\", 65536, 0, NULL, NULL) = 116
10 fcntl(24, F_GETFD)                = 0x1 (flags FD_CLOEXEC)
10 fcntl(25, F_GETFD <unfinished ...>
10 fcntl(24, F_SETFL, O_RDONLY|O_NONBLOCK) = 0
10 clone3({flags=CLONE_VM, ...} <unfinished ...>
11 setpgid(0, 0 <unfinished ...>
10 <... clone3 resumed> => {parent_tid=[11]}, 88) = 11
11 <... setpgid resumed>)            = 0
11 readlink(\"/usr\", 0x7ffe, 1023) = -1 EINVAL (Invalid argument)
11 execve(\"/bin/true\", [\"/bin/true\"], 0x5 /* 7 vars */) = 0
11 brk(NULL)                         = 0x56410afeb000
10 read(24, 0x7f, 16384) = -1 EAGAIN (Resource temporarily unavailable)
11 +++ exited with 0 +++
10 --- SIGCHLD {si_signo=SIGCHLD} ---
10 recvfrom(15, 0x7f, 65536, 0, NULL, NULL) = -1 EAGAIN (Resource temporarily unavailable)
10 recvfrom(15, \"y\", 65536, 0, NULL, NULL) = 116
12 <... futex resumed>)              = ? ERESTARTSYS (To be restarted if SA_RESTART is set)
12 futex(0x55, FUTEX_WAIT_BITSET_PRIVATE, 4294967295, NULL, FUTEX_BITSET_MATCH_ANY <unfinished ...>
10 restart_syscall(<... resuming interrupted read ...>) = 0
10 writev(15, [{iov_base=\"z\", iov_len=39}], 1) = 39
10 epoll_wait(4, [], 1024, 3)        = 0
10 epoll_wait(4,  <unfinished ...>
11 exit_group(0) = ?
10 <... epoll_wait resumed>[], 1024, 17) = 0
10 epoll_wait(4, [], 1024, 0) = 0
10 epoll_wait(4, [{events=EPOLLIN|EPOLLHUP, data={u32=2, u64=2}}, {events=EPOLLIN|EPOLLOUT, data={u32=1, u64=1}}], 1024, 0) = 2
10 epoll_wait(4,  <unfinished ...>
10 <... epoll_wait resumed>[{events=EPOLLIN|EPOLLOUT, data={u32=1, u64=1}}], 1024, 12) = 1
";
    let segs = segments(trace);
    assert_eq!(segs.len(), 2, "{segs:?}");
    let get = |n: &str| segs[0].get(n).copied().unwrap_or((0, 0));
    assert_eq!(get("epoll_wait"), (0, 0), "before the first request");
    assert_eq!(get("recvfrom"), (2, 0), "the request's and the EAGAIN one");
    assert_eq!(get("fcntl"), (1, 0), "F_GETFD is not counted, F_SETFL is");
    assert_eq!(get("clone3"), (1, 0));
    assert_eq!(get("setpgid"), (1, 0));
    assert_eq!(get("readlink"), (1, 1));
    assert_eq!(get("execve"), (1, 0));
    assert_eq!(get("brk"), (0, 0), "the tool's own calls are not counted");
    assert_eq!(get("read"), (1, 0), "EAGAIN is not a failure");
    assert_eq!(segs[0].values().map(|v| v.0).sum::<usize>(), 8);
    assert_eq!(call_path_total(&segs[1]), 4, "{:?}", segs[1]);
    assert_eq!(
        segs[1].get(TIMER),
        Some(&(2, 0)),
        "two waits ended by a timer"
    );
    assert_eq!(
        segs[1].get(CLIENT),
        Some(&(1, 0)),
        "one wait ended by the client alone"
    );
    assert_eq!(segs[1].get(CHECK), Some(&(1, 0)), "one poll found nothing");
    assert_eq!(
        segs[1].get("epoll_wait"),
        Some(&(1, 0)),
        "the poll with the tool's end and the client's request"
    );
    assert_eq!(median(&mut [3.0, 1.0, 2.0]), 2.0);
    assert_eq!(median(&mut [4.0, 1.0, 2.0, 3.0]), 2.5);
}

#[test]
fn a_sandboxed_call_stays_within_its_system_call_budget() {
    if Command::new("strace")
        .arg("-V")
        .stdout(Stdio::null())
        .status()
        .map_or(true, |s| !s.success())
    {
        eprintln!("skipped: strace is missing (apt-get install strace; .ci/run installs it)");
        return;
    }
    let (budget, total_budget) = documented_budget();
    // Logging as in production (`RUST_LOG` unset: info), not the tests'
    // debug level, which writes one more line per call.
    let srv = Launch::new()
        .tools(&[(
            "t.yaml",
            "description: Exit at once\nexecutable: /bin/true\n",
        )])
        .arg("--no-auth")
        .env_remove("RUST_LOG")
        .start();
    let mut c = srv.attached();
    load(&mut c, "a1", "t");
    let body = payload(&[("tool", "t"), ("agent", "a1")]);
    let mut clunk = None;
    for _ in 0..WARM_UP {
        clunk = Some(pipelined_call(&mut c, &body, clunk));
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let trace_path = dir.path().join("trace");
    let mut strace = Command::new("strace")
        .args(["-f", "-qq", "-o"])
        .arg(&trace_path)
        .args(["-p", &srv.pid().to_string()])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start strace");
    let attached = wait_until(WAIT, || all_threads_traced(srv.pid()));
    let started = std::time::Instant::now();
    for _ in 0..CALLS {
        clunk = Some(pipelined_call(&mut c, &body, clunk));
    }
    let elapsed = started.elapsed();
    // Let the last call's end (reaping, the log line) reach the trace.
    std::thread::sleep(Duration::from_millis(200));
    // Safety: kill(2) of our own child, not yet reaped.
    unsafe { libc::kill(strace.id() as i32, libc::SIGINT) };
    let stopped = wait_until(WAIT, || strace.try_wait().ok().flatten().is_some());
    if !stopped {
        let _ = strace.kill();
        let _ = strace.wait();
    }
    assert!(attached, "strace did not attach to every server thread");
    assert!(stopped, "strace did not stop within {WAIT:?}");
    let trace = std::fs::read_to_string(&trace_path).expect("read the trace");
    if let Some(keep) = std::env::var_os("TOOLSRV_BUDGET_TRACE") {
        std::fs::write(&keep, &trace).expect("keep the trace");
        eprintln!("trace kept in {}", keep.to_string_lossy());
    }
    let segs = segments(&trace);
    assert!(
        segs.len() >= CALLS - 1,
        "{} calls found in the trace of {CALLS}",
        segs.len()
    );
    let n = segs.len() as f64;
    let mut totals: Vec<f64> = segs.iter().map(|s| call_path_total(s) as f64).collect();
    let mean_total = totals.iter().sum::<f64>() / n;
    let total = median(&mut totals);
    let mut names: Vec<&String> = segs.iter().flat_map(|s| s.keys()).collect();
    names.sort();
    names.dedup();
    let mut report = format!(
        "{} calls: the median call made {total} system calls (budget {total_budget}, at most {:.1}); \
         {mean_total:.1} on average with the periodic upkeep\n  {:<24} median   mean  failing/call  budget\n",
        segs.len(),
        total_budget * SLACK,
        "system call"
    );
    let mut over = Vec::new();
    for name in names {
        let mut per: Vec<f64> = segs
            .iter()
            .map(|s| s.get(name).map_or(0.0, |v| v.0 as f64))
            .collect();
        let failed: usize = segs.iter().map(|s| s.get(name).map_or(0, |v| v.1)).sum();
        let mean = per.iter().sum::<f64>() / n;
        let med = median(&mut per);
        if name == TIMER || name == CLIENT {
            report.push_str(&format!(
                "  {name:<24} {med:6} {mean:6.2}                not counted ({:.1} ms per call)\n",
                elapsed.as_secs_f64() * 1000.0 / CALLS as f64
            ));
            continue;
        }
        if name == CHECK {
            report.push_str(&format!(
                "  {name:<24} {med:6} {mean:6.2}                in the total only\n"
            ));
            continue;
        }
        let allowed = budget.get(name.as_str()).copied().unwrap_or(0.0);
        report.push_str(&format!(
            "  {name:<24} {med:6} {mean:6.2} {:13.2}  {allowed}\n",
            failed as f64 / n
        ));
        if med > allowed * SLACK + ROW_SLACK {
            over.push(format!("{name} {med} > {allowed}"));
        }
    }
    eprintln!("{report}");
    assert!(
        total <= total_budget * SLACK,
        "the median call made {total} system calls, more than 10 % over the budget of {total_budget}:\n{report}"
    );
    assert!(
        over.is_empty(),
        "over their rows of the budget: {}\n{report}",
        over.join(", ")
    );
}
