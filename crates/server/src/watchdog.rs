//! The watchdog: a small process forked from toolsrv at startup that kills every
//! tool process group when toolsrv dies, even by SIGKILL.
//!
//! `PR_SET_PDEATHSIG` (set in each tool) only reaches the tool itself, not what
//! the tool started. toolsrv and the watchdog share a table of process group ids
//! (an anonymous `MAP_SHARED` mapping made before the fork): toolsrv stores a
//! group's id in a free slot when it starts the group and clears the slot when
//! the group is gone. That costs two memory stores per tool and no system call
//! or wake-up (a pipe of `+pgid`/`-pgid` records woke the watchdog twice per
//! call). The watchdog blocks reading a pipe that toolsrv never writes; when
//! toolsrv dies, for whatever reason, the read sees end of file and the watchdog
//! sends SIGKILL to every group still in the table, kills everything in the
//! server's cgroups and removes them ([`toolsrv_sandbox::teardown`]),
//! then exits.
//!
//! Where runs are contained by PID namespaces, a group id is not enough: the
//! namespace's first process may leave its group (`setpgid` into a child's)
//! and clear its parent-death signal (`prctl`, or any credential change), and
//! then neither reaches it. There the table also holds each first process's
//! start time, the watchdog kills those processes themselves (by pidfd, once
//! the start time matched: the namespace dies with them), and the table is a
//! file beside the socket (`<socket>.runs`) that the next server on that socket
//! reads to kill what a dead server *and* its dead watchdog left
//! (`crate::leaders`).

use std::collections::HashMap;
use std::io;
use std::mem::MaybeUninit;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicI32, AtomicU64, Ordering};
use std::sync::Mutex;

use toolsrv_base::LockUnpoisoned;

use crate::sys;

/// Slots in the shared table: slot 0 holds how many slots were ever used (the
/// watchdog scans no further), the others one process group id each (0: free).
const SLOTS: usize = 1 << 16;

/// toolsrv's side of the watchdog.
pub struct Watchdog {
    /// Held open for toolsrv's lifetime; its closing wakes the watchdog.
    _alive: OwnedFd,
    table: Table,
    books: Mutex<Books>,
    /// Whether tracked pids are the first processes of PID namespaces (their
    /// start times are recorded and they are killed themselves).
    leaders: bool,
    /// How many survivors of a dead server the start killed.
    survivors_killed: usize,
}

/// Which slot holds which group, and the free slots.
#[derive(Default)]
struct Books {
    slot_of: HashMap<i32, usize>,
    free: Vec<usize>,
    /// Slots handed out so far (the next unused one is `used + 1`).
    used: usize,
    /// Whether "table full" was already logged.
    warned: bool,
}

/// The shared table: `SLOTS` process group ids (`i32`), then `SLOTS` start
/// times (`u64`, 0: not recorded), in a `MAP_SHARED` mapping.
struct Table {
    base: *mut u8,
}

// Safety: the mapping is only accessed through atomics, and it is never unmapped
// while the process runs (the Watchdog lives as long as the server).
unsafe impl Send for Table {}
// Safety: as above; every access is an atomic operation.
unsafe impl Sync for Table {}

/// Bytes of the table.
const TABLE_LEN: usize = crate::leaders::table_len(SLOTS);

impl Table {
    /// A table in anonymous shared memory.
    fn anonymous() -> io::Result<Table> {
        Ok(Table {
            base: crate::sys::map_shared_zeroed(TABLE_LEN)?,
        })
    }

    /// A table in `file` (zeroed, `TABLE_LEN` bytes long).
    fn in_file(file: &std::fs::File) -> io::Result<Table> {
        Ok(Table {
            base: crate::sys::map_shared_file(file.as_fd(), TABLE_LEN)?,
        })
    }

    /// Slot `i`; callers keep `i < SLOTS`.
    fn slot(&self, i: usize) -> &AtomicI32 {
        debug_assert!(i < SLOTS);
        // Safety: `i` is in bounds of the mapping (every caller bounds it), which is
        // zero-initialised (a valid AtomicI32), page-aligned, and lives as long as `self`.
        unsafe { &*self.base.cast::<AtomicI32>().add(i) }
    }

    /// The start time recorded with slot `i`; callers keep `i < SLOTS`.
    fn start(&self, i: usize) -> &AtomicU64 {
        debug_assert!(i < SLOTS);
        // Safety: the start times follow the `SLOTS` pids (4 bytes each, so
        // 8-aligned for a power-of-two `SLOTS`); `i` is in bounds, the bytes are
        // zero-initialised (a valid AtomicU64), and the mapping lives as long as `self`.
        unsafe { &*self.base.add(SLOTS * 4).cast::<AtomicU64>().add(i) }
    }
}

