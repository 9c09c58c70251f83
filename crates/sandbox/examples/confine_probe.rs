//! A tiny probe used by the sandbox integration tests: it performs one operation inside a
//! confined child and prints `ok` or the OS error (e.g. `Permission denied (os error 13)`).
//!
//! Usage: `confine_probe <fds|pdeathsig|udp|netlink|unix-pair|io-uring|tcp PORT|
//! abstract NAME|abstract-self NAME|kill PID SIG|truncate PATH|bind PORT>`

// Test code: an unexpected failure is a panic that names it.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::{self, Write};
use std::net::{TcpStream, UdpSocket};
use std::os::linux::net::SocketAddrExt;
use std::os::unix::net::{SocketAddr, UnixListener, UnixStream};

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let words: Vec<&str> = args.iter().map(String::as_str).collect();
    let out = match words.as_slice() {
        ["fds"] => fds(),
        ["pdeathsig"] => pdeathsig(),
        ["udp"] => UdpSocket::bind("127.0.0.1:0").map(|_| "ok".to_string()),
        ["netlink"] => raw_socket(libc::AF_NETLINK, libc::SOCK_RAW, 0),
        ["unix-pair"] => UnixStream::pair().map(|_| "ok".to_string()),
        ["io-uring"] => io_uring(),
        ["truncate", path] => truncate(path),
        ["tcp", port] => match port.parse::<u16>() {
            Ok(p) => TcpStream::connect(("127.0.0.1", p)).map(|_| "ok".to_string()),
            Err(e) => Ok(format!("bad port: {e}")),
        },
        ["bind", port] => match port.parse::<u16>() {
            Ok(p) => std::net::TcpListener::bind(("127.0.0.1", p)).map(|_| "ok".to_string()),
            Err(e) => Ok(format!("bad port: {e}")),
        },
        ["abstract", name] => SocketAddr::from_abstract_name(name.as_bytes())
            .and_then(|a| UnixStream::connect_addr(&a))
            .map(|_| "ok".to_string()),
        ["abstract-self", name] => SocketAddr::from_abstract_name(name.as_bytes())
            .and_then(|a| {
                let _l = UnixListener::bind_addr(&a)?;
                UnixStream::connect_addr(&a)
            })
            .map(|_| "ok".to_string()),
        ["kill", pid, sig] => match (pid.parse::<i32>(), sig.parse::<i32>()) {
            (Ok(p), Ok(s)) => {
                // Safety: kill has no memory arguments.
                if unsafe { libc::kill(p, s) } == 0 {
                    Ok("ok".to_string())
                } else {
                    Err(io::Error::last_os_error())
                }
            }
            _ => Ok("bad kill arguments".to_string()),
        },
        _ => Ok(format!("unknown probe {words:?}")),
    };
    let line = match out {
        Ok(s) => s,
        Err(e) => e.to_string(),
    };
    let _ = writeln!(io::stdout(), "{line}");
}

/// Lists this process's open descriptors, minus the one used to read the directory.
fn fds() -> io::Result<String> {
    let mut names = Vec::new();
    for entry in std::fs::read_dir("/proc/self/fd")? {
        let entry = entry?;
        let target = std::fs::read_link(entry.path()).unwrap_or_default();
        if target.to_string_lossy().starts_with("/proc/") {
            continue;
        }
        names.push(entry.file_name().to_string_lossy().into_owned());
    }
    names.sort();
    Ok(names.join(" "))
}

fn pdeathsig() -> io::Result<String> {
    let mut sig: libc::c_int = 0;
    // Safety: PR_GET_PDEATHSIG stores an int into `sig`.
    if unsafe { libc::prctl(libc::PR_GET_PDEATHSIG, &mut sig as *mut libc::c_int) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(sig.to_string())
}

fn raw_socket(domain: i32, ty: i32, proto: i32) -> io::Result<String> {
    // Safety: socket has no memory arguments.
    let fd = unsafe { libc::socket(domain, ty | libc::SOCK_CLOEXEC, proto) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // Safety: `fd` was just created and is owned here.
    unsafe { libc::close(fd) };
    Ok("ok".to_string())
}

fn io_uring() -> io::Result<String> {
    let mut params = [0u8; 120];
    // Safety: io_uring_setup reads and writes a struct io_uring_params (120 bytes).
    let fd = unsafe { libc::syscall(libc::SYS_io_uring_setup, 1, params.as_mut_ptr()) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // Safety: the ring descriptor was just created and is owned here.
    unsafe { libc::close(fd as i32) };
    Ok("ok".to_string())
}

/// `truncate(2)` by path (not open + ftruncate), to exercise Landlock's truncate right.
fn truncate(path: &str) -> io::Result<String> {
    let c = std::ffi::CString::new(path).map_err(io::Error::other)?;
    // Safety: `c` is a NUL-terminated path that outlives the call.
    if unsafe { libc::truncate(c.as_ptr(), 0) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok("ok".to_string())
}
