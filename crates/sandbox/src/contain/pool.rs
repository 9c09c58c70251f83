//! The group pool: run groups handed back after their run, made reusable once
//! empty, and removed when no run needed them for a while.

use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use toolsrv_base::LockUnpoisoned;

use super::group::Group;
use super::hierarchy::Cgroups;
use super::run_group::RunGroup;
use super::{Containment, Limits};

/// Groups kept for reuse at most (more are removed when their run ends).
const POOL_MAX: usize = 64;

#[derive(Default)]
pub(super) struct Pool {
    pub(super) idle: Vec<RunGroup>,
    /// Groups whose processes were killed but had not all exited yet.
    pub(super) draining: Vec<RunGroup>,
    /// Groups that will not be used again, removed once empty.
    pub(super) retiring: Vec<RunGroup>,
}

impl Containment {
    /// Upkeep, about once a second: removes the groups of killed runs once they
    /// are empty, makes drained groups reusable, and removes pooled groups no
    /// run needed for `idle_for` (so a burst of runs does not keep its groups
    /// and their descriptors for the server's life).
    pub fn collect(&self, idle_for: Duration) {
        let Some(cg) = &self.cgroups else {
            return;
        };
        let mut gone = Vec::new();
        {
            let mut pool = cg.lock();
            let Pool {
                idle,
                draining,
                retiring,
            } = &mut *pool;
            let mut i = 0;
            while i < retiring.len() {
                if retiring[i].is_empty() {
                    gone.push(retiring.swap_remove(i));
                } else {
                    i += 1;
                }
            }
            let mut i = 0;
            while i < draining.len() {
                if draining[i].is_empty() {
                    idle.push(draining.swap_remove(i));
                } else {
                    i += 1;
                }
            }
            let mut i = 0;
            while i < idle.len() {
                if idle[i].returned.elapsed() >= idle_for {
                    gone.push(idle.swap_remove(i));
                } else {
                    i += 1;
                }
            }
        }
        for g in gone {
            g.remove();
        }
    }
}

impl Cgroups {
    pub(super) fn lock(&self) -> std::sync::MutexGuard<'_, Pool> {
        self.pool.lock_unpoisoned()
    }

    /// A group for a run with `limits`: a pooled one when there is one.
    pub(super) fn take(&self, limits: &Limits) -> std::io::Result<RunGroup> {
        let pooled = {
            // Draining and retiring groups are looked at by the upkeep
            // (`Containment::collect`), not on the way to every spawn.
            self.lock().idle.pop()
        };
        let mut g = match pooled {
            Some(g) => g,
            None => self.create()?,
        };
        if let Err(e) = g.apply(self, limits) {
            g.remove();
            return Err(e);
        }
        g.known_empty = false;
        Ok(g)
    }

    fn create(&self) -> std::io::Result<RunGroup> {
        let n = self.next.fetch_add(1, Ordering::Relaxed);
        let name = format!("run.{n}");
        let mk = |d: &Option<PathBuf>| d.as_ref().map(|d| Group::create(d.join(&name))).transpose();
        let mut g = RunGroup {
            v2: None,
            pids: None,
            memory: None,
            cpuacct: None,
            pids_max: None,
            memory_max: None,
            pids_refused: 0,
            oom_kills: 0,
            killed: false,
            known_empty: false,
            returned: Instant::now(),
        };
        g.v2 = mk(&self.v2)?;
        g.pids = match mk(&self.pids) {
            Ok(p) => p,
            Err(e) => {
                g.remove();
                return Err(e);
            }
        };
        Ok(g)
    }

    /// Back to the pool once its run ended (after [`RunGroup::kill`]).
    pub(super) fn give_back(&self, mut g: RunGroup) {
        g.returned = Instant::now();
        let mut pool = self.lock();
        if g.killed {
            if g.is_empty() {
                drop(pool);
                g.remove();
            } else {
                pool.retiring.push(g);
            }
            return;
        }
        if pool.idle.len() + pool.draining.len() >= POOL_MAX {
            drop(pool);
            if g.is_empty() {
                g.remove();
            }
            // A full pool and a group still draining: it stays until the
            // server's teardown removes the instance.
            return;
        }
        if g.is_empty() {
            pool.idle.push(g);
        } else {
            pool.draining.push(g);
        }
    }
}
