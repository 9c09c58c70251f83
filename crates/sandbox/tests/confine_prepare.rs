//! Preparing confinements: ABI detection, hard requirements, best-effort degradation.

use std::path::PathBuf;

use crate::spawn_support::base_rules;
use toolsrv_sandbox::{landlock_abi, Confinement};

#[test]
fn landlock_abi_is_detected() {
    // This machine (kernel 6.18) has Landlock; every other test relies on it.
    assert!(landlock_abi() >= 6, "landlock ABI {}", landlock_abi());
}

#[test]
fn full_abi_enforces_everything() {
    let c = Confinement::prepare(&base_rules()).expect("prepare");
    assert!(c.unenforced().is_empty(), "{:?}", c.unenforced());
    assert_eq!(c.abi(), landlock_abi());
}

#[test]
fn hard_requirement_refuses_a_kernel_without_truncate_control() {
    let rules = base_rules();
    assert!(!rules.best_effort);
    let err = Confinement::prepare_with_abi_limit(&rules, Some(2)).expect_err("must refuse");
    assert_eq!(
        err.to_string(),
        "landlock ABI 3 required for truncate control, kernel has ABI 2"
    );
}

#[test]
fn hard_requirement_refuses_port_rules_without_network_support() {
    let mut rules = base_rules();
    rules.network.connect_tcp = vec![443];
    let err = Confinement::prepare_with_abi_limit(&rules, Some(3)).expect_err("must refuse");
    assert_eq!(
        err.to_string(),
        "landlock ABI 4 required for tcp port rules, kernel has ABI 3"
    );
    // Without port rules, ABI 5 is enough; scoping (ABI 6) is only reported.
    let c = Confinement::prepare_with_abi_limit(&base_rules(), Some(5)).expect("ABI 5");
    assert_eq!(c.unenforced().len(), 1, "{:?}", c.unenforced());
    assert!(c.unenforced()[0].contains("signal and abstract unix socket scoping"));
}

#[test]
fn best_effort_reports_what_is_not_enforced() {
    let mut rules = base_rules();
    rules.best_effort = true;
    rules.rw.push(std::env::temp_dir());
    let c = Confinement::prepare_with_abi_limit(&rules, Some(1)).expect("best effort");
    let all = c.unenforced().join("\n");
    for feature in [
        "link and rename control",
        "truncate control",
        "device ioctl control",
        "signal and abstract unix socket scoping",
    ] {
        assert!(all.contains(feature), "{feature} missing from {all}");
    }
    assert!(!all.contains("filesystem access control"), "{all}");
    let none = Confinement::prepare_with_abi_limit(&rules, Some(0)).expect("no landlock");
    assert_eq!(none.abi(), 0);
    assert!(none
        .unenforced()
        .join("\n")
        .contains("filesystem access control"));
}

#[test]
fn missing_path_refuses_in_hard_mode_and_is_skipped_in_best_effort() {
    let mut rules = base_rules();
    rules.ro.push(PathBuf::from("/nonexistent/toolsrv-path"));
    let err = Confinement::prepare(&rules).expect_err("hard mode refuses");
    assert!(
        err.to_string()
            .starts_with("cannot open sandbox path /nonexistent/toolsrv-path: "),
        "{err}"
    );
    rules.best_effort = true;
    let c = Confinement::prepare(&rules).expect("best effort skips");
    assert_eq!(c.unenforced().len(), 1, "{:?}", c.unenforced());
    assert!(c.unenforced()[0].contains("/nonexistent/toolsrv-path"));
}

#[test]
fn confinement_is_send_and_sync() {
    fn check<T: Send + Sync>() {}
    check::<Confinement>();
}
