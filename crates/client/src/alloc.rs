//! Tag and fid allocators: small integers handed out lowest-free-first from a
//! free list, so freed values are reused and the reserved `NOTAG`/`NOFID`
//! values are never produced.

use toolsrv_wire::{NOFID, NOTAG};

/// Allocates 9P tags (never [`NOTAG`]).
#[derive(Debug, Default)]
pub(crate) struct TagAllocator {
    next: u16,
    free: Vec<u16>,
}

impl TagAllocator {
    /// A free tag, or `None` when all 65535 are in use.
    pub(crate) fn alloc(&mut self) -> Option<u16> {
        if let Some(t) = self.free.pop() {
            return Some(t);
        }
        if self.next == NOTAG {
            return None;
        }
        let t = self.next;
        self.next += 1;
        Some(t)
    }

    /// Return `tag` for reuse. The caller guarantees it was allocated and is
    /// freed only once.
    pub(crate) fn free(&mut self, tag: u16) {
        debug_assert!(tag != NOTAG && tag < self.next);
        self.free.push(tag);
    }

    /// How many tags are currently allocated.
    pub(crate) fn in_use(&self) -> usize {
        self.next as usize - self.free.len()
    }
}

/// Allocates fids (never [`NOFID`]). Fid 0 is the root fid of the attach.
#[derive(Debug, Default)]
pub(crate) struct FidAllocator {
    next: u32,
    free: Vec<u32>,
}

impl FidAllocator {
    /// A free fid, or `None` when all are in use.
    pub(crate) fn alloc(&mut self) -> Option<u32> {
        if let Some(f) = self.free.pop() {
            return Some(f);
        }
        if self.next == NOFID {
            return None;
        }
        let f = self.next;
        self.next += 1;
        Some(f)
    }

    /// Return `fid` for reuse.
    pub(crate) fn free(&mut self, fid: u32) {
        debug_assert!(fid != NOFID && fid < self.next);
        self.free.push(fid);
    }

    /// How many fids are currently allocated.
    pub(crate) fn in_use(&self) -> usize {
        self.next as usize - self.free.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tags_are_reused_and_never_notag() {
        let mut a = TagAllocator::default();
        let mut seen = std::collections::HashSet::new();
        while let Some(t) = a.alloc() {
            assert_ne!(t, NOTAG);
            assert!(seen.insert(t), "tag {t} handed out twice");
        }
        assert_eq!(seen.len(), 65535);
        assert_eq!(a.in_use(), 65535);
        a.free(42);
        a.free(7);
        assert_eq!(a.in_use(), 65533);
        assert_eq!(a.alloc(), Some(7));
        assert_eq!(a.alloc(), Some(42));
        assert_eq!(a.alloc(), None);
    }

    #[test]
    fn fids_are_reused_and_counted() {
        let mut a = FidAllocator::default();
        let f0 = a.alloc().expect("fid");
        let f1 = a.alloc().expect("fid");
        assert_ne!(f0, f1);
        assert_eq!(a.in_use(), 2);
        a.free(f0);
        assert_eq!(a.in_use(), 1);
        assert_eq!(a.alloc(), Some(f0));
        assert_eq!(a.alloc(), Some(2));
    }

    #[test]
    fn fid_allocator_stops_before_nofid() {
        let mut a = FidAllocator {
            next: NOFID - 1,
            free: Vec::new(),
        };
        assert_eq!(a.alloc(), Some(NOFID - 1));
        assert_eq!(a.alloc(), None);
        a.free(NOFID - 1);
        assert_eq!(a.alloc(), Some(NOFID - 1));
    }
}
