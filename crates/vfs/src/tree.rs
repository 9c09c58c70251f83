//! Builders for declaring a tree in one place.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use crate::node::{Dir, File, Node, NodeKind};

/// Qid paths of declared (static) nodes count up from 1; generated nodes must
/// use paths at or above [`GENERATED_QID_BASE`].
static NEXT_QID: AtomicU64 = AtomicU64::new(1);

/// Qid paths at or above this value are free for generated nodes (e.g. `proc/{pid}`).
pub const GENERATED_QID_BASE: u64 = 1 << 48;

fn next_qid() -> u64 {
    NEXT_QID.fetch_add(1, Ordering::Relaxed)
}

/// A directory with a fixed list of children.
pub struct StaticDir {
    children: Vec<Node>,
}

impl StaticDir {
    /// A directory holding `children`.
    pub fn new(children: Vec<Node>) -> StaticDir {
        StaticDir { children }
    }
}

impl Dir for StaticDir {
    fn lookup(&self, name: &str) -> Option<Node> {
        self.children.iter().find(|n| &*n.name == name).cloned()
    }
    fn children(&self) -> Vec<Node> {
        self.children.clone()
    }
}

/// A directory node with fixed children and a fresh qid.
pub fn dir(name: &str, perm: u32, children: Vec<Node>) -> Node {
    dir_with(name, perm, Arc::new(StaticDir::new(children)))
}

/// A directory node with a custom (e.g. generated) [`Dir`] and a fresh qid.
pub fn dir_with(name: &str, perm: u32, d: Arc<dyn Dir>) -> Node {
    Node {
        name: name.into(),
        qid_path: next_qid(),
        perm,
        kind: NodeKind::Dir(d),
    }
}

/// A file node with a fresh qid.
pub fn file(name: &str, perm: u32, f: impl File) -> Node {
    Node {
        name: name.into(),
        qid_path: next_qid(),
        perm,
        kind: NodeKind::File(Arc::new(f)),
    }
}
