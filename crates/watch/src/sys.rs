//! The crate's system calls: one small typed wrapper per call.
//!
//! A wrapper that takes integers, descriptors it borrows, or references is a
//! safe function: its `unsafe` block and note stand here, once. Those the
//! reader calls after `clone` (see `reader.rs`) are plain system calls of
//! libc that allocate nothing and take no lock, which is what a child of a
//! multi-threaded process may call; they are marked "reader-safe".

use std::ffi::CStr;
use std::io;
use std::mem::MaybeUninit;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};

/// `FAN_REPORT_FID` and the other fanotify constants this crate uses (the
/// values of `<linux/fanotify.h>`; not every libc release has the newer ones).
pub(crate) mod fan {
    pub(crate) const CLOEXEC: u32 = 0x1;
    pub(crate) const NONBLOCK: u32 = 0x2;
    pub(crate) const UNLIMITED_QUEUE: u32 = 0x10;
    pub(crate) const UNLIMITED_MARKS: u32 = 0x20;
    pub(crate) const REPORT_FID: u32 = 0x200;
    pub(crate) const REPORT_DIR_FID: u32 = 0x400;
    pub(crate) const REPORT_NAME: u32 = 0x800;

    pub(crate) const MARK_ADD: u32 = 0x1;
    pub(crate) const MARK_REMOVE: u32 = 0x2;
    pub(crate) const MARK_DONT_FOLLOW: u32 = 0x4;
    pub(crate) const MARK_ONLYDIR: u32 = 0x8;
    pub(crate) const MARK_FILESYSTEM: u32 = 0x100;

    pub(crate) const CLOSE_WRITE: u64 = 0x8;
    pub(crate) const MOVED_FROM: u64 = 0x40;
    pub(crate) const MOVED_TO: u64 = 0x80;
    pub(crate) const CREATE: u64 = 0x100;
    pub(crate) const DELETE: u64 = 0x200;
    pub(crate) const Q_OVERFLOW: u64 = 0x4000;
    pub(crate) const EVENT_ON_CHILD: u64 = 0x0800_0000;
    pub(crate) const ONDIR: u64 = 0x4000_0000;

    pub(crate) const INFO_TYPE_FID: u8 = 1;
    pub(crate) const INFO_TYPE_DFID_NAME: u8 = 2;
    pub(crate) const INFO_TYPE_DFID: u8 = 3;
    pub(crate) const INFO_TYPE_OLD_DFID_NAME: u8 = 10;
    pub(crate) const INFO_TYPE_NEW_DFID_NAME: u8 = 12;

    /// `FANOTIFY_METADATA_VERSION`.
    pub(crate) const METADATA_VERSION: u8 = 3;
    /// `FAN_NOFD`.
    #[cfg(test)]
    pub(crate) const NOFD: i32 = -1;
}

/// `Ok(())` when a libc call returned 0, else the errno as an error.
fn zero_or_errno(r: libc::c_int) -> io::Result<()> {
    if r == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// A descriptor returned by a libc call, or the errno.
fn fd_or_errno(r: libc::c_int) -> io::Result<OwnedFd> {
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        // Safety: the call just returned this descriptor; nothing else owns it.
        Ok(unsafe { OwnedFd::from_raw_fd(r) })
    }
}

/// A byte count returned by a libc call, or the errno.
fn len_or_errno(r: isize) -> io::Result<usize> {
    usize::try_from(r).map_err(|_| io::Error::last_os_error())
}

/// `fanotify_init(flags, O_RDONLY | O_CLOEXEC)`.
pub(crate) fn fanotify_init(flags: u32) -> io::Result<OwnedFd> {
    // Safety: integer arguments only.
    fd_or_errno(unsafe {
        libc::fanotify_init(
            flags,
            (libc::O_RDONLY | libc::O_CLOEXEC | libc::O_LARGEFILE) as u32,
        )
    })
}

/// `fanotify_mark(group, flags, mask, AT_FDCWD, path)`.
pub(crate) fn fanotify_mark(
    group: BorrowedFd<'_>,
    flags: u32,
    mask: u64,
    path: &CStr,
) -> io::Result<()> {
    // Safety: `path` is a NUL-terminated string that outlives the call; the
    // group is a descriptor the caller keeps open.
    zero_or_errno(unsafe {
        libc::fanotify_mark(
            group.as_raw_fd(),
            flags,
            mask,
            libc::AT_FDCWD,
            path.as_ptr(),
        )
    })
}

