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

/// A new user namespace whose uid and gid maps are `uid_map` and `gid_map`
/// (written by this process, which must be privileged over its own
/// namespace for maps of more than its own ids), as a descriptor of its
/// `ns/user`. A forked helper enters it (`unshare(CLONE_NEWUSER)`; the fork
/// is single-threaded, whatever this process is) and waits until the maps
/// are written and the namespace opened, then exits; the helper makes raw
/// calls only, so this is safe in a multithreaded process.
pub(crate) fn user_namespace_with_maps(
    uid_map: &[u8],
    gid_map: &[u8],
) -> io::Result<std::os::fd::OwnedFd> {
    use std::io::{Read, Write};
    use std::os::fd::{FromRawFd, OwnedFd};

    let pipe = || -> io::Result<(OwnedFd, OwnedFd)> {
        let mut fds = [0; 2];
        // Safety: pipe2 writes two descriptors into `fds`.
        if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } < 0 {
            return Err(io::Error::last_os_error());
        }
        // Safety: both are fresh descriptors nobody else owns.
        Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
    };
    // `ready`: the helper says it is in the namespace (or why not); `done`:
    // closed by this process when it no longer needs the helper.
    let (ready_r, ready_w) = pipe()?;
    let (done_r, done_w) = pipe()?;
    let raw = std::os::fd::AsRawFd::as_raw_fd;
    let (ready_r_fd, ready_w_fd, done_r_fd, done_w_fd) =
        (raw(&ready_r), raw(&ready_w), raw(&done_r), raw(&done_w));
    // Safety: the child makes raw system calls on its own locals only, then
    // `_exit`s without unwinding or running destructors.
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        return Err(io::Error::last_os_error());
    }
    if pid == 0 {
        // Safety: raw calls on integers and locals, then _exit.
        unsafe {
            // Only its own two ends stay open: a helper forked at the same
            // time by another thread would otherwise hold this one's `done`
            // write end (and this one the other's), and neither would see
            // end of file (O_CLOEXEC does nothing without an exec).
            let (lo, hi) = if ready_w_fd < done_r_fd {
                (ready_w_fd as libc::c_uint, done_r_fd as libc::c_uint)
            } else {
                (done_r_fd as libc::c_uint, ready_w_fd as libc::c_uint)
            };
            let close_range = |a: libc::c_uint, b: libc::c_uint| {
                libc::syscall(libc::SYS_close_range, a, b, 0);
            };
            if lo > 0 {
                close_range(0, lo - 1);
            }
            if hi > lo + 1 {
                close_range(lo + 1, hi - 1);
            }
            close_range(hi + 1, libc::c_uint::MAX);
            let _ = (ready_r_fd, done_w_fd);
            let errno: i32 = if libc::unshare(libc::CLONE_NEWUSER) == 0 {
                0
            } else {
                *libc::__errno_location()
            };
            libc::write(ready_w_fd, (&errno as *const i32).cast(), 4);
            let mut b = 0u8;
            libc::read(done_r_fd, (&mut b as *mut u8).cast(), 1);
            libc::_exit(0);
        }
    }
    drop(ready_w);
    drop(done_r);
    let result = (|| {
        let mut word = [0u8; 4];
        std::fs::File::from(ready_r)
            .read_exact(&mut word)
            .map_err(|_| io::Error::other("the user namespace helper ended early"))?;
        let errno = i32::from_ne_bytes(word);
        if errno != 0 {
            return Err(io::Error::from_raw_os_error(errno));
        }
        for (name, map) in [("uid_map", uid_map), ("gid_map", gid_map)] {
            std::fs::OpenOptions::new()
                .write(true)
                .open(format!("/proc/{pid}/{name}"))
                .and_then(|mut f| f.write_all(map))
                .map_err(|e| io::Error::new(e.kind(), format!("/proc/{pid}/{name}: {e}")))?;
        }
        let ns = std::fs::File::open(format!("/proc/{pid}/ns/user"))?;
        Ok(OwnedFd::from(ns))
    })();
    // A byte, not only the close: the helper wakes even if a copy of this
    // end was inherited somewhere.
    let mut done_w = std::fs::File::from(done_w);
    let _ = done_w.write(&[1]);
    drop(done_w);
    let mut status = 0;
    loop {
        // Safety: waits for our own child; writes one int.
        let r = unsafe { libc::waitpid(pid, &mut status, 0) };
        if r == pid || io::Error::last_os_error().raw_os_error() != Some(libc::EINTR) {
            break;
        }
    }
    result
}

#[cfg(test)]
mod tests {
    /// Helpers forked at the same time by several threads each inherited
    /// the others' `done` write end and waited for an end of file that never
    /// came (the in-process server suite hung in `waitpid`). Sixteen threads
    /// making namespaces at once must all be done within the bound.
    #[test]
    fn namespaces_made_by_many_threads_at_once_do_not_wait_for_each_other() {
        let (tx, rx) = std::sync::mpsc::channel();
        for _ in 0..16 {
            let tx = tx.clone();
            std::thread::spawn(move || {
                for _ in 0..10 {
                    let r = super::user_namespace_with_maps(b"0 0 1\n", b"0 0 1\n");
                    tx.send(r.map(drop).map_err(|e| e.to_string()))
                        .expect("send");
                }
            });
        }
        drop(tx);
        for _ in 0..160 {
            let r = rx
                .recv_timeout(std::time::Duration::from_secs(30))
                .expect("a namespace helper hung");
            r.expect("a user namespace with maps");
        }
    }
}
