//! CONTRACT §3: authentication.

use toolsrv_wire::{Body, NOFID, QTAUTH};

use crate::util::Server;

#[test]
fn first_secret_is_stored_and_same_secret_gets_same_token() {
    let srv = Server::start(&[]);
    let (_c1, t1) = srv.authed("s3cret");
    assert_eq!(t1.len(), 64, "token {t1:?}");
    assert!(t1
        .bytes()
        .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase()));
    let (_c2, t2) = srv.authed("s3cret");
    assert_eq!(t1, t2, "same secret, same token");
}

#[test]
fn different_secret_is_refused() {
    let srv = Server::start(&[]);
    srv.authed("right");
    let mut c = srv.raw();
    assert_eq!(
        c.authenticate("wrong").unwrap_err(),
        "authentication failed"
    );
}

#[test]
fn rauth_has_an_auth_qid() {
    let srv = Server::start(&[]);
    let mut c = srv.raw();
    match c.ok(Body::Tauth {
        afid: 7,
        uname: "agent".into(),
        aname: String::new(),
    }) {
        Body::Rauth { aqid } => assert_eq!(aqid.ty, QTAUTH),
        b => panic!("{b:?}"),
    }
}

#[test]
fn attach_without_auth_is_refused() {
    let srv = Server::start(&[]);
    let mut c = srv.raw();
    let e = c.err(Body::Tattach {
        fid: 0,
        afid: NOFID,
        uname: "agent".into(),
        aname: String::new(),
    });
    assert_eq!(e, "authentication required");
    // An afid whose secret was never written is not enough either.
    c.ok(Body::Tauth {
        afid: 9,
        uname: "agent".into(),
        aname: String::new(),
    });
    let e = c.err(Body::Tattach {
        fid: 0,
        afid: 9,
        uname: "agent".into(),
        aname: String::new(),
    });
    assert_eq!(e, "authentication required");
    // Nor one whose secret was refused.
    srv.authed("right");
    c.ok(Body::Tauth {
        afid: 10,
        uname: "agent".into(),
        aname: String::new(),
    });
    let e = c.err(Body::Twrite {
        fid: 10,
        offset: 0,
        data: b"wrong".to_vec(),
    });
    assert_eq!(e, "authentication failed");
    let e = c.err(Body::Tattach {
        fid: 0,
        afid: 10,
        uname: "agent".into(),
        aname: String::new(),
    });
    assert_eq!(e, "authentication required");
}

#[test]
fn attach_without_reading_the_token_works() {
    let srv = Server::start(&[]);
    let mut c = srv.raw();
    c.ok(Body::Tauth {
        afid: 3,
        uname: "agent".into(),
        aname: String::new(),
    });
    c.ok(Body::Twrite {
        fid: 3,
        offset: 0,
        data: b"abc".to_vec(),
    });
    c.ok(Body::Tattach {
        fid: 0,
        afid: 3,
        uname: "agent".into(),
        aname: String::new(),
    });
    assert!(!c.read_file("info").is_empty());
}

#[test]
fn no_auth_mode() {
    let srv = Server::start(&["--no-auth"]);
    let mut c = srv.raw();
    let e = c.err(Body::Tauth {
        afid: 1,
        uname: "agent".into(),
        aname: String::new(),
    });
    assert_eq!(e, "authentication not required");
    c.ok(Body::Tattach {
        fid: 0,
        afid: NOFID,
        uname: "agent".into(),
        aname: String::new(),
    });
    assert!(!c.read_file("info").is_empty());
    assert!(srv.log_text().contains("authentication is off"));
}

#[test]
fn secret_never_reaches_the_log() {
    let srv = Server::start(&[]);
    let (_c, token) = srv.authed("a-very-distinctive-secret");
    let log = srv.log_text();
    assert!(!log.is_empty());
    assert!(!log.contains("a-very-distinctive-secret"));
    assert!(!log.contains(&token));
}
