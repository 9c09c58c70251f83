//! The server's system calls: one small typed wrapper per call.
//!
//! A wrapper that takes integers, descriptors it borrows, or references is a
//! safe function: its one `unsafe` block and note stand here, once. The two
//! that cannot be made safe (`fork` of a process that may hold locks, and
//! what the watchdog's child does before it exits) are `unsafe fn`s with a
//! Safety section saying what the caller must guarantee.

use std::io;
use std::mem::MaybeUninit;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};

/// `Ok(())` when a libc call returned 0, else the errno as an error.
fn zero_or_errno(r: libc::c_int) -> io::Result<()> {
    if r == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// `pipe2(O_CLOEXEC)`: a new pipe, read end first.
pub(crate) fn pipe() -> io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0; 2];
    // Safety: pipe2 writes two descriptors into the array we own.
    zero_or_errno(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) })?;
    // Safety: both descriptors were just created and are owned by nobody else.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

/// `fcntl(F_SETFL, O_NONBLOCK)`: sets the descriptor's status flags to
/// non-blocking alone (for a new pipe, whose other status flags are clear).
pub(crate) fn set_status_nonblocking(fd: BorrowedFd<'_>) -> io::Result<()> {
    // Safety: fcntl with integer arguments on a descriptor the caller keeps open.
    zero_or_errno(unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_SETFL, libc::O_NONBLOCK) })
}

/// `fcntl(F_SETPIPE_SZ, size)`: grows the pipe behind `fd`.
pub(crate) fn set_pipe_size(fd: BorrowedFd<'_>, size: i32) -> io::Result<()> {
    // Safety: fcntl with integer arguments on a descriptor the caller keeps open.
    let r = unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_SETPIPE_SZ, size) };
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

/// `fcntl(F_SETFD, FD_CLOEXEC)`.
pub(crate) fn set_cloexec(fd: BorrowedFd<'_>) -> io::Result<()> {
    // Safety: fcntl with integer arguments on a descriptor the caller keeps open.
    let r = unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_SETFD, libc::FD_CLOEXEC) };
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

/// `read(fd, buf)` into memory that need not be initialised: how many bytes
/// were read (now initialised at the start of `buf`).
pub(crate) fn read(fd: BorrowedFd<'_>, buf: &mut [MaybeUninit<u8>]) -> io::Result<usize> {
    // Safety: the kernel writes at most `buf.len()` bytes into `buf`, which
    // we borrow mutably for the call.
    let n = unsafe { libc::read(fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) };
    usize::try_from(n).map_err(|_| io::Error::last_os_error())
}

/// `preadv2(fd, buf, -1, RWF_NOWAIT)`: reads like [`read`] from the current
/// position, but fails with `EAGAIN` instead of waiting, whether or not the
/// descriptor is non-blocking. Pipes honour it since Linux 5.9; older kernels
/// fail with `EOPNOTSUPP` (the caller then makes the descriptor
/// non-blocking).
pub(crate) fn read_nowait(fd: BorrowedFd<'_>, buf: &mut [MaybeUninit<u8>]) -> io::Result<usize> {
    let iov = libc::iovec {
        iov_base: buf.as_mut_ptr().cast(),
        iov_len: buf.len(),
    };
    // Safety: the kernel writes at most `iov_len` bytes at `iov_base`, which
    // points into `buf`, borrowed mutably for the call; it reads one iovec.
    let n = unsafe { libc::preadv2(fd.as_raw_fd(), &iov, 1, -1, libc::RWF_NOWAIT) };
    usize::try_from(n).map_err(|_| io::Error::last_os_error())
}

