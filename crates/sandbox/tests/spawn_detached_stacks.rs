//! A detached child runs on a stack lent until it execs: a long-running tool
//! does not keep one (each is a 64 KiB mapping plus a guard page). Its own test
//! binary, so no other test's mappings come and go meanwhile.

// Test code: an unexpected failure is a panic that names it.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod spawn_support;

use std::time::{Duration, Instant};

use spawn_support::start_with;
use toolsrv_sandbox::{spawn_detached, ExitStatus};

fn mappings() -> usize {
    std::fs::read_to_string("/proc/self/maps")
        .expect("read /proc/self/maps")
        .lines()
        .count()
}

#[test]
fn running_children_do_not_keep_their_stacks() {
    let start = || {
        start_with(spawn_detached, &["/bin/sleep", "30"], "/", &[], None)
            .expect("spawn")
            .0
    };
    // Warm up (the first spawn maps the pool's first stack, /dev/null opens).
    let mut first = start();
    let before = mappings();
    let mut children = Vec::new();
    for _ in 0..60 {
        let child = start();
        // Spawns paced like calls: each child has exec'd before the next spawn
        // (which takes its stack back). A burst would have several in flight.
        let exe = format!("/proc/{}/exe", child.pid());
        let deadline = Instant::now() + Duration::from_secs(10);
        while std::fs::read_link(&exe).map_or(true, |p| !p.ends_with("sleep")) {
            assert!(
                Instant::now() < deadline,
                "child {} never exec'd",
                child.pid()
            );
            std::thread::yield_now();
        }
        children.push(child);
    }
    let grown = mappings().saturating_sub(before);
    for child in children.iter().chain(std::iter::once(&first)) {
        child.signal_group(libc::SIGKILL).expect("kill");
    }
    for child in children.iter_mut().chain(std::iter::once(&mut first)) {
        assert_eq!(
            child.wait().expect("wait"),
            ExitStatus::Signal(libc::SIGKILL)
        );
    }
    // 60 kept stacks would be 120 mappings.
    assert!(grown < 10, "60 running children added {grown} mappings");
}
