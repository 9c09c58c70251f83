//! A 9P server that runs as another user, for the escape tests
//! (`tests/escapes.rs`): it stands where a client expects toolsrv and records
//! everything a client sends it, so a test can check that the client never
//! sends its secret to a server of another uid.
//!
//! Usage (as root): `otheruid UID SOCKET`
//!
//! It drops to UID (group and user) before it binds and listens on SOCKET
//! (the directory must be writable by UID), so `SO_PEERCRED` shows UID to a
//! client. It then serves connections one after the other: `Tversion` gets
//! `Rversion 9P2000`, `Tauth` an `Rauth`, `Twrite` an `Rwrite` of all its
//! bytes, anything else `Rerror`. Each message received is printed on stdout
//! as `<type name> <data as lossy UTF-8>` (data of writes only), flushed.

// Test code: an unexpected failure is a panic that names it.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::Write;
use std::os::unix::net::{UnixListener, UnixStream};
use std::process::ExitCode;

use toolsrv_wire::{decode, encode, read_frame, Body, Frame, Qid, QTAUTH};

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [uid, socket] = args.as_slice() else {
        eprintln!("usage: otheruid UID SOCKET");
        return ExitCode::from(2);
    };
    let Ok(uid) = uid.parse::<u32>() else {
        eprintln!("otheruid: bad uid {uid:?}");
        return ExitCode::from(2);
    };
    // Safety: plain set*id calls; this process is single-threaded here.
    let dropped = unsafe {
        libc::setgroups(0, std::ptr::null()) == 0
            && libc::setresgid(uid, uid, uid) == 0
            && libc::setresuid(uid, uid, uid) == 0
    };
    if !dropped {
        eprintln!(
            "otheruid: cannot become uid {uid}: {}",
            std::io::Error::last_os_error()
        );
        return ExitCode::FAILURE;
    }
    let listener = match UnixListener::bind(socket) {
        Ok(l) => l,
        Err(e) => {
            eprintln!("otheruid: cannot listen on {socket}: {e}");
            return ExitCode::FAILURE;
        }
    };
    println!("listening as uid {uid}");
    let _ = std::io::stdout().flush();
    for conn in listener.incoming() {
        match conn {
            Ok(s) => serve(s),
            Err(e) => eprintln!("otheruid: accept: {e}"),
        }
    }
    ExitCode::SUCCESS
}

/// Answer one connection until it closes.
fn serve(mut s: UnixStream) {
    loop {
        let Ok(frame) = read_frame(&mut s, 1 << 20) else {
            return;
        };
        let Ok(Frame { tag, body }) = decode(&frame) else {
            return;
        };
        let reply = match &body {
            Body::Tversion { msize, .. } => {
                println!("Tversion");
                Body::Rversion {
                    msize: (*msize).min(65536),
                    version: "9P2000".into(),
                }
            }
            Body::Tauth { .. } => {
                println!("Tauth");
                Body::Rauth {
                    aqid: Qid {
                        ty: QTAUTH,
                        version: 0,
                        path: 1,
                    },
                }
            }
            Body::Twrite { data, .. } => {
                println!("Twrite {}", String::from_utf8_lossy(data));
                Body::Rwrite {
                    count: data.len() as u32,
                }
            }
            other => {
                println!(
                    "{}",
                    toolsrv_wire::msgtype::name(other.type_id()).unwrap_or("?")
                );
                Body::Rerror {
                    ename: "not implemented".into(),
                }
            }
        };
        let _ = std::io::stdout().flush();
        let mut out = Vec::new();
        encode(&Frame { tag, body: reply }, &mut out);
        if s.write_all(&out).is_err() {
            return;
        }
    }
}
