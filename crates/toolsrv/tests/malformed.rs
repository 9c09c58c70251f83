//! docs/protocol.md, "Connection": malformed input never crashes the server or drops a usable connection.

use toolsrv_wire::{msgtype, Body, Frame, NOFID};

use crate::util::{Raw, Server};

/// size[4] type[1] tag[2] + body.
fn frame(ty: u8, tag: u16, body: &[u8]) -> Vec<u8> {
    let mut v = ((7 + body.len()) as u32).to_le_bytes().to_vec();
    v.push(ty);
    v.extend_from_slice(&tag.to_le_bytes());
    v.extend_from_slice(body);
    v
}

fn still_works(c: &mut Raw) {
    assert!(c.read_file("info").starts_with(b"{"), "connection unusable");
}

#[test]
fn truncated_body_gets_rerror() {
    let srv = Server::start(&["--no-auth"]);
    let mut c = srv.attached();
    c.send_bytes(&frame(msgtype::TWALK, 5, &[1, 0]));
    let f = c.recv();
    assert_eq!(f.tag, 5);
    assert!(matches!(f.body, Body::Rerror { .. }), "{f:?}");
    still_works(&mut c);
}

#[test]
fn oversized_frame_is_refused_and_discarded() {
    let srv = Server::start(&["--no-auth"]);
    let mut c = Raw::connect(&srv.socket);
    c.version(8192);
    c.ok(Body::Tattach {
        fid: 0,
        afid: NOFID,
        uname: "t".into(),
        aname: String::new(),
    });
    let big = frame(msgtype::TWRITE, 6, &vec![0u8; 20000]);
    c.send_bytes(&big);
    assert_eq!(
        c.recv(),
        Frame {
            tag: 6,
            body: Body::Rerror {
                ename: "message too large".into()
            }
        }
    );
    still_works(&mut c);
}

#[test]
fn unknown_and_reply_types_get_rerror() {
    let srv = Server::start(&["--no-auth"]);
    let mut c = srv.attached();
    for ty in [200u8, msgtype::TERROR, msgtype::RREAD, 0] {
        c.send_bytes(&frame(ty, 11, &[0, 0, 0, 0]));
        let f = c.recv();
        assert_eq!(f.tag, 11);
        assert!(matches!(f.body, Body::Rerror { .. }), "type {ty}: {f:?}");
    }
    still_works(&mut c);
}

#[test]
fn invalid_utf8_in_a_string_gets_rerror() {
    let srv = Server::start(&["--no-auth"]);
    let mut c = srv.attached();
    // Twalk fid=0 newfid=1 nwname=1 wname="\xff\xfe"
    let mut body = vec![0, 0, 0, 0, 1, 0, 0, 0, 1, 0, 2, 0];
    body.extend_from_slice(&[0xff, 0xfe]);
    c.send_bytes(&frame(msgtype::TWALK, 12, &body));
    let f = c.recv();
    assert_eq!(f.tag, 12);
    match f.body {
        Body::Rerror { ename } => assert!(ename.contains("UTF-8"), "{ename}"),
        b => panic!("{b:?}"),
    }
    still_works(&mut c);
}

#[test]
fn fid_reuse_is_refused() {
    let srv = Server::start(&["--no-auth"]);
    let mut c = srv.attached();
    let e = c.err(Body::Tattach {
        fid: 0,
        afid: NOFID,
        uname: "t".into(),
        aname: String::new(),
    });
    assert_eq!(e, "fid 0 is already in use");
    c.walk(4, "info").unwrap();
    let e = c.walk(4, "proc").unwrap_err();
    assert_eq!(e, "fid 4 is already in use");
    still_works(&mut c);
}

#[test]
fn more_than_16_walk_names_is_refused() {
    let srv = Server::start(&["--no-auth"]);
    let mut c = srv.attached();
    let e = c.err(Body::Twalk {
        fid: 0,
        newfid: 1,
        wnames: vec!["proc".into(); 17],
    });
    assert!(e.contains("17"), "{e}");
    still_works(&mut c);
}

#[test]
fn a_frame_too_short_for_a_header_closes_only_that_connection() {
    let srv = Server::start(&["--no-auth"]);
    let mut other = srv.attached();
    let mut c = srv.attached();
    c.send_bytes(&3u32.to_le_bytes());
    assert!(c.closed(), "connection should be closed");
    still_works(&mut other);
    let mut fresh = srv.attached();
    still_works(&mut fresh);
}

#[test]
fn a_connection_closed_mid_frame_does_not_hurt_the_server() {
    let srv = Server::start(&["--no-auth"]);
    {
        let mut c = srv.attached();
        let mut f = frame(msgtype::TREAD, 1, &[0; 16]);
        f.truncate(10);
        c.send_bytes(&f);
    }
    let mut fresh = srv.attached();
    still_works(&mut fresh);
}

#[test]
fn requests_before_version_are_refused() {
    let srv = Server::start(&["--no-auth"]);
    let mut c = Raw::connect(&srv.socket);
    let e = c.err(Body::Tattach {
        fid: 0,
        afid: NOFID,
        uname: "t".into(),
        aname: String::new(),
    });
    assert!(e.contains("Tversion"), "{e}");
}
