//! `doctor::Report::evaluate`: facts held against a policy (docs/cli.md).
//! The facts are written by hand here, for hosts this machine is not (no
//! Landlock, user namespaces refused); `crates/toolsrv/tests/doctor.rs`
//! checks the real host and a real server.

use toolsrv_sandbox::Enforcement;
use toolsrv_sandbox::Mode;
use toolsrv_sandbox::Policy;
use toolsrv_sandbox::{Facts, Report, Source};

/// A host that has everything.
fn complete() -> Facts {
    Facts {
        source: Source::Host,
        landlock_abi: 7,
        seccomp: Ok(()),
        containment: Enforcement {
            mechanism: "cgroup",
            grouping: "cgroup v2 group per run".into(),
            processes: Some("v2 pids.max".into()),
            memory: Some("v2 memory.max".into()),
            cpu: "v2 cpu.stat and RLIMIT_CPU".into(),
            file_size_and_open_files: "RLIMIT_FSIZE, RLIMIT_NOFILE".into(),
        },
        identity: Mode::OwnNamespace,
        ids: (1000, 1000),
        identity_reason: None,
        tool_ids: None,
        filesystem_view: Ok(()),
        network: Ok(()),
        unconfined: false,
        attribution: toolsrv_watch::describe(true, false, false).into(),
    }
}

fn policy(yaml: &str) -> Policy {
    serde_yaml_ng::from_str(yaml).expect("policy")
}

fn required(r: &Report) -> Vec<String> {
    r.missing
        .iter()
        .filter(|m| m.required)
        .map(|m| m.what.clone())
        .collect()
}

#[test]
fn a_complete_host_enforces_a_strict_policy() {
    let p = policy(
        "general:\n  best_effort: false\nnetwork:\n  connect_tcp: [443]\nlimits:\n  memory: 1GiB\n",
    );
    let r = Report::evaluate(&complete(), &p, Some("/etc/toolsrv/sandbox.yaml"));
    assert!(r.enforced, "{:?}", r.missing);
    assert!(r.missing.is_empty());
    assert_eq!(r.policy.path.as_deref(), Some("/etc/toolsrv/sandbox.yaml"));
    assert!(r.landlock.audit && r.denials.observable);
    assert_eq!(r.filesystem.mechanism, "mount-namespace-view");
    assert_eq!(r.identity.mode, "own-user-namespace");
}

#[test]
fn without_landlock_the_fix_is_the_boot_parameter() {
    let mut f = complete();
    f.landlock_abi = 0;
    let r = Report::evaluate(&f, &Policy::default(), None);
    assert!(!r.enforced);
    let fs = r
        .missing
        .iter()
        .find(|m| m.what == "Landlock filesystem access control")
        .expect("filesystem control is missing");
    assert!(fs.required && fs.fix.contains("lsm=landlock"), "{fs:?}");
    assert!(!r.denials.observable);
}

#[test]
fn an_old_landlock_misses_only_what_the_policy_uses() {
    let mut f = complete();
    f.landlock_abi = 3;
    // Port rules need ABI 4: only a policy with port rules misses them.
    let plain = Report::evaluate(&f, &Policy::default(), None);
    assert!(!required(&plain).iter().any(|w| w.contains("TCP port")));
    let ports = Report::evaluate(&f, &policy("network:\n  bind_tcp: [8080]\n"), None);
    let tcp = ports
        .missing
        .iter()
        .find(|m| m.what.contains("TCP port"))
        .expect("port rules are missing");
    assert!(
        tcp.fix.contains("ABI 4") && tcp.fix.contains("6.7"),
        "{tcp:?}"
    );
    // Scoping (ABI 6) and audit (ABI 7) are listed but never required.
    assert!(plain
        .missing
        .iter()
        .any(|m| m.what.contains("scoping") && !m.required));
}

#[test]
fn a_refused_user_namespace_means_the_fallback_and_says_which_sysctl() {
    let mut f = complete();
    f.identity = Mode::PerRun;
    f.identity_reason = Some(
        "unshare(CLONE_NEWUSER): Operation not permitted; sysctl kernel.apparmor_restrict_unprivileged_userns=0".into(),
    );
    f.containment.mechanism = "pid-namespace+user-namespace";
    f.containment.processes = Some("RLIMIT_NPROC (per user, not per run)".into());
    f.containment.memory = None;
    f.filesystem_view = Err("an unprivileged server needs its own user namespace".into());
    let r = Report::evaluate(&f, &Policy::default(), None);
    assert!(!r.enforced);
    assert_eq!(r.filesystem.mechanism, "landlock-only-fallback");
    let view = r
        .missing
        .iter()
        .find(|m| m.what.starts_with("filesystem view"))
        .expect("the view is missing");
    assert!(view.required);
    // The fix names this host's own switch (probed from /proc/sys), or the
    // whole list where none of them is set.
    assert!(view.fix.contains("userns"), "{view:?}");
    // PID namespaces per run need a user namespace too: containment is
    // missing, with both ways out.
    let c = r
        .missing
        .iter()
        .find(|m| m.what.starts_with("containment"))
        .expect("containment is missing");
    assert!(
        c.required && c.fix.contains("Delegate=yes") && c.fix.contains("userns"),
        "{c:?}"
    );
}

