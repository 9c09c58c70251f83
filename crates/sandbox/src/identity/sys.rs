//! The raw system calls of the identity module, each behind a typed wrapper.

use std::io;

/// `CAP_SYS_ADMIN` (`linux/capability.h`).
const CAP_SYS_ADMIN: u32 = 21;

/// `getresuid()`: real, effective and saved uid.
pub(crate) fn uids() -> (u32, u32, u32) {
    let (mut r, mut e, mut s) = (0, 0, 0);
    // Safety: getresuid writes three uid_t into our locals and cannot fail
    // with valid pointers.
    unsafe { libc::getresuid(&mut r, &mut e, &mut s) };
    (r, e, s)
}

/// `getresgid()`: real, effective and saved gid.
pub(crate) fn gids() -> (u32, u32, u32) {
    let (mut r, mut e, mut s) = (0, 0, 0);
    // Safety: getresgid writes three gid_t into our locals.
    unsafe { libc::getresgid(&mut r, &mut e, &mut s) };
    (r, e, s)
}

/// `unshare(flags)`.
pub(crate) fn unshare(flags: libc::c_int) -> io::Result<()> {
    // Safety: unshare takes no pointers.
    if unsafe { libc::unshare(flags) } == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Whether the calling thread holds CAP_SYS_ADMIN in its effective set (in
/// its own user namespace).
pub(crate) fn holds_sys_admin() -> bool {
    #[repr(C)]
    struct Header {
        version: u32,
        pid: i32,
    }
    #[repr(C)]
    #[derive(Default, Clone, Copy)]
    struct Data {
        effective: u32,
        permitted: u32,
        inheritable: u32,
    }
    let mut hdr = Header {
        version: 0x2008_0522,
        pid: 0,
    };
    let mut data = [Data::default(); 2];
    // Safety: capget writes one header and two data structs, all ours.
    let r = unsafe { libc::syscall(libc::SYS_capget, &mut hdr as *mut Header, data.as_mut_ptr()) };
    r == 0 && data[0].effective & (1 << CAP_SYS_ADMIN) != 0
}

/// `fork()` then `f` in the child, which exits with `f`'s value; the
/// child's exit code (or `None` when it did not exit normally or could not be
/// started). `f` runs in a copy of a possibly multi-threaded process: it must
/// only make system calls on memory prepared before (no allocation, no locks).
pub(crate) fn in_child(f: impl FnOnce() -> i32) -> Option<i32> {
    // Safety: the child runs only `f`, which the caller restricts to raw
    // system calls on prepared memory, then `_exit`s without unwinding.
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        return None;
    }
    if pid == 0 {
        let code = f();
        // Safety: _exit ends the child without running the parent's destructors.
        unsafe { libc::_exit(code) };
    }
    let mut status = 0;
    loop {
        // Safety: waits for our own child; writes one int.
        let r = unsafe { libc::waitpid(pid, &mut status, 0) };
        if r == pid {
            break;
        }
        if io::Error::last_os_error().raw_os_error() != Some(libc::EINTR) {
            return None;
        }
    }
    libc::WIFEXITED(status).then(|| libc::WEXITSTATUS(status))
}

/// Writes `bytes` to the existing file `path` (NUL-terminated) in one
/// `write`: for `/proc/self/*` files, which take a whole value per write.
/// Raw calls only (safe in a forked child).
pub(crate) fn write_proc(path: &[u8], bytes: &[u8]) -> Result<(), i32> {
    debug_assert_eq!(path.last(), Some(&0));
    // Safety: `path` is NUL-terminated (checked by the callers' literals).
    let fd = unsafe { libc::open(path.as_ptr().cast(), libc::O_WRONLY | libc::O_CLOEXEC) };
    if fd < 0 {
        return Err(errno());
    }
    // Safety: writes `bytes.len()` bytes from a live slice to our descriptor.
    let n = unsafe { libc::write(fd, bytes.as_ptr().cast(), bytes.len()) };
    let err = errno();
    // Safety: closes the descriptor opened above.
    unsafe { libc::close(fd) };
    if n == bytes.len() as isize {
        Ok(())
    } else {
        Err(if n < 0 { err } else { libc::EIO })
    }
}

/// The calling thread's errno.
fn errno() -> i32 {
    io::Error::last_os_error()
        .raw_os_error()
        .unwrap_or(libc::EIO)
}
