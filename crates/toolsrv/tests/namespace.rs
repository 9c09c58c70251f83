//! docs/protocol.md, "Connection" (permissions), through the daemon. The tree
//! itself (entries and modes, qids, walks, stats, `info`) is tested in-process
//! in crates/server/src/tests/namespace.rs, the 9P core's walk errors in
//! crates/vfs/tests/conn.rs; end to end the root listing and `info` are read in
//! interop.rs (with [`ROOT_ENTRIES`]) and missing names walked in procs_ctl.rs.

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