/// `inotify_init1(IN_NONBLOCK | IN_CLOEXEC)`.
pub(crate) fn inotify() -> io::Result<OwnedFd> {
    // Safety: inotify_init1 takes flags only.
    let fd = unsafe { libc::inotify_init1(libc::IN_NONBLOCK | libc::IN_CLOEXEC) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // Safety: a fresh descriptor owned by nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// `inotify_add_watch(fd, path, mask)` (the path followed if a symbolic
/// link): the watch descriptor.
pub(crate) fn inotify_watch(
    fd: BorrowedFd<'_>,
    path: &std::path::Path,
    mask: u32,
) -> io::Result<i32> {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(path.as_os_str().as_bytes())
        .map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
    // Safety: `c` is a NUL-terminated path alive for the call.
    let wd = unsafe { libc::inotify_add_watch(fd.as_raw_fd(), c.as_ptr(), mask) };
    if wd < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(wd)
}

/// `fstat(fd)`'s file type bits: whether `fd` is a socket (an error such as
/// EBADF when `fd` is not open).
pub(crate) fn is_socket(fd: RawFd) -> io::Result<bool> {
    let mut st = MaybeUninit::<libc::stat>::uninit();
    // Safety: fstat writes a `stat` into memory we own; the descriptor is
    // only a number to the kernel here.
    zero_or_errno(unsafe { libc::fstat(fd, st.as_mut_ptr()) })?;
    // Safety: fstat succeeded, so the structure is initialised.
    let st = unsafe { st.assume_init() };
    Ok(st.st_mode & libc::S_IFMT == libc::S_IFSOCK)
}

/// `setsockopt(SOL_SOCKET, SO_SNDBUF, bytes)`.
pub(crate) fn set_send_buffer(fd: BorrowedFd<'_>, bytes: i32) -> io::Result<()> {
    let size: libc::c_int = bytes;
    // Safety: setsockopt reads `size`, an int we own, for its length.
    zero_or_errno(unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_SNDBUF,
            (&size as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    })
}

/// `umask(mask)`: the previous mask.
pub(crate) fn umask(mask: libc::mode_t) -> libc::mode_t {
    // Safety: umask only swaps the process's file-creation mask.
    unsafe { libc::umask(mask) }
}

pub(crate) use toolsrv_base::process::kill;

/// `getpgid(pid)`: the process group of `pid`.
pub(crate) fn getpgid(pid: i32) -> io::Result<i32> {
    // Safety: getpgid takes an integer only.
    let g = unsafe { libc::getpgid(pid) };
    if g < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(g)
    }
}

/// `waitpid(pid, WNOHANG)`: whether the child `pid` was reaped.
pub(crate) fn reap_if_exited(pid: i32) -> bool {
    let mut status = 0;
    // Safety: waitpid writes the status into an int we own.
    unsafe { libc::waitpid(pid, &mut status, libc::WNOHANG) == pid }
}

/// `prctl(PR_SET_CHILD_SUBREAPER, 1)`.
pub(crate) fn set_child_subreaper() -> io::Result<()> {
    // Safety: prctl with integer arguments only.
    zero_or_errno(unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) })
}

/// `prctl(PR_SET_NAME, name)`: this thread's name (at most 15 bytes show).
pub(crate) fn set_thread_name(name: &std::ffi::CStr) -> io::Result<()> {
    // Safety: the kernel reads the NUL-terminated string `name` refers to.
    zero_or_errno(unsafe { libc::prctl(libc::PR_SET_NAME, name.as_ptr()) })
}

/// `signal(sig, SIG_IGN)`.
pub(crate) fn ignore_signal(sig: i32) -> io::Result<()> {
    // Safety: installs SIG_IGN, which runs no code of ours.
    if unsafe { libc::signal(sig, libc::SIG_IGN) } == libc::SIG_ERR {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

/// `setpgid(0, 0)`: this process leads a group of its own.
pub(crate) fn new_process_group() -> io::Result<()> {
    // Safety: setpgid with integer arguments only.
    zero_or_errno(unsafe { libc::setpgid(0, 0) })
}

/// `getrlimit(RLIMIT_NOFILE)`: (soft, hard).
pub(crate) fn nofile_limit() -> io::Result<(u64, u64)> {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // Safety: getrlimit writes the struct we own.
    zero_or_errno(unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) })?;
    Ok((lim.rlim_cur, lim.rlim_max))
}

