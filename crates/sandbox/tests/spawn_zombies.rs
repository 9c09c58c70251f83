//! Many spawns (successful and failing) leave no zombie and no descriptor behind.
//! Its own test binary: no other test's children are around while it counts.

// Test code: an unexpected failure is a panic that names it.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod spawn_support;

use spawn_support::run;
use toolsrv_sandbox::ExitStatus;

/// Children of this process (any thread) in state Z.
fn zombie_children() -> Vec<i32> {
    let me = std::process::id() as i32;
    let mut zombies = Vec::new();
    for entry in std::fs::read_dir("/proc").expect("read /proc").flatten() {
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
            continue;
        };
        let Some(after) = stat.rsplit(')').next() else {
            continue;
        };
        let fields: Vec<&str> = after.split_whitespace().collect();
        if fields.len() > 1 && fields[0] == "Z" && fields[1].parse() == Ok(me) {
            zombies.push(entry.file_name().to_string_lossy().parse().unwrap_or(-1));
        }
    }
    zombies
}

fn open_fds() -> usize {
    std::fs::read_dir("/proc/self/fd").expect("fd dir").count()
}

#[test]
fn two_hundred_spawns_leave_no_zombies_or_descriptors() {
    // The one `/dev/null` descriptor all spawns share is opened up front (the
    // server does this at startup); nothing else may stay open.
    toolsrv_sandbox::preopen().expect("open /dev/null");
    let fds_before = open_fds();
    for i in 0..200 {
        if i % 4 == 3 {
            // Failing spawns are reaped inside spawn().
            run(&["/nonexistent/tool"], "/", None).expect_err("missing program");
            run(&["/bin/true"], "/nonexistent", None).expect_err("bad cwd");
        } else {
            let (status, _) = run(&["/bin/true"], "/", None).expect("spawn true");
            assert_eq!(status, ExitStatus::Code(0));
        }
    }
    assert_eq!(zombie_children(), Vec::<i32>::new());
    assert_eq!(open_fds(), fds_before, "descriptor leak in the parent");
}
