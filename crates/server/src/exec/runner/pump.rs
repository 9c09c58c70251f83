//! Phase 3's output pump: the output pipe, read without waiting, copied
//! into the process's output until its end of file.

use std::future::Future;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::OnceLock;
use std::task::Poll;
use std::time::Duration;

use tokio::io::unix::AsyncFd;

use crate::procs::Proc;
use crate::sys;

/// The output pipe's capacity, and the most the pump reads at once.
const PIPE_SIZE: i32 = 1 << 20;

/// The pump's first buffer (grown to [`PIPE_SIZE`] for chatty tools).
const PUMP_START: usize = 16 * 1024;

/// Whether this kernel reads pipes with `RWF_NOWAIT` ([`sys::read_nowait`]),
/// probed once on a pipe of its own before any output pipe is made (Linux
/// 5.9 and later do; then no output pipe needs an `fcntl` to be read without
/// waiting).
fn reads_nowait() -> bool {
    static NOWAIT: OnceLock<bool> = OnceLock::new();
    *NOWAIT.get_or_init(|| {
        let Ok((r, _w)) = sys::pipe() else {
            return false;
        };
        let mut byte = [std::mem::MaybeUninit::<u8>::uninit(); 1];
        let probe = sys::read_nowait(r.as_fd(), &mut byte);
        let ok = matches!(&probe, Err(e) if e.kind() == std::io::ErrorKind::WouldBlock);
        if !ok {
            tracing::debug!(result = ?probe, "no RWF_NOWAIT reads of pipes: output pipes are made non-blocking");
        }
        ok
    })
}

/// A pipe with both ends close-on-exec whose read end [`read_pipe`] reads
/// without waiting: made non-blocking only where the kernel cannot read it
/// with `RWF_NOWAIT` (the `fcntl` was one system call per run).
pub(super) fn pipe() -> std::io::Result<(OwnedFd, OwnedFd)> {
    let nowait = reads_nowait();
    let (r, w) = sys::pipe()?;
    if !nowait {
        // A new pipe's read end has no status flag set, and F_SETFL leaves
        // the access mode alone: no F_GETFL.
        sys::set_status_nonblocking(r.as_fd())?;
    }
    Ok((r, w))
}

/// One read of an output pipe made by [`pipe`]; never waits.
fn read_pipe(fd: BorrowedFd<'_>, buf: &mut [std::mem::MaybeUninit<u8>]) -> std::io::Result<usize> {
    if reads_nowait() {
        sys::read_nowait(fd, buf)
    } else {
        sys::read(fd, buf)
    }
}

/// Grow the pipe behind `fd` to [`PIPE_SIZE`]: fewer wake-ups for a chatty
/// tool. Done once its output fills the pump's first buffer, not for every
/// tool (most print little, and the larger ring costs an allocation). The
/// kernel may refuse (pipe-max-size, per-user limits), which is fine.
fn grow_pipe(fd: BorrowedFd<'_>) {
    let _ = sys::set_pipe_size(fd, PIPE_SIZE);
}

/// The output pump of one run, driven by the run's own task.
pub(super) struct Pump<F> {
    fut: Pin<Box<F>>,
    done: bool,
}

impl<F: Future<Output = ()>> Pump<F> {
    pub(super) fn new(fut: F) -> Pump<F> {
        Pump {
            fut: Box::pin(fut),
            done: false,
        }
    }

    /// Wait for `f` while the pump keeps copying output.
    pub(super) async fn alongside<T>(&mut self, f: impl Future<Output = T>) -> T {
        let mut f = std::pin::pin!(f);
        loop {
            tokio::select! {
                biased;
                r = &mut f => return r,
                _ = self.fut.as_mut(), if !self.done => self.done = true,
            }
        }
    }

    /// Run the pump to the pipe's end of file for at most `limit`; whether it
    /// got there. The pump is polled once before a timer is armed: the end of
    /// file is usually there already.
    pub(super) async fn finish_within(&mut self, limit: Duration) -> bool {
        if !self.done {
            let fut = &mut self.fut;
            self.done =
                std::future::poll_fn(|cx| Poll::Ready(fut.as_mut().poll(cx).is_ready())).await;
        }
        if !self.done && tokio::time::timeout(limit, self.fut.as_mut()).await.is_ok() {
            self.done = true;
        }
        self.done
    }
}

/// Copy the pipe into the process's output until EOF.
///
/// The read end (read without waiting by [`read_pipe`]) is watched with `AsyncFd`
/// directly: `tokio::net::unix::pipe::Receiver` would first check it with an
/// `fstat` and an `F_GETFL`, two system calls per run.
pub(super) async fn pump(rx: &AsyncFd<OwnedFd>, proc: &Proc, writer_closed: &AtomicBool) {
    // Start small (most tools print little) and grow up to the pipe's size
    // when reads fill the buffer; spare capacity is never zeroed.
    let mut buf = Vec::with_capacity(PUMP_START);
    let mut grown = false;
    loop {
        buf.clear();
        match read_some(rx, &mut buf, writer_closed).await {
            Ok(0) | Err(_) => return,
            Ok(n) => {
                proc.output.push_paced(&buf).await;
                if n == buf.capacity() && n < PIPE_SIZE as usize {
                    if !grown {
                        grow_pipe(rx.get_ref().as_fd());
                        grown = true;
                    }
                    buf = Vec::with_capacity((n * 4).min(PIPE_SIZE as usize));
                }
            }
        }
    }
}

/// Read what the pipe holds into `buf`'s spare capacity (at least one byte
/// of room); 0 at end of file.
///
/// Once `writer_closed` is set (the server dropped its write end after the
/// tool exited), the pipe is read at once, without waiting for the runtime's
/// poller to report it readable: the end of file is usually there already,
/// and that spares a turn of the poller (an `epoll_wait`) per run. The flag
/// is cleared when such a read would block (a descendant holds the pipe).
async fn read_some(
    rx: &AsyncFd<OwnedFd>,
    buf: &mut Vec<u8>,
    writer_closed: &AtomicBool,
) -> std::io::Result<usize> {
    std::future::poll_fn(|cx| loop {
        let spare = buf.spare_capacity_mut();
        let result = if writer_closed.load(Ordering::Relaxed) {
            match read_pipe(rx.get_ref().as_fd(), spare) {
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                    writer_closed.store(false, Ordering::Relaxed);
                    continue;
                }
                r => r,
            }
        } else {
            let mut guard = match rx.poll_read_ready(cx) {
                Poll::Ready(Ok(g)) => g,
                Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
                Poll::Pending => return Poll::Pending,
            };
            match guard.try_io(|fd| read_pipe(fd.get_ref().as_fd(), spare)) {
                Ok(r) => r,
                Err(_would_block) => continue,
            }
        };
        match result {
            Ok(n) => {
                // Safety: the kernel initialised the first `n` spare bytes.
                unsafe { buf.set_len(buf.len() + n) };
                return Poll::Ready(Ok(n));
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Poll::Ready(Err(e)),
        }
    })
    .await
}
