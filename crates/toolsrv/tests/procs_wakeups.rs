//! What a tool's end costs the server beyond the thread that handles it, with
//! the multi-thread runtime (two workers): the main thread, which only accepts
//! connections, must stay asleep during calls. In particular the SIGCHLD of an
//! ended tool must be discarded by the kernel (toolsrv has no handler for it),
//! not queued to wake another thread: it was queued while the spawning thread
//! blocked every signal around a vfork `clone`, and each tool ending during
//! another's start-up woke the main thread (105 wake-ups in 320 calls).

use std::time::Duration;

use crate::procs_util::{call, load, ok_text, write_tool};
use crate::util::{wait_until, Launch};

/// Concurrent agents and calls each: enough overlap of one tool's end with
/// another's start that the old mask woke the main thread on ~40 % of calls.
const AGENTS: usize = 8;
const CALLS: usize = 40;

/// `voluntary_ctxt_switches` of the main thread of `pid`.
fn main_thread_wakeups(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/status"))
        .expect("main thread status");
    status
        .lines()
        .find_map(|l| l.strip_prefix("voluntary_ctxt_switches:"))
        .and_then(|v| v.trim().parse().ok())
        .expect("voluntary_ctxt_switches field")
}

#[test]
fn ended_tools_do_not_wake_the_servers_main_thread() {
    let dir = tempfile::tempdir().expect("tempdir");
    let tools = dir.path().join("tools");
    std::fs::create_dir(&tools).expect("tools dir");
    write_tool(
        &tools,
        "t.yaml",
        "description: Exit at once\nexecutable: /bin/true\n",
    );
    let tools_arg = tools.to_str().expect("utf8 path").to_string();
    // Two workers: the multi-thread runtime, whose main thread only accepts.
    let srv = Launch::new()
        .env("TOKIO_WORKER_THREADS", "2")
        .args(["--no-auth", "--yolo", "--tools", &tools_arg])
        .start();
    let mut conns: Vec<_> = (0..AGENTS)
        .map(|i| {
            let mut c = srv.attached();
            load(&mut c, &format!("a{i}"), "t");
            c
        })
        .collect();
    // Let the main thread settle after the accepts before counting.
    let settled = wait_until(Duration::from_secs(5), || {
        let before = main_thread_wakeups(srv.pid());
        std::thread::sleep(Duration::from_millis(50));
        main_thread_wakeups(srv.pid()) == before
    });
    assert!(settled, "the main thread never went quiet");
    let before = main_thread_wakeups(srv.pid());
    std::thread::scope(|s| {
        for (i, c) in conns.iter_mut().enumerate() {
            s.spawn(move || {
                let agent = format!("a{i}");
                for _ in 0..CALLS {
                    let r = call(c, &[("tool", "t"), ("agent", &agent)]);
                    ok_text(&r);
                }
            });
        }
    });
    let woken = main_thread_wakeups(srv.pid()) - before;
    assert!(
        woken < (AGENTS * CALLS / 20) as u64,
        "the main thread woke {woken} times during {} calls",
        AGENTS * CALLS
    );
}
