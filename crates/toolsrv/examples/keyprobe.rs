//! A probe run as a tool by `tests/doors.rs`: what a run can do with the
//! kernel keyrings. One line per attempt, `<what>: <result>`, the result
//! being the value or the OS error:
//!
//! - `session`: `keyctl(KEYCTL_DESCRIBE, @s)`, the session keyring's
//!   description (`keyring;uid;gid;perm;name`);
//! - `search`: `keyctl(KEYCTL_SEARCH, @s, "user", NAME)`, the key's id;
//! - `read`: `keyctl(KEYCTL_READ)` of that key, its payload;
//! - `add-user`: `add_key("user", "keyprobe", …, @u)` into the user keyring
//!   (unlinked again at once when it worked);
//! - `add-session`: the same into the session keyring;
//! - `request`: `request_key("user", NAME, NULL, @s)`;
//! - `join-named`: `keyctl(KEYCTL_JOIN_SESSION_KEYRING, "keyprobe")`.
//!
//! Usage: `keyprobe NAME` (the name of a key the test put in the server's
//! session keyring).

// Test code: an unexpected failure is a panic that names it.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::ffi::CString;
use std::io::{self, Write};

const KEY_SPEC_SESSION_KEYRING: i64 = -3;
const KEY_SPEC_USER_KEYRING: i64 = -4;
const KEYCTL_JOIN_SESSION_KEYRING: i64 = 1;
const KEYCTL_DESCRIBE: i64 = 6;
const KEYCTL_UNLINK: i64 = 9;
const KEYCTL_SEARCH: i64 = 10;
const KEYCTL_READ: i64 = 11;

/// A raw system call's result: the value, or the OS error.
fn checked(r: i64) -> io::Result<i64> {
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r)
    }
}

/// `keyctl(op, a, b, c, d)` with integer (or pointer) arguments.
fn keyctl(op: i64, a: i64, b: i64, c: i64, d: i64) -> io::Result<i64> {
    // Safety: the callers pass integers, or pointers to buffers and
    // NUL-terminated strings that outlive the call, sized as the op expects.
    checked(unsafe { libc::syscall(libc::SYS_keyctl, op, a, b, c, d) })
}

/// A keyctl call that fills a buffer: its bytes.
fn keyctl_buffer(op: i64, id: i64) -> io::Result<Vec<u8>> {
    let mut buf = vec![0u8; 4096];
    let n = keyctl(op, id, buf.as_mut_ptr() as i64, buf.len() as i64, 0)?;
    buf.truncate(usize::try_from(n).unwrap_or(0).min(4096));
    Ok(buf)
}

/// `add_key("user", name, payload, keyring)`: the new key's id.
fn add_key(name: &CString, payload: &[u8], keyring: i64) -> io::Result<i64> {
    let ty = c"user";
    // Safety: the type and name are NUL-terminated strings and the payload a
    // slice of the given length, all alive across the call.
    checked(unsafe {
        libc::syscall(
            libc::SYS_add_key,
            ty.as_ptr(),
            name.as_ptr(),
            payload.as_ptr(),
            payload.len(),
            keyring,
        )
    })
}

fn line(what: &str, r: io::Result<String>) {
    let text = match r {
        Ok(v) => v,
        Err(e) => format!("error: {e}"),
    };
    let _ = writeln!(io::stdout(), "{what}: {text}");
}

fn main() {
    let name = std::env::args().nth(1).unwrap_or_else(|| "none".into());
    let Ok(cname) = CString::new(name) else {
        line("usage", Err(io::Error::other("a key name without NUL")));
        return;
    };
    let text = |b: Vec<u8>| {
        String::from_utf8_lossy(&b)
            .trim_end_matches('\0')
            .to_string()
    };
    line(
        "session",
        keyctl_buffer(KEYCTL_DESCRIBE, KEY_SPEC_SESSION_KEYRING).map(text),
    );
    let ty = c"user";
    let found = keyctl(
        KEYCTL_SEARCH,
        KEY_SPEC_SESSION_KEYRING,
        ty.as_ptr() as i64,
        cname.as_ptr() as i64,
        0,
    );
    line(
        "search",
        found.as_ref().map(|id| id.to_string()).map_err(clone),
    );
    line(
        "read",
        found
            .and_then(|id| keyctl_buffer(KEYCTL_READ, id))
            .map(text),
    );
    let probe = c"keyprobe".to_owned();
    let added = add_key(&probe, b"probe", KEY_SPEC_USER_KEYRING);
    if let Ok(id) = added {
        let _ = keyctl(KEYCTL_UNLINK, id, KEY_SPEC_USER_KEYRING, 0, 0);
    }
    line("add-user", added.map(|id| id.to_string()));
    line(
        "add-session",
        add_key(&probe, b"probe", KEY_SPEC_SESSION_KEYRING).map(|id| id.to_string()),
    );
    // Safety: the type and description are NUL-terminated strings alive
    // across the call; the callout info is NULL.
    let requested = checked(unsafe {
        libc::syscall(
            libc::SYS_request_key,
            ty.as_ptr(),
            cname.as_ptr(),
            std::ptr::null::<libc::c_char>(),
            KEY_SPEC_SESSION_KEYRING,
        )
    });
    line("request", requested.map(|id| id.to_string()));
    line(
        "join-named",
        keyctl(KEYCTL_JOIN_SESSION_KEYRING, probe.as_ptr() as i64, 0, 0, 0)
            .map(|id| id.to_string()),
    );
}

fn clone(e: &io::Error) -> io::Error {
    match e.raw_os_error() {
        Some(n) => io::Error::from_raw_os_error(n),
        None => io::Error::other(e.to_string()),
    }
}
