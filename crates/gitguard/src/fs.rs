//! Reading a Git directory without following symbolic links out of it:
//! every name is opened relative to its parent directory's descriptor with
//! `O_NOFOLLOW` (`openat`), so a link planted anywhere below the directory
//! the inspection starts from is seen as a link, never followed, whatever a
//! running tool swaps meanwhile. Nothing but a regular file is ever opened
//! for reading (see `open_regular`), and it is read up to a bound.

use crate::Stamp;
use rustix::fs::{AtFlags, FileType, Mode, OFlags};
use rustix::io::Errno;
use std::ffi::{OsStr, OsString};
use std::io::Read as _;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

/// What a name in a directory is, not following a link.
pub(crate) enum Node {
    Missing,
    Dir,
    File { stamp: Stamp, executable: bool },
    Symlink(Stamp),
    Other(Stamp),
    Error(std::io::Error),
}

/// The outcome of reading a file that should be a small regular file.
pub(crate) enum Read {
    Bytes(Vec<u8>, Stamp),
    Missing,
    Symlink(Stamp),
    Dir,
    NotRegular(Stamp),
    TooLarge(Stamp),
    Error(std::io::Error),
}

#[allow(clippy::unnecessary_cast)] // the field types differ between architectures
fn stamp(st: &rustix::fs::Stat) -> Stamp {
    let ns = |s: i64, n: u64| i128::from(s) * 1_000_000_000 + i128::from(n);
    Stamp {
        dev: st.st_dev as u64,
        ino: st.st_ino as u64,
        size: st.st_size as u64,
        mtime_ns: ns(st.st_mtime as i64, st.st_mtime_nsec as u64),
        ctime_ns: ns(st.st_ctime as i64, st.st_ctime_nsec as u64),
    }
}

/// The kind of `name` in `dir`, without following it if it is a link.
pub(crate) fn node(dir: BorrowedFd<'_>, name: &OsStr) -> Node {
    match rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW) {
        Err(Errno::NOENT) | Err(Errno::NOTDIR) => Node::Missing,
        Err(e) => Node::Error(e.into()),
        Ok(st) => {
            let s = stamp(&st);
            match FileType::from_raw_mode(st.st_mode) {
                FileType::Directory => Node::Dir,
                FileType::RegularFile => Node::File {
                    stamp: s,
                    executable: st.st_mode & 0o111 != 0,
                },
                FileType::Symlink => Node::Symlink(s),
                _ => Node::Other(s),
            }
        }
    }
}

/// Opens a directory by path, following links as git does when it follows
/// a `gitdir:` or `commondir` it was given (or as the caller's own path).
pub(crate) fn open_dir_path(path: &Path) -> std::io::Result<OwnedFd> {
    Ok(rustix::fs::open(
        path,
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    )?)
}

/// Opens the directory `name` in `dir`, refusing a link.
pub(crate) fn open_dir_at(dir: BorrowedFd<'_>, name: &OsStr) -> std::io::Result<OwnedFd> {
    Ok(rustix::fs::openat(
        dir,
        name,
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::empty(),
    )?)
}

/// The device and inode of an open directory: its identity, to visit each
/// git directory once.
pub(crate) fn identity(fd: BorrowedFd<'_>) -> std::io::Result<(u64, u64)> {
    let s = stamp(&rustix::fs::fstat(fd)?);
    Ok((s.dev, s.ino))
}

/// Reads `name` in `dir`: a regular file, not a link, at most `max` bytes.
pub(crate) fn read_at(dir: BorrowedFd<'_>, name: &OsStr, max: u64) -> Read {
    match open_regular(dir, name, false) {
        Ok(fd) => read_open(fd, max),
        Err(r) => r,
    }
}

