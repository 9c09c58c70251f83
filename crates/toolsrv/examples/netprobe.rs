//! A tiny probe run as a tool by the sandbox integration tests
//! (`tests/sandbox_*.rs`): it performs one network, socket or file operation and
//! prints `ok` (exit 0) or the OS error, e.g. `Permission denied (os error 13)`
//! (exit 1).
//!
//! Usage: `netprobe <tcp PORT | bind PORT | udp-send PORT | mptcp | unix-pair |
//! abstract NAME | abstract-self NAME | truncate PATH | hold NAME PORT>`;
//! `hold` binds the abstract name and a listener on `127.0.0.1:PORT`,
//! prints `holding` and keeps them for 30 s.

// Test code: an unexpected failure is a panic that names it.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::{self, Write};
use std::net::{TcpListener, TcpStream, UdpSocket};
use std::os::linux::net::SocketAddrExt;
use std::os::unix::net::{SocketAddr, UnixListener, UnixStream};
use std::process::ExitCode;

/// `IPPROTO_MPTCP` (not exported by every libc crate version).
const IPPROTO_MPTCP: i32 = 262;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let words: Vec<&str> = args.iter().map(String::as_str).collect();
    let result = match words.as_slice() {
        ["tcp", port] => port_arg(port).and_then(|p| {
            let mut s = TcpStream::connect(("127.0.0.1", p))?;
            s.write_all(b"probe")?;
            Ok(())
        }),
        ["bind", port] => {
            port_arg(port).and_then(|p| TcpListener::bind(("127.0.0.1", p)).map(drop))
        }
        ["udp-send", port] => port_arg(port).and_then(|p| {
            let s = UdpSocket::bind("127.0.0.1:0")?;
            s.send_to(b"probe", ("127.0.0.1", p)).map(drop)
        }),
        ["mptcp"] => socket(libc::AF_INET, libc::SOCK_STREAM, IPPROTO_MPTCP),
        ["unix-pair"] => UnixStream::pair().map(drop),
        ["abstract", name] => SocketAddr::from_abstract_name(name.as_bytes())
            .and_then(|a| UnixStream::connect_addr(&a))
            .map(drop),
        ["abstract-self", name] => SocketAddr::from_abstract_name(name.as_bytes()).and_then(|a| {
            let _listener = UnixListener::bind_addr(&a)?;
            UnixStream::connect_addr(&a).map(drop)
        }),
        ["truncate", path] => truncate(path),
        ["hold", name, port] => port_arg(port).and_then(|p| hold(name, p)),
        _ => Err(io::Error::other(format!("unknown probe {words:?}"))),
    };
    let (line, code) = match result {
        Ok(()) => ("ok".to_string(), ExitCode::SUCCESS),
        Err(e) => (e.to_string(), ExitCode::FAILURE),
    };
    let _ = writeln!(io::stdout(), "{line}");
    code
}

/// A TCP/UDP port argument.
fn port_arg(s: &str) -> io::Result<u16> {
    s.parse::<u16>()
        .map_err(|e| io::Error::other(format!("invalid port {s:?}: {e}")))
}

/// `socket(2)` with the given triple; the descriptor is closed again at once.
fn socket(domain: i32, ty: i32, proto: i32) -> io::Result<()> {
    // Safety: socket(2) takes no pointers.
    let fd = unsafe { libc::socket(domain, ty | libc::SOCK_CLOEXEC, proto) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // Safety: `fd` was just created here and nothing else owns it.
    unsafe { libc::close(fd) };
    Ok(())
}

/// `truncate(2)` by path (not open + ftruncate), to exercise Landlock's truncate right.
fn truncate(path: &str) -> io::Result<()> {
    let c = std::ffi::CString::new(path).map_err(io::Error::other)?;
    // Safety: `c` is a NUL-terminated path that outlives the call.
    if unsafe { libc::truncate(c.as_ptr(), 0) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Binds abstract `name` and `127.0.0.1:port`, says so, and keeps both.
fn hold(name: &str, port: u16) -> io::Result<()> {
    let a = SocketAddr::from_abstract_name(name.as_bytes())?;
    let _unix = UnixListener::bind_addr(&a)?;
    let _tcp = TcpListener::bind(("127.0.0.1", port))?;
    println!("holding");
    std::thread::sleep(std::time::Duration::from_secs(30));
    Ok(())
}
