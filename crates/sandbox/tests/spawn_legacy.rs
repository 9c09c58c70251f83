//! The `clone(2)` fallback of the spawn path (kernels before 5.5, other
//! architectures, seccomp policies that refuse `clone3`): the child resets
//! every signal itself. Its own test binary, since the switch is process-wide.

// Test code: an unexpected failure is a panic that names it.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod spawn_support;

use spawn_support::{run, sh, status_field};
use toolsrv_sandbox::ExitStatus;

extern "C" fn noop_handler(_: libc::c_int) {}

#[test]
fn without_clone3_tools_still_start_with_default_signals_and_an_empty_mask() {
    toolsrv_sandbox::disable_clone3();
    // A handler in the parent, as tokio installs for SIGCHLD/SIGTERM: the tool
    // must not inherit it (nor SIGPIPE ignored by the Rust runtime).
    // Safety: installs a handler that does nothing, for SIGUSR1 in this test process.
    unsafe {
        libc::signal(
            libc::SIGUSR1,
            noop_handler as *const () as libc::sighandler_t,
        )
    };
    let (status, out) = run(&["/bin/cat", "/proc/self/status"], "/", None).expect("spawn cat");
    assert_eq!(status, ExitStatus::Code(0));
    let field = |name: &str| status_field(&out, name);
    assert_eq!(field("SigIgn:"), "0000000000000000");
    assert_eq!(field("SigBlk:"), "0000000000000000");
    assert_eq!(field("SigCgt:"), "0000000000000000");
    let (status, _) = sh("kill -USR1 $$", "/", None);
    assert_eq!(status, ExitStatus::Signal(libc::SIGUSR1));
    run(&["/nonexistent/tool"], "/", None).expect_err("missing program");
}
