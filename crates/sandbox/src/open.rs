//! Opening paths without being raced: `openat2(2)` with `RESOLVE_*` flags
//! (Linux 5.6), and an equivalent walk one component at a time with
//! `O_NOFOLLOW` where `openat2` cannot be used; and what an opened file *is*
//! (device and inode), the identity every cache of rules is keyed by.
//!
//! `openat2` cannot be used on a kernel without it, and on a thread that
//! carries the seccomp filter of confined runs (which answers it `ENOSYS`
//! for the tools: its mode argument is out of the filter's sight). The
//! server's own worker threads carry that filter once they have started a
//! confined tool, so an `ENOSYS` there says nothing about the kernel: only a
//! thread without any seccomp filter decides, for the whole process, that
//! the kernel has no `openat2`; a filtered thread walks from then on, alone.
//!
//! The sandbox opens a path once and works from the descriptor from then on:
//! a path looked up twice can name two different files if a tool swaps a
//! directory for a symbolic link in between (issue 14, hole 1).

use std::cell::Cell;
use std::collections::VecDeque;
use std::ffi::CString;
use std::ffi::OsString;
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};

mod sys;

use sys::OpenHow;

/// `RESOLVE_NO_MAGICLINKS` (`linux/openat2.h`): no `/proc/<pid>/fd/*`-style links.
const RESOLVE_NO_MAGICLINKS: u64 = 0x02;
/// `RESOLVE_NO_SYMLINKS`: no symbolic link at all, anywhere in the path.
const RESOLVE_NO_SYMLINKS: u64 = 0x04;
/// `RESOLVE_BENEATH`: the lookup may not leave the starting directory
/// (absolute paths, `..` above it and symbolic links leaving it are `EXDEV`).
const RESOLVE_BENEATH: u64 = 0x08;

/// What an opened file is: its device and inode. Two descriptors with the
/// same identity are the same file, whatever paths led to them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct FileId {
    /// `st_dev`.
    pub(crate) dev: u64,
    /// `st_ino`.
    pub(crate) ino: u64,
}

/// Set once `openat2` answered `ENOSYS` (or `EPERM`) on a thread without a
/// seccomp filter: the kernel has none (or a policy around the whole process
/// refuses it), and every later open walks.
static NO_OPENAT2: AtomicBool = AtomicBool::new(false);

/// The most symbolic links a walk follows (the kernel's own limit).
const MAX_LINKS: usize = 40;

thread_local! {
    /// `openat2` was refused on this thread, which carries a seccomp filter:
    /// this thread walks.
    static FILTERED_HERE: Cell<bool> = const { Cell::new(false) };
}

/// Whether to try `openat2` on this thread.
fn try_openat2() -> bool {
    !NO_OPENAT2.load(Ordering::Relaxed) && !FILTERED_HERE.with(Cell::get)
}

/// `openat2` was refused on this thread: remember it for the thread when a
/// seccomp filter on it may be why, else for the process.
fn openat2_refused() {
    if thread_has_seccomp_filter() {
        FILTERED_HERE.with(|f| f.set(true));
    } else {
        NO_OPENAT2.store(true, Ordering::Relaxed);
    }
}

/// Whether this thread runs under a seccomp filter (`Seccomp:` of
/// `/proc/thread-self/status` is not 0); unsure counts as yes.
fn thread_has_seccomp_filter() -> bool {
    std::fs::read_to_string("/proc/thread-self/status").map_or(true, |s| {
        s.lines()
            .find_map(|l| l.strip_prefix("Seccomp:"))
            .is_none_or(|v| v.trim() != "0")
    })
}

/// `openat(dir, name, O_PATH | O_NOFOLLOW | O_CLOEXEC)`: one component,
/// never following it.
fn open_component(dir: BorrowedFd<'_>, name: &CString) -> io::Result<OwnedFd> {
    sys::openat(dir, name, libc::O_PATH | libc::O_NOFOLLOW | libc::O_CLOEXEC)
}

/// The identity of `fd` and whether it is a directory (`fstat`).
pub(crate) fn identify(fd: BorrowedFd<'_>) -> io::Result<(FileId, libc::mode_t)> {
    let st = sys::fstat(fd)?;
    Ok((
        FileId {
            dev: st.st_dev,
            ino: st.st_ino,
        },
        st.st_mode & libc::S_IFMT,
    ))
}

/// The path the kernel has for `fd` now (`/proc/self/fd/N`), if it is an
/// absolute path to a file that still exists.
pub(crate) fn current_path(fd: BorrowedFd<'_>) -> Option<PathBuf> {
    let link = format!("/proc/self/fd/{}", fd.as_raw_fd());
    let p = std::fs::read_link(link).ok()?;
    let deleted = p.as_os_str().as_bytes().ends_with(b" (deleted)");
    (p.is_absolute() && !deleted).then_some(p)
}