/// `MAX_HANDLE_SZ`.
pub(crate) const MAX_HANDLE_SZ: usize = 128;

/// `struct file_handle` with room for the largest handle.
#[repr(C)]
struct HandleBuf {
    handle_bytes: u32,
    handle_type: i32,
    f_handle: [u8; MAX_HANDLE_SZ],
}

/// `name_to_handle_at(AT_FDCWD, path, AT_HANDLE_FID)`: `path`'s handle as
/// fanotify reports it (type and bytes), not following a final symbolic
/// link. Without `AT_HANDLE_FID` (before Linux 6.5) the plain export handle,
/// which is the same for the filesystems that can be exported.
pub(crate) fn name_to_handle(path: &CStr) -> io::Result<(i32, Vec<u8>)> {
    let mut try_flags = [libc::AT_HANDLE_FID, 0];
    let mut last = io::Error::from_raw_os_error(libc::EINVAL);
    for flags in try_flags.iter_mut() {
        let mut h = HandleBuf {
            handle_bytes: MAX_HANDLE_SZ as u32,
            handle_type: 0,
            f_handle: [0; MAX_HANDLE_SZ],
        };
        let mut mount_id: libc::c_int = 0;
        // Safety: `h` is a `struct file_handle` whose `handle_bytes` says how
        // much room follows it; `mount_id` and `path` are valid for the call.
        let r = unsafe {
            libc::name_to_handle_at(
                libc::AT_FDCWD,
                path.as_ptr(),
                (&mut h as *mut HandleBuf).cast(),
                &mut mount_id,
                *flags,
            )
        };
        if r == 0 {
            let n = (h.handle_bytes as usize).min(MAX_HANDLE_SZ);
            return Ok((h.handle_type, h.f_handle[..n].to_vec()));
        }
        last = io::Error::last_os_error();
        if last.raw_os_error() != Some(libc::EINVAL) {
            break;
        }
    }
    Err(last)
}

/// `open_by_handle_at(mount, handle, O_PATH | O_CLOEXEC)`: the object
/// `handle` names on `mount`'s filesystem (needs CAP_DAC_READ_SEARCH).
pub(crate) fn open_by_handle(
    mount: BorrowedFd<'_>,
    handle_type: i32,
    bytes: &[u8],
) -> io::Result<OwnedFd> {
    if bytes.len() > MAX_HANDLE_SZ {
        return Err(io::Error::from_raw_os_error(libc::EINVAL));
    }
    let mut h = HandleBuf {
        handle_bytes: bytes.len() as u32,
        handle_type,
        f_handle: [0; MAX_HANDLE_SZ],
    };
    h.f_handle[..bytes.len()].copy_from_slice(bytes);
    // Safety: `h` is a valid `struct file_handle` of `handle_bytes` bytes; the
    // mount descriptor is kept open by the caller.
    fd_or_errno(unsafe {
        libc::open_by_handle_at(
            mount.as_raw_fd(),
            (&mut h as *mut HandleBuf).cast(),
            libc::O_PATH | libc::O_CLOEXEC,
        )
    })
}

/// `fstatfs(fd).f_fsid`, as the two words fanotify reports.
pub(crate) fn fsid(fd: BorrowedFd<'_>) -> io::Result<[i32; 2]> {
    let mut st = MaybeUninit::<libc::statfs>::uninit();
    // Safety: fstatfs fills the struct we own on success.
    zero_or_errno(unsafe { libc::fstatfs(fd.as_raw_fd(), st.as_mut_ptr()) })?;
    // Safety: initialised by the successful call.
    let st = unsafe { st.assume_init() };
    // Safety: `fsid_t` is `#[repr(C)] struct { int __val[2]; }` (its field is
    // private in the libc crate): the same size and layout as `[i32; 2]`.
    Ok(unsafe { std::mem::transmute::<libc::fsid_t, [i32; 2]>(st.f_fsid) })
}

/// `openat(dir, name, flags | O_CLOEXEC, mode)`.
pub(crate) fn openat(
    dir: BorrowedFd<'_>,
    name: &CStr,
    flags: libc::c_int,
    mode: libc::mode_t,
) -> io::Result<OwnedFd> {
    // Safety: `name` is NUL-terminated and outlives the call.
    fd_or_errno(unsafe {
        libc::openat(
            dir.as_raw_fd(),
            name.as_ptr(),
            flags | libc::O_CLOEXEC,
            libc::c_uint::from(mode),
        )
    })
}