/// `setrlimit(RLIMIT_NOFILE, soft, hard)`.
pub(crate) fn set_nofile_limit(soft: u64, hard: u64) -> io::Result<()> {
    let lim = libc::rlimit {
        rlim_cur: soft,
        rlim_max: hard,
    };
    // Safety: setrlimit reads the struct we own.
    zero_or_errno(unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &lim) })
}

/// `mmap(MAP_SHARED | MAP_ANONYMOUS)` of `len` zeroed bytes, readable and
/// writable, shared with children forked later; never unmapped.
pub(crate) fn map_shared_zeroed(len: usize) -> io::Result<*mut u8> {
    // Safety: a fresh anonymous mapping; no existing memory is touched.
    let p = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_SHARED | libc::MAP_ANONYMOUS,
            -1,
            0,
        )
    };
    if p == libc::MAP_FAILED {
        Err(io::Error::last_os_error())
    } else {
        Ok(p.cast())
    }
}

/// What [`fork`] returned in this process.
pub(crate) enum Forked {
    /// The new process.
    Child,
    /// This process (the child has its own pid).
    Parent,
}

/// `fork()`.
///
/// # Safety
/// The process is single-threaded: a fork of a multi-threaded process gives
/// the child copies of locks other threads may hold.
pub(crate) unsafe fn fork() -> io::Result<Forked> {
    // Safety: the caller guarantees the process is single-threaded.
    match unsafe { libc::fork() } {
        -1 => Err(io::Error::last_os_error()),
        0 => Ok(Forked::Child),
        _ => Ok(Forked::Parent),
    }
}

/// `dup2(fd, to)`, taking `fd`'s place: what was `fd` is now `to` alone.
///
/// # Safety
/// Nothing else in this process owns descriptor `to`.
pub(crate) unsafe fn move_fd(fd: OwnedFd, to: RawFd) -> io::Result<OwnedFd> {
    if fd.as_raw_fd() == to {
        return Ok(fd);
    }
    // Safety: `fd` is ours; `to` is owned by nobody (the caller's promise), so
    // replacing it closes nothing another owner uses.
    if unsafe { libc::dup2(fd.as_raw_fd(), to) } < 0 {
        return Err(io::Error::last_os_error());
    }
    // Safety: `to` is now a copy of `fd`, owned by nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(to) })
}

/// `close_range(first, ~0, 0)`: closes every descriptor from `first` on.
///
/// # Safety
/// No live owner (an `OwnedFd`, a `File`, the runtime) holds a descriptor
/// from `first` on, or none uses it again.
pub(crate) unsafe fn close_from(first: u32) -> io::Result<()> {
    // Safety: the caller vouches that no descriptor closed here is used again.
    zero_or_errno(unsafe { libc::close_range(first, u32::MAX, 0) })
}

/// `close(fd)` of a raw descriptor.
///
/// # Safety
/// No owner uses `fd` again.
pub(crate) unsafe fn close(fd: RawFd) {
    // Safety: the caller vouches that nothing uses `fd` again.
    unsafe { libc::close(fd) };
}

/// `_exit(code)`: ends the process without running exit handlers or destructors.
pub(crate) fn exit_now(code: i32) -> ! {
    // Safety: _exit only ends the process; nothing of ours runs after it.
    unsafe { libc::_exit(code) }
}

/// `mmap(MAP_SHARED)` of the first `len` bytes of the file `fd` (which must be
/// at least that long), readable and writable, shared with children forked
/// later and with whoever maps the file; never unmapped.
pub(crate) fn map_shared_file(fd: BorrowedFd<'_>, len: usize) -> io::Result<*mut u8> {
    // Safety: a fresh shared mapping of a file we opened; no existing memory
    // of ours is touched.
    let p = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_SHARED,
            fd.as_raw_fd(),
            0,
        )
    };
    if p == libc::MAP_FAILED {
        Err(io::Error::last_os_error())
    } else {
        Ok(p.cast())
    }
}

