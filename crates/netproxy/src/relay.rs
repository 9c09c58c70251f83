//! Copying a tunnel's bytes both ways once its destination is checked:
//! `splice(2)` from one socket into a pipe and from the pipe into the
//! other, so the bytes never pass through the proxy's memory (measured in
//! the `proxy` bench: docs/network.md, "Cost"). Where a pipe cannot be
//! made, a buffered copy.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

use tokio::io::Interest;
use tokio::net::TcpStream;

/// The pipe's capacity asked for (the kernel may give less; what it gives
/// is what is used).
const PIPE_SIZE: libc::c_int = 1 << 20;

/// The buffered copy's size per read, where splice is not used.
const BUFFER: usize = 256 * 1024;

/// Relays `a` and `b` both ways until both ends are done; each side's
/// write half is shut once the other side's input ended.
pub(crate) async fn relay(a: &mut TcpStream, b: &mut TcpStream) -> io::Result<()> {
    match (Pipe::new(), Pipe::new()) {
        (Ok(p1), Ok(p2)) => {
            let (a, b) = (&*a, &*b);
            tokio::try_join!(one_way(a, b, &p1), one_way(b, a, &p2))?;
            Ok(())
        }
        _ => {
            tokio::io::copy_bidirectional_with_sizes(a, b, BUFFER, BUFFER).await?;
            Ok(())
        }
    }
}

/// A non-blocking pipe and its capacity.
struct Pipe {
    read: OwnedFd,
    write: OwnedFd,
    capacity: usize,
}

impl Pipe {
    fn new() -> io::Result<Pipe> {
        let mut fds = [0 as RawFd; 2];
        // Safety: `fds` has room for the two descriptors pipe2 writes.
        if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_NONBLOCK | libc::O_CLOEXEC) } != 0 {
            return Err(io::Error::last_os_error());
        }
        // Safety: both descriptors are new and owned by nothing else.
        let (read, write) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
        // Safety: fcntl on a descriptor this function owns; a refusal
        // (pipe-max-size) leaves the default size, read back below.
        unsafe { libc::fcntl(write.as_raw_fd(), libc::F_SETPIPE_SZ, PIPE_SIZE) };
        // Safety: as above.
        let size = unsafe { libc::fcntl(write.as_raw_fd(), libc::F_GETPIPE_SZ) };
        let capacity = usize::try_from(size).unwrap_or(0).max(4096);
        Ok(Pipe {
            read,
            write,
            capacity,
        })
    }
}

/// One `splice` of at most `len` bytes, never waiting.
fn splice(from: RawFd, to: RawFd, len: usize) -> io::Result<usize> {
    // Safety: both descriptors are open for the call's length (borrowed
    // from values the caller holds); no offsets are passed (null).
    let n = unsafe {
        libc::splice(
            from,
            std::ptr::null_mut(),
            to,
            std::ptr::null_mut(),
            len,
            libc::SPLICE_F_MOVE | libc::SPLICE_F_NONBLOCK,
        )
    };
    usize::try_from(n).map_err(|_| io::Error::last_os_error())
}

/// Moves what `from` sends to `to` through `pipe` until `from`'s end of
/// file, then shuts `to`'s write half.
///
/// The pipe is filled only when empty: then a splice into it that would
/// block means the socket has nothing (never that the pipe is full, which
/// a partly filled pipe can be before its byte capacity, by its slots), so
/// the socket's readiness is cleared only when it should be.
async fn one_way(from: &TcpStream, to: &TcpStream, pipe: &Pipe) -> io::Result<()> {
    let (mut held, mut ended) = (0usize, false);
    loop {
        if !ended && held == 0 {
            match from.try_io(Interest::READABLE, || {
                splice(
                    from.as_raw_fd(),
                    pipe.write.as_raw_fd(),
                    pipe.capacity - held,
                )
            }) {
                Ok(0) => ended = true,
                Ok(n) => held += n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(e) => return Err(e),
            }
        }
        if held > 0 {
            match to.try_io(Interest::WRITABLE, || {
                splice(pipe.read.as_raw_fd(), to.as_raw_fd(), held)
            }) {
                Ok(n) => held -= n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(e) => return Err(e),
            }
        }
        if ended && held == 0 {
            // Safety: shutdown(2) of a socket the caller holds open.
            unsafe { libc::shutdown(to.as_raw_fd(), libc::SHUT_WR) };
            return Ok(());
        }
        let want_read = !ended && held == 0;
        tokio::select! {
            r = from.readable(), if want_read => r?,
            r = to.writable(), if held > 0 => r?,
        }
    }
}