impl Watchdog {
    /// Fork the watchdog process.
    ///
    /// Must be called while the process is still single-threaded (before the
    /// async runtime starts): the child only runs plain system calls and its own
    /// loop, but a fork of a multi-threaded process could inherit held locks.
    ///
    /// `first_processes` is set where runs are PID namespaces: the tracked
    /// pids are their first processes, recorded with their start times and
    /// killed themselves too. Then `record` is the file the table lives in
    /// (`<socket>.runs`); before anything else, the survivors a dead server
    /// recorded there are killed (see [`Watchdog::survivors_killed`]). Where
    /// the record cannot be made, the table is kept in memory (and the next
    /// server will not know this one's runs), which is logged.
    pub fn start(
        groups: Vec<PathBuf>,
        first_processes: bool,
        record: Option<&Path>,
    ) -> io::Result<Watchdog> {
        let mut survivors_killed = 0;
        let in_file = record.filter(|_| first_processes).and_then(|path| {
            let made = crate::leaders::take_over_record(path, SLOTS).and_then(|(file, killed)| {
                survivors_killed = killed;
                let meta = file.metadata()?;
                Ok((
                    Table::in_file(&file)?,
                    (path.to_path_buf(), meta.dev(), meta.ino()),
                ))
            });
            made.map_err(|e| {
                tracing::warn!(record = %path.display(), error = %e,
                    "cannot keep the record of runs beside the socket: a server started after this one dies with its watchdog will not kill what is left of its runs");
            })
            .ok()
        });
        let (table, file_id) = match in_file {
            Some((table, id)) => (table, Some(id)),
            None => (Table::anonymous()?, None),
        };
        let (rd, wr) = sys::pipe()?;
        // Safety: called while single-threaded (documented precondition).
        match unsafe { sys::fork() }? {
            // Safety: this is the child right after the fork; watch() never returns.
            sys::Forked::Child => unsafe { watch(rd, wr, &table, &groups, file_id) },
            // The read end belongs to the child now: ours closes with `rd`.
            sys::Forked::Parent => Ok(Watchdog {
                _alive: wr,
                table,
                books: Mutex::new(Books::default()),
                leaders: first_processes,
                survivors_killed,
            }),
        }
    }

    /// How many processes left by a dead server on the same socket the start
    /// killed (PID-namespace runs only).
    pub fn survivors_killed(&self) -> usize {
        self.survivors_killed
    }

    /// A tool process group was started.
    pub(crate) fn track(&self, pgid: i32) {
        let mut b = self.books.lock_unpoisoned();
        let slot = match b.free.pop() {
            Some(s) => s,
            None if b.used + 1 < SLOTS => {
                b.used += 1;
                // Publish the new bound before the slot is filled.
                self.table.slot(0).store(b.used as i32, Ordering::Release);
                b.used
            }
            None => {
                if !std::mem::replace(&mut b.warned, true) {
                    tracing::warn!(
                        limit = SLOTS - 1,
                        "watchdog table full: further tools are not killed if toolsrv is killed"
                    );
                }
                return;
            }
        };
        // The start time first: the watchdog reads a slot's pid, then its time.
        let start = if self.leaders {
            crate::leaders::start_time(pgid).unwrap_or(0)
        } else {
            0
        };
        self.table.slot(slot).store(0, Ordering::Release);
        self.table.start(slot).store(start, Ordering::Release);
        self.table.slot(slot).store(pgid, Ordering::Release);
        b.slot_of.insert(pgid, slot);
    }

    /// A tool process group is gone (reaped and killed).
    pub(crate) fn untrack(&self, pgid: i32) {
        let mut b = self.books.lock_unpoisoned();
        if let Some(slot) = b.slot_of.remove(&pgid) {
            self.table.slot(slot).store(0, Ordering::Release);
            self.table.start(slot).store(0, Ordering::Release);
            b.free.push(slot);
        }
    }
}

/// The watchdog's life: wait for end of file on the pipe, then kill every group
/// in the table (and every recorded first process of a PID namespace), tear
/// down the cgroups in `groups`, and remove the record file `record` (path,
/// device, inode) if it is still the one this table lives in.
///
/// # Safety
/// Only to be called in the child right after `fork`: it closes every
/// descriptor but the pipe's read end, whoever owned them in the parent.
unsafe fn watch(
    rd: OwnedFd,
    wr: OwnedFd,
    table: &Table,
    groups: &[PathBuf],
    record: Option<(PathBuf, u64, u64)>,
) -> ! {
    drop(wr);
    // Keep only the pipe: move it to 3 and close everything else.
    // Safety: the forked child owns nothing at 3 that it uses again.
    let Ok(rd) = (unsafe { sys::move_fd(rd, 3) }) else {
        sys::exit_now(1)
    };
    // Safety: nothing of this child uses a descriptor above 3 again (the
    // parent's owners of them are copies that never run here).
    let _ = unsafe { sys::close_from(4) };
    for fd in 0..3 {
        // Safety: as above, for standard input, output and error.
        unsafe { sys::close(fd) };
    }
    // Out of the terminal's process group and deaf to its signals, so Ctrl-C
    // aimed at toolsrv does not take the watchdog down first.
    let _ = sys::new_process_group();
    for sig in [libc::SIGINT, libc::SIGHUP, libc::SIGTERM, libc::SIGPIPE] {
        let _ = sys::ignore_signal(sig);
    }
    let _ = sys::set_thread_name(c"toolsrv-watch");
    let mut byte = [MaybeUninit::<u8>::uninit()];
    loop {
        match sys::read(rd.as_fd(), &mut byte) {
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            // toolsrv never writes: any other outcome means it is gone.
            _ => break,
        }
    }
    let used = (table.slot(0).load(Ordering::Acquire).max(0) as usize).min(SLOTS - 1);
    for i in 1..=used {
        let g = table.slot(i).load(Ordering::Acquire);
        if g > 1 {
            let _ = sys::kill(-g, libc::SIGKILL);
            // The fork happened while toolsrv was single-threaded, so this
            // process may allocate and read /proc like any other.
            crate::leaders::kill_if_same(g, table.start(i).load(Ordering::Acquire));
        }
    }
    toolsrv_sandbox::teardown(groups, std::time::Duration::from_secs(3));
    if let Some((path, dev, ino)) = record {
        // Only the file this table lives in: a server started on the socket
        // since then has put its own there.
        if std::fs::symlink_metadata(&path).is_ok_and(|m| m.dev() == dev && m.ino() == ino) {
            let _ = std::fs::remove_file(&path);
        }
    }
    sys::exit_now(0)
}
