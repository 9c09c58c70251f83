//! Directory reads: a snapshot of stat entries served at entry boundaries.

use toolsrv_wire::encode_stat;

use crate::error::Error;
use crate::node::{Node, NodeKind};

/// The stat entries of a directory, encoded once per open (and again on a
/// rewind to offset 0), served in whole entries.
pub(crate) struct Listing {
    bytes: Vec<u8>,
    /// Start offset of every entry, plus `bytes.len()` at the end.
    bounds: Vec<usize>,
}

impl Listing {
    pub(crate) fn snapshot(node: &Node, user: &str, mtime: u32) -> Listing {
        let mut bytes = Vec::new();
        let mut bounds = vec![0];
        if let NodeKind::Dir(d) = &node.kind {
            for child in d.children() {
                encode_stat(&child.stat(user, mtime), &mut bytes);
                bounds.push(bytes.len());
            }
        }
        Listing { bytes, bounds }
    }

    /// Whole entries starting at `offset`, at most `count` bytes in all.
    pub(crate) fn read(&self, offset: u64, count: u32) -> Result<Vec<u8>, Error> {
        let Ok(start) = usize::try_from(offset) else {
            return Err(Error::new(format!(
                "invalid directory read offset {offset}"
            )));
        };
        let Ok(i) = self.bounds.binary_search(&start) else {
            return Err(Error::new(format!(
                "invalid directory read offset {offset}"
            )));
        };
        let limit = start.saturating_add(count as usize);
        let end = self.bounds[i..]
            .iter()
            .take_while(|&&b| b <= limit)
            .last()
            .copied()
            .unwrap_or(start);
        if end == start && start < self.bytes.len() {
            return Err(Error::new(format!(
                "read count {count} too small for a directory entry"
            )));
        }
        Ok(self.bytes[start..end].to_vec())
    }
}
