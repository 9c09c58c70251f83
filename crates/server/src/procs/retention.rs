//! How much the process table keeps of finished processes (docs/containment.md): the
//! table itself, and the bookkeeping that bounds finished processes by count
//! and by the bytes of output they retain, dismissing the oldest finished first.

use std::collections::{BTreeMap, VecDeque};
use std::sync::atomic::Ordering;
use std::sync::Arc;

use super::Proc;

/// What a finished process's entry costs beside its output (the entry, its
/// strings, its channels), counted against [`Retention::max_output_bytes`].
pub(crate) const ENTRY_OVERHEAD: u64 = 2048;

/// Bounds on what finished processes keep (defaults: [`crate::Config`]).
#[derive(Debug, Clone, Copy)]
pub struct Retention {
    /// The memory kept by finished processes together, in bytes: their output
    /// plus `ENTRY_OVERHEAD` each, with room left for one more process's
    /// output limit (so that finishing one never takes the total past it).
    pub max_output_bytes: u64,
    /// The number of finished processes kept.
    pub max_finished: usize,
    /// Running (or awaiting approval) background processes per agent.
    pub max_background_per_agent: usize,
}

/// The processes by pid, and the finished ones in the order they ended.
pub(crate) struct Table {
    pub(crate) map: BTreeMap<u64, Arc<Proc>>,
    /// Pids in the order they ended; may hold pids removed since (skipped).
    ended: VecDeque<u64>,
    /// Finished processes counted (in `map` and in `ended`).
    ended_live: usize,
    /// Output bytes they retain.
    ended_bytes: u64,
    retention: Retention,
    /// `retention.max_output_bytes` less one process's output limit.
    bytes_bound: u64,
}

impl Table {
    /// A table for processes that keep at most `max_output` bytes each.
    pub(crate) fn new(retention: Retention, max_output: u64) -> Table {
        Table {
            map: BTreeMap::new(),
            ended: VecDeque::new(),
            ended_live: 0,
            ended_bytes: 0,
            bytes_bound: retention.max_output_bytes.saturating_sub(max_output),
            retention,
        }
    }

    pub(crate) fn retention(&self) -> &Retention {
        &self.retention
    }

    /// Count `pid` (just finished) and dismiss the oldest finished processes
    /// beyond the bounds; returns the bytes they retained.
    pub(crate) fn ended(&mut self, pid: u64) -> u64 {
        let Some(p) = self.map.get(&pid) else {
            return 0;
        };
        if p.counted.swap(true, Ordering::AcqRel) {
            return 0;
        }
        self.ended.push_back(p.pid);
        self.ended_live += 1;
        self.ended_bytes += p.retained.load(Ordering::Acquire);
        let mut dismissed = 0;
        while self.ended_bytes > self.bytes_bound || self.ended_live > self.retention.max_finished {
            let Some(pid) = self.ended.pop_front() else {
                break;
            };
            if self.remove(pid).is_some() {
                dismissed += 1;
            }
        }
        if self.ended.len() > 2 * self.ended_live + 1024 {
            let map = &self.map;
            self.ended.retain(|pid| map.contains_key(pid));
        }
        dismissed
    }

    /// Take `pid` out of the table, uncounting it if it was counted.
    pub(crate) fn remove(&mut self, pid: u64) -> Option<Arc<Proc>> {
        let p = self.map.remove(&pid)?;
        if p.counted.load(Ordering::Acquire) {
            self.ended_live -= 1;
            self.ended_bytes -= p.retained.load(Ordering::Acquire);
        }
        Some(p)
    }
}
