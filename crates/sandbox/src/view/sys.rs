//! The raw system calls of the filesystem view: `unshare`, `mount`,
//! `open_tree`, `move_mount`, `mount_setattr` and the `fsopen` family (a
//! detached tmpfs for masks), each behind a typed wrapper. They run on the
//! view's build thread only (never in the spawned child, whose `setns` is in
//! `spawn::sys`).

use std::ffi::CString;
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

/// `OPEN_TREE_CLONE` (`linux/mount.h`): a detached copy of the mount.
const OPEN_TREE_CLONE: libc::c_uint = 1;
/// `AT_RECURSIVE`: with every mount beneath it.
const AT_RECURSIVE: libc::c_uint = 0x8000;
/// `MOVE_MOUNT_F_EMPTY_PATH`: the source is the descriptor itself.
const MOVE_MOUNT_F_EMPTY_PATH: libc::c_uint = 0x04;
/// `MOUNT_ATTR_RDONLY`.
const MOUNT_ATTR_RDONLY: u64 = 0x1;
/// `MOUNT_ATTR_NOSUID`.
const MOUNT_ATTR_NOSUID: u64 = 0x2;
/// `MOUNT_ATTR_NODEV`.
const MOUNT_ATTR_NODEV: u64 = 0x4;
/// `MOUNT_ATTR_NOEXEC`.
const MOUNT_ATTR_NOEXEC: u64 = 0x8;
/// `MOUNT_ATTR_IDMAP`.
const MOUNT_ATTR_IDMAP: u64 = 0x0010_0000;
/// `FSOPEN_CLOEXEC`.
const FSOPEN_CLOEXEC: libc::c_uint = 1;
/// `FSMOUNT_CLOEXEC`.
const FSMOUNT_CLOEXEC: libc::c_uint = 1;
/// `FSCONFIG_SET_FLAG`.
const FSCONFIG_SET_FLAG: libc::c_uint = 0;
/// `FSCONFIG_SET_STRING`.
const FSCONFIG_SET_STRING: libc::c_uint = 1;
/// `FSCONFIG_SET_FD`.
const FSCONFIG_SET_FD: libc::c_uint = 5;
/// `FSCONFIG_CMD_CREATE`.
const FSCONFIG_CMD_CREATE: libc::c_uint = 6;

/// `fsconfig(fs, FSCONFIG_CMD_CREATE)`: the configured filesystem context
/// `fs` makes its superblock.
fn fs_create(fs: BorrowedFd<'_>) -> io::Result<()> {
    // Safety: no pointers.
    check(unsafe {
        libc::syscall(
            libc::SYS_fsconfig,
            fs.as_raw_fd(),
            FSCONFIG_CMD_CREATE,
            std::ptr::null::<libc::c_char>(),
            std::ptr::null::<libc::c_char>(),
            0,
        )
    })
    .map(drop)
}

/// `struct mount_attr` (`linux/mount.h`).
#[repr(C)]
#[derive(Debug, Default)]
struct MountAttr {
    attr_set: u64,
    attr_clr: u64,
    propagation: u64,
    userns_fd: u64,
}

fn c_path(p: &Path) -> io::Result<CString> {
    CString::new(p.as_os_str().as_bytes()).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))
}

fn check(ret: libc::c_long) -> io::Result<libc::c_long> {
    if ret < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(ret)
    }
}

