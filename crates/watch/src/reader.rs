//! The reader: the first process (pid 1) of the tools PID namespace.
//!
//! It is made by a fork-like `clone` of a process that may have other
//! threads, so from its first instruction to its exit it makes only
//! reader-safe calls of `sys` (plain system calls: no allocation, no lock,
//! no formatting, no panic), on buffers the parent allocated before the
//! clone. Its jobs:
//!
//! - **Hold the namespace.** The kernel kills every process of a PID
//!   namespace when its first process dies, and this one dies with the
//!   thread that made it (`PR_SET_PDEATHSIG(SIGKILL)`) or when its control
//!   socket closes. It cannot be killed from inside the namespace (the
//!   kernel drops every signal a namespace's init has no handler for, even
//!   SIGKILL, when it comes from inside).
//! - **Reap.** Orphans of the tools are reparented to it; SIGCHLD is
//!   ignored, so the kernel reaps them as they end (no zombie, no code).
//! - **Read the fanotify group** it is given, so that each event's pid is
//!   translated into *this* namespace when it is read: non-zero exactly when
//!   a process of the namespace made it, however long ago it was reaped.
//!   Events of processes inside the namespace go to the server over the
//!   control socket; the others are dropped unless the server asks for them.

use std::os::fd::RawFd;

use crate::fid;
use crate::proto::*;
use crate::sys::{self, fan};

/// What the reader works with, prepared by the parent before the clone.
pub(crate) struct ReaderArgs {
    /// The reader's end of the control socket.
    pub(crate) ctl: RawFd,
    /// Buffer for `read(2)` of the group.
    pub(crate) read_buf: *mut u8,
    pub(crate) read_len: usize,
    /// Buffer for the messages to the server (`HEAD + EVENTS_MAX` bytes).
    pub(crate) msg_buf: *mut u8,
    pub(crate) msg_len: usize,
    /// The page shared with the server (`sys::SharedPage`): batches of
    /// the group started and finished.
    pub(crate) shared: *mut u64,
}

/// The reader's state.
struct Reader<'a> {
    ctl: RawFd,
    group: RawFd,
    others: bool,
    read: &'a mut [u8],
    msg: &'a mut [u8],
    started: &'a std::sync::atomic::AtomicU64,
    finished: &'a std::sync::atomic::AtomicU64,
}

/// The reader's life. Never returns.
///
/// # Safety
///
/// Called only in the child of [`sys::clone_pid_namespace`]; `args`'s
/// buffers are valid for their lengths and used by nothing else (the child
/// has its own copy of the parent's memory).
pub(crate) unsafe fn main(args: &ReaderArgs) -> ! {
    sys::reader_signals();
    if sys::reader_process(c"toolsrv-toolsns").is_err() {
        sys::exit(1);
    }
    // Keep only the control socket: every other descriptor of the server
    // (its listening socket, the tools' pipes, which must reach end of file
    // when the tools end) is closed.
    let ctl = match sys::dup_above(args.ctl, 3) {
        Ok(fd) => fd,
        Err(_) => sys::exit(1),
    };
    sys::close_range(0, (ctl - 1) as u32);
    sys::close_range(ctl as u32 + 1, u32::MAX);
    // Safety: the caller's promise: both buffers are ours alone and as long
    // as said.
    let (read, msg) = unsafe {
        (
            std::slice::from_raw_parts_mut(args.read_buf, args.read_len),
            std::slice::from_raw_parts_mut(args.msg_buf, args.msg_len),
        )
    };
    // Safety: the parent mapped the page shared and keeps it while this
    // reader lives; it holds two u64 counters, aligned.
    let (started, finished) = unsafe {
        let p = args.shared as *const std::sync::atomic::AtomicU64;
        (&*p, &*p.add(1))
    };
    let mut r = Reader {
        ctl,
        group: -1,
        others: false,
        read,
        msg,
        started,
        finished,
    };
    let mut ready = [0u8; HEAD];
    ready[0] = FROM_READER_READY;
    if sys::send(ctl, &ready, None).is_err() {
        sys::exit(1);
    }
    r.run()
}

