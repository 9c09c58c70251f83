//! `spawn_detached`: the spawning thread does not wait for the child's
//! `execve`; the child's memory stays valid until the kernel says it is done,
//! its process group exists at once, and a setup failure is told after the reap.

use std::io::Read;
use std::os::fd::OwnedFd;

use crate::spawn_support::start_with;
use toolsrv_sandbox::{spawn_detached, Child, ExitStatus, SpawnError};

/// Starts `argv` detached, with `env` added to the test environment, writing
/// into a fresh pipe.
fn start(argv: &[&str], cwd: &str, env: &[&str]) -> Result<(Child, OwnedFd), SpawnError> {
    start_with(spawn_detached, argv, cwd, env, None)
}

fn read_all(r: OwnedFd) -> String {
    let mut out = String::new();
    std::fs::File::from(r)
        .read_to_string(&mut out)
        .expect("read tool output");
    out
}

#[test]
fn a_detached_child_runs_with_its_arguments_and_environment() {
    let (mut child, r) = start(
        &["/bin/sh", "-c", "echo \"$1 $X\"", "sh", "one"],
        "/",
        &["X=two"],
    )
    .expect("spawn");
    assert_eq!(read_all(r), "one two\n");
    assert_eq!(child.wait().expect("wait"), ExitStatus::Code(0));
    assert!(child.setup_error().is_none());
}

#[test]
fn setup_failures_are_told_once_the_child_is_reaped() {
    let cases = [
        (
            ["/nonexistent/tool"],
            "/",
            "cannot start /nonexistent/tool: No such file or directory (os error 2)",
        ),
        (
            ["/bin/true"],
            "/nonexistent/dir",
            "cannot chdir to /nonexistent/dir: No such file or directory (os error 2)",
        ),
    ];
    for (argv, cwd, want) in cases {
        match start(&argv, cwd, &[]) {
            Ok((mut child, r)) => {
                assert!(child.setup_error().is_none(), "known before the reap");
                assert_eq!(read_all(r), "", "a failed setup prints nothing");
                assert_eq!(child.wait().expect("wait"), ExitStatus::Code(127));
                let e = child.setup_error().expect("the setup failure");
                assert_eq!(e.to_string(), want);
            }
            // Without clone3 it is the vfork spawn, which fails at once.
            Err(e) => assert_eq!(e.to_string(), want),
        }
    }
}

#[test]
fn the_process_group_exists_when_spawn_returns() {
    for _ in 0..20 {
        let (mut child, _r) = start(&["/bin/sleep", "60"], "/", &[]).expect("spawn sleep");
        // Safety: getpgid has no memory arguments.
        assert_eq!(unsafe { libc::getpgid(child.pid()) }, child.pid());
        child.signal_group(libc::SIGKILL).expect("kill the group");
        assert_eq!(
            child.wait().expect("wait"),
            ExitStatus::Signal(libc::SIGKILL)
        );
    }
}

#[test]
fn concurrent_spawns_keep_their_arguments_apart() {
    // Each child reads its own strings while later spawns prepare theirs: a
    // launch freed or reused too early would show up as a wrong line.
    std::thread::scope(|s| {
        for t in 0..4 {
            s.spawn(move || {
                for i in 0..50 {
                    let arg = format!("t{t}-{i}");
                    let env = format!("Y={i}-{t}");
                    let (mut child, r) = start(
                        &["/bin/sh", "-c", "echo \"$1 $Y\"", "sh", &arg],
                        "/",
                        &[&env],
                    )
                    .expect("spawn");
                    assert_eq!(read_all(r), format!("{arg} {i}-{t}\n"));
                    assert_eq!(child.wait().expect("wait"), ExitStatus::Code(0));
                }
            });
        }
    });
}

#[test]
fn a_child_dropped_before_it_execs_still_runs_its_program() {
    // Dropping the `Child` at once must not free what the child still reads.
    let mut pids = Vec::new();
    let mut outputs = Vec::new();
    for i in 0..20 {
        let arg = format!("dropped-{i}");
        let (child, r) = start(&["/bin/echo", &arg], "/", &[]).expect("spawn");
        pids.push(child.pid());
        drop(child);
        outputs.push((arg, r));
    }
    for (arg, r) in outputs {
        assert_eq!(read_all(r), format!("{arg}\n"));
    }
    for pid in pids {
        let mut status = 0;
        // Safety: reaps our own child; `status` is a valid out pointer.
        assert_eq!(unsafe { libc::waitpid(pid, &mut status, 0) }, pid);
        assert!(libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0);
    }
    // A later spawn frees the parked launches; it still works.
    let (mut child, r) = start(&["/bin/echo", "after"], "/", &[]).expect("spawn");
    assert_eq!(read_all(r), "after\n");
    assert_eq!(child.wait().expect("wait"), ExitStatus::Code(0));
}
