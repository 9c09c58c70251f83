//! The child's standard descriptors: what it reads (the spec's, else the
//! shared `/dev/null`) and an output descriptor, each numbered 3 or above.

use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd, RawFd};
use std::sync::OnceLock;

use super::error::SpawnError;
use super::spec::{SpawnSpec, MAX_FILES};
use super::sys;

/// The descriptor the child should `dup3` onto 0 (`spec.stdin`, else the
/// shared `/dev/null`), and the duplicate to keep open until `clone`
/// returned, if one was needed (see [`output_fd`]).
pub(super) fn stdin_fd(spec: &SpawnSpec) -> Result<(RawFd, Option<OwnedFd>), SpawnError> {
    let Some(fd) = spec.stdin else {
        return Ok((dev_null()?.as_raw_fd(), None));
    };
    high(fd.as_raw_fd())
}

/// `fd` if it is numbered 3 or above, else a duplicate that is (kept open
/// by the caller until `clone` returned).
fn high(fd: RawFd) -> Result<(RawFd, Option<OwnedFd>), SpawnError> {
    if fd >= 3 {
        return Ok((fd, None));
    }
    let dup = dup_high(fd)?;
    Ok((dup.as_raw_fd(), Some(dup)))
}

/// The descriptor the child should `dup3` onto 1 and 2, and the duplicate to keep
/// open until `clone` returned, if one was needed: the child `dup3`s onto 0, 1 and
/// 2, so no source descriptor may be one of them.
pub(super) fn output_fd(spec: &SpawnSpec) -> Result<(RawFd, Option<OwnedFd>), SpawnError> {
    high(spec.output.as_raw_fd())
}

/// The descriptors of `spec.files` as the child moves them onto 3, 4, …
/// (-1 after the last), and the duplicates made so that each is numbered
/// above every target: keep those open until `clone` returned.
pub(super) fn file_fds(spec: &SpawnSpec) -> Result<([RawFd; MAX_FILES], Vec<OwnedFd>), SpawnError> {
    if spec.files.len() > MAX_FILES {
        return Err(SpawnError::Prepare {
            step: "argument files",
            source: io::Error::from_raw_os_error(libc::E2BIG),
        });
    }
    let mut fds = [-1; MAX_FILES];
    let mut dups = Vec::new();
    let first_free = 3 + MAX_FILES as RawFd;
    for (slot, file) in fds.iter_mut().zip(spec.files) {
        let fd = file.as_raw_fd();
        *slot = if fd >= first_free {
            fd
        } else {
            let dup = sys::parent::dup_cloexec_from(fd, first_free).map_err(|source| {
                SpawnError::Prepare {
                    step: "argument files",
                    source,
                }
            })?;
            let raw = dup.as_raw_fd();
            dups.push(dup);
            raw
        };
    }
    Ok((fds, dups))
}

/// `/dev/null`, opened once for the life of the process and shared by every
/// spawn (each child `dup3`s it onto its stdin; an open per spawn cost a path
/// lookup and two descriptor-table updates per call).
static DEV_NULL: OnceLock<OwnedFd> = OnceLock::new();

/// The shared `/dev/null` descriptor, opened on first use.
pub(super) fn dev_null() -> Result<BorrowedFd<'static>, SpawnError> {
    if DEV_NULL.get().is_none() {
        // A concurrent first use may win the race: then ours is closed here.
        let _ = DEV_NULL.set(open_devnull()?);
    }
    DEV_NULL
        .get()
        .map(AsFd::as_fd)
        .ok_or_else(|| SpawnError::Prepare {
            step: "/dev/null",
            source: io::Error::from_raw_os_error(libc::EBADF),
        })
}

/// Open the `/dev/null` descriptor every spawn shares now rather than at the
/// first spawn (so a count of open descriptors taken after startup stays put).
pub fn preopen() -> Result<(), SpawnError> {
    dev_null().map(|_| ())
}

/// Opens `/dev/null` read-only, close-on-exec, at descriptor 3 or above.
fn open_devnull() -> Result<OwnedFd, SpawnError> {
    let prepare = |source| SpawnError::Prepare {
        step: "/dev/null",
        source,
    };
    let file = std::fs::File::open("/dev/null").map_err(prepare)?;
    let fd = OwnedFd::from(file);
    if fd.as_raw_fd() < 3 {
        return dup_high(fd.as_raw_fd());
    }
    Ok(fd)
}

/// Duplicates `fd` to a close-on-exec descriptor numbered 3 or above.
fn dup_high(fd: i32) -> Result<OwnedFd, SpawnError> {
    sys::parent::dup_cloexec_above_stdio(fd).map_err(|source| SpawnError::Prepare {
        step: "descriptors",
        source,
    })
}
