//! Honest skips: a test that could not run never reads as passed.
//!
//! libtest has no "skipped" outcome and captures a passing test's output, so a
//! test that returns early is reported `ok`. Every early return goes through
//! here instead:
//!
//! - [`missing_prerequisite`]: something `.ci/run` installs is not there
//!   (sshd, python3, the MCP Inspector, bubblewrap). Under `CI=true` the test
//!   fails, naming it; elsewhere the skip is recorded.
//! - [`cannot_run_here`]: a reason no install fixes (not root, a kernel
//!   feature): always recorded.
//!
//! A recorded skip is one line, `<test binary> <test>: <why>`, appended to the
//! skip list ([`skip_list`]), and the same line on stderr. `.ci/run` empties the
//! list before the tests and prints it after them.

use std::io::Write;
use std::path::PathBuf;

/// Whether this is a CI run (`CI=true`, as CI services set it, or `CI=1`).
pub fn is_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| v.eq_ignore_ascii_case("true") || v == "1")
}

/// Where skips are recorded: `$TOOLSRV_TEST_SKIPS`, else
/// `<target>/test-skips.txt` of the running test binary's target directory.
pub fn skip_list() -> PathBuf {
    if let Some(p) = std::env::var_os("TOOLSRV_TEST_SKIPS").filter(|p| !p.is_empty()) {
        return PathBuf::from(p);
    }
    let profile = crate::paths::profile_dir();
    profile.parent().unwrap_or(&profile).join("test-skips.txt")
}

/// A prerequisite that `.ci/run` installs (`what`, e.g. "OpenSSH's sshd at
/// /usr/sbin/sshd") is missing. Under `CI=true` this panics (the test fails);
/// elsewhere the skip is recorded and the caller returns.
pub fn missing_prerequisite(what: &str) {
    let why = format!("{what} is missing (.ci/run installs it)");
    if is_ci() {
        panic!(
            "{}: {why}; under CI=true a prerequisite .ci/run installs must be there, so this is a failure, not a skip",
            test_name()
        );
    }
    record(&why);
}

/// The test cannot run here for a reason no install fixes (`why`); the skip is
/// recorded and the caller returns.
pub fn cannot_run_here(why: &str) {
    record(why);
}

/// Appends the skip to the list (one `write` of one line, so concurrent tests
/// do not interleave) and says it on stderr.
fn record(why: &str) {
    let line = format!("{} {}: {why}\n", binary_name(), test_name());
    eprint!("SKIP: {line}");
    let path = skip_list();
    let written = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&path)
        .and_then(|mut f| f.write_all(line.as_bytes()));
    if let Err(e) = written {
        // The skip would go unseen: fail rather than pass silently.
        panic!("cannot record a skipped test in {}: {e}", path.display());
    }
}

/// The running test (libtest names each test's thread after it).
fn test_name() -> String {
    std::thread::current()
        .name()
        .filter(|n| *n != "main")
        .unwrap_or("(main)")
        .to_string()
}

/// The test binary, without cargo's hash suffix (`integration`, `run`).
fn binary_name() -> String {
    let exe = std::env::current_exe().ok();
    let stem = exe
        .as_deref()
        .and_then(|p| p.file_stem())
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    match stem.rsplit_once('-') {
        Some((name, hash)) if hash.len() == 16 && hash.bytes().all(|b| b.is_ascii_hexdigit()) => {
            name.to_string()
        }
        _ => stem,
    }
}