/// `pidfd_open(pid, 0)`: a descriptor that names process `pid` from now on,
/// whatever happens to the number.
pub(crate) fn pidfd_open(pid: i32) -> io::Result<OwnedFd> {
    // Safety: pidfd_open takes integers only.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    let fd = RawFd::try_from(fd).map_err(|_| io::Error::from_raw_os_error(libc::EBADF))?;
    // Safety: a fresh descriptor nobody else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// `poll` of one descriptor for `POLLIN`, at most `timeout_ms` (negative:
/// no limit). `Ok(true)` when it is readable (or hung up), `Ok(false)` on
/// timeout.
pub(crate) fn poll_readable(fd: BorrowedFd<'_>, timeout_ms: i32) -> io::Result<bool> {
    let mut p = libc::pollfd {
        fd: fd.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    // Safety: one pollfd of ours, alive for the call; the kernel writes only
    // its revents.
    let r = unsafe { libc::poll(&mut p, 1, timeout_ms) };
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r > 0)
    }
}

/// `mallopt(M_MMAP_THRESHOLD, 2 MiB)`: blocks of 2 MiB and more are mapped on
/// their own, so that the memory of a dismissed process's output (two such
/// blocks) goes back to the system when it is freed. glibc's default
/// threshold rises with every such block freed, after which they come from
/// the heap, whose freed pages it keeps: the server's memory then stays at
/// its high-water mark instead of following the retention budget (docs/containment.md
///). Call while single-threaded.
pub(crate) fn map_large_allocations() {
    #[cfg(target_env = "gnu")]
    // Safety: mallopt only changes a tuning parameter of the allocator.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, 2 << 20);
    }
}

/// Overwrite with `x` the value of every entry of the process's environment
/// block whose name starts with `prefix`: the bytes `/proc/<pid>/environ`
/// shows. The entries stay (the caller removes them with
/// `std::env::remove_var`).
///
/// # Safety
///
/// The process must be single-threaded: nothing else may read or change the
/// environment meanwhile.
pub(crate) unsafe fn blank_environ_values(prefix: &[u8]) {
    extern "C" {
        static mut environ: *const *mut libc::c_char;
    }
    // Safety: the caller guarantees no other thread touches the environment;
    // we only overwrite bytes inside the NUL-terminated strings the
    // environment array points to, never past their terminators.
    unsafe {
        let mut p = environ;
        while !p.is_null() && !(*p).is_null() {
            let entry = *p;
            let len = libc::strlen(entry);
            let bytes = std::slice::from_raw_parts_mut(entry.cast::<u8>(), len);
            if bytes.starts_with(prefix) {
                if let Some(eq) = bytes.iter().position(|&b| b == b'=') {
                    bytes[eq + 1..].fill(b'x');
                }
            }
            p = p.add(1);
        }
    }
}

/// A new anonymous file (`memfd_create`, close-on-exec) holding `data`,
/// its offset at 0: what a tool gets of a `file: true` argument.
pub(crate) fn memfd_with(name: &std::ffi::CStr, data: &[u8]) -> io::Result<OwnedFd> {
    // Safety: `name` is NUL-terminated and outlives the call.
    let fd = unsafe { libc::memfd_create(name.as_ptr(), libc::MFD_CLOEXEC) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // Safety: `fd` is a fresh descriptor owned by nobody else.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    let file = std::fs::File::from(fd);
    // Written at offsets, so the descriptor's own offset stays at 0 for a
    // tool that reads it directly (`cat <&3`).
    std::os::unix::fs::FileExt::write_all_at(&file, data, 0)?;
    Ok(OwnedFd::from(file))
}