#[test]
fn a_forced_mode_is_fixed_by_unsetting_the_variable() {
    let mut f = complete();
    f.identity = Mode::PerRun;
    f.identity_reason = Some("TOOLSRV_USERNS=per-run".into());
    f.filesystem_view = Err("forced".into());
    let r = Report::evaluate(&f, &Policy::default(), None);
    let view = r
        .missing
        .iter()
        .find(|m| m.what.starts_with("filesystem view"))
        .unwrap();
    assert_eq!(view.fix, "unset TOOLSRV_USERNS (or set it to `own`)");
}

#[test]
fn limits_without_a_controller_and_no_containment_are_missing() {
    let mut f = complete();
    f.containment.memory = None;
    f.containment.processes = None;
    f.containment.mechanism = "none";
    let r = Report::evaluate(
        &f,
        &policy("limits:\n  memory: 1GiB\n  processes: 64\n"),
        None,
    );
    let req = required(&r);
    for want in ["containment", "limits.memory", "limits.processes"] {
        assert!(req.iter().any(|w| w.starts_with(want)), "{want}: {req:?}");
    }
    assert!(r
        .missing
        .iter()
        .all(|m| !m.required || m.fix.contains("Delegate=yes")));
    // A policy without those limits misses only the containment.
    let r = Report::evaluate(&f, &policy("limits:\n  memory: 0\n  processes: 0\n"), None);
    assert_eq!(required(&r).len(), 1, "{:?}", r.missing);
}

#[test]
fn a_yolo_server_enforces_nothing() {
    let mut f = complete();
    f.source = Source::Server;
    f.unconfined = true;
    let r = Report::evaluate(&f, &Policy::default(), None);
    assert!(!r.enforced);
    assert!(required(&r).iter().any(|w| w.contains("--yolo")));
}

#[test]
fn the_report_round_trips_through_json() {
    let r = Report::evaluate(&complete(), &Policy::default(), None);
    let text = serde_json::to_string(&r).unwrap();
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    for key in [
        "source",
        "policy",
        "landlock",
        "seccomp",
        "containment",
        "identity",
        "filesystem",
        "network",
        "denials",
        "attribution",
        "missing",
        "enforced",
    ] {
        assert!(v.get(key).is_some(), "{key} missing from {text}");
    }
    assert_eq!(v["source"], "host");
    let back: Report = serde_json::from_str(&text).unwrap();
    assert_eq!(back, r);
}

#[test]
fn a_root_servers_tools_that_run_as_root_are_missing_their_own_ids() {
    use toolsrv_sandbox::ToolIds;
    let mut f = complete();
    f.ids = (0, 0);
    f.identity = Mode::RootToolNamespace;
    f.tool_ids = Some(ToolIds {
        base: 2_013_265_920,
        count: 65_536,
        workspace_id_maps: Ok(()),
    });
    let r = Report::evaluate(&f, &Policy::default(), None);
    assert!(r.enforced, "{:?}", r.missing);
    assert_eq!(r.identity.mode, "root-tools-user-namespace");
    let tools = r.identity.tools.as_ref().expect("the tools' ids");
    assert_eq!((tools.host_uid, tools.count), (2_013_265_920, 65_536));
    // A workspace whose file system takes no id maps: said, not required.
    f.tool_ids.as_mut().unwrap().workspace_id_maps =
        Err("the file system of /nfs takes no id-mapped mounts".into());
    let r = Report::evaluate(&f, &Policy::default(), None);
    assert!(r.enforced, "{:?}", r.missing);
    assert!(r
        .missing
        .iter()
        .any(|m| !m.required && m.what.starts_with("id-mapped mounts on the workspace")));
    // Tools that stay root (forced here): the bounded scan is all there is.
    f.identity = Mode::Root;
    f.tool_ids = None;
    f.identity_reason = Some("TOOLSRV_USERNS=root".into());
    let r = Report::evaluate(&f, &Policy::default(), None);
    assert!(!r.enforced);
    let m = r
        .missing
        .iter()
        .find(|m| m.what.starts_with("unprivileged tools"))
        .expect("unprivileged tools are missing");
    assert!(
        m.required && m.fix.starts_with("unset TOOLSRV_USERNS"),
        "{m:?}"
    );
    assert!(r.identity.tools.is_none());
}
