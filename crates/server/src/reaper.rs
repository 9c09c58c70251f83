//! toolsrv is a child subreaper: orphaned descendants of tools (a tool that
//! started something and exited) are re-parented to it rather than to init, so
//! they can be reaped and, at shutdown, killed.
//!
//! Tools themselves are reaped through their pidfds by the executor; the reaper
//! never calls `waitpid(-1)` (that would steal their statuses). It looks for
//! zombie children that are not tracked tools and reaps those by pid.

use std::collections::HashSet;
use std::sync::Mutex;

/// Pids of tool processes the executor reaps itself.
#[derive(Default)]
pub struct Tracked(Mutex<HashSet<i32>>);

impl Tracked {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashSet<i32>> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }
    /// Spawn while holding the lock, recording the new pid before the orphan
    /// reaper can look at it (a fast tool may already be a zombie when `spawn`
    /// returns).
    pub fn spawning<T, E>(
        &self,
        spawn: impl FnOnce() -> Result<T, E>,
        pid_of: impl FnOnce(&T) -> i32,
    ) -> Result<T, E> {
        let mut g = self.lock();
        let t = spawn()?;
        g.insert(pid_of(&t));
        Ok(t)
    }
    /// A tool was reaped.
    pub fn remove(&self, pid: i32) {
        self.lock().remove(&pid);
    }
}

/// Make this process a child subreaper.
pub fn become_subreaper() -> std::io::Result<()> {
    // Safety: prctl with integer arguments only.
    if unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// Our children: (pid, state letter).
///
/// Read from `/proc/self/task/*/children` (a few small files, one per thread),
/// not by scanning every process on the host; the full scan is the fallback for
/// kernels without `CONFIG_PROC_CHILDREN`.
fn children() -> Vec<(i32, char)> {
    let pids = task_children().unwrap_or_else(scan_children);
    pids.into_iter()
        .filter_map(|pid| Some((pid, proc_stat(pid)?.0)))
        .collect()
}

/// (state letter, ppid) of a process.
fn proc_stat(pid: i32) -> Option<(char, i32)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &stat[stat.rfind(')')? + 1..];
    let mut f = rest.split_whitespace();
    let state = f.next()?.chars().next()?;
    Some((state, f.next()?.parse().ok()?))
}

fn task_children() -> Option<Vec<i32>> {
    let mut out = Vec::new();
    for task in std::fs::read_dir("/proc/self/task").ok()? {
        let path = task.ok()?.path().join("children");
        let text = std::fs::read_to_string(path).ok()?;
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

/// Reap zombie children that are not tracked tools; returns how many.
pub fn reap_orphans(tracked: &Tracked) -> usize {
    let mut n = 0;
    let zombies: Vec<i32> = children()
        .into_iter()
        .filter(|(_, state)| *state == 'Z')
        .map(|(pid, _)| pid)
        .collect();
    if zombies.is_empty() {
        return 0;
    }
    // Hold the lock while deciding and reaping, so a tool being spawned right
    // now (recorded under the same lock) is never taken for an orphan.
    let g = tracked.lock();
    for pid in zombies {
        if !g.contains(&pid) {
            let mut status = 0;
            // Safety: waitpid on one specific child with WNOHANG.
            if unsafe { libc::waitpid(pid, &mut status, libc::WNOHANG) } == pid {
                n += 1;
            }
        }
    }
    n
}

/// Kill every child that is not a tracked tool (and its group): used at shutdown
/// for orphans re-parented to us.
pub fn kill_orphans(tracked: &Tracked) {
    let g = tracked.lock();
    for (pid, _) in children() {
        if !g.contains(&pid) {
            // Safety: kill(2) of a process (group) that is our child.
            unsafe {
                libc::kill(-pid, libc::SIGKILL);
                libc::kill(pid, libc::SIGKILL);
            }
        }
    }
}
