//! Nodes of a synthetic file tree and the handlers behind them.

use std::sync::Arc;

use async_trait::async_trait;
use toolsrv_wire::{Qid, Stat, DMDIR, QTDIR, QTFILE};

use crate::conninfo::ConnInfo;
use crate::error::Error;

/// The access an open asks for (the low two bits of the 9P open mode).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OpenMode {
    /// `OREAD`.
    Read,
    /// `OWRITE`.
    Write,
    /// `ORDWR`.
    ReadWrite,
}

impl OpenMode {
    /// Whether the open may read.
    pub fn reads(self) -> bool {
        matches!(self, OpenMode::Read | OpenMode::ReadWrite)
    }
    /// Whether the open may write.
    pub fn writes(self) -> bool {
        matches!(self, OpenMode::Write | OpenMode::ReadWrite)
    }
}

/// One open instance of a file (one per `Topen`). State that a write-then-read
/// file keeps between the write and the read lives here.
#[async_trait]
pub trait Handle: Send + Sync + 'static {
    /// Read up to `count` bytes at `offset`. May wait (a blocking read); the core
    /// runs a waiting read in its own task, abandons it on `Tflush`, and answers
    /// `cancelled` when the fid is clunked meanwhile.
    async fn read(&self, offset: u64, count: u32) -> Result<Vec<u8>, Error> {
        let _ = (offset, count);
        Err(Error::permission_denied())
    }
    /// Write `data` at `offset`; returns the number of bytes taken.
    async fn write(&self, offset: u64, data: Vec<u8>) -> Result<u32, Error> {
        let _ = (offset, data);
        Err(Error::permission_denied())
    }
    /// The close hook: called once when the fid is clunked (or its connection
    /// closes). Must not block; spawn work that takes time.
    fn clunk(&self) {}
}

/// A file: opening it yields a [`Handle`].
pub trait File: Send + Sync + 'static {
    /// Open the file. Permission bits were checked already.
    fn open(&self, mode: OpenMode, conn: &ConnInfo) -> Result<Arc<dyn Handle>, Error>;
}

/// A directory: fixed or generated children.
pub trait Dir: Send + Sync + 'static {
    /// The child called `name`, if any.
    fn lookup(&self, name: &str) -> Option<Node>;
    /// All children, in listing order.
    fn children(&self) -> Vec<Node>;
}

/// What a node is.
#[derive(Clone)]
pub enum NodeKind {
    /// A directory.
    Dir(Arc<dyn Dir>),
    /// A file.
    File(Arc<dyn File>),
}

/// A named entry of the tree.
#[derive(Clone)]
pub struct Node {
    /// The entry's name (`/` for the root).
    pub name: Arc<str>,
    /// Unique per file on the server; never reused for another file.
    pub qid_path: u64,
    /// Permission bits (`0o444`, `0o200`, ...); `DMDIR` is added for directories.
    pub perm: u32,
    /// Directory or file, with its handler.
    pub kind: NodeKind,
}

impl Node {
    /// Whether this node is a directory.
    pub fn is_dir(&self) -> bool {
        matches!(self.kind, NodeKind::Dir(_))
    }

    /// The node's qid.
    pub fn qid(&self) -> Qid {
        Qid {
            ty: if self.is_dir() { QTDIR } else { QTFILE },
            version: 0,
            path: self.qid_path,
        }
    }

    /// The 9P mode word: permission bits plus `DMDIR` for directories.
    pub fn mode(&self) -> u32 {
        if self.is_dir() {
            self.perm | DMDIR
        } else {
            self.perm
        }
    }

    /// The node's stat entry, owned by `user`.
    pub fn stat(&self, user: &str, mtime: u32) -> Stat {
        Stat {
            ty: 0,
            dev: 0,
            qid: self.qid(),
            mode: self.mode(),
            atime: mtime,
            mtime,
            length: 0,
            name: self.name.to_string(),
            uid: user.to_string(),
            gid: user.to_string(),
            muid: user.to_string(),
        }
    }

    /// Whether `mode` is allowed by the owner permission bits.
    pub fn permits(&self, mode: OpenMode) -> bool {
        (!mode.reads() || self.perm & 0o400 != 0) && (!mode.writes() || self.perm & 0o200 != 0)
    }
}
