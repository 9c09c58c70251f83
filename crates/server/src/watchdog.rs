//! The watchdog: a small process forked from toolsrv at startup that kills every
//! tool process group when toolsrv dies, even by SIGKILL.
//!
//! `PR_SET_PDEATHSIG` (set in each tool) only reaches the tool itself, not what
//! the tool started. The watchdog holds the read end of a pipe; toolsrv writes a
//! record for every process group it starts (`+pgid`) and reaps (`-pgid`). When
//! toolsrv dies, for whatever reason, the pipe reaches end of file and the
//! watchdog sends SIGKILL to every group still listed, then exits.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

/// toolsrv's end of the watchdog pipe.
pub struct Watchdog {
    fd: OwnedFd,
}

const ADD: u8 = b'+';
const REMOVE: u8 = b'-';

impl Watchdog {
    /// Fork the watchdog process.
    ///
    /// Must be called while the process is still single-threaded (before the
    /// async runtime starts): the child only runs plain system calls and its own
    /// loop, but a fork of a multi-threaded process could inherit held locks.
    pub fn start() -> io::Result<Watchdog> {
        let mut fds = [0; 2];
        // Safety: pipe2 writes two new descriptors into our array.
        if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
            return Err(io::Error::last_os_error());
        }
        let (rd, wr) = (fds[0], fds[1]);
        // Safety: fork in a single-threaded process (documented precondition).
        match unsafe { libc::fork() } {
            -1 => {
                let e = io::Error::last_os_error();
                // Safety: closing the two descriptors we just created.
                unsafe {
                    libc::close(rd);
                    libc::close(wr);
                }
                Err(e)
            }
            0 => {
                // Safety: we are the child; watch() never returns.
                unsafe { watch(rd, wr) }
            }
            _ => {
                // Safety: the read end belongs to the child now; close our copy.
                unsafe { libc::close(rd) };
                // Safety: `wr` is ours and nobody else owns it.
                Ok(Watchdog {
                    fd: unsafe { OwnedFd::from_raw_fd(wr) },
                })
            }
        }
    }

    fn send(&self, op: u8, pgid: i32) {
        let mut rec = [0u8; 5];
        rec[0] = op;
        rec[1..].copy_from_slice(&pgid.to_le_bytes());
        // A 5-byte write to a pipe is atomic. If the watchdog is gone there is
        // nothing better to do than carry on (its absence is logged at startup).
        // Safety: writing from a local buffer to a descriptor we own.
        unsafe { libc::write(self.fd.as_raw_fd(), rec.as_ptr().cast(), rec.len()) };
    }

    /// A tool process group was started.
    pub fn track(&self, pgid: i32) {
        self.send(ADD, pgid);
    }

    /// A tool process group is gone (reaped and killed).
    pub fn untrack(&self, pgid: i32) {
        self.send(REMOVE, pgid);
    }
}

/// The watchdog's life: read records until EOF, then kill what is listed.
///
/// # Safety
/// Only to be called in the child right after `fork`.
unsafe fn watch(rd: i32, wr: i32) -> ! {
    // Safety (whole function): raw system calls on descriptors and memory we own.
    unsafe {
        libc::close(wr);
        // Keep only the pipe: move it to 3 and close everything else.
        if rd != 3 {
            libc::dup2(rd, 3);
        }
        libc::close_range(4, u32::MAX, 0);
        for fd in 0..3 {
            libc::close(fd);
        }
        // Out of the terminal's process group and deaf to its signals, so Ctrl-C
        // aimed at toolsrv does not take the watchdog down first.
        libc::setpgid(0, 0);
        libc::signal(libc::SIGINT, libc::SIG_IGN);
        libc::signal(libc::SIGHUP, libc::SIG_IGN);
        libc::signal(libc::SIGTERM, libc::SIG_IGN);
        libc::signal(libc::SIGPIPE, libc::SIG_IGN);
        let name = b"toolsrv-watch\0";
        libc::prctl(libc::PR_SET_NAME, name.as_ptr());
        let mut groups: Vec<i32> = Vec::new();
        let mut buf = [0u8; 5 * 512];
        let mut have = 0usize;
        loop {
            let n = libc::read(3, buf[have..].as_mut_ptr().cast(), buf.len() - have);
            if n < 0 && *libc::__errno_location() == libc::EINTR {
                continue;
            }
            if n <= 0 {
                break;
            }
            have += n as usize;
            let whole = have - have % 5;
            for rec in buf[..whole].chunks_exact(5) {
                let pgid = i32::from_le_bytes([rec[1], rec[2], rec[3], rec[4]]);
                match rec[0] {
                    ADD => groups.push(pgid),
                    REMOVE => groups.retain(|g| *g != pgid),
                    _ => {}
                }
            }
            buf.copy_within(whole..have, 0);
            have -= whole;
        }
        for g in groups {
            if g > 1 {
                libc::kill(-g, libc::SIGKILL);
            }
        }
        libc::_exit(0)
    }
}