/// `open(path, flags | O_CLOEXEC)`.
pub(crate) fn open(path: &CStr, flags: libc::c_int) -> io::Result<OwnedFd> {
    // Safety: `path` is NUL-terminated and outlives the call.
    fd_or_errno(unsafe { libc::open(path.as_ptr(), flags | libc::O_CLOEXEC) })
}

/// `fstatat(dir, name, AT_SYMLINK_NOFOLLOW)` (`name` empty: `dir` itself,
/// with `AT_EMPTY_PATH`).
pub(crate) fn lstatat(dir: BorrowedFd<'_>, name: &CStr) -> io::Result<libc::stat> {
    let mut st = MaybeUninit::<libc::stat>::uninit();
    let flags = libc::AT_SYMLINK_NOFOLLOW
        | if name.is_empty() {
            libc::AT_EMPTY_PATH
        } else {
            0
        };
    // Safety: `name` is NUL-terminated; fstatat fills the struct we own.
    zero_or_errno(unsafe {
        libc::fstatat(dir.as_raw_fd(), name.as_ptr(), st.as_mut_ptr(), flags)
    })?;
    // Safety: initialised by the successful call.
    Ok(unsafe { st.assume_init() })
}

/// `renameat2(from_dir, from, to_dir, to, RENAME_NOREPLACE)`: never follows
/// either name, never replaces what is at `to`.
pub(crate) fn rename_noreplace(
    from_dir: BorrowedFd<'_>,
    from: &CStr,
    to_dir: BorrowedFd<'_>,
    to: &CStr,
) -> io::Result<()> {
    // Safety: both names are NUL-terminated and outlive the call.
    zero_or_errno(unsafe {
        libc::renameat2(
            from_dir.as_raw_fd(),
            from.as_ptr(),
            to_dir.as_raw_fd(),
            to.as_ptr(),
            libc::RENAME_NOREPLACE,
        )
    })
}

/// `renameat(from_dir, from, to_dir, to)`: replaces what is at `to`.
pub(crate) fn rename(
    from_dir: BorrowedFd<'_>,
    from: &CStr,
    to_dir: BorrowedFd<'_>,
    to: &CStr,
) -> io::Result<()> {
    // Safety: both names are NUL-terminated and outlive the call.
    zero_or_errno(unsafe {
        libc::renameat(
            from_dir.as_raw_fd(),
            from.as_ptr(),
            to_dir.as_raw_fd(),
            to.as_ptr(),
        )
    })
}

/// `unlinkat(dir, name, flags)` (`AT_REMOVEDIR` for a directory).
pub(crate) fn unlinkat(dir: BorrowedFd<'_>, name: &CStr, flags: libc::c_int) -> io::Result<()> {
    // Safety: `name` is NUL-terminated and outlives the call.
    zero_or_errno(unsafe { libc::unlinkat(dir.as_raw_fd(), name.as_ptr(), flags) })
}

/// `mkdirat(dir, name, mode)`.
pub(crate) fn mkdirat(dir: BorrowedFd<'_>, name: &CStr, mode: libc::mode_t) -> io::Result<()> {
    // Safety: `name` is NUL-terminated and outlives the call.
    zero_or_errno(unsafe { libc::mkdirat(dir.as_raw_fd(), name.as_ptr(), mode) })
}

/// `symlinkat(target, dir, name)`.
pub(crate) fn symlinkat(target: &CStr, dir: BorrowedFd<'_>, name: &CStr) -> io::Result<()> {
    // Safety: both strings are NUL-terminated and outlive the call.
    zero_or_errno(unsafe { libc::symlinkat(target.as_ptr(), dir.as_raw_fd(), name.as_ptr()) })
}

/// `readlinkat(dir, name)` (`name` empty: the link `dir` was opened on with
/// `O_PATH | O_NOFOLLOW`).
pub(crate) fn readlinkat(dir: BorrowedFd<'_>, name: &CStr) -> io::Result<Vec<u8>> {
    let mut buf = vec![0u8; libc::PATH_MAX as usize + 1];
    // Safety: the buffer is ours and as long as the length passed.
    let n = len_or_errno(unsafe {
        libc::readlinkat(
            dir.as_raw_fd(),
            name.as_ptr(),
            buf.as_mut_ptr().cast(),
            buf.len(),
        )
    })?;
    buf.truncate(n);
    Ok(buf)
}

