//! A tool that tries to approve a bypass request itself, run by the bypass
//! integration tests (`tests/bypass.rs`) inside the sandbox. It speaks raw 9P2000
//! over the toolsrv socket (no authentication: the tests use `--no-auth`) and
//! writes `bypass/resolve`.
//!
//! Usage: `selfapprove <direct|handoff> SOCKET ID OUTFILE`
//!
//! - `direct`: connect and approve; the outcome (`approved` or the server's
//!   error) goes to OUTFILE.
//! - `handoff`: connect, then fork; the connecting process exits at once and the
//!   child (in a new session) keeps the connection, waits until the connecting
//!   process is gone, and then approves. The server learned the connecting pid
//!   through `SO_PEERCRED`; this probes whether its ancestry check still holds
//!   once that pid no longer exists.
//!
//! OUTFILE is written whole (through a rename), so a reader never sees half.

// Test code: an unexpected failure is a panic that names it.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::{self, Write};
use std::os::unix::net::UnixStream;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use toolsrv_wire::{decode, encode, read_frame, Body, Frame, NOFID, NOTAG, OWRITE};

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [mode, socket, id, outfile] = args.as_slice() else {
        eprintln!("usage: selfapprove <direct|handoff> SOCKET ID OUTFILE");
        return ExitCode::from(2);
    };
    let stream = match UnixStream::connect(socket) {
        Ok(s) => s,
        Err(e) => {
            report(outfile, &format!("connect failed: {e}"));
            return ExitCode::FAILURE;
        }
    };
    match mode.as_str() {
        "direct" => {
            report(outfile, &outcome(stream, id));
            ExitCode::SUCCESS
        }
        "handoff" => handoff(stream, id, outfile),
        other => {
            eprintln!("unknown mode {other:?}");
            ExitCode::from(2)
        }
    }
}

/// Fork; the parent (the connecting process) exits, the child approves later.
fn handoff(stream: UnixStream, id: &str, outfile: &str) -> ExitCode {
    let connector = std::process::id() as i32;
    // The parent waits on this pipe until the child has left the tool's process
    // group (which is killed when the tool exits).
    let mut fds = [0; 2];
    // Safety: pipe writes two descriptors into the array we own.
    if unsafe { libc::pipe(fds.as_mut_ptr()) } != 0 {
        report(
            outfile,
            &format!("pipe failed: {}", io::Error::last_os_error()),
        );
        return ExitCode::FAILURE;
    }
    let [ready_r, ready_w] = fds;
    // Safety: this program is single-threaded, so the child may run arbitrary code.
    match unsafe { libc::fork() } {
        -1 => {
            report(
                outfile,
                &format!("fork failed: {}", io::Error::last_os_error()),
            );
            ExitCode::FAILURE
        }
        0 => {
            // Safety: setsid has no preconditions; it detaches from the tool's
            // process group so that the group's end does not take us along.
            unsafe { libc::setsid() };
            // Safety: plain write and close of the pipe descriptors we created.
            unsafe {
                libc::close(ready_r);
                libc::write(ready_w, b"r".as_ptr().cast(), 1);
                libc::close(ready_w);
            }
            // Asked of the kernel, not of `/proc`: the pid is this process's
            // namespace's (the server's tools PID namespace), which the host's
            // procfs does not number.
            // Safety: kill with signal 0 only checks that the process exists.
            let alive = || unsafe { libc::kill(connector, 0) } == 0;
            let start = Instant::now();
            while alive() && start.elapsed() < Duration::from_secs(5) {
                std::thread::sleep(Duration::from_millis(10));
            }
            if alive() {
                report(outfile, "the connecting process did not go away");
            } else {
                report(outfile, &outcome(stream, id));
            }
            ExitCode::SUCCESS
        }
        _ => {
            let mut b = [0u8; 1];
            // Safety: plain close and read of the pipe descriptors we created;
            // the read ends with the byte or with EOF if the child died.
            unsafe {
                libc::close(ready_w);
                libc::read(ready_r, b.as_mut_ptr().cast(), 1);
            }
            ExitCode::SUCCESS
        }
    }
}

/// `approved`, or what failed.
fn outcome(stream: UnixStream, id: &str) -> String {
    match approve(stream, id) {
        Ok(()) => "approved".into(),
        Err(e) => e,
    }
}

/// Version, attach without auth, walk to `bypass/resolve`, open, write.
fn approve(mut s: UnixStream, id: &str) -> Result<(), String> {
    s.set_read_timeout(Some(Duration::from_secs(5)))
        .map_err(|e| e.to_string())?;
    rpc(
        &mut s,
        NOTAG,
        Body::Tversion {
            msize: 65536,
            version: "9P2000".into(),
        },
    )?;
    rpc(
        &mut s,
        1,
        Body::Tattach {
            fid: 0,
            afid: NOFID,
            uname: "selfapprove".into(),
            aname: String::new(),
        },
    )?;
    rpc(
        &mut s,
        2,
        Body::Twalk {
            fid: 0,
            newfid: 1,
            wnames: vec!["bypass".into(), "resolve".into()],
        },
    )?;
    rpc(
        &mut s,
        3,
        Body::Topen {
            fid: 1,
            mode: OWRITE,
        },
    )?;
    let data = format!(r#"{{"id": "{id}", "approve": true}}"#).into_bytes();
    rpc(
        &mut s,
        4,
        Body::Twrite {
            fid: 1,
            offset: 0,
            data,
        },
    )?;
    Ok(())
}

/// One request and its reply; an `Rerror` becomes its text.
fn rpc(s: &mut UnixStream, tag: u16, body: Body) -> Result<Body, String> {
    let mut buf = Vec::new();
    encode(&Frame { tag, body }, &mut buf);
    s.write_all(&buf).map_err(|e| format!("send failed: {e}"))?;
    let frame = read_frame(s, 1 << 20).map_err(|e| format!("receive failed: {e}"))?;
    match decode(&frame).map_err(|e| format!("bad reply: {e}"))?.body {
        Body::Rerror { ename } => Err(ename),
        b => Ok(b),
    }
}

/// Write `text` to `outfile` whole.
fn report(outfile: &str, text: &str) {
    let tmp = format!("{outfile}.tmp");
    if std::fs::write(&tmp, text).is_ok() {
        let _ = std::fs::rename(&tmp, outfile);
    }
}
