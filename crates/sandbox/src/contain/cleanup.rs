//! Stale-group removal and teardown: the groups of servers that are gone, and
//! every group of this one at shutdown or by its watchdog.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use super::group::Group;
use super::mounts::Hierarchy;
use super::{sys, Containment};

impl Containment {
    /// Kills every process of every run and removes every group this server
    /// made, waiting at most `limit` (shutdown).
    pub fn shutdown(&self, limit: Duration) {
        if let Some(cg) = &self.cgroups {
            let mut pool = cg.lock();
            pool.idle.clear();
            pool.draining.clear();
            pool.retiring.clear();
        }
        teardown(&self.instance_dirs(), limit);
    }
}

/// Whether `name` is an instance directory (`toolsrv.<pid>`) and whose.
fn instance_owner(name: &str) -> Option<i32> {
    let rest = name.strip_prefix("toolsrv.")?;
    rest.strip_suffix(".server").unwrap_or(rest).parse().ok()
}

/// Removes the instance groups of servers that are gone (killing what they
/// left); how many directories were removed.
pub(super) fn remove_stale(hierarchies: &[Hierarchy]) -> usize {
    let me = sys::getpid();
    let mut stale = Vec::new();
    for h in hierarchies {
        let Ok(entries) = std::fs::read_dir(&h.own_dir) else {
            continue;
        };
        for e in entries.flatten() {
            let name = e.file_name();
            let Some(pid) = name.to_str().and_then(instance_owner) else {
                continue;
            };
            // Ours (`pid == me`) cannot exist yet: it is a dead server's
            // whose pid this process now has.
            if pid == me || !sys::alive(pid) {
                stale.push(e.path());
            }
        }
    }
    let n = stale.len();
    if n > 0 {
        teardown(&stale, Duration::from_secs(3));
    }
    n
}

/// Kills every process in the instance directories `dirs` and removes them with
/// every group inside, waiting at most `limit` for the processes to die.
///
/// Used at shutdown, by the watchdog when the server died, and at startup for
/// what a dead server left. Runs in a plain thread or process (it sleeps).
pub fn teardown(dirs: &[PathBuf], limit: Duration) {
    let deadline = Instant::now() + limit;
    // v2: one write kills a whole subtree.
    for d in dirs {
        let _ = std::fs::write(d.join("cgroup.kill"), "1");
    }
    let runs = |d: &Path| -> Vec<PathBuf> {
        std::fs::read_dir(d)
            .map(|it| {
                it.flatten()
                    .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
                    .map(|e| e.path())
                    .collect()
            })
            .unwrap_or_default()
    };
    loop {
        let mut left = 0;
        for d in dirs {
            for r in runs(d) {
                if let Ok(mut g) = Group::open(r) {
                    left += g.kill_listed().unwrap_or(0);
                }
            }
            if let Ok(mut g) = Group::open(d.clone()) {
                left += g.kill_listed().unwrap_or(0);
            }
        }
        if left == 0 || Instant::now() >= deadline {
            break;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    loop {
        let mut busy = false;
        for d in dirs {
            for r in runs(d) {
                busy |= remove_dir(&r);
            }
            busy |= remove_dir(d);
        }
        if !busy || Instant::now() >= deadline {
            break;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// `rmdir`; whether the directory is still there (busy).
fn remove_dir(d: &Path) -> bool {
    match std::fs::remove_dir(d) {
        Ok(()) => false,
        Err(e) => e.kind() != std::io::ErrorKind::NotFound,
    }
}

#[cfg(test)]
mod tests {
    use super::instance_owner;

    #[test]
    fn instance_names_carry_their_server() {
        assert_eq!(instance_owner("toolsrv.123"), Some(123));
        assert_eq!(instance_owner("toolsrv.123.server"), Some(123));
        assert_eq!(instance_owner("toolsrv.x"), None);
        assert_eq!(instance_owner("run.1"), None);
    }
}
