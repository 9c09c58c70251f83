//! toolsrv is a child subreaper: orphaned descendants of tools (a tool that
//! started something and exited) are re-parented to it rather than to init, so
//! they can be reaped and, at shutdown, killed.
//!
//! Tools themselves are reaped through their pidfds by the executor; the reaper
//! never calls `waitpid(-1)` (that would steal their statuses). It looks for
//! zombie children that are not tracked tools and reaps those by pid.
//!
//! Where the server has a tools PID namespace (docs/watch.md), the orphans
//! of sandboxed runs go to that namespace's init, which the kernel reaps
//! them for (it ignores SIGCHLD); only those of unconfined runs come here.
//!
//! When it looks: orphans only appear when something in a tool's tree dies, so
//! after each tool run ends (the executor's `Tracked::ended` notice), and
//! then every `ORPHAN_POLL` for as long as orphans are alive. toolsrv does not
//! handle SIGCHLD: every tool's exit would run a signal handler and wake the
//! runtime's signal driver and this task (~5 % of the server's CPU per call).

use std::collections::HashSet;
use std::sync::Mutex;

use toolsrv_base::LockUnpoisoned;

/// How often to look again while orphans are alive.
pub(crate) const ORPHAN_POLL: std::time::Duration = std::time::Duration::from_secs(1);

/// Pids of tool processes the executor reaps itself, and the notice that one
/// ended (a moment when orphans may have appeared).
#[derive(Default)]
pub(crate) struct Tracked {
    pids: Mutex<HashSet<i32>>,
    /// Signalled when a tool was reaped and its group killed.
    pub(crate) ended: tokio::sync::Notify,
    /// The watch, whose tools PID namespace's init is a child of the server
    /// that is neither a tool nor an orphan (its own thread reaps it).
    watch: std::sync::OnceLock<std::sync::Arc<crate::watch::Watch>>,
}

impl Tracked {
    /// Spawn while holding the lock, recording the new pid before the orphan
    /// reaper can look at it (a fast tool may already be a zombie when `spawn`
    /// returns).
    pub(crate) fn spawning<T, E>(
        &self,
        spawn: impl FnOnce() -> Result<T, E>,
        pid_of: impl FnOnce(&T) -> i32,
    ) -> Result<T, E> {
        let mut g = self.pids.lock_unpoisoned();
        let t = spawn()?;
        g.insert(pid_of(&t));
        Ok(t)
    }
    /// Leave the init of `watch`'s tools PID namespace alone.
    pub(crate) fn set_watch(&self, watch: std::sync::Arc<crate::watch::Watch>) {
        let _ = self.watch.set(watch);
    }

    /// Whether `pid` is a child the reaper leaves alone: a tracked tool, or
    /// the tools PID namespace's init.
    fn leaves_alone(&self, pids: &HashSet<i32>, pid: i32) -> bool {
        pids.contains(&pid) || self.watch.get().is_some_and(|w| w.is_reader(pid))
    }

    /// A tool was reaped (and its group killed): orphans may have appeared.
    pub(crate) fn remove(&self, pid: i32) {
        self.pids.lock_unpoisoned().remove(&pid);
        self.ended.notify_one();
    }
}

/// Make this process a child subreaper.
pub fn become_subreaper() -> std::io::Result<()> {
    crate::sys::set_child_subreaper()
}

/// Our children's pids.
///
/// Read from `/proc/self/task/*/children` (a few small files, one per thread),
/// not by scanning every process on the host; the full scan is the fallback for
/// kernels without `CONFIG_PROC_CHILDREN`.
fn children() -> Vec<i32> {
    task_children().unwrap_or_else(scan_children)
}

/// A small procfs file, read into one buffer: `open`, a `read` or two and
/// `close` (`read_to_string` first asks its size, which procfs reports as 0,
/// then grows its buffer from 32 bytes: nine system calls for a `stat` line).
fn read_proc(path: &str) -> Option<String> {
    use std::io::Read;
    let f = std::fs::File::open(path).ok()?;
    let mut buf = Vec::with_capacity(1024);
    // Through `Take`: no size hint asked of the file.
    f.take(u64::MAX).read_to_end(&mut buf).ok()?;
    String::from_utf8(buf).ok()
}

/// (state letter, ppid) of a process.
fn proc_stat(pid: i32) -> Option<(char, i32)> {
    let stat = read_proc(&format!("/proc/{pid}/stat"))?;
    let rest = &stat[stat.rfind(')')? + 1..];
    let mut f = rest.split_whitespace();
    let state = f.next()?.chars().next()?;
    Some((state, f.next()?.parse().ok()?))
}

fn task_children() -> Option<Vec<i32>> {
    let mut out = Vec::new();
    for task in std::fs::read_dir("/proc/self/task").ok()? {
        let path = task.ok()?.path().join("children");
        let text = read_proc(path.to_str()?)?;
        out.extend(
            text.split_whitespace()
                .filter_map(|p| p.parse::<i32>().ok()),
        );
    }
    Some(out)
}

fn scan_children() -> Vec<i32> {
    let me = std::process::id() as i32;
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| proc_stat(*pid).is_some_and(|(_, ppid)| ppid == me))
        .collect()
}

/// What one look for orphans found.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct OrphanScan {
    /// Zombie orphans reaped.
    pub(crate) reaped: usize,
    /// Orphans still alive (they will need reaping once they end).
    pub(crate) alive: usize,
}

/// Reap zombie children that are not tracked tools, and count the live ones.
pub(crate) fn reap_orphans(tracked: &Tracked) -> OrphanScan {
    let mut scan = OrphanScan::default();
    let kids = children();
    if kids.is_empty() {
        return scan;
    }
    // Hold the lock while deciding and reaping, so a tool being spawned right
    // now (recorded under the same lock) is never taken for an orphan. A
    // tracked tool's state is not read at all.
    let g = tracked.pids.lock_unpoisoned();
    for pid in kids {
        if tracked.leaves_alone(&g, pid) {
            continue;
        }
        let Some((state, _)) = proc_stat(pid) else {
            continue;
        };
        if state != 'Z' {
            scan.alive += 1;
            continue;
        }
        if crate::sys::reap_if_exited(pid) {
            scan.reaped += 1;
        }
    }
    scan
}

/// Kill every child that is not a tracked tool (and its group): used at shutdown
/// for orphans re-parented to us.
pub(crate) fn kill_orphans(tracked: &Tracked) {
    let g = tracked.pids.lock_unpoisoned();
    for pid in children() {
        if !tracked.leaves_alone(&g, pid) {
            // A child of ours and its group; either may be gone already.
            let _ = crate::sys::kill(-pid, libc::SIGKILL);
            let _ = crate::sys::kill(pid, libc::SIGKILL);
        }
    }
}