impl Reader<'_> {
    fn run(&mut self) -> ! {
        let mut ctl_msg = [0u8; 64];
        loop {
            let mut fds = [
                libc::pollfd {
                    fd: self.ctl,
                    events: libc::POLLIN,
                    revents: 0,
                },
                libc::pollfd {
                    fd: self.group,
                    events: libc::POLLIN,
                    revents: 0,
                },
            ];
            let n = if self.group >= 0 { 2 } else { 1 };
            if sys::poll(&mut fds[..n], -1).is_err() {
                sys::exit(1);
            }
            if fds[0].revents & libc::POLLIN != 0 {
                match sys::recv(self.ctl, &mut ctl_msg) {
                    Ok((0, _)) | Err(_) => sys::exit(0),
                    Ok((len, fd)) => self.command(&ctl_msg[..len], fd),
                }
            } else if fds[0].revents & (libc::POLLHUP | libc::POLLERR | libc::POLLNVAL) != 0 {
                sys::exit(0);
            }
            if n == 2 && fds[1].revents & libc::POLLIN != 0 {
                self.drain(false);
            }
        }
    }

    /// One message from the server.
    fn command(&mut self, m: &[u8], fd: Option<RawFd>) {
        if m.len() < HEAD {
            if let Some(fd) = fd {
                sys::close(fd);
            }
            return;
        }
        match (m[0], fd) {
            (TO_READER_GROUP, Some(fd)) => {
                if self.group >= 0 {
                    sys::close(self.group);
                }
                sys::set_nonblocking(fd);
                self.group = fd;
                if m[1] & FLAG_UNKNOWN != 0 {
                    self.drain(true);
                }
            }
            (TO_READER_FLUSH, None) => {
                self.drain(false);
                let Some(seq) = seq_of(m) else { return };
                if sys::send(self.ctl, &with_seq(FROM_READER_FLUSHED, seq), None).is_err() {
                    sys::exit(0);
                }
            }
            (TO_READER_OTHERS, None) => self.others = m[1] != 0,
            (_, Some(fd)) => sys::close(fd),
            _ => {}
        }
    }

    /// Reads the group until nothing is queued, forwarding what passes.
    ///
    /// The shared counters say a batch is on its way from its first read to
    /// its last send (the server reads them instead of asking, `quiet`).
    fn drain(&mut self, unknown: bool) {
        if self.group < 0 {
            return;
        }
        let n = self.started.load(std::sync::atomic::Ordering::SeqCst) + 1;
        self.started.store(n, std::sync::atomic::Ordering::SeqCst);
        self.forward(unknown);
        self.finished.store(n, std::sync::atomic::Ordering::SeqCst);
    }

    fn forward(&mut self, unknown: bool) {
        let mut out = HEAD;
        loop {
            let got = match sys::read(self.group, self.read) {
                Ok(0) => break,
                Ok(n) => n,
                Err(e) if e.raw_os_error() == Some(libc::EINTR) => continue,
                Err(_) => break,
            };
            let mut at = 0;
            while let Some((len, mask, fd, pid)) = fid::header(&self.read[at..got]) {
                if fd >= 0 {
                    sys::close(fd);
                }
                let keep = unknown || pid != 0 || self.others || mask & fan::Q_OVERFLOW != 0;
                if keep {
                    if out + len > self.msg.len() {
                        self.send_events(out, unknown);
                        out = HEAD;
                    }
                    if len <= self.msg.len() - HEAD {
                        self.msg[out..out + len].copy_from_slice(&self.read[at..at + len]);
                        out += len;
                    }
                }
                at += len;
            }
        }
        if out > HEAD {
            self.send_events(out, unknown);
        }
    }

    /// Sends the first `len` bytes of the message buffer as events.
    fn send_events(&mut self, len: usize, unknown: bool) {
        self.msg[0] = FROM_READER_EVENTS;
        self.msg[1] = if unknown { FLAG_UNKNOWN } else { 0 };
        if sys::send(self.ctl, &self.msg[..len], None).is_err() {
            sys::exit(0);
        }
    }
}