/// The names in the directory `dir` (without `.` and `..`), read through a
/// duplicate of the descriptor (`fdopendir` takes the one it is given).
pub(crate) fn read_dir_names(dir: BorrowedFd<'_>) -> io::Result<Vec<Vec<u8>>> {
    let own = openat(dir, c".", libc::O_RDONLY | libc::O_DIRECTORY, 0)?;
    let raw = std::os::fd::IntoRawFd::into_raw_fd(own);
    // Safety: `raw` is a directory descriptor we own; fdopendir takes it over
    // (closedir closes it).
    let d = unsafe { libc::fdopendir(raw) };
    if d.is_null() {
        let e = io::Error::last_os_error();
        // Safety: fdopendir failed, so the descriptor is still ours.
        drop(unsafe { OwnedFd::from_raw_fd(raw) });
        return Err(e);
    }
    let mut names = Vec::new();
    loop {
        // Safety: `d` is an open directory stream used by this thread only.
        let e = unsafe { libc::readdir64(d) };
        if e.is_null() {
            break;
        }
        // Safety: readdir returned an entry whose name is NUL-terminated and
        // valid until the next readdir on `d`; it is copied at once.
        let name = unsafe { CStr::from_ptr((*e).d_name.as_ptr()) }.to_bytes();
        if name != b"." && name != b".." {
            names.push(name.to_vec());
        }
    }
    // Safety: `d` is open and not used again.
    unsafe { libc::closedir(d) };
    Ok(names)
}

/// `read(fd, buf)`. Reader-safe.
pub(crate) fn read(fd: RawFd, buf: &mut [u8]) -> io::Result<usize> {
    // Safety: the buffer is ours and as long as the length passed.
    len_or_errno(unsafe { libc::read(fd, buf.as_mut_ptr().cast(), buf.len()) })
}

/// `write(fd, buf)`.
pub(crate) fn write(fd: BorrowedFd<'_>, buf: &[u8]) -> io::Result<usize> {
    // Safety: the buffer is ours and as long as the length passed.
    len_or_errno(unsafe { libc::write(fd.as_raw_fd(), buf.as_ptr().cast(), buf.len()) })
}

/// `socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC)`.
pub(crate) fn seqpacket_pair() -> io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0; 2];
    // Safety: socketpair writes two descriptors into the array we own.
    zero_or_errno(unsafe {
        libc::socketpair(
            libc::AF_UNIX,
            libc::SOCK_SEQPACKET | libc::SOCK_CLOEXEC,
            0,
            fds.as_mut_ptr(),
        )
    })?;
    // Safety: both descriptors were just created and are owned by nobody else.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

/// `pipe2(O_CLOEXEC)`: a new pipe, read end first.
pub(crate) fn pipe() -> io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0; 2];
    // Safety: pipe2 writes two descriptors into the array we own.
    zero_or_errno(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC | libc::O_NONBLOCK) })?;
    // Safety: both descriptors were just created and are owned by nobody else.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

/// Room for one descriptor in a control message.
const FD_CMSG_SPACE: usize = 24;

/// `sendmsg(sock, buf, [fd])`: one message, with a descriptor passed along
/// when `fd` is given. Reader-safe.
pub(crate) fn send(sock: RawFd, buf: &[u8], fd: Option<RawFd>) -> io::Result<()> {
    let mut iov = libc::iovec {
        iov_base: buf.as_ptr() as *mut libc::c_void,
        iov_len: buf.len(),
    };
    #[repr(C, align(8))]
    struct Cmsg([u8; FD_CMSG_SPACE]);
    let mut cmsg = Cmsg([0; FD_CMSG_SPACE]);
    // Safety: an all-zero msghdr is valid (no name, no control).
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    if let Some(fd) = fd {
        // Safety: CMSG_SPACE/CMSG_LEN are pure computations.
        let (space, len) = unsafe {
            (
                libc::CMSG_SPACE(std::mem::size_of::<RawFd>() as u32) as usize,
                libc::CMSG_LEN(std::mem::size_of::<RawFd>() as u32) as usize,
            )
        };
        debug_assert!(space <= FD_CMSG_SPACE);
        msg.msg_control = cmsg.0.as_mut_ptr().cast();
        msg.msg_controllen = space as _;
        // Safety: the control buffer is aligned and `space` bytes long, room
        // for one header and one descriptor, so CMSG_FIRSTHDR is in it.
        unsafe {
            let h = libc::CMSG_FIRSTHDR(&msg);
            (*h).cmsg_level = libc::SOL_SOCKET;
            (*h).cmsg_type = libc::SCM_RIGHTS;
            (*h).cmsg_len = len as _;
            std::ptr::write_unaligned(libc::CMSG_DATA(h).cast::<RawFd>(), fd);
        }
    }
    loop {
        // Safety: `msg` points at the iovec and control buffer above, alive
        // for the call.
        let r = unsafe { libc::sendmsg(sock, &msg, libc::MSG_NOSIGNAL) };
        if r >= 0 {
            return Ok(());
        }
        let e = io::Error::last_os_error();
        if e.raw_os_error() != Some(libc::EINTR) {
            return Err(e);
        }
    }
}