fn c_path(p: &Path) -> io::Result<CString> {
    CString::new(p.as_os_str().as_bytes()).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))
}

/// Whether `e` says the kernel (or a seccomp filter around us) has no `openat2`.
fn no_openat2(e: &io::Error) -> bool {
    matches!(e.raw_os_error(), Some(libc::ENOSYS) | Some(libc::EPERM))
}

/// Opens `rel` beneath `dir` as an `O_PATH` descriptor: the lookup never
/// leaves `dir` (an absolute path, `..` above it or a symbolic link leading
/// out of it is `EXDEV`) and follows no magic link. Relative symbolic links
/// that stay beneath `dir` are followed, with or without `openat2`.
pub(crate) fn open_beneath(dir: BorrowedFd<'_>, rel: &Path) -> io::Result<OwnedFd> {
    match openat2_beneath(dir, rel, 0) {
        Some(r) => r,
        None => walk_beneath(dir, rel),
    }
}

/// `openat2(dir, rel, O_PATH, RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS |
/// extra)`, or `None` where there is no `openat2`.
fn openat2_beneath(dir: BorrowedFd<'_>, rel: &Path, extra: u64) -> Option<io::Result<OwnedFd>> {
    if !try_openat2() {
        return None;
    }
    let how = OpenHow {
        flags: (libc::O_PATH | libc::O_CLOEXEC) as u64,
        mode: 0,
        resolve: RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS | extra,
    };
    let target = if rel.as_os_str().is_empty() {
        Path::new(".")
    } else {
        rel
    };
    let c = match c_path(target) {
        Ok(c) => c,
        Err(e) => return Some(Err(e)),
    };
    match sys::openat2(dir, &c, &how) {
        Err(e) if no_openat2(&e) => {
            openat2_refused();
            None
        }
        other => Some(other),
    }
}

/// One step of a walk.
enum Step {
    Up,
    Name(OsString),
}

/// The steps of `p`; `Err(EXDEV)` for an absolute path.
fn steps(p: &Path) -> io::Result<Vec<Step>> {
    let mut out = Vec::new();
    for comp in p.components() {
        match comp {
            Component::CurDir => {}
            Component::ParentDir => out.push(Step::Up),
            Component::Normal(name) => out.push(Step::Name(name.to_os_string())),
            Component::RootDir | Component::Prefix(_) => {
                return Err(io::Error::from_raw_os_error(libc::EXDEV))
            }
        }
    }
    Ok(out)
}

/// The `openat2`-less [`open_beneath`]: one component at a time with
/// `O_NOFOLLOW`, keeping the descriptors of the directories above so that
/// `..` never climbs above `dir`. A symbolic link met on the way is read and
/// its target walked in its place: a relative one that stays beneath `dir`
/// is followed, an absolute one is `EXDEV`, more than 40 are `ELOOP`.
pub(crate) fn walk_beneath(dir: BorrowedFd<'_>, rel: &Path) -> io::Result<OwnedFd> {
    walk(dir, rel, true)
}

/// Opens `rel` beneath `dir` as an `O_PATH` descriptor, following no
/// symbolic link at all (`ELOOP` on the first one) and never leaving `dir`.
pub(crate) fn open_beneath_no_symlinks(dir: BorrowedFd<'_>, rel: &Path) -> io::Result<OwnedFd> {
    match openat2_beneath(dir, rel, RESOLVE_NO_SYMLINKS) {
        Some(r) => r,
        None => walk(dir, rel, false),
    }
}

/// The walk of [`walk_beneath`]; `follow: false` refuses every symbolic link
/// (`ELOOP`).
fn walk(dir: BorrowedFd<'_>, rel: &Path, follow: bool) -> io::Result<OwnedFd> {
    let mut stack: Vec<OwnedFd> = vec![dir.try_clone_to_owned()?];
    let mut pending: VecDeque<Step> = steps(rel)?.into();
    let mut links = 0;
    while let Some(step) = pending.pop_front() {
        let name = match step {
            Step::Up => {
                if stack.len() == 1 {
                    return Err(io::Error::from_raw_os_error(libc::EXDEV));
                }
                stack.pop();
                continue;
            }
            Step::Name(name) => name,
        };
        let top = stack.last().map(AsFd::as_fd).ok_or_else(ebadf)?;
        let (_, mode) = identify(top)?;
        if mode != libc::S_IFDIR {
            return Err(io::Error::from_raw_os_error(libc::ENOTDIR));
        }
        let next = open_component(top, &c_path(Path::new(&name))?)?;
        if identify(next.as_fd())?.1 != libc::S_IFLNK {
            stack.push(next);
            continue;
        }
        links += 1;
        if !follow || links > MAX_LINKS {
            return Err(io::Error::from_raw_os_error(libc::ELOOP));
        }
        let target = read_link(next.as_fd())?;
        for s in steps(&target)?.into_iter().rev() {
            pending.push_front(s);
        }
    }
    stack.pop().ok_or_else(ebadf)
}

