//! A small time-limited cache for what `prepare` derives from the filesystem on
//! every request: resolved sandbox rules (a `canonicalize` per policy path) and
//! the private temporary directory. Entries live [`TTL`]; a policy path created,
//! removed or re-pointed takes effect within that time.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use toolsrv_base::LockUnpoisoned;

/// How long a derived value is reused.
pub(crate) const TTL: Duration = Duration::from_secs(2);

/// At most this many keys are kept (oldest evicted first).
const CAPACITY: usize = 32;

/// A key part compared by identity (the same allocation), holding it alive so
/// its address cannot be reused by another value while cached.
pub(crate) struct Same<T>(pub(crate) std::sync::Arc<T>);

impl<T> PartialEq for Same<T> {
    fn eq(&self, other: &Self) -> bool {
        std::sync::Arc::ptr_eq(&self.0, &other.0)
    }
}

/// Values by key, each valid for [`TTL`].
pub(crate) struct TtlCache<K, V> {
    entries: Mutex<Vec<(K, Instant, V)>>,
}

impl<K, V> Default for TtlCache<K, V> {
    fn default() -> Self {
        TtlCache {
            entries: Mutex::new(Vec::new()),
        }
    }
}

impl<K: PartialEq, V: Clone> TtlCache<K, V> {
    /// The cached value for `key`, or `make()` (run without the lock held),
    /// stored for next time.
    pub(crate) fn get_or(&self, key: K, make: impl FnOnce() -> V) -> V {
        self.get_or_keep(key, make, |_| true)
    }

    /// [`TtlCache::get_or`], storing what `make` returns only when `keep`
    /// says so.
    pub(crate) fn get_or_keep(
        &self,
        key: K,
        make: impl FnOnce() -> V,
        keep: impl FnOnce(&V) -> bool,
    ) -> V {
        let now = Instant::now();
        {
            let mut g = self.entries.lock_unpoisoned();
            g.retain(|(_, at, _)| now.duration_since(*at) < TTL);
            if let Some((_, _, v)) = g.iter().find(|(k, _, _)| *k == key) {
                return v.clone();
            }
        }
        let v = make();
        if !keep(&v) {
            return v;
        }
        let mut g = self.entries.lock_unpoisoned();
        if g.len() >= CAPACITY {
            g.remove(0);
        }
        g.push((key, now, v.clone()));
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reuses_within_the_ttl_and_keys_apart() {
        let c: TtlCache<u32, u32> = TtlCache::default();
        let mut calls = 0;
        assert_eq!(
            c.get_or(1, || {
                calls += 1;
                10
            }),
            10
        );
        assert_eq!(
            c.get_or(1, || {
                calls += 1;
                11
            }),
            10
        );
        assert_eq!(
            c.get_or(2, || {
                calls += 1;
                20
            }),
            20
        );
        assert_eq!(calls, 2);
    }

    #[test]
    fn a_value_not_kept_is_made_again_next_time() {
        let c: TtlCache<u32, u32> = TtlCache::default();
        assert_eq!(c.get_or_keep(1, || 10, |_| false), 10);
        assert_eq!(c.get_or_keep(1, || 11, |v| *v != 12), 11);
        assert_eq!(c.get_or(1, || 12), 11);
    }
}