/// `recvmsg(sock, buf)`: one message and the descriptor passed with it, if
/// any (received close-on-exec). `Ok((0, None))` at end of file. Reader-safe.
pub(crate) fn recv(sock: RawFd, buf: &mut [u8]) -> io::Result<(usize, Option<RawFd>)> {
    let mut iov = libc::iovec {
        iov_base: buf.as_mut_ptr().cast(),
        iov_len: buf.len(),
    };
    #[repr(C, align(8))]
    struct Cmsg([u8; FD_CMSG_SPACE]);
    let mut cmsg = Cmsg([0; FD_CMSG_SPACE]);
    // Safety: an all-zero msghdr is valid (no name, no control).
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = cmsg.0.as_mut_ptr().cast();
    msg.msg_controllen = FD_CMSG_SPACE as _;
    let n = loop {
        // Safety: `msg` points at our iovec and control buffer, alive for the call.
        let r = unsafe { libc::recvmsg(sock, &mut msg, libc::MSG_CMSG_CLOEXEC) };
        if r >= 0 {
            break r as usize;
        }
        let e = io::Error::last_os_error();
        if e.raw_os_error() != Some(libc::EINTR) {
            return Err(e);
        }
    };
    let mut fd = None;
    // Safety: the kernel filled `msg_control` with `msg_controllen` bytes of
    // control messages; the CMSG macros stay within them.
    unsafe {
        let mut h = libc::CMSG_FIRSTHDR(&msg);
        while !h.is_null() {
            if (*h).cmsg_level == libc::SOL_SOCKET && (*h).cmsg_type == libc::SCM_RIGHTS {
                let got = std::ptr::read_unaligned(libc::CMSG_DATA(h).cast::<RawFd>());
                if fd.is_none() {
                    fd = Some(got);
                } else {
                    libc::close(got);
                }
            }
            h = libc::CMSG_NXTHDR(&msg, h);
        }
    }
    Ok((n, fd))
}

/// `poll(fds, timeout_ms)`, retried on EINTR only when `timeout_ms` is -1.
/// Reader-safe.
pub(crate) fn poll(fds: &mut [libc::pollfd], timeout_ms: libc::c_int) -> io::Result<usize> {
    loop {
        // Safety: the array is ours and as long as the count passed.
        let r = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, timeout_ms) };
        if r >= 0 {
            return Ok(r as usize);
        }
        let e = io::Error::last_os_error();
        if e.raw_os_error() != Some(libc::EINTR) || timeout_ms >= 0 {
            return Err(e);
        }
    }
}

/// `close(fd)`. Reader-safe.
pub(crate) fn close(fd: RawFd) {
    // Safety: the caller owns `fd` and does not use it again.
    unsafe { libc::close(fd) };
}

/// `fcntl(fd, F_DUPFD, min)`: a copy of `fd` at `min` or above. Reader-safe.
pub(crate) fn dup_above(fd: RawFd, min: RawFd) -> io::Result<RawFd> {
    // Safety: integer arguments only.
    let r = unsafe { libc::fcntl(fd, libc::F_DUPFD, min) };
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r)
    }
}

/// `close_range(first, last, 0)`. Reader-safe.
pub(crate) fn close_range(first: u32, last: u32) {
    // Safety: integer arguments only; the caller owns every descriptor in range.
    unsafe { libc::close_range(first, last, 0) };
}

