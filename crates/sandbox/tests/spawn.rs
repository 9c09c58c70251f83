//! The unconfined spawn path against real processes.

use std::io::{BufRead, BufReader};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

use crate::spawn_support::{run, run_probe, sh, start, status_field, wait_gone};
use toolsrv_sandbox::ExitStatus;

#[test]
fn echo_output_reaches_the_pipe() {
    let (status, out) = run(&["/bin/echo", "hi"], "/", None).expect("spawn echo");
    assert_eq!(status, ExitStatus::Code(0));
    assert_eq!(out, "hi\n");
}

#[test]
fn stdout_and_stderr_are_merged_in_order() {
    let (status, out) = sh("echo a; echo b >&2; echo c", "/", None);
    assert_eq!(status.code(), 0);
    assert_eq!(out, "a\nb\nc\n");
}

#[test]
fn stdin_is_dev_null() {
    let (_, out) = run(&["/bin/readlink", "/proc/self/fd/0"], "/", None).expect("spawn");
    assert_eq!(out, "/dev/null\n");
    // Reading stdin hits EOF at once.
    let (status, out) = sh("cat; echo done", "/", None);
    assert_eq!((status.code(), out.as_str()), (0, "done\n"));
}

#[test]
fn exit_code_is_reported() {
    let (status, _) = sh("exit 3", "/", None);
    assert_eq!(status, ExitStatus::Code(3));
    assert_eq!(status.code(), 3);
}

#[test]
fn signal_death_is_128_plus_n() {
    let (status, _) = sh("kill -KILL $$", "/", None);
    assert_eq!(status, ExitStatus::Signal(libc::SIGKILL));
    assert_eq!(status.code(), 137);
}

#[test]
fn missing_program_is_a_spawn_error() {
    let err = run(&["/nonexistent/tool"], "/", None).expect_err("must fail");
    assert_eq!(
        err.to_string(),
        "cannot start /nonexistent/tool: No such file or directory (os error 2)"
    );
}

#[test]
fn bad_cwd_is_a_spawn_error() {
    let err = run(&["/bin/true"], "/nonexistent-dir", None).expect_err("must fail");
    assert_eq!(
        err.to_string(),
        "cannot chdir to /nonexistent-dir: No such file or directory (os error 2)"
    );
}

#[test]
fn cwd_is_applied() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().to_str().expect("utf-8");
    let (_, out) = run(&["/bin/pwd"], path, None).expect("spawn pwd");
    assert_eq!(out.trim(), path);
}

#[test]
fn child_leads_its_own_process_group() {
    let (status, out) = run(&["/bin/cat", "/proc/self/stat"], "/", None).expect("spawn");
    assert_eq!(status.code(), 0);
    let pid: i32 = out
        .split(' ')
        .next()
        .and_then(|p| p.parse().ok())
        .expect("pid");
    let after_comm = out.rsplit(')').next().expect("stat fields");
    let fields: Vec<&str> = after_comm.split_whitespace().collect();
    // fields[0] = state, [1] = ppid, [2] = pgrp, [3] = session
    let pgrp: i32 = fields[2].parse().expect("pgrp");
    assert_eq!(pgrp, pid);
    // Safety: getpgrp has no preconditions.
    assert_ne!(pgrp, unsafe { libc::getpgrp() });
}

#[test]
fn signal_group_kills_grandchildren() {
    let (mut child, r) =
        start(&["/bin/sh", "-c", "sleep 60 & echo $!; wait"], "/", None).expect("spawn sh");
    let mut line = String::new();
    BufReader::new(std::fs::File::from(r))
        .read_line(&mut line)
        .expect("read grandchild pid");
    let grandchild: i32 = line.trim().parse().expect("grandchild pid");
    assert_eq!(child.try_wait().expect("try_wait"), None);
    child.signal_group(libc::SIGKILL).expect("signal group");
    assert_eq!(
        child.wait().expect("wait"),
        ExitStatus::Signal(libc::SIGKILL)
    );
    assert!(
        wait_gone(grandchild, 10_000),
        "grandchild {grandchild} survived"
    );
    // Signalling a group that no longer exists is fine.
    child.signal_group(libc::SIGTERM).expect("ESRCH is ok");
}

#[test]
fn try_wait_reports_exit_via_pidfd() {
    let (mut child, r) = start(&["/bin/true"], "/", None).expect("spawn true");
    drop(r);
    let mut pfd = libc::pollfd {
        fd: child.pidfd().as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    // Safety: polls one valid pollfd.
    let n = unsafe { libc::poll(&mut pfd, 1, 10_000) };
    assert_eq!(n, 1, "pidfd became readable");
    assert_eq!(
        child.try_wait().expect("try_wait"),
        Some(ExitStatus::Code(0))
    );
    assert_eq!(child.try_wait().expect("again"), Some(ExitStatus::Code(0)));
}

#[test]
fn no_descriptor_leaks_into_the_tool() {
    // An inheritable descriptor in the parent, as a careless library might leave.
    // Safety: dup of stderr without CLOEXEC; the result is owned below.
    let leaky = unsafe { libc::dup(2) };
    assert!(leaky >= 3);
    // Safety: fresh descriptor owned here.
    let _leaky = unsafe { OwnedFd::from_raw_fd(leaky) };
    assert_eq!(run_probe(&["fds"], None), "0 1 2");
}

#[test]
fn sigpipe_is_default_and_mask_empty_in_the_tool() {
    let (_, out) = run(&["/bin/cat", "/proc/self/status"], "/", None).expect("spawn cat");
    let field = |name: &str| status_field(&out, name);
    assert_eq!(field("SigIgn:"), "0000000000000000");
    assert_eq!(field("SigBlk:"), "0000000000000000");
    // The test process itself ignores SIGPIPE (Rust runtime): the tool must not.
    let (status, _) = sh("kill -PIPE $$", "/", None);
    assert_eq!(status, ExitStatus::Signal(libc::SIGPIPE));
}

#[test]
fn parent_death_signal_is_armed() {
    assert_eq!(run_probe(&["pdeathsig"], None), libc::SIGKILL.to_string());
}

#[test]
fn tool_dies_with_the_spawning_thread() {
    // PR_SET_PDEATHSIG fires when the thread that spawned the child exits.
    let handle = std::thread::spawn(|| {
        let (child, r) = start(&["/bin/sleep", "60"], "/", None).expect("spawn sleep");
        drop(r);
        child
    });
    let mut child = handle.join().expect("spawner thread");
    assert_eq!(
        child.wait().expect("wait"),
        ExitStatus::Signal(libc::SIGKILL)
    );
}