/// Opens `name` in `dir` for reading if, and only if, it is a regular file.
///
/// The name is resolved once, to an `O_PATH` descriptor that opens nothing
/// (no FIFO, no device: opening some devices has effects), its type is
/// checked on that descriptor, and the same inode is then opened for
/// reading through `/proc/self/fd`, so that nothing swapped in meanwhile is
/// opened. Without `/proc`, a name not followed is opened `O_NOFOLLOW`
/// (a tool cannot make a device node) and a followed one is refused.
fn open_regular(dir: BorrowedFd<'_>, name: &OsStr, follow: bool) -> Result<OwnedFd, Read> {
    let mut flags = OFlags::PATH | OFlags::CLOEXEC;
    if !follow {
        flags |= OFlags::NOFOLLOW;
    }
    let path_fd = match rustix::fs::openat(dir, name, flags, Mode::empty()) {
        Ok(fd) => fd,
        Err(Errno::NOENT) | Err(Errno::NOTDIR) => return Err(Read::Missing),
        Err(e) => return Err(Read::Error(e.into())),
    };
    let st = rustix::fs::fstat(&path_fd).map_err(|e| Read::Error(e.into()))?;
    let s = stamp(&st);
    match FileType::from_raw_mode(st.st_mode) {
        FileType::RegularFile => {}
        FileType::Symlink => return Err(Read::Symlink(s)),
        FileType::Directory => return Err(Read::Dir),
        _ => return Err(Read::NotRegular(s)),
    }
    let read = OFlags::RDONLY | OFlags::NONBLOCK | OFlags::NOCTTY | OFlags::CLOEXEC;
    let proc_path = format!("/proc/self/fd/{}", path_fd.as_raw_fd());
    match rustix::fs::open(proc_path.as_str(), read, Mode::empty()) {
        Ok(fd) => Ok(fd),
        Err(Errno::NOENT) if !follow => {
            rustix::fs::openat(dir, name, read | OFlags::NOFOLLOW, Mode::empty())
                .map_err(|e| Read::Error(e.into()))
        }
        Err(e) => Err(Read::Error(e.into())),
    }
}

/// Reads an open file: a regular file of at most `max` bytes.
fn read_open(fd: OwnedFd, max: u64) -> Read {
    let st = match rustix::fs::fstat(&fd) {
        Ok(st) => st,
        Err(e) => return Read::Error(e.into()),
    };
    let s = stamp(&st);
    if FileType::from_raw_mode(st.st_mode) != FileType::RegularFile {
        return Read::NotRegular(s);
    }
    if s.size > max {
        return Read::TooLarge(s);
    }
    let mut bytes = Vec::with_capacity(s.size as usize);
    let mut file = std::fs::File::from(fd).take(max + 1);
    if let Err(e) = file.read_to_end(&mut bytes) {
        return Read::Error(e);
    }
    if bytes.len() as u64 > max {
        return Read::TooLarge(s);
    }
    Read::Bytes(bytes, s)
}

/// Where the link `name` in `dir` points, for the report.
pub(crate) fn link_target(dir: BorrowedFd<'_>, name: &OsStr) -> Option<String> {
    let target = rustix::fs::readlinkat(dir, name, Vec::new()).ok()?;
    Some(String::from_utf8_lossy(target.as_bytes()).into_owned())
}

/// Up to `cap` names in `dir` (not `.` and `..`), sorted, and whether there
/// were more.
pub(crate) fn list(dir: BorrowedFd<'_>, cap: usize) -> std::io::Result<(Vec<OsString>, bool)> {
    let mut names = Vec::new();
    let mut more = false;
    for entry in rustix::fs::Dir::read_from(dir.as_fd())? {
        let entry = entry?;
        let name = entry.file_name().to_bytes();
        if name == b"." || name == b".." {
            continue;
        }
        if names.len() == cap {
            more = true;
            break;
        }
        names.push(OsStr::from_bytes(name).to_os_string());
    }
    names.sort();
    Ok((names, more))
}

/// Reads the file at `path` following links, as git reads a file it was
/// pointed to (an included config): a regular file of at most `max` bytes,
/// opened without blocking on a FIFO.
pub(crate) fn read_path(path: &Path, max: u64) -> Read {
    let (Some(parent), Some(name)) = (path.parent(), path.file_name()) else {
        return Read::Missing;
    };
    let parent = if parent.as_os_str().is_empty() {
        Path::new(".")
    } else {
        parent
    };
    let dir = match open_dir_path(parent) {
        Ok(d) => d,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Read::Missing,
        Err(e) => return Read::Error(e),
    };
    match open_regular(dir.as_fd(), name, true) {
        Ok(fd) => read_open(fd, max),
        Err(r) => r,
    }
}
