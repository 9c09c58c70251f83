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
use std::os::fd::{FromRawFd, OwnedFd};
use std::path::PathBuf;
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::Mutex;

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
        // Safety: a fresh anonymous mapping; no existing memory is touched.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                SLOTS * std::mem::size_of::<AtomicI32>(),
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
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
        let mut fds = [0; 2];
        // Safety: pipe2 writes two new descriptors into our array.
        if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
            return Err(io::Error::last_os_error());
        }
        let (rd, wr) = (fds[0], fds[1]);
        // Safety: fork in a single-threaded process (documented precondition).
        match unsafe { libc::fork() } {
            -1 => {
                let e = io::Error::last_os_error();
                // Safety: closing the two descriptors we just created.
                unsafe {
                    libc::close(rd);
                    libc::close(wr);
                }
                Err(e)
            }
            0 => {
                // Safety: we are the child; watch() never returns.
                unsafe { watch(rd, wr, &table, &groups) }
            }
            _ => {
                // Safety: the read end belongs to the child now; close our copy.
                unsafe { libc::close(rd) };
                Ok(Watchdog {
                    // Safety: `wr` is ours and nobody else owns it.
                    _alive: unsafe { OwnedFd::from_raw_fd(wr) },
                    table,
                    books: Mutex::new(Books::default()),
                })
            }
        }
    }

    fn books(&self) -> std::sync::MutexGuard<'_, Books> {
        self.books.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A tool process group was started.
    pub fn track(&self, pgid: i32) {
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
    pub fn untrack(&self, pgid: i32) {
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
/// Only to be called in the child right after `fork`.
unsafe fn watch(rd: i32, wr: i32, table: &Table, groups: &[PathBuf]) -> ! {
    // Safety (whole function): raw system calls on descriptors and memory we own.
    unsafe {
        libc::close(wr);
        // Keep only the pipe: move it to 3 and close everything else.
        if rd != 3 {
            libc::dup2(rd, 3);
        }
        libc::close_range(4, u32::MAX, 0);
        for fd in 0..3 {
            libc::close(fd);
        }
        // Out of the terminal's process group and deaf to its signals, so Ctrl-C
        // aimed at toolsrv does not take the watchdog down first.
        libc::setpgid(0, 0);
        libc::signal(libc::SIGINT, libc::SIG_IGN);
        libc::signal(libc::SIGHUP, libc::SIG_IGN);
        libc::signal(libc::SIGTERM, libc::SIG_IGN);
        libc::signal(libc::SIGPIPE, libc::SIG_IGN);
        let name = b"toolsrv-watch\0";
        libc::prctl(libc::PR_SET_NAME, name.as_ptr());
        let mut byte = 0u8;
        loop {
            let n = libc::read(3, (&mut byte as *mut u8).cast(), 1);
            if n < 0 && *libc::__errno_location() == libc::EINTR {
                continue;
            }
            // toolsrv never writes: any other outcome means it is gone.
            break;
        }
        let used = (table.slot(0).load(Ordering::Acquire).max(0) as usize).min(SLOTS - 1);
        for i in 1..=used {
            let g = table.slot(i).load(Ordering::Acquire);
            if g > 1 {
                libc::kill(-g, libc::SIGKILL);
            }
        }
        // The fork happened while toolsrv was single-threaded, so this process
        // may allocate and use the file system like any other.
        toolsrv_sandbox::contain::teardown(groups, std::time::Duration::from_secs(3));
        libc::_exit(0)
    }
}
