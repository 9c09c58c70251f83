//! docs/protocol.md, "Namespace" (the tree) and "Connection" (modes, qids, permissions).

use toolsrv_wire::{Body, DMDIR, ORDWR, OREAD, OWRITE};

use crate::util::Server;

/// The root's entries and their modes (docs/protocol.md, "Namespace").
pub const ROOT_ENTRIES: [(&str, u32); 8] = [
    ("ctl", 0o200),
    ("tools", 0o600),
    ("all", 0o444),
    ("info", 0o444),
    ("doctor", 0o444),
    ("tools_rev", 0o600),
    ("bypass", DMDIR | 0o555),
    ("proc", DMDIR | 0o555),
];

#[test]
fn root_lists_every_file_with_its_mode() {
    let srv = Server::start(&["--no-auth"]);
    let mut c = srv.attached();
    let got: Vec<(String, u32)> = c.list("").into_iter().map(|s| (s.name, s.mode)).collect();
    for (name, mode) in ROOT_ENTRIES {
        assert!(
            got.contains(&(name.to_string(), mode)),
            "{name} {mode:o} missing from {got:?}"
        );
    }
    let bypass: Vec<(String, u32)> = c
        .list("bypass")
        .into_iter()
        .map(|s| (s.name, s.mode))
        .collect();
    assert_eq!(
        bypass,
        [("pending".into(), 0o444), ("resolve".into(), 0o200)]
    );
    let proc_: Vec<(String, u32)> = c
        .list("proc")
        .into_iter()
        .map(|s| (s.name, s.mode))
        .collect();
    for (name, mode) in [("list", 0o600), ("new", 0o600), ("new.bg", 0o600)] {
        assert!(
            proc_.contains(&(name.to_string(), mode)),
            "{name} in {proc_:?}"
        );
    }
}

#[test]
fn qids_are_unique_per_file() {
    let srv = Server::start(&["--no-auth"]);
    let mut c = srv.attached();
    let mut paths: Vec<u64> = c.list("").iter().map(|s| s.qid.path).collect();
    paths.extend(c.list("bypass").iter().map(|s| s.qid.path));
    paths.extend(c.list("proc").iter().map(|s| s.qid.path));
    let n = paths.len();
    paths.sort();
    paths.dedup();
    assert_eq!(paths.len(), n, "duplicate qid paths");
}

#[test]
fn info_names_platform_and_arch_in_go_terms() {
    let srv = Server::start(&["--no-auth"]);
    let mut c = srv.attached();
    let v: serde_json::Value = serde_json::from_slice(&c.read_file("info")).unwrap();
    assert_eq!(v["platform"], "linux");
    let arch = v["arch"].as_str().unwrap();
    if cfg!(target_arch = "x86_64") {
        assert_eq!(arch, "amd64");
    }
}

#[test]
fn opening_against_the_permissions_is_refused() {
    let srv = Server::start(&["--no-auth"]);
    let mut c = srv.attached();
    c.walk(1, "info").unwrap();
    c.walk(2, "ctl").unwrap();
    c.walk(3, "proc").unwrap();
    for (fid, mode) in [(1, OWRITE), (1, ORDWR), (2, OREAD), (3, OWRITE)] {
        assert_eq!(
            c.err(Body::Topen { fid, mode }),
            "permission denied",
            "fid {fid} mode {mode}"
        );
    }
    // create, remove and a real wstat are refused; a no-op wstat succeeds.
    assert_eq!(
        c.err(Body::Tcreate {
            fid: 3,
            name: "x".into(),
            perm: 0o644,
            mode: OWRITE
        }),
        "permission denied"
    );
    let noop = toolsrv_wire::Stat::unchanged();
    assert_eq!(
        c.ok(Body::Twstat {
            fid: 1,
            stat: noop.clone()
        }),
        Body::Rwstat
    );
    let rename = toolsrv_wire::Stat {
        name: "other".into(),
        ..noop
    };
    assert_eq!(
        c.err(Body::Twstat {
            fid: 1,
            stat: rename
        }),
        "permission denied"
    );
    assert_eq!(c.err(Body::Tremove { fid: 1 }), "permission denied");
    // remove clunks the fid even when it fails
    assert_eq!(c.err(Body::Tclunk { fid: 1 }), "unknown fid 1");
}

#[test]
fn walking_to_a_missing_name_fails_clearly() {
    let srv = Server::start(&["--no-auth"]);
    let mut c = srv.attached();
    assert_eq!(c.walk(1, "nope").unwrap_err(), "file not found");
    c.walk(1, "proc").unwrap();
    assert_eq!(
        c.err(Body::Twalk {
            fid: 1,
            newfid: 2,
            wnames: vec!["999".into(), "out".into()]
        }),
        "file not found"
    );
    // a partial walk returns the qids walked so far and creates no fid
    match c.rpc(Body::Twalk {
        fid: 0,
        newfid: 8,
        wnames: vec!["proc".into(), "nope".into()],
    }) {
        Body::Rwalk { wqids } => assert_eq!(wqids.len(), 1),
        b => panic!("{b:?}"),
    }
    assert_eq!(c.err(Body::Tclunk { fid: 8 }), "unknown fid 8");
    // walking through a file
    c.walk(9, "info").unwrap();
    let e = c.err(Body::Twalk {
        fid: 9,
        newfid: 10,
        wnames: vec!["x".into()],
    });
    assert_eq!(e, "not a directory: \"info\"");
    // `..` goes up; `..` of the root is the root
    c.walk(12, "proc/../info").unwrap();
    c.walk(13, "..").unwrap();
}

#[test]
fn stat_of_a_file() {
    let srv = Server::start(&["--no-auth"]);
    let mut c = srv.attached();
    c.walk(1, "info").unwrap();
    match c.ok(Body::Tstat { fid: 1 }) {
        Body::Rstat { stat } => {
            assert_eq!(stat.name, "info");
            assert_eq!(stat.mode, 0o444);
        }
        b => panic!("{b:?}"),
    }
}
