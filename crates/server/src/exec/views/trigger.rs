//! What wakes the views' rescan before its second is up: an inotify watch
//! of the directories that hold a covered file or directory inside a
//! writable bind (a shell start-up file an editor saves by rename, a
//! repository's `hooks/` replaced, a tools directory's file), filtered to
//! the names covered there, so that a replaced protected path is covered
//! again in milliseconds, not at the next second. Events of other names in
//! those directories (a build's output beside `.bashrc`) are read and
//! dropped without waking anyone.

use std::collections::{HashMap, HashSet};
use std::ffi::OsString;
use std::mem::MaybeUninit;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::sys;

/// What a directory watch reports: an entry created, removed or renamed.
const DIR_EVENTS: u32 = libc::IN_CREATE
    | libc::IN_DELETE
    | libc::IN_MOVED_FROM
    | libc::IN_MOVED_TO
    | libc::IN_DELETE_SELF
    | libc::IN_MOVE_SELF
    | libc::IN_ONLYDIR;

/// The watch.
pub(super) struct Trigger {
    /// The inotify descriptor; `None` where there is none (the rescan then
    /// only runs once a second).
    fd: Option<OwnedFd>,
    /// What is watched.
    watched: Watched,
}

/// The watched directories and the names in them that matter.
#[derive(Default)]
struct Watched {
    /// Each watched directory: its watch descriptor and the names in it
    /// that matter.
    dirs: HashMap<PathBuf, (i32, HashSet<OsString>)>,
    /// The names that matter, by watch descriptor.
    names: HashMap<i32, HashSet<OsString>>,
}

impl Trigger {
    /// A trigger watching nothing yet.
    pub(super) fn new() -> Trigger {
        let fd = sys::inotify()
            .inspect_err(|e| {
                tracing::debug!(error = %e, "filesystem view: no inotify; protected paths replaced on the host are covered again within a second")
            })
            .ok();
        Trigger {
            fd,
            watched: Watched::default(),
        }
    }

    /// Watches the parent of each of `paths` for its name (adding what is
    /// new; a watch no longer needed stays until the directory goes).
    pub(super) fn watch<'a>(&mut self, paths: impl Iterator<Item = &'a Path>) {
        let Some(fd) = &self.fd else {
            return;
        };
        let w = &mut self.watched;
        for p in paths {
            let (Some(dir), Some(name)) = (p.parent(), p.file_name()) else {
                continue;
            };
            if let Some((wd, names)) = w.dirs.get_mut(dir) {
                if names.insert(name.to_os_string()) {
                    w.names.entry(*wd).or_default().insert(name.to_os_string());
                }
                continue;
            }
            match sys::inotify_watch(fd.as_fd(), dir, DIR_EVENTS) {
                Ok(wd) => {
                    let names: HashSet<OsString> = [name.to_os_string()].into();
                    w.names.entry(wd).or_default().extend(names.iter().cloned());
                    w.dirs.insert(dir.to_path_buf(), (wd, names));
                }
                Err(e) => {
                    tracing::debug!(path = %dir.display(), error = %e, "filesystem view: cannot watch a directory holding a protected path; the once-a-second rescan covers it")
                }
            }
        }
    }

    /// Waits at most `limit` for an event that matters; `true` when one came
    /// (several in a burst count once: after the first, events are read for
    /// a few more milliseconds).
    pub(super) fn wait(&mut self, limit: Duration) -> bool {
        let Some(fd) = &self.fd else {
            std::thread::sleep(limit);
            return false;
        };
        let until = Instant::now() + limit;
        loop {
            let left = until.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return false;
            }
            let ms = i32::try_from(left.as_millis()).unwrap_or(i32::MAX).max(1);
            match sys::poll_readable(fd.as_fd(), ms) {
                Ok(true) => {}
                Ok(false) => return false,
                Err(_) => {
                    std::thread::sleep(left);
                    return false;
                }
            }
            if drain(fd, &mut self.watched) {
                // The rest of a burst (an editor's save, `git init`).
                std::thread::sleep(Duration::from_millis(5));
                drain(fd, &mut self.watched);
                return true;
            }
        }
    }
}

/// Reads every event queued on `fd`; whether one of them matters (or the
/// queue overflowed, or a watched directory went).
fn drain(fd: &OwnedFd, watched: &mut Watched) -> bool {
    let mut matters = false;
    let mut buf = [MaybeUninit::<u8>::uninit(); 8192];
    loop {
        let n = match sys::read(fd.as_fd(), &mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        // Safety: the kernel wrote `n` bytes at the start of `buf`.
        let bytes = unsafe { std::slice::from_raw_parts(buf.as_ptr().cast::<u8>(), n) };
        matters |= watched.matters(bytes);
    }
    matters
}

impl Watched {
    /// Whether the events in `bytes` (whole `inotify_event` records) name a
    /// protected entry.
    fn matters(&mut self, mut bytes: &[u8]) -> bool {
        const HEAD: usize = std::mem::size_of::<libc::inotify_event>();
        let mut matters = false;
        while bytes.len() >= HEAD {
            let field = |at: usize| {
                u32::from_ne_bytes([bytes[at], bytes[at + 1], bytes[at + 2], bytes[at + 3]])
            };
            let wd = field(0) as i32;
            let mask = field(4);
            let len = field(12) as usize;
            let end = (HEAD + len).min(bytes.len());
            let raw = &bytes[HEAD..end];
            let name =
                std::ffi::OsStr::from_bytes(raw.split(|&b| b == 0).next().unwrap_or_default());
            if mask
                & (libc::IN_Q_OVERFLOW
                    | libc::IN_DELETE_SELF
                    | libc::IN_MOVE_SELF
                    | libc::IN_IGNORED)
                != 0
            {
                matters = true;
                if mask & libc::IN_IGNORED != 0 {
                    self.names.remove(&wd);
                    self.dirs.retain(|_, (w, _)| *w != wd);
                }
            } else if self.names.get(&wd).is_some_and(|n| n.contains(name)) {
                matters = true;
            }
            bytes = &bytes[end..];
        }
        matters
    }
}
