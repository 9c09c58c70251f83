//! A spawned child: its pid, its pidfd, waiting and signalling.

use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};

use super::launch::Launch;

/// How a child ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExitStatus {
    /// Exited by itself with this status.
    Code(i32),
    /// Killed by this signal.
    Signal(i32),
}

impl ExitStatus {
    /// The shell-style exit code: the status, or 128+N after signal N.
    pub fn code(&self) -> i32 {
        match *self {
            ExitStatus::Code(c) => c,
            ExitStatus::Signal(s) => 128 + s,
        }
    }
}

/// A running (or finished, not yet reaped) tool process, leader of its own process group.
///
/// The caller must reap it with [`Child::wait`] or [`Child::try_wait`]; dropping an
/// unreaped `Child` leaves the process running and, once it exits, a zombie.
pub struct Child {
    pid: i32,
    pidfd: OwnedFd,
    status: Option<ExitStatus>,
    /// The memory a detached child reads until it execs (see `spawn_detached`).
    launch: Option<Box<Launch>>,
}

impl std::fmt::Debug for Child {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Child")
            .field("pid", &self.pid)
            .field("status", &self.status)
            .field(
                "program",
                &self.launch.as_ref().map(|l| l.program().to_string_lossy()),
            )
            .finish()
    }
}

impl Drop for Child {
    fn drop(&mut self) {
        if let Some(launch) = self.launch.take() {
            super::launch::retire(launch);
        }
    }
}

impl Child {
    pub(crate) fn new(pid: i32, pidfd: OwnedFd) -> Child {
        Child {
            pid,
            pidfd,
            status: None,
            launch: None,
        }
    }

    pub(crate) fn detached(pid: i32, pidfd: OwnedFd, launch: Box<Launch>) -> Child {
        Child {
            pid,
            pidfd,
            status: None,
            launch: Some(launch),
        }
    }

    /// Why a child started with [`super::spawn_detached`] failed before it could
    /// run its program (it then exits with status 127): known once the child has
    /// been reaped ([`Child::wait`], or [`Child::try_wait`] returning `Some`);
    /// `None` before, and for a child that ran its program.
    pub fn setup_error(&self) -> Option<super::SpawnError> {
        self.status?;
        self.launch.as_ref()?.failure()
    }

    /// The OS process id (also the process group id).
    pub fn pid(&self) -> i32 {
        self.pid
    }

    /// The pidfd: it becomes readable when the child exits (register it with a poller).
    pub fn pidfd(&self) -> BorrowedFd<'_> {
        self.pidfd.as_fd()
    }

    /// Reaps the child if it has exited, without blocking. Once this returned `Some`
    /// the child is reaped; later calls return the same status.
    pub fn try_wait(&mut self) -> io::Result<Option<ExitStatus>> {
        if let Some(status) = self.status {
            return Ok(Some(status));
        }
        let status = wait_pidfd(self.pidfd.as_fd(), libc::WNOHANG)?;
        self.status = status;
        Ok(status)
    }

    /// Blocks until the child exits and reaps it.
    pub fn wait(&mut self) -> io::Result<ExitStatus> {
        if let Some(status) = self.status {
            return Ok(status);
        }
        loop {
            if let Some(status) = wait_pidfd(self.pidfd.as_fd(), 0)? {
                self.status = Some(status);
                return Ok(status);
            }
        }
    }

    /// Sends `sig` to the child's whole process group, and to the child itself
    /// (through its pidfd) when it has left that group (`setpgid` into another
    /// one): a tool cannot make itself deaf to its run's signals that way. A
    /// group or child that no longer exists (`ESRCH`) is not an error.
    pub fn signal_group(&self, sig: i32) -> io::Result<()> {
        // Safety: kill has no memory arguments; a negative pid addresses the group.
        let ret = unsafe { libc::kill(-self.pid, sig) };
        if ret != 0 {
            let err = io::Error::last_os_error();
            if err.raw_os_error() != Some(libc::ESRCH) {
                return Err(err);
            }
        }
        // Safety: getpgid has no memory arguments. The pid is the child's
        // until it is reaped (by this value's owner), so it names the child.
        let group = unsafe { libc::getpgid(self.pid) };
        if group >= 0 && group != self.pid {
            // Safety: the pidfd is ours and open; no siginfo is passed.
            let r = unsafe {
                libc::syscall(
                    libc::SYS_pidfd_send_signal,
                    self.pidfd.as_raw_fd(),
                    sig,
                    std::ptr::null::<libc::siginfo_t>(),
                    0,
                )
            };
            if r != 0 {
                let err = io::Error::last_os_error();
                if err.raw_os_error() != Some(libc::ESRCH) {
                    return Err(err);
                }
            }
        }
        Ok(())
    }
}

/// `waitid(P_PIDFD, fd, WEXITED | extra)`, retrying on EINTR. `None`: not exited yet
/// (only with `WNOHANG`).
pub(crate) fn wait_pidfd(fd: BorrowedFd<'_>, extra: i32) -> io::Result<Option<ExitStatus>> {
    loop {
        let mut info = std::mem::MaybeUninit::<libc::siginfo_t>::zeroed();
        // Safety: `info` is writable memory of the size of siginfo_t, zeroed so that
        // si_pid reads 0 when WNOHANG finds no exited child.
        let ret = unsafe {
            libc::waitid(
                libc::P_PIDFD,
                fd.as_raw_fd() as libc::id_t,
                info.as_mut_ptr(),
                libc::WEXITED | extra,
            )
        };
        if ret != 0 {
            let err = io::Error::last_os_error();
            if err.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(err);
        }
        // Safety: waitid succeeded and the buffer was zero-initialised before.
        let info = unsafe { info.assume_init() };
        // Safety: for SIGCHLD siginfo (what waitid fills in), si_pid and si_status are
        // the valid union members.
        let (pid, status) = unsafe { (info.si_pid(), info.si_status()) };
        if pid == 0 {
            return Ok(None);
        }
        return Ok(Some(match info.si_code {
            libc::CLD_EXITED => ExitStatus::Code(status),
            _ => ExitStatus::Signal(status),
        }));
    }
}
