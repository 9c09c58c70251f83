//! The fid table of one connection.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use toolsrv_base::LockUnpoisoned;

use tokio_util::sync::CancellationToken;

use crate::auth::AuthHandle;
use crate::dirread::Listing;
use crate::node::{Handle, Node, OpenMode};

/// What an open fid reads from.
pub(crate) enum Opened {
    /// A file and its per-open handle.
    File {
        handle: Arc<dyn Handle>,
        mode: OpenMode,
    },
    /// A directory listing.
    Dir(Arc<Mutex<Listing>>),
}

/// One fid.
pub(crate) struct Fid {
    /// The file or directory it names.
    pub node: Node,
    /// Its ancestors, root first (for walking `..`).
    pub parents: Vec<Node>,
    /// Set by `Topen`.
    pub open: Option<Opened>,
    /// Set for an auth fid (from `Tauth`).
    pub auth: Option<Arc<dyn AuthHandle>>,
    /// Cancelled when the fid is clunked: completes reads still waiting on it.
    pub cancel: CancellationToken,
}

impl Fid {
    pub(crate) fn new(node: Node, parents: Vec<Node>) -> Fid {
        Fid {
            node,
            parents,
            open: None,
            auth: None,
            cancel: CancellationToken::new(),
        }
    }

    /// Run the close hook and complete waiting reads. Called once, on removal.
    pub(crate) fn close(self) {
        self.cancel.cancel();
        if let Some(Opened::File { handle, .. }) = &self.open {
            handle.clunk();
        }
        if let Some(a) = &self.auth {
            a.clunk();
        }
    }
}

/// The fids of one connection.
#[derive(Default)]
pub(crate) struct FidTable {
    fids: Mutex<HashMap<u32, Fid>>,
}

impl FidTable {
    pub(crate) fn with<R>(&self, f: impl FnOnce(&mut HashMap<u32, Fid>) -> R) -> R {
        let mut g = self.fids.lock_unpoisoned();
        f(&mut g)
    }

    /// Remove every fid, running close hooks outside the lock.
    pub(crate) fn clear(&self) {
        let all: Vec<Fid> = self.with(|m| m.drain().map(|(_, f)| f).collect());
        for f in all {
            f.close();
        }
    }
}
