//! The skip rule: under `CI=true` a missing prerequisite that `.ci/run`
//! installs fails the test; elsewhere, and for reasons no install fixes, the
//! skip is recorded in the skip list, never silently passed.

use std::process::{Command, Output};

use toolsrv_testkit::example;

/// Runs the probe with `args`, `CI` set to `ci` (or removed), recording into `list`.
fn probe(ci: Option<&str>, list: &std::path::Path, args: &[&str]) -> Output {
    let mut c = Command::new(example("skip_probe"));
    c.args(args).env("TOOLSRV_TEST_SKIPS", list);
    match ci {
        Some(v) => c.env("CI", v),
        None => c.env_remove("CI"),
    };
    c.output().expect("run skip_probe")
}

fn read(list: &std::path::Path) -> String {
    std::fs::read_to_string(list).unwrap_or_default()
}

#[test]
fn under_ci_a_missing_prerequisite_is_a_failure() {
    let dir = tempfile::tempdir().expect("tempdir");
    let list = dir.path().join("skips.txt");
    for ci in ["true", "1"] {
        let out = probe(Some(ci), &list, &["missing", "the frobnicator"]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "CI={ci}: passed: {err}");
        assert!(
            err.contains("the frobnicator is missing") && err.contains("CI=true"),
            "{err}"
        );
    }
    assert_eq!(read(&list), "", "a failure is not recorded as a skip");
}

#[test]
fn elsewhere_a_skip_is_recorded_and_said() {
    let dir = tempfile::tempdir().expect("tempdir");
    let list = dir.path().join("skips.txt");
    for ci in [None, Some("false")] {
        let out = probe(ci, &list, &["missing", "the frobnicator"]);
        assert!(out.status.success(), "{out:?}");
        assert!(String::from_utf8_lossy(&out.stderr).starts_with("SKIP: skip_probe "));
    }
    // A reason no install fixes is recorded under CI too.
    let out = probe(Some("true"), &list, &["cannot", "not root"]);
    assert!(out.status.success(), "{out:?}");
    let lines: Vec<String> = read(&list).lines().map(str::to_string).collect();
    assert_eq!(lines.len(), 3, "{lines:?}");
    assert!(
        lines[..2].iter().all(|l| l.starts_with("skip_probe ")
            && l.ends_with(": the frobnicator is missing (.ci/run installs it)")),
        "{lines:?}"
    );
    assert!(lines[2].ends_with(": not root"), "{lines:?}");
}