/// `fcntl(fd, F_SETFL, O_NONBLOCK)`. Reader-safe.
pub(crate) fn set_nonblocking(fd: RawFd) {
    // Safety: integer arguments only.
    unsafe {
        let fl = libc::fcntl(fd, libc::F_GETFL);
        if fl >= 0 {
            libc::fcntl(fd, libc::F_SETFL, fl | libc::O_NONBLOCK);
        }
    }
}

/// Resets every signal's disposition to SIG_DFL, SIGCHLD's to SIG_IGN (so
/// the kernel reaps the children of the reader, the orphans reparented to
/// it, as they end), and empties the signal mask. Reader-safe.
pub(crate) fn reader_signals() {
    for sig in 1..=64 {
        if sig == libc::SIGKILL || sig == libc::SIGSTOP {
            continue;
        }
        // Safety: an all-zero sigaction is SIG_DFL with no flags; sigaction
        // with a valid pointer and a signal number.
        unsafe {
            let mut sa: libc::sigaction = std::mem::zeroed();
            if sig == libc::SIGCHLD {
                sa.sa_sigaction = libc::SIG_IGN;
            }
            libc::sigaction(sig, &sa, std::ptr::null_mut());
        }
    }
    // Safety: an empty set, applied to this (single-threaded) process.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigprocmask(libc::SIG_SETMASK, &set, std::ptr::null_mut());
    }
}

/// `prctl(PR_SET_PDEATHSIG, SIGKILL)`, `setsid()` and `prctl(PR_SET_NAME)`:
/// the reader dies with the thread that made it, leads a session of its
/// own (a terminal's signals never reach it) and has a name `ps` shows.
/// Reader-safe.
pub(crate) fn reader_process(name: &CStr) -> io::Result<()> {
    // Safety: integer arguments, and a NUL-terminated name of at most 16 bytes.
    unsafe {
        if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0) != 0 {
            return Err(io::Error::last_os_error());
        }
        libc::setsid();
        libc::prctl(libc::PR_SET_NAME, name.as_ptr(), 0, 0, 0);
    }
    Ok(())
}

/// `_exit(code)`. Reader-safe.
pub(crate) fn exit(code: libc::c_int) -> ! {
    // Safety: ends the process without running anything of user space.
    unsafe { libc::_exit(code) }
}

/// What a [`clone_pid_namespace`] returned in this process.
pub(crate) enum Cloned {
    /// In the parent: the child's pid (in the caller's namespace) and pidfd.
    Parent(i32, OwnedFd),
    /// In the child: the first process of the new PID namespace.
    Child,
}

/// `clone(CLONE_NEWPID | CLONE_PIDFD | SIGCHLD)`, like `fork`: the child is
/// the first process (pid 1) of a new PID namespace, with a copy of this
/// process's memory.
///
/// # Safety
///
/// The process may have other threads, whose locks the child's copy of
/// memory holds as they were: the child must only make reader-safe calls
/// (no allocation, no lock, no formatting, no panic) until it exits.
pub(crate) unsafe fn clone_pid_namespace() -> io::Result<Cloned> {
    let mut pidfd: libc::c_int = -1;
    let flags = (libc::CLONE_NEWPID | libc::CLONE_PIDFD | libc::SIGCHLD) as libc::c_long;
    // Safety: a fork-like clone (no CLONE_VM, no new stack): the child
    // resumes here on its own copy of this stack. CLONE_PIDFD writes the
    // pidfd into `pidfd` (the third argument on every architecture).
    let r = unsafe {
        libc::syscall(
            libc::SYS_clone,
            flags,
            0 as libc::c_long,
            &mut pidfd as *mut libc::c_int,
            0 as libc::c_long,
            0 as libc::c_long,
        )
    };
    match r {
        0 => Ok(Cloned::Child),
        r if r < 0 => Err(io::Error::last_os_error()),
        pid => {
            // Safety: CLONE_PIDFD returned a fresh descriptor nobody else owns.
            let pidfd = unsafe { OwnedFd::from_raw_fd(pidfd) };
            Ok(Cloned::Parent(pid as i32, pidfd))
        }
    }
}

/// `setns(fd, CLONE_NEWPID)`: this thread's children are born in the PID
/// namespace `fd` names (the thread itself stays where it is).
pub(crate) fn setns_pid(fd: BorrowedFd<'_>) -> io::Result<()> {
    // Safety: integer arguments only.
    zero_or_errno(unsafe { libc::setns(fd.as_raw_fd(), libc::CLONE_NEWPID) })
}

