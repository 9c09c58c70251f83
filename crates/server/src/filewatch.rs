//! Whether the files a call depends on (each loaded tool's metadata file, the
//! sandbox policy file) may have changed, without a `stat` of each per call.
//!
//! One inotify descriptor watches those files and their directories. Each
//! call asks for the current [`FileWatch::generation`]: one `read` of the
//! descriptor, which fails with `EAGAIN` when nothing changed, and the
//! generation moves when something did (inotify queues the event in the
//! writer's own system call, so a change made before a request was sent is
//! always seen by it). Whoever caches what it learnt from a file keeps the
//! generation it checked at, and checks the file again (`stat`) only when the
//! generation moved.
//!
//! What inotify does not see (a network filesystem changed from another
//! host, a directory on the way to the file re-pointed) is seen within
//! [`RECHECK`]: the generation also moves when it has not for that long. A
//! host without inotify (or out of watches) moves it at every call: every
//! call checks its files then, as without this module.

use std::collections::HashMap;
use std::ffi::OsString;
use std::os::fd::{AsFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use toolsrv_base::LockUnpoisoned;

use crate::sys;

/// The longest a change inotify cannot report goes unnoticed.
pub(crate) const RECHECK: Duration = Duration::from_secs(1);

/// What a file watch reports: the file changed, was replaced, or went.
const FILE_EVENTS: u32 = libc::IN_MODIFY
    | libc::IN_ATTRIB
    | libc::IN_CLOSE_WRITE
    | libc::IN_DELETE_SELF
    | libc::IN_MOVE_SELF;
/// What a directory watch reports: an entry created, removed or renamed
/// (not changes to the entries' contents, which the files' own watches
/// report: a log file beside them would otherwise wake the watch at every
/// call).
const DIR_EVENTS: u32 = libc::IN_DELETE_SELF
    | libc::IN_MOVE_SELF
    | libc::IN_CREATE
    | libc::IN_DELETE
    | libc::IN_MOVED_FROM
    | libc::IN_MOVED_TO
    | libc::IN_ONLYDIR;

/// What of a watch's events matters.
enum Interest {
    /// Every event (a watched file's own watch).
    All,
    /// Events of these entries of a watched directory, each with the file
    /// to watch again when its entry changes (a new file is a new inode; a
    /// new directory on the way to the file makes it watchable).
    Names(HashMap<OsString, PathBuf>),
}

/// The watch and the generation it keeps.
pub(crate) struct FileWatch {
    /// The inotify descriptor; `None` where there is none.
    fd: Option<OwnedFd>,
    state: Mutex<State>,
}

struct State {
    /// What matters of each watch: any event of a file's own watch; in a
    /// directory's, the events of the entries named here (other files
    /// there, such as a log, change all the time).
    interest: HashMap<i32, Interest>,
    generation: u64,
    /// When the generation last moved.
    moved: Instant,
    /// A file could not be watched: every call checks its files.
    blind: bool,
}

impl FileWatch {
    /// A watch with nothing watched yet.
    pub(crate) fn new() -> FileWatch {
        let fd = match sys::inotify() {
            Ok(fd) => Some(fd),
            Err(e) => {
                tracing::info!(error = %e, "no inotify: tool and policy files are checked at every call");
                None
            }
        };
        FileWatch {
            state: Mutex::new(State {
                generation: 0,
                moved: Instant::now(),
                blind: fd.is_none(),
                interest: HashMap::new(),
            }),
            fd,
        }
    }

    /// Watch `file` (followed if a symbolic link; it need not exist) and the
    /// directory that holds it. Called when a file starts to matter (a tool
    /// loaded, the policy at startup): two system calls then, none per call.
    /// A file that cannot be watched makes every call check its files.
    pub(crate) fn watch(&self, file: &Path) {
        let Some(fd) = &self.fd else {
            return;
        };
        // The directory, or where it does not exist (a policy file in a
        // configuration directory not made yet), the nearest one that does:
        // its creation is seen there, and what is made inside it within
        // RECHECK.
        let mut entry = file;
        let mut dir = match file.parent() {
            Some(d) if !d.as_os_str().is_empty() => d,
            _ => Path::new("."),
        };
        let dir_wd = loop {
            match sys::inotify_watch(fd.as_fd(), dir, DIR_EVENTS) {
                Ok(wd) => break wd,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound && dir.parent().is_some() => {
                    entry = dir;
                    dir = dir.parent().unwrap_or(dir);
                }
                Err(e) => {
                    tracing::info!(dir = %dir.display(), error = %e, "cannot watch the directory: tool and policy files are checked at every call");
                    self.state.lock_unpoisoned().blind = true;
                    return;
                }
            }
        };
        // The file itself, for a symbolic link's target elsewhere; a file
        // that does not exist yet is seen being created in its directory.
        let file_wd = sys::inotify_watch(fd.as_fd(), file, FILE_EVENTS).ok();
        let mut st = self.state.lock_unpoisoned();
        if let Some(name) = entry.file_name() {
            match st
                .interest
                .entry(dir_wd)
                .or_insert_with(|| Interest::Names(HashMap::new()))
            {
                Interest::Names(names) => {
                    names.insert(name.to_os_string(), file.to_path_buf());
                }
                Interest::All => {}
            }
        } else {
            st.interest.insert(dir_wd, Interest::All);
        }
        if let Some(wd) = file_wd {
            st.interest.insert(wd, Interest::All);
        }
        // Whatever changed before the watch was set is not reported: make
        // the next call look.
        self.bump(&mut st);
    }

    /// The generation now: it moved if a watched file may have changed since
    /// the last call, or if it had not moved for [`RECHECK`]. One `read` of
    /// the inotify descriptor (`EAGAIN` when nothing happened).
    pub(crate) fn generation(&self) -> u64 {
        let mut st = self.state.lock_unpoisoned();
        let Some(fd) = self.fd.as_ref().filter(|_| !st.blind) else {
            self.bump(&mut st);
            return st.generation;
        };
        let mut changed = false;
        let mut again = Vec::new();
        let mut buf = [std::mem::MaybeUninit::<u8>::uninit(); 4096];
        loop {
            match sys::read(fd.as_fd(), &mut buf) {
                Ok(n) if n > 0 => {
                    // Safety: the kernel initialised the first `n` bytes.
                    let events: &[u8] =
                        unsafe { std::slice::from_raw_parts(buf.as_ptr().cast(), n) };
                    changed |= matters(&st.interest, events, &mut again);
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                // End of file cannot happen; any other error: look at the files.
                _ => {
                    changed = true;
                    break;
                }
            }
        }
        if changed || st.moved.elapsed() >= RECHECK {
            self.bump(&mut st);
        }
        if !again.is_empty() {
            drop(st);
            for file in again {
                self.watch(&file);
            }
            st = self.state.lock_unpoisoned();
        }
        st.generation
    }

    /// Move the generation: every cached check is stale.
    fn bump(&self, st: &mut State) {
        st.generation = st.generation.wrapping_add(1);
        st.moved = Instant::now();
    }
}

/// Whether one of the inotify `events` (as read) is of interest: an event of
/// a file's own watch, an entry of a directory's watch named in its
/// interest, a queue overflow, or a watch that went away. The files whose
/// directory entries changed are added to `again`.
fn matters(interest: &HashMap<i32, Interest>, events: &[u8], again: &mut Vec<PathBuf>) -> bool {
    use std::os::unix::ffi::OsStrExt;
    const HEADER: usize = std::mem::size_of::<libc::inotify_event>();
    let mut rest = events;
    let mut changed = false;
    while rest.len() >= HEADER {
        // Safety: at least a header's bytes remain; read unaligned.
        let ev: libc::inotify_event = unsafe { std::ptr::read_unaligned(rest.as_ptr().cast()) };
        let len = ev.len as usize;
        let Some(name_bytes) = rest.get(HEADER..HEADER + len) else {
            return true;
        };
        rest = &rest[HEADER + len..];
        if ev.mask & (libc::IN_Q_OVERFLOW | libc::IN_IGNORED) != 0 {
            changed = true;
            continue;
        }
        let name_end = name_bytes.iter().position(|b| *b == 0).unwrap_or(len);
        let name = std::ffi::OsStr::from_bytes(&name_bytes[..name_end]);
        match interest.get(&ev.wd) {
            Some(Interest::Names(names)) if !name.is_empty() => {
                if let Some(file) = names.get(name) {
                    again.push(file.clone());
                    changed = true;
                }
            }
            _ => changed = true,
        }
    }
    changed || !rest.is_empty()
}

#[cfg(test)]
mod tests {
    use super::FileWatch;

    #[test]
    fn the_generation_moves_for_watched_files_only() {
        let dir = tempfile::tempdir().expect("tempdir");
        let tool = dir.path().join("t.yaml");
        let log = dir.path().join("server.log");
        std::fs::write(&tool, "description: a\n").expect("write tool");
        std::fs::write(&log, "").expect("write log");
        let w = FileWatch::new();
        w.watch(&tool);
        let g = w.generation();
        // A file beside it changing (a log) does not count.
        std::fs::write(&log, "a line\n").expect("append log");
        assert_eq!(w.generation(), g, "an unwatched file moved the generation");
        // The watched file written in place does.
        std::fs::write(&tool, "description: b\n").expect("rewrite tool");
        let g2 = w.generation();
        assert_ne!(g2, g, "a rewrite of the watched file was not seen");
        assert_eq!(w.generation(), g2, "the generation moves once per change");
        // Replaced by a rename (an editor's save): seen, and the new file
        // is watched in turn.
        let tmp = dir.path().join(".t.yaml.swp");
        std::fs::write(&tmp, "description: c\n").expect("write replacement");
        std::fs::rename(&tmp, &tool).expect("rename over");
        let g3 = w.generation();
        assert_ne!(g3, g2, "a replacement was not seen");
        let _ = w.generation();
        let g4 = w.generation();
        std::fs::write(&tool, "description: d\n").expect("rewrite replacement");
        assert_ne!(w.generation(), g4, "the replacement's rewrite was not seen");
    }

    #[test]
    fn a_missing_file_is_seen_when_created_even_in_a_new_directory() {
        let dir = tempfile::tempdir().expect("tempdir");
        let cfg = dir.path().join("cfg");
        let policy = cfg.join("sandbox.yaml");
        let w = FileWatch::new();
        w.watch(&policy);
        let g = w.generation();
        std::fs::write(dir.path().join("server.log"), "x").expect("write log");
        assert_eq!(w.generation(), g, "an unrelated entry moved the generation");
        std::fs::create_dir(&cfg).expect("mkdir cfg");
        let g2 = w.generation();
        assert_ne!(g2, g, "the directory's creation was not seen");
        std::fs::write(&policy, "{}").expect("write policy");
        let g3 = w.generation();
        assert_ne!(
            g3, g2,
            "the file's creation in the new directory was not seen"
        );
        let _ = w.generation();
        let g4 = w.generation();
        std::fs::write(&policy, "{ }").expect("rewrite policy");
        assert_ne!(w.generation(), g4, "a rewrite of the new file was not seen");
    }

    #[test]
    fn the_generation_moves_at_least_every_recheck() {
        let dir = tempfile::tempdir().expect("tempdir");
        let tool = dir.path().join("t.yaml");
        std::fs::write(&tool, "description: a\n").expect("write tool");
        let w = FileWatch::new();
        w.watch(&tool);
        let g = w.generation();
        assert_eq!(w.generation(), g);
        std::thread::sleep(super::RECHECK + std::time::Duration::from_millis(50));
        assert_ne!(w.generation(), g, "no look after RECHECK");
    }
}
