//! The raw system calls of race-free opening: `openat2`, one-component
//! `openat`, `fstat` and `readlinkat`, each behind a typed wrapper.

use std::ffi::CStr;
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd};

/// `struct open_how` (`linux/openat2.h`).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct OpenHow {
    pub(super) flags: u64,
    pub(super) mode: u64,
    pub(super) resolve: u64,
}

/// `openat2(dir, path, how)`: a new descriptor.
pub(super) fn openat2(dir: BorrowedFd<'_>, path: &CStr, how: &OpenHow) -> io::Result<OwnedFd> {
    // Safety: `path` is NUL-terminated and `how` a valid `struct open_how` of
    // the size passed; both outlive the call, which writes no memory of ours.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_openat2,
            dir.as_raw_fd(),
            path.as_ptr(),
            how as *const OpenHow,
            std::mem::size_of::<OpenHow>(),
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    let fd = i32::try_from(fd).map_err(|_| io::Error::from_raw_os_error(libc::EBADF))?;
    // Safety: a fresh descriptor nobody else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// `openat(dir, name, flags)`: a new descriptor.
pub(super) fn openat(dir: BorrowedFd<'_>, name: &CStr, flags: i32) -> io::Result<OwnedFd> {
    // Safety: `name` is NUL-terminated and outlives the call.
    let fd = unsafe { libc::openat(dir.as_raw_fd(), name.as_ptr(), flags) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // Safety: a fresh descriptor nobody else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// `fstat(fd)`.
pub(crate) fn fstat(fd: BorrowedFd<'_>) -> io::Result<libc::stat> {
    let mut st = std::mem::MaybeUninit::<libc::stat>::zeroed();
    // Safety: `st` is writable memory of the size of `struct stat`.
    if unsafe { libc::fstat(fd.as_raw_fd(), st.as_mut_ptr()) } != 0 {
        return Err(io::Error::last_os_error());
    }
    // Safety: fstat succeeded and filled the whole structure.
    Ok(unsafe { st.assume_init() })
}

/// `readlinkat(fd, "")` into `buf`: how many bytes the target has there.
pub(super) fn readlink_fd(fd: BorrowedFd<'_>, buf: &mut [u8]) -> io::Result<usize> {
    // Safety: `buf` is writable for its length; the empty path names `fd` itself.
    let n = unsafe {
        libc::readlinkat(
            fd.as_raw_fd(),
            c"".as_ptr(),
            buf.as_mut_ptr().cast(),
            buf.len(),
        )
    };
    usize::try_from(n).map_err(|_| io::Error::last_os_error())
}