fn owned(ret: libc::c_long) -> io::Result<OwnedFd> {
    let fd = i32::try_from(check(ret)?).map_err(|_| io::Error::from_raw_os_error(libc::EBADF))?;
    // Safety: a fresh descriptor returned by the kernel that nobody else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// `unshare(CLONE_FS | CLONE_NEWNS)`: this thread gets its own root and
/// working directory, and a private copy of the mount tree.
pub(crate) fn unshare_mounts() -> io::Result<()> {
    // Safety: unshare takes no pointers.
    check(unsafe { libc::unshare(libc::CLONE_FS | libc::CLONE_NEWNS) }.into()).map(drop)
}

/// `mount(NULL, "/", NULL, MS_REC | MS_SLAVE)`: nothing done in this
/// namespace propagates back to the host; the host's later mounts still
/// arrive.
pub(crate) fn make_slave() -> io::Result<()> {
    let root = c"/";
    // Safety: `root` is NUL-terminated; null type, source and data are allowed
    // for a propagation change.
    let ret = unsafe {
        libc::mount(
            std::ptr::null(),
            root.as_ptr(),
            std::ptr::null(),
            libc::MS_REC | libc::MS_SLAVE,
            std::ptr::null(),
        )
    };
    check(ret.into()).map(drop)
}

/// `open_tree(fd, "", OPEN_TREE_CLONE | AT_EMPTY_PATH | AT_RECURSIVE?)`: a
/// detached bind of `path` (with the mounts beneath it when `recursive`),
/// `path` opened first without following any symbolic link on the way or
/// at its end (`ELOOP`). A path the plan saw as a file or directory that a
/// tool swapped for a link must not be cloned through it: the link would be
/// resolved against the host's root (a view is assembled before its pivot),
/// and the host file it names bound into the view. Absolute paths from the
/// host's root, relative ones from the working directory (the new root
/// while a view is assembled).
pub(crate) fn clone_tree(path: &Path, recursive: bool) -> io::Result<OwnedFd> {
    let fd = if path.is_absolute() {
        crate::open::open_no_symlinks(path)?
    } else {
        // Safety: AT_FDCWD is no descriptor we own; "." names the cwd.
        let cwd = owned(unsafe {
            libc::openat(
                libc::AT_FDCWD,
                c".".as_ptr(),
                libc::O_PATH | libc::O_DIRECTORY | libc::O_CLOEXEC,
            ) as libc::c_long
        })?;
        crate::open::open_beneath_no_symlinks(cwd.as_fd(), path)?
    };
    let mut flags =
        OPEN_TREE_CLONE | libc::O_CLOEXEC as libc::c_uint | libc::AT_EMPTY_PATH as libc::c_uint;
    if recursive {
        flags |= AT_RECURSIVE;
    }
    // Safety: a valid descriptor and an empty NUL-terminated path.
    owned(unsafe { libc::syscall(libc::SYS_open_tree, fd.as_raw_fd(), c"".as_ptr(), flags) })
}

/// `open_tree(dir, name, OPEN_TREE_CLONE)`: a detached bind of `name`
/// beneath `dir` (a file of a detached tmpfs, say).
pub(crate) fn clone_at(dir: BorrowedFd<'_>, name: &Path) -> io::Result<OwnedFd> {
    let c = c_path(name)?;
    let flags = OPEN_TREE_CLONE | libc::O_CLOEXEC as libc::c_uint;
    // Safety: `c` is NUL-terminated and outlives the call.
    owned(unsafe { libc::syscall(libc::SYS_open_tree, dir.as_raw_fd(), c.as_ptr(), flags) })
}

/// `move_mount(tree, "", AT_FDCWD, target, MOVE_MOUNT_F_EMPTY_PATH)`:
/// attaches the detached `tree` on top of `target` (not following a
/// symbolic link there).
pub(crate) fn attach(tree: BorrowedFd<'_>, target: &Path) -> io::Result<()> {
    let t = c_path(target)?;
    // Safety: both strings are NUL-terminated and outlive the call.
    let ret = unsafe {
        libc::syscall(
            libc::SYS_move_mount,
            tree.as_raw_fd(),
            c"".as_ptr(),
            libc::AT_FDCWD,
            t.as_ptr(),
            MOVE_MOUNT_F_EMPTY_PATH,
        )
    };
    check(ret).map(drop)
}

/// `mount_setattr(fd, "", AT_EMPTY_PATH | AT_RECURSIVE, {attr_set: RDONLY})`:
/// a detached tree read-only, with every mount in it.
pub(crate) fn make_tree_read_only(fd: BorrowedFd<'_>) -> io::Result<()> {
    let c = CString::default();
    set_attr_flags(
        fd.as_raw_fd(),
        &c,
        libc::AT_EMPTY_PATH as libc::c_uint | AT_RECURSIVE,
        MOUNT_ATTR_RDONLY,
        0,
    )
}

/// `mount_setattr(fd, "", AT_EMPTY_PATH | AT_RECURSIVE?, {attr_set: IDMAP,
/// userns_fd})`: the detached tree `fd` (each mount in it when `recursive`)
/// shows its files' owners through the id maps of the user namespace
/// `userns`. The kernel refuses with `EINVAL` a file system that takes no id
/// maps (`devtmpfs`, `proc`, NFS, ...) anywhere in the tree, and with
/// `EPERM` a mount that has them already.
pub(crate) fn set_id_map(
    fd: BorrowedFd<'_>,
    userns: BorrowedFd<'_>,
    recursive: bool,
) -> io::Result<()> {
    let c = CString::default();
    let mut flags = libc::AT_EMPTY_PATH as libc::c_uint;
    if recursive {
        flags |= AT_RECURSIVE;
    }
    let attr = MountAttr {
        attr_set: MOUNT_ATTR_IDMAP,
        userns_fd: userns.as_raw_fd() as u64,
        ..MountAttr::default()
    };
    // Safety: as in `set_attr_flags`.
    let ret = unsafe {
        libc::syscall(
            libc::SYS_mount_setattr,
            fd.as_raw_fd(),
            c.as_ptr(),
            flags,
            &attr as *const MountAttr,
            std::mem::size_of::<MountAttr>(),
        )
    };
    check(ret).map(drop)
}

/// `mount_setattr(AT_FDCWD, path, AT_RECURSIVE?, {attr_set: RDONLY})`.
pub(crate) fn make_read_only(path: &Path, recursive: bool) -> io::Result<()> {
    let c = c_path(path)?;
    set_attr(libc::AT_FDCWD, &c, recursive, MOUNT_ATTR_RDONLY, 0)
}

/// `mount_setattr(fd, "", AT_EMPTY_PATH, {attr_set})`.
fn set_attr_fd(fd: BorrowedFd<'_>, set: u64) -> io::Result<()> {
    let c = CString::default();
    let flags_fd = fd.as_raw_fd();
    set_attr_flags(flags_fd, &c, libc::AT_EMPTY_PATH as libc::c_uint, set, 0)
}

fn set_attr(dir: i32, c: &CString, recursive: bool, set: u64, clr: u64) -> io::Result<()> {
    let flags = if recursive { AT_RECURSIVE } else { 0 };
    set_attr_flags(dir, c, flags, set, clr)
}

fn set_attr_flags(
    dir: i32,
    c: &CString,
    flags: libc::c_uint,
    set: u64,
    clr: u64,
) -> io::Result<()> {
    let attr = MountAttr {
        attr_set: set,
        attr_clr: clr,
        ..MountAttr::default()
    };
    // Safety: `c` is NUL-terminated and `attr` a `struct mount_attr` of the
    // size passed; both outlive the call, which writes no memory of ours.
    let ret = unsafe {
        libc::syscall(
            libc::SYS_mount_setattr,
            dir,
            c.as_ptr(),
            flags,
            &attr as *const MountAttr,
            std::mem::size_of::<MountAttr>(),
        )
    };
    check(ret).map(drop)
}

/// A new, detached, empty tmpfs (mode 0555, 1 MiB at most, no set-id
/// files, devices or programs), still writable so that its caller can
/// create the few entries it needs before [`seal`]ing it.
pub(crate) fn detached_tmpfs() -> io::Result<OwnedFd> {
    tmpfs_with(c"0555")
}

/// A new, detached, empty tmpfs for a view's root (mode 0755, else as
/// [`detached_tmpfs`]).
pub(crate) fn detached_root() -> io::Result<OwnedFd> {
    tmpfs_with(c"0755")
}

fn tmpfs_with(mode: &std::ffi::CStr) -> io::Result<OwnedFd> {
    // Safety: the name is NUL-terminated.
    let fs = owned(unsafe { libc::syscall(libc::SYS_fsopen, c"tmpfs".as_ptr(), FSOPEN_CLOEXEC) })?;
    for (key, value) in [(c"mode", mode), (c"size", c"1m")] {
        // Safety: key and value are NUL-terminated; aux is unused.
        check(unsafe {
            libc::syscall(
                libc::SYS_fsconfig,
                fs.as_raw_fd(),
                FSCONFIG_SET_STRING,
                key.as_ptr(),
                value.as_ptr(),
                0,
            )
        })?;
    }
    fs_create(fs.as_fd())?;
    let attrs = (MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC) as libc::c_uint;
    // Safety: no pointers.
    owned(unsafe { libc::syscall(libc::SYS_fsmount, fs.as_raw_fd(), FSMOUNT_CLOEXEC, attrs) })
}

/// Makes the mount `fd` (a detached tmpfs) read-only.
pub(crate) fn seal(fd: BorrowedFd<'_>) -> io::Result<()> {
    set_attr_fd(fd, MOUNT_ATTR_RDONLY)
}

/// `mkdirat(dir, name, mode)`: `true` when made, `false` when something
/// was there already.
pub(crate) fn mkdir_at(dir: BorrowedFd<'_>, name: &Path, mode: libc::mode_t) -> io::Result<bool> {
    let c = c_path(name)?;
    // Safety: `c` is NUL-terminated and outlives the call.
    let ret = unsafe { libc::mkdirat(dir.as_raw_fd(), c.as_ptr(), mode) };
    if ret < 0 {
        let e = io::Error::last_os_error();
        if e.raw_os_error() == Some(libc::EEXIST) {
            return Ok(false);
        }
        return Err(e);
    }
    Ok(true)
}

/// Creates the empty file `name` beneath `dir` with `mode`, by `mknodat`:
/// the file is never opened. An open for writing, however brief, would let
/// a child another thread forks in that moment inherit the descriptor;
/// until that child execs, the mount has a writer, and sealing it read-only
/// fails with `EBUSY`.
pub(crate) fn create_at(dir: BorrowedFd<'_>, name: &Path, mode: libc::mode_t) -> io::Result<()> {
    let c = c_path(name)?;
    // Safety: `c` is NUL-terminated and outlives the call.
    let ret = unsafe { libc::mknodat(dir.as_raw_fd(), c.as_ptr(), libc::S_IFREG | mode, 0) };
    match check(ret.into()) {
        Err(e) if e.raw_os_error() == Some(libc::EEXIST) && is_regular_at(dir, &c) => Ok(()),
        r => r.map(drop),
    }
}

/// Whether `name` beneath `dir`, not followed, is a regular file.
fn is_regular_at(dir: BorrowedFd<'_>, name: &std::ffi::CStr) -> bool {
    // Safety: stat is plain old data; all-zero is a valid value.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // Safety: `name` is NUL-terminated and `st` is writable.
    let ret = unsafe {
        libc::fstatat(
            dir.as_raw_fd(),
            name.as_ptr(),
            &mut st,
            libc::AT_SYMLINK_NOFOLLOW,
        )
    };
    ret == 0 && st.st_mode & libc::S_IFMT == libc::S_IFREG
}

/// `open("/proc/thread-self/ns/mnt")`: this thread's mount namespace, kept
/// alive as long as the descriptor.
pub(crate) fn own_mount_namespace() -> io::Result<OwnedFd> {
    let f = std::fs::File::open("/proc/thread-self/ns/mnt")?;
    Ok(OwnedFd::from(f))
}

/// `fchdir(fd)`.
pub(crate) fn fchdir(fd: BorrowedFd<'_>) -> io::Result<()> {
    // Safety: no pointers.
    check(unsafe { libc::fchdir(fd.as_raw_fd()) }.into()).map(drop)
}

/// `chdir("/")`.
pub(crate) fn chdir_root() -> io::Result<()> {
    // Safety: a NUL-terminated literal.
    check(unsafe { libc::chdir(c"/".as_ptr()) }.into()).map(drop)
}

/// `open("/", O_PATH | O_DIRECTORY)`: the current root, to leave it later.
pub(crate) fn open_root() -> io::Result<OwnedFd> {
    // Safety: a NUL-terminated literal.
    owned(
        unsafe {
            libc::open(
                c"/".as_ptr(),
                libc::O_PATH | libc::O_DIRECTORY | libc::O_CLOEXEC,
            )
        }
        .into(),
    )
}

/// `pivot_root(".", ".")`: the working directory (a mount point) becomes
/// the root, and the old root is stacked on top of it, to be unmounted.
pub(crate) fn pivot_to_cwd() -> io::Result<()> {
    // Safety: NUL-terminated literals.
    check(unsafe { libc::syscall(libc::SYS_pivot_root, c".".as_ptr(), c".".as_ptr()) }).map(drop)
}

/// `umount2(".", MNT_DETACH)`: the mount whose root is the working directory.
pub(crate) fn detach_cwd() -> io::Result<()> {
    // Safety: a NUL-terminated literal.
    check(unsafe { libc::umount2(c".".as_ptr(), libc::MNT_DETACH) }.into()).map(drop)
}

/// `symlinkat(target, dir, name)`.
pub(crate) fn symlink_at(target: &Path, dir: BorrowedFd<'_>, name: &Path) -> io::Result<()> {
    let t = c_path(target)?;
    let n = c_path(name)?;
    // Safety: both strings are NUL-terminated and outlive the call.
    check(unsafe { libc::symlinkat(t.as_ptr(), dir.as_raw_fd(), n.as_ptr()) }.into()).map(drop)
}

/// `fchmodat(dir, name, mode)` and `fchownat(dir, name, uid, gid,
/// AT_SYMLINK_NOFOLLOW)`: best effort (a tmpfs of the view's skeleton
/// mirrors the host's modes and owners where it can).
pub(crate) fn set_mode_owner(dir: BorrowedFd<'_>, name: &Path, mode: u32, uid: u32, gid: u32) {
    let Ok(n) = c_path(name) else {
        return;
    };
    // Safety: `n` is NUL-terminated and outlives the calls; failures are
    // ignored on purpose (an unmapped owner in a user namespace, say).
    unsafe {
        libc::fchmodat(dir.as_raw_fd(), n.as_ptr(), mode as libc::mode_t, 0);
        libc::fchownat(
            dir.as_raw_fd(),
            n.as_ptr(),
            uid,
            gid,
            libc::AT_SYMLINK_NOFOLLOW,
        );
    }
}

/// `unshare(CLONE_FS)`: this thread gets its own root and working
/// directory, so that it may enter another mount namespace alone.
pub(crate) fn unshare_fs() -> io::Result<()> {
    // Safety: unshare takes no pointers.
    check(unsafe { libc::unshare(libc::CLONE_FS) }.into()).map(drop)
}

/// `setns(fd, CLONE_NEWNS)`: this thread (after [`unshare_fs`]) enters the
/// mount namespace `fd`; its root and working directory become that
/// namespace's root.
pub(crate) fn enter_mount_namespace(fd: BorrowedFd<'_>) -> io::Result<()> {
    // Safety: no pointers.
    check(unsafe { libc::setns(fd.as_raw_fd(), libc::CLONE_NEWNS) }.into()).map(drop)
}

/// `mount_setattr(AT_FDCWD, path, 0, {attr_clr: RDONLY})`: the mount at
/// `path` writable again (the view's root, while mount points are made).
pub(crate) fn make_writable(path: &Path) -> io::Result<()> {
    let c = c_path(path)?;
    set_attr(libc::AT_FDCWD, &c, false, 0, MOUNT_ATTR_RDONLY)
}

/// A detached overlay whose lower layer is the mount `lower` (read as it
/// is) and whose upper layer and work directory are the directories
/// `upper` and `work` (on one filesystem, empty at first), each given as a
/// descriptor (a detached clone, id-mapped where a root server's tools need
/// it: overlayfs takes id-mapped layers, not id maps of its own). With
/// `userxattr` (a server in a user namespace of its own) overlayfs keeps its
/// bookkeeping in `user.` extended attributes.
pub(crate) fn detached_overlay(
    lower: BorrowedFd<'_>,
    upper: BorrowedFd<'_>,
    work: BorrowedFd<'_>,
    userxattr: bool,
) -> io::Result<OwnedFd> {
    // Safety: the name is NUL-terminated.
    let fs =
        owned(unsafe { libc::syscall(libc::SYS_fsopen, c"overlay".as_ptr(), FSOPEN_CLOEXEC) })?;
    for (key, fd) in [
        (c"lowerdir+", lower),
        (c"upperdir", upper),
        (c"workdir", work),
    ] {
        // Safety: the key is NUL-terminated; the value is unused with a
        // descriptor.
        check(unsafe {
            libc::syscall(
                libc::SYS_fsconfig,
                fs.as_raw_fd(),
                FSCONFIG_SET_FD,
                key.as_ptr(),
                std::ptr::null::<libc::c_char>(),
                fd.as_raw_fd(),
            )
        })?;
    }
    if userxattr {
        // Safety: the key is NUL-terminated; a flag has no value.
        check(unsafe {
            libc::syscall(
                libc::SYS_fsconfig,
                fs.as_raw_fd(),
                FSCONFIG_SET_FLAG,
                c"userxattr".as_ptr(),
                std::ptr::null::<libc::c_char>(),
                0,
            )
        })?;
    }
    fs_create(fs.as_fd())?;
    // Safety: no pointers.
    owned(unsafe { libc::syscall(libc::SYS_fsmount, fs.as_raw_fd(), FSMOUNT_CLOEXEC, 0) })
}

/// `openat(dir, name, O_PATH | O_DIRECTORY | O_NOFOLLOW)`: a directory in
/// the (detached) tree `dir`.
pub(crate) fn open_dir_at(dir: BorrowedFd<'_>, name: &Path) -> io::Result<OwnedFd> {
    let c = c_path(name)?;
    // Safety: `c` is NUL-terminated and outlives the call.
    owned(
        unsafe {
            libc::openat(
                dir.as_raw_fd(),
                c.as_ptr(),
                libc::O_PATH | libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC,
            )
        }
        .into(),
    )
}

/// `open(path, O_PATH | O_NOFOLLOW)`: what is at `path` in this thread's
/// mount namespace, to make a Landlock rule of (a cache's overlay root).
pub(crate) fn open_path(path: &Path) -> io::Result<OwnedFd> {
    let c = c_path(path)?;
    // Safety: `c` is NUL-terminated and outlives the call.
    owned(
        unsafe {
            libc::open(
                c.as_ptr(),
                libc::O_PATH | libc::O_NOFOLLOW | libc::O_CLOEXEC,
            )
        }
        .into(),
    )
}
