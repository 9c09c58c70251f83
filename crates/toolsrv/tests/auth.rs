//! docs/protocol.md, "Authentication": authentication.

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

/// A secret file owned by us with `mode`, holding `content`, in its own temp dir.
fn secret_file(content: &str, mode: u32) -> (tempfile::TempDir, std::path::PathBuf) {
    use std::os::unix::fs::PermissionsExt;
    let d = tempfile::tempdir().expect("tempdir");
    let f = d.path().join("pinned.secret");
    std::fs::write(&f, content).expect("write secret");
    std::fs::set_permissions(&f, std::fs::Permissions::from_mode(mode)).expect("chmod");
    (d, f)
}

#[test]
fn a_pinned_secret_is_the_only_one_accepted_even_first() {
    let (_d, f) = secret_file("  pinned-one\n", 0o600);
    let srv = Server::start(&["--secret-file", f.to_str().expect("utf-8")]);
    let mut c = srv.raw();
    assert_eq!(
        c.authenticate("first-comer").unwrap_err(),
        "authentication failed",
        "the first client cannot set its own secret"
    );
    let (_c, t1) = srv.authed("pinned-one");
    let (_c2, t2) = srv.authed("pinned-one");
    assert_eq!(t1.len(), 64);
    assert_eq!(t1, t2);
}

fn serve_exit(f: &std::path::Path) -> (Option<i32>, String) {
    let run = tempfile::tempdir().expect("tempdir");
    let out = std::process::Command::new(crate::util::toolsrv_bin())
        .args(["serve", "--listen"])
        .arg(run.path().join("s.sock"))
        .arg("--cwd")
        .arg(run.path())
        .arg("--secret-file")
        .arg(f)
        .output()
        .expect("run serve");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn an_unsafe_or_missing_secret_file_stops_startup_naming_it() {
    let (_d, f) = secret_file("s3cret", 0o640);
    let (code, err) = serve_exit(&f);
    assert_eq!(code, Some(1), "{err}");
    assert!(
        err.contains(&*f.to_string_lossy()) && err.contains("0640"),
        "{err}"
    );

    let (_d2, empty) = secret_file(" \n", 0o600);
    let (code, err) = serve_exit(&empty);
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains(&*empty.to_string_lossy()), "{err}");

    let missing = _d2.path().join("nope");
    let (code, err) = serve_exit(&missing);
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains(&*missing.to_string_lossy()), "{err}");

    // Safety: getuid has no preconditions.
    if unsafe { libc::geteuid() } == 0 {
        let (_d3, other) = secret_file("s3cret", 0o600);
        std::os::unix::fs::chown(&other, Some(4242), None).expect("chown");
        let (code, err) = serve_exit(&other);
        assert_eq!(code, Some(1), "{err}");
        assert!(err.contains("owned by uid 4242"), "{err}");
    }
}
