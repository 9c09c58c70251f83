//! A spawned child: its pid, its pidfd, waiting and signalling.

use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};

use super::launch::Launch;
use super::sys;

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
    pub fn setup_error(&self) -> Option<super::error::SpawnError> {
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
        let gone = |r: io::Result<()>| match r {
            Err(err) if err.raw_os_error() != Some(libc::ESRCH) => Err(err),
            _ => Ok(()),
        };
        // A negative pid addresses the group.
        gone(sys::parent::kill(-self.pid, sig))?;
        // The pid is the child's until it is reaped (by this value's owner), so
        // it names the child.
        let group = sys::parent::getpgid(self.pid);
        if group >= 0 && group != self.pid {
            gone(toolsrv_base::pidfd_send_signal(self.pidfd.as_fd(), sig))?;
        }
        Ok(())
    }
}

/// `waitid(P_PIDFD, fd, WEXITED | extra)`, retrying on EINTR. `None`: not exited yet
/// (only with `WNOHANG`).
pub(crate) fn wait_pidfd(fd: BorrowedFd<'_>, extra: i32) -> io::Result<Option<ExitStatus>> {
    loop {
        let (code, status) = match sys::parent::waitid_pidfd(fd, extra) {
            Ok(Some(exited)) => exited,
            Ok(None) => return Ok(None),
            Err(err) if err.kind() == io::ErrorKind::Interrupted => continue,
            Err(err) => return Err(err),
        };
        return Ok(Some(match code {
            libc::CLD_EXITED => ExitStatus::Code(status),
            _ => ExitStatus::Signal(status),
        }));
    }
}
