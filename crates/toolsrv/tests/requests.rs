//! docs/protocol.md, "Connection": concurrent requests, Tflush, clunk of a waiting read, msize.

use std::time::Duration;

use toolsrv_wire::{Body, Frame, NOTAG};

use crate::util::{Raw, Server};

#[test]
fn version_and_msize_negotiation() {
    let srv = Server::start(&["--no-auth"]);
    let mut c = Raw::connect(&srv.socket);
    assert_eq!(c.version(8192), (8192, "9P2000".into()));
    assert_eq!(c.version(4 << 20), (1 << 20, "9P2000".into()));
    c.send(
        NOTAG,
        Body::Tversion {
            msize: 8192,
            version: "9P2000.u".into(),
        },
    );
    assert_eq!(
        c.recv().body,
        Body::Rversion {
            msize: 8192,
            version: "9P2000".into()
        }
    );
    c.send(
        NOTAG,
        Body::Tversion {
            msize: 8192,
            version: "bogus".into(),
        },
    );
    match c.recv().body {
        Body::Rversion { version, .. } => assert_eq!(version, "unknown"),
        b => panic!("{b:?}"),
    }
}

/// Start a read of `bypass/pending` (blocks: nothing is pending) as fid 5 with `tag`.
fn start_blocked_read(c: &mut Raw, tag: u16) {
    c.open(5, "bypass/pending", 0);
    c.send(
        tag,
        Body::Tread {
            fid: 5,
            offset: 0,
            count: 100,
        },
    );
}

#[test]
fn a_blocked_read_does_not_delay_other_requests() {
    let srv = Server::start(&["--no-auth"]);
    let mut c = srv.attached();
    start_blocked_read(&mut c, 77);
    // The same connection keeps working: the next reply is for the info read.
    let info = c.read_file("info");
    assert!(info.starts_with(b"{"));
    // And another connection too.
    let mut d = srv.attached();
    assert_eq!(d.read_file("info"), info);
}

#[test]
fn flush_abandons_a_blocked_read_without_a_reply_for_it() {
    let srv = Server::start(&["--no-auth"]);
    let mut c = srv.attached();
    start_blocked_read(&mut c, 77);
    c.send(78, Body::Tflush { oldtag: 77 });
    let f = c.recv();
    assert_eq!(
        f,
        Frame {
            tag: 78,
            body: Body::Rflush
        }
    );
    // Nothing more arrives for tag 77: the next frame answers our next request.
    c.send(79, Body::Tclunk { fid: 5 });
    assert_eq!(
        c.recv(),
        Frame {
            tag: 79,
            body: Body::Rclunk
        }
    );
    c.s.set_read_timeout(Some(Duration::from_millis(300)))
        .unwrap();
    assert!(
        c.try_recv().is_none(),
        "a reply arrived for the flushed tag"
    );
}

#[test]
fn flush_of_an_unknown_tag_still_answers() {
    let srv = Server::start(&["--no-auth"]);
    let mut c = srv.attached();
    c.send(9, Body::Tflush { oldtag: 1234 });
    assert_eq!(
        c.recv(),
        Frame {
            tag: 9,
            body: Body::Rflush
        }
    );
}

#[test]
fn clunk_completes_an_outstanding_read() {
    let srv = Server::start(&["--no-auth"]);
    let mut c = srv.attached();
    start_blocked_read(&mut c, 77);
    c.send(80, Body::Tclunk { fid: 5 });
    let mut got = [c.recv(), c.recv()];
    got.sort_by_key(|f| f.tag);
    assert_eq!(
        got[0],
        Frame {
            tag: 77,
            body: Body::Rerror {
                ename: "cancelled".into()
            }
        }
    );
    assert_eq!(
        got[1],
        Frame {
            tag: 80,
            body: Body::Rclunk
        }
    );
}

#[test]
fn pipelined_requests_are_answered_in_order() {
    let srv = Server::start(&["--no-auth"]);
    let mut c = srv.attached();
    let mut buf = Vec::new();
    for (tag, body) in [
        (
            1,
            Body::Twalk {
                fid: 0,
                newfid: 9,
                wnames: vec!["info".into()],
            },
        ),
        (2, Body::Topen { fid: 9, mode: 0 }),
        (
            3,
            Body::Tread {
                fid: 9,
                offset: 0,
                count: 1000,
            },
        ),
        (4, Body::Tclunk { fid: 9 }),
    ] {
        toolsrv_wire::encode(&Frame { tag, body }, &mut buf);
    }
    c.send_bytes(&buf);
    let tags: Vec<u16> = (0..4)
        .map(|_| {
            let f = c.recv();
            assert!(!matches!(f.body, Body::Rerror { .. }), "{f:?}");
            f.tag
        })
        .collect();
    assert_eq!(tags, [1, 2, 3, 4]);
}

#[test]
fn closing_the_connection_releases_blocked_reads() {
    let srv = Server::start(&["--no-auth"]);
    for _ in 0..20 {
        let mut c = srv.attached();
        start_blocked_read(&mut c, 77);
    }
    // The server is still fine.
    let mut d = srv.attached();
    assert!(!d.read_file("info").is_empty());
}