/// `pidfd_send_signal(pidfd, SIGKILL)`.
pub(crate) fn kill_pidfd(pidfd: BorrowedFd<'_>) -> io::Result<()> {
    toolsrv_base::pidfd_send_signal(pidfd, libc::SIGKILL)
}

/// `waitid(P_PIDFD, pidfd, WEXITED | WNOHANG)`: whether the process was
/// reaped now (`false`: still running; ECHILD: reaped by someone else,
/// which counts as reaped).
pub(crate) fn reap_pidfd(pidfd: BorrowedFd<'_>) -> bool {
    let mut info = MaybeUninit::<libc::siginfo_t>::zeroed();
    // Safety: waitid fills the siginfo we own; integer arguments otherwise.
    let r = unsafe {
        libc::waitid(
            libc::P_PIDFD,
            pidfd.as_raw_fd() as libc::id_t,
            info.as_mut_ptr(),
            libc::WEXITED | libc::WNOHANG,
        )
    };
    if r != 0 {
        return io::Error::last_os_error().raw_os_error() == Some(libc::ECHILD);
    }
    // Safety: zero-initialised, and filled by the kernel when a child was reaped.
    unsafe { info.assume_init().si_pid() != 0 }
}

/// The inode of a namespace file (`/proc/<pid>/ns/pid`), which names it.
pub(crate) fn inode(fd: BorrowedFd<'_>) -> io::Result<u64> {
    Ok(lstatat(fd, c"")?.st_ino)
}

/// Whether this process holds CAP_SYS_ADMIN in the initial user namespace
/// (what a privileged fanotify group and a filesystem mark need): its
/// effective set has it and it is in the initial user namespace.
pub(crate) fn privileged() -> bool {
    let in_initial = std::fs::read_to_string("/proc/self/uid_map")
        .map(|m| {
            let f: Vec<&str> = m.split_whitespace().collect();
            f.len() == 3 && f[0] == "0" && f[1] == "0" && f[2] == "4294967295"
        })
        .unwrap_or(false);
    let has_cap = std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("CapEff:"))
                .and_then(|v| u64::from_str_radix(v.trim(), 16).ok())
        })
        .is_some_and(|eff| eff & (1 << 21) != 0);
    in_initial && has_cap
}

/// How many bytes are queued to read on `fd` (`FIONREAD`: a fanotify
/// group's queued events, a socket's queued data).
pub(crate) fn queued(fd: RawFd) -> io::Result<usize> {
    let mut n: libc::c_int = 0;
    // Safety: FIONREAD writes one int to the pointer given.
    let r = unsafe { libc::ioctl(fd, libc::FIONREAD, &mut n) };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(n.max(0) as usize)
}

/// A page shared with the reader across its `clone` (`MAP_SHARED`): two
/// counters of the batches it started and finished forwarding, so the
/// server can tell that nothing read from the group is still on its way
/// without asking.
pub(crate) struct SharedPage {
    ptr: *mut libc::c_void,
}

// Safety: the page holds only atomics, and is unmapped once, on drop.
unsafe impl Send for SharedPage {}
// Safety: as above.
unsafe impl Sync for SharedPage {}

impl SharedPage {
    /// A new zeroed page.
    pub(crate) fn new() -> io::Result<SharedPage> {
        // Safety: a fresh anonymous mapping, checked below.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                4096,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if ptr == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        Ok(SharedPage { ptr })
    }

    /// The counters: batches started, batches finished.
    pub(crate) fn counters(
        &self,
    ) -> (&std::sync::atomic::AtomicU64, &std::sync::atomic::AtomicU64) {
        // Safety: the page is mapped, zeroed, aligned to a page, and lives
        // as long as `self`; AtomicU64 has the layout of u64.
        unsafe {
            let p = self.ptr as *const std::sync::atomic::AtomicU64;
            (&*p, &*p.add(1))
        }
    }

    /// The raw address, for the reader's arguments.
    pub(crate) fn as_ptr(&self) -> *mut u64 {
        self.ptr as *mut u64
    }
}

impl Drop for SharedPage {
    fn drop(&mut self) {
        // Safety: mapped by `new`, unmapped once.
        unsafe { libc::munmap(self.ptr, 4096) };
    }
}
