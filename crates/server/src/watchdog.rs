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
//! server's cgroups and removes them ([`toolsrv_sandbox::contain::teardown`]),
//! then exits.

use std::collections::HashMap;
use std::io;
use std::mem::MaybeUninit;
use std::os::fd::{AsFd, OwnedFd};
use std::path::PathBuf;
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::Mutex;

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

/// The shared table: `SLOTS` atomic integers in a `MAP_SHARED` mapping.
struct Table {
    base: *const AtomicI32,
}

// Safety: the mapping is only accessed through atomics, and it is never unmapped
// while the process runs (the Watchdog lives as long as the server).
unsafe impl Send for Table {}
// Safety: as above; every access is an atomic operation.
unsafe impl Sync for Table {}

impl Table {
    fn new() -> io::Result<Table> {
        let p = crate::sys::map_shared_zeroed(SLOTS * std::mem::size_of::<AtomicI32>())?;
        Ok(Table {
            base: p as *const AtomicI32,
        })
    }

    /// Slot `i`; callers keep `i < SLOTS`.
    fn slot(&self, i: usize) -> &AtomicI32 {
        debug_assert!(i < SLOTS);
        // Safety: `i` is in bounds of the mapping (every caller bounds it), which is zero-initialised
        // (a valid AtomicI32) and lives as long as `self`.
        unsafe { &*self.base.add(i) }
    }
}

impl Watchdog {
    /// Fork the watchdog process.
    ///
    /// Must be called while the process is still single-threaded (before the
    /// async runtime starts): the child only runs plain system calls and its own
    /// loop, but a fork of a multi-threaded process could inherit held locks.
    pub fn start(groups: Vec<PathBuf>) -> io::Result<Watchdog> {
        let table = Table::new()?;
        let (rd, wr) = sys::pipe()?;
        // Safety: called while single-threaded (documented precondition).
        match unsafe { sys::fork() }? {
            // Safety: this is the child right after the fork; watch() never returns.
            sys::Forked::Child => unsafe { watch(rd, wr, &table, &groups) },
            // The read end belongs to the child now: ours closes with `rd`.
            sys::Forked::Parent => Ok(Watchdog {
                _alive: wr,
                table,
                books: Mutex::new(Books::default()),
            }),
        }
    }

    fn books(&self) -> std::sync::MutexGuard<'_, Books> {
        self.books.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A tool process group was started.
    pub(crate) fn track(&self, pgid: i32) {
        let mut b = self.books();
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
        self.table.slot(slot).store(pgid, Ordering::Release);
        b.slot_of.insert(pgid, slot);
    }

    /// A tool process group is gone (reaped and killed).
    pub(crate) fn untrack(&self, pgid: i32) {
        let mut b = self.books();
        if let Some(slot) = b.slot_of.remove(&pgid) {
            self.table.slot(slot).store(0, Ordering::Release);
            b.free.push(slot);
        }
    }
}

/// The watchdog's life: wait for end of file on the pipe, then kill every group
/// in the table.
///
/// # Safety
/// Only to be called in the child right after `fork`: it closes every
/// descriptor but the pipe's read end, whoever owned them in the parent.
unsafe fn watch(rd: OwnedFd, wr: OwnedFd, table: &Table, groups: &[PathBuf]) -> ! {
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
        }
    }
    // The fork happened while toolsrv was single-threaded, so this process
    // may allocate and use the file system like any other.
    toolsrv_sandbox::contain::teardown(groups, std::time::Duration::from_secs(3));
    sys::exit_now(0)
}
