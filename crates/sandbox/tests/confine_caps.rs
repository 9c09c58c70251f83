//! Capabilities: a confined child of a privileged toolsrv keeps only
//! `confine::caps::KEEP`; an unconfined one keeps everything. Landlock allows
//! each operation below (the directory is `rw`), so a refusal comes from the
//! dropped capability. Meaningful when the tests run as root (they do in CI);
//! otherwise there is nothing to drop and the tests say so and stop.

use crate::spawn_support::{base_rules, confine, sh};
use toolsrv_sandbox::ExitStatus;

const EPERM: &str = "Operation not permitted";

/// A scratch directory covered by an `rw` rule, and the confinement.
fn setup() -> (tempfile::TempDir, String, toolsrv_sandbox::Confinement) {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut rules = base_rules();
    rules.rw.push(dir.path().to_path_buf());
    let c = confine(&rules);
    let path = dir.path().display().to_string();
    (dir, path, c)
}

/// Whether this process holds the capabilities the probes need (it is root).
/// (`nice` warns and runs the command anyway when it cannot set the niceness.)
fn privileged() -> bool {
    let (status, out) = sh("nice -n -5 true", "/", None);
    if status != ExitStatus::Code(0) || !out.is_empty() {
        toolsrv_testkit::skip::cannot_run_here(
            "not privileged (no CAP_SYS_NICE): no capability to drop, nothing to check",
        );
        return false;
    }
    true
}

#[test]
fn a_confined_child_loses_the_capabilities_landlock_cannot_contain() {
    if !privileged() {
        return;
    }
    let (_dir, d, c) = setup();
    // CAP_SYS_NICE: raising priority (or worse, real-time scheduling). nice
    // warns and runs the command anyway.
    let (_, out) = sh("nice -n -5 true", &d, Some(&c));
    assert!(out.contains("cannot set niceness"), "{out}");
    // CAP_MKNOD: a block device node in a writable directory would read the disk.
    let (status, out) = sh("mknod blk b 7 0", &d, Some(&c));
    assert_ne!(status, ExitStatus::Code(0), "{out}");
    assert!(out.contains(EPERM), "{out}");
    // Unconfined, the same commands work: the refusals above are the drop.
    let (status, out) = sh("nice -n -5 true && mknod blk b 7 0 && rm blk", &d, None);
    assert_eq!((status, out.as_str()), (ExitStatus::Code(0), ""));
}

#[test]
fn a_confined_child_keeps_what_file_work_as_root_needs() {
    if !privileged() {
        return;
    }
    let (_dir, d, c) = setup();
    // CAP_CHOWN and CAP_FOWNER: tar extracting as root restores owners and modes.
    // CAP_DAC_OVERRIDE: a file without permission bits is still readable.
    let script = "echo x > f && chown 12345:12345 f && chmod 000 f && cat f && \
                  chmod 644 f && chown 0:0 f";
    let (status, out) = sh(script, &d, Some(&c));
    assert_eq!((status, out.as_str()), (ExitStatus::Code(0), "x\n"));
}