/// The target of the symbolic link `fd` (an `O_PATH | O_NOFOLLOW` descriptor).
fn read_link(fd: BorrowedFd<'_>) -> io::Result<PathBuf> {
    let mut buf = vec![0u8; libc::PATH_MAX as usize];
    let n = sys::readlink_fd(fd, &mut buf)?;
    buf.truncate(n);
    Ok(PathBuf::from(
        <OsString as std::os::unix::ffi::OsStringExt>::from_vec(buf),
    ))
}

fn ebadf() -> io::Error {
    io::Error::from_raw_os_error(libc::EBADF)
}

/// Opens the absolute `path` as an `O_PATH` descriptor without following any
/// symbolic link on the way (`ELOOP` if there is one). For canonical paths,
/// which have none: a link found now was put there since they were made.
pub fn open_no_symlinks(path: &Path) -> io::Result<OwnedFd> {
    if !path.is_absolute() {
        return Err(io::Error::from_raw_os_error(libc::EINVAL));
    }
    if try_openat2() {
        let how = OpenHow {
            flags: (libc::O_PATH | libc::O_CLOEXEC) as u64,
            mode: 0,
            resolve: RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS,
        };
        // Safety: AT_FDCWD is not a descriptor we own; the path is absolute,
        // so the kernel does not use it.
        let cwd = unsafe { BorrowedFd::borrow_raw(libc::AT_FDCWD) };
        match sys::openat2(cwd, &c_path(path)?, &how) {
            Err(e) if no_openat2(&e) => openat2_refused(),
            other => return other,
        }
    }
    let root = OwnedFd::from(std::fs::File::open("/")?);
    let rel = path.strip_prefix("/").unwrap_or(path);
    walk(root.as_fd(), rel, false)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    #[test]
    fn a_walk_follows_at_most_forty_links() {
        let t = tempfile::tempdir().unwrap();
        symlink("loop", t.path().join("loop")).unwrap();
        let e = walk_beneath(dir_fd(t.path()).as_fd(), Path::new("loop")).unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::ELOOP));
    }

    fn dir_fd(p: &Path) -> OwnedFd {
        OwnedFd::from(std::fs::File::open(p).unwrap())
    }

    #[test]
    fn beneath_refuses_what_leaves_and_follows_what_stays() {
        let t = tempfile::tempdir().unwrap();
        let base = t.path().join("base");
        std::fs::create_dir_all(base.join("sub/deeper")).unwrap();
        symlink("/", base.join("root")).unwrap();
        symlink("../..", base.join("sub/up")).unwrap();
        symlink("deeper", base.join("sub/inner")).unwrap();
        let fd = dir_fd(&base);
        let exdev = |r: io::Result<OwnedFd>| r.err().and_then(|e| e.raw_os_error());
        for walk in [false, true] {
            let open = |rel: &str| {
                if walk {
                    walk_beneath(fd.as_fd(), Path::new(rel))
                } else {
                    open_beneath(fd.as_fd(), Path::new(rel))
                }
            };
            assert_eq!(exdev(open("root")), Some(libc::EXDEV));
            assert_eq!(exdev(open("sub/up")), Some(libc::EXDEV));
            assert_eq!(exdev(open("..")), Some(libc::EXDEV));
            assert_eq!(exdev(open("/etc")), Some(libc::EXDEV));
            assert_eq!(exdev(open("missing")), Some(libc::ENOENT));
            let want = identify(dir_fd(&base.join("sub/deeper")).as_fd())
                .unwrap()
                .0;
            let got = open("sub/../sub/deeper").unwrap();
            assert_eq!(identify(got.as_fd()).unwrap().0, want);
            let inner = open("sub/inner").unwrap();
            assert_eq!(identify(inner.as_fd()).unwrap().0, want);
            let through = open("sub/inner/../deeper").unwrap();
            assert_eq!(identify(through.as_fd()).unwrap().0, want);
            let here = open("").unwrap();
            assert_eq!(
                identify(here.as_fd()).unwrap().0,
                identify(fd.as_fd()).unwrap().0
            );
        }
    }

    #[test]
    fn no_symlinks_refuses_a_link_anywhere_on_the_path() {
        let t = tempfile::tempdir().unwrap();
        let real = std::fs::canonicalize(t.path()).unwrap();
        std::fs::create_dir(real.join("d")).unwrap();
        symlink(real.join("d"), real.join("l")).unwrap();
        assert!(open_no_symlinks(&real.join("d")).is_ok());
        let e = open_no_symlinks(&real.join("l")).unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::ELOOP));
        let e = walk(
            dir_fd(Path::new("/")).as_fd(),
            real.join("l").strip_prefix("/").unwrap(),
            false,
        )
        .unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::ELOOP));
    }
}
