//! Request dispatch: each 9P request of a connection against its fid table
//! and tree. Requests that complete at once queue their reply; a read or
//! write that waits moves to a task of its own, which sends its reply.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use tokio_util::sync::CancellationToken;
use toolsrv_base::LockUnpoisoned;
use toolsrv_wire::{
    Body, Frame, Qid, Stat, DMAUTH, NOFID, OEXEC, ORCLOSE, ORDWR, OTRUNC, OWRITE, QTAUTH,
    VERSION_9P2000,
};

use crate::auth::Auth;
use crate::conninfo::ConnInfo;
use crate::dirread::Listing;
use crate::error::Error;
use crate::fids::{Fid, FidTable, Opened};
use crate::inflight::Inflight;
use crate::limits::Limits;
use crate::node::{Handle, Node, NodeKind, OpenMode};
use crate::outbox::Outbox;
use crate::replies::Replies;
use crate::writer::Writer;

/// The largest msize the server accepts (1 MiB).
pub const MAX_MSIZE: u32 = 1 << 20;
/// The smallest msize a client may ask for.
const MIN_MSIZE: u32 = 256;
/// Room for the header of an `Rread`/`Twrite` inside msize (as Plan 9's IOHDRSZ).
const IOHDRSZ: u32 = 24;
/// Header of an `Rread`: size[4] type[1] tag[2] count[4].
const RREAD_HDR: u32 = 11;
/// The qid path of auth files: outside the range any tree uses.
const AUTH_QID_PATH: u64 = u64::MAX;

type IoFuture = Pin<Box<dyn Future<Output = Result<Body, Error>> + Send>>;

/// One connection's state: the tree, its fids, its waiting requests, and
/// where replies go.
pub(crate) struct Conn {
    root: Node,
    auth: Arc<dyn Auth>,
    pub(crate) info: ConnInfo,
    pub(crate) fids: FidTable,
    pub(crate) inflight: Inflight,
    pub(crate) writer: Writer,
    pub(crate) msize: AtomicU32,
    versioned: AtomicBool,
    /// Set by the first successful `Tattach`.
    pub(crate) attached: AtomicBool,
    pub(crate) limits: Limits,
    pub(crate) replies: Replies,
}

impl Conn {
    /// A connection serving `root`, not yet versioned nor attached.
    pub(crate) fn new(
        root: Node,
        auth: Arc<dyn Auth>,
        info: ConnInfo,
        limits: Limits,
        writer: Writer,
    ) -> Conn {
        Conn {
            root,
            auth,
            info,
            fids: FidTable::default(),
            inflight: Inflight::default(),
            writer,
            msize: AtomicU32::new(MAX_MSIZE),
            versioned: AtomicBool::new(false),
            attached: AtomicBool::new(false),
            replies: Replies::new(limits.max_unsent),
            limits,
        }
    }
}

/// How a request was handled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Handled {
    /// Its reply is queued.
    Replied,
    /// It waits in a task of its own, which sends the reply; its tag.
    Waiting(u16),
}

fn reply(out: &mut Outbox, tag: u16, r: Result<Body, Error>) -> Handled {
    out.push(tag, r.unwrap_or_else(|e| Body::Rerror { ename: e.0 }));
    Handled::Replied
}

/// The error of a walk (or attach, auth) to a new fid beyond [`Limits::max_fids`].
fn too_many_fids() -> Error {
    Error::new("too many fids")
}

fn unknown_fid(fid: u32) -> Error {
    Error::new(format!("unknown fid {fid}"))
}

impl Conn {
    /// Handle one request: its reply is queued on `out`, or it waits in a
    /// task of its own that sends the reply.
    pub(crate) fn handle(self: &Arc<Self>, f: Frame, out: &mut Outbox) -> Handled {
        let tag = f.tag;
        if let Body::Tversion { msize, version } = f.body {
            return reply(out, tag, self.version(msize, &version));
        }
        if !self.versioned.load(Ordering::Relaxed) {
            return reply(
                out,
                tag,
                Err(Error::new("version not negotiated: send Tversion first")),
            );
        }
        if self.inflight.contains(tag) {
            return reply(
                out,
                tag,
                Err(Error::new(format!("tag {tag} is already in use"))),
            );
        }
        let r = match f.body {
            Body::Tauth { afid, uname, aname } => self.auth(afid, &uname, &aname),
            Body::Tattach { fid, afid, .. } => self.attach(fid, afid),
            Body::Tflush { oldtag } => {
                self.inflight.flush(oldtag);
                Ok(Body::Rflush)
            }
            Body::Twalk {
                fid,
                newfid,
                wnames,
            } => self.walk(fid, newfid, &wnames),
            Body::Topen { fid, mode } => self.open(fid, mode),
            Body::Tcreate { fid, .. } => self.fid_exists(fid).and(Err(Error::permission_denied())),
            Body::Tread { fid, offset, count } => return self.read(tag, fid, offset, count, out),
            Body::Twrite { fid, offset, data } => return self.write(tag, fid, offset, data, out),
            Body::Tclunk { fid } => self.clunk(fid).map(|_| Body::Rclunk),
            Body::Tremove { fid } => self.clunk(fid).and(Err(Error::permission_denied())),
            Body::Tstat { fid } => self.stat(fid),
            Body::Twstat { fid, stat } => self.wstat(fid, &stat),
            other => Err(Error::new(format!(
                "unexpected message type {}: not a request",
                other.type_id()
            ))),
        };
        reply(out, tag, r)
    }

    fn version(&self, msize: u32, version: &str) -> Result<Body, Error> {
        self.inflight.abort_all();
        self.fids.clear();
        let msize = msize.min(MAX_MSIZE);
        let ok = version == VERSION_9P2000 || version.starts_with("9P2000.");
        if !ok {
            self.versioned.store(false, Ordering::Relaxed);
            return Ok(Body::Rversion {
                msize,
                version: "unknown".into(),
            });
        }
        if msize < MIN_MSIZE {
            return Err(Error::new(format!(
                "msize {msize} is too small (minimum {MIN_MSIZE})"
            )));
        }
        self.msize.store(msize, Ordering::Relaxed);
        self.versioned.store(true, Ordering::Relaxed);
        Ok(Body::Rversion {
            msize,
            version: VERSION_9P2000.into(),
        })
    }

    fn fid_exists(&self, fid: u32) -> Result<(), Error> {
        if self.fids.with(|m| m.contains_key(&fid)) {
            Ok(())
        } else {
            Err(unknown_fid(fid))
        }
    }

    fn insert_new(&self, fid: u32, f: Fid) -> Result<(), Error> {
        self.fids.with(|m| {
            if m.contains_key(&fid) {
                return Err(Error::new(format!("fid {fid} is already in use")));
            }
            if m.len() >= self.limits.max_fids {
                return Err(too_many_fids());
            }
            m.insert(fid, f);
            Ok(())
        })
    }

    fn auth(&self, afid: u32, uname: &str, aname: &str) -> Result<Body, Error> {
        if afid == NOFID {
            return Err(Error::new("invalid afid NOFID"));
        }
        let handle = self.auth.start(uname, aname)?;
        let mut f = Fid::new(self.root.clone(), Vec::new());
        f.auth = Some(handle);
        self.insert_new(afid, f)?;
        Ok(Body::Rauth {
            aqid: Qid {
                ty: QTAUTH,
                version: 0,
                path: AUTH_QID_PATH,
            },
        })
    }

    fn attach(&self, fid: u32, afid: u32) -> Result<Body, Error> {
        let ok = if afid == NOFID {
            self.auth.allows_anonymous()
        } else {
            self.fids.with(|m| {
                m.get(&afid)
                    .and_then(|f| f.auth.as_ref())
                    .is_some_and(|a| a.authenticated())
            })
        };
        if !ok {
            return Err(Error::new("authentication required"));
        }
        self.insert_new(fid, Fid::new(self.root.clone(), Vec::new()))?;
        self.attached.store(true, Ordering::Release);
        Ok(Body::Rattach {
            qid: self.root.qid(),
        })
    }

    fn walk(&self, fid: u32, newfid: u32, wnames: &[String]) -> Result<Body, Error> {
        let (mut node, mut parents) = self.fids.with(|m| {
            let f = m.get(&fid).ok_or_else(|| unknown_fid(fid))?;
            if f.auth.is_some() {
                return Err(Error::new(format!("fid {fid} is an auth fid")));
            }
            if f.open.is_some() {
                return Err(Error::new(format!(
                    "fid {fid} is open and cannot be walked"
                )));
            }
            if newfid != fid && m.contains_key(&newfid) {
                return Err(Error::new(format!("fid {newfid} is already in use")));
            }
            Ok((f.node.clone(), f.parents.clone()))
        })?;
        let mut wqids = Vec::with_capacity(wnames.len());
        for name in wnames {
            let next = if name == ".." {
                match parents.pop() {
                    Some(p) => Some(p),
                    None => Some(node.clone()), // ".." of the root is the root
                }
            } else {
                match &node.kind {
                    NodeKind::Dir(d) => d.lookup(name).inspect(|_| parents.push(node.clone())),
                    NodeKind::File(_) => {
                        if wqids.is_empty() {
                            return Err(Error::new(format!("not a directory: {:?}", &*node.name)));
                        }
                        None
                    }
                }
            };
            match next {
                Some(n) => {
                    wqids.push(n.qid());
                    node = n;
                }
                None if wqids.is_empty() => return Err(Error::new("file not found")),
                None => return Ok(Body::Rwalk { wqids }),
            }
        }
        let f = Fid::new(node, parents);
        self.fids.with(|m| {
            if newfid != fid && m.len() >= self.limits.max_fids && !m.contains_key(&newfid) {
                return Err(too_many_fids());
            }
            if let Some(old) = m.insert(newfid, f) {
                // newfid == fid: the old fid is replaced.
                drop(old);
            }
            Ok(())
        })?;
        Ok(Body::Rwalk { wqids })
    }

    fn open(&self, fid: u32, mode: u8) -> Result<Body, Error> {
        let node = self.fids.with(|m| {
            let f = m.get(&fid).ok_or_else(|| unknown_fid(fid))?;
            if f.open.is_some() || f.auth.is_some() {
                return Err(Error::new(format!("fid {fid} is already open")));
            }
            Ok(f.node.clone())
        })?;
        let access = match mode & 3 {
            0 => OpenMode::Read,
            OWRITE => OpenMode::Write,
            ORDWR => OpenMode::ReadWrite,
            OEXEC => return Err(Error::permission_denied()),
            _ => unreachable!("two bits"),
        };
        let access = if mode & OTRUNC != 0 && !access.writes() {
            OpenMode::ReadWrite
        } else {
            access
        };
        if mode & ORCLOSE != 0 || !node.permits(access) {
            return Err(Error::permission_denied());
        }
        let opened = match &node.kind {
            NodeKind::Dir(_) if access.writes() => return Err(Error::permission_denied()),
            NodeKind::Dir(_) => Opened::Dir(Arc::new(Mutex::new(Listing::snapshot(
                &node,
                &self.info.user,
                self.info.mtime,
            )))),
            NodeKind::File(file) => Opened::File {
                handle: file.open(access, &self.info)?,
                mode: access,
            },
        };
        let qid = node.qid();
        let late = self.fids.with(|m| match m.get_mut(&fid) {
            Some(f) if f.open.is_none() => {
                f.open = Some(opened);
                None
            }
            _ => Some(opened),
        });
        if let Some(Opened::File { handle, .. }) = late {
            handle.clunk();
            return Err(unknown_fid(fid));
        }
        Ok(Body::Ropen {
            qid,
            iounit: self.msize.load(Ordering::Relaxed) - IOHDRSZ,
        })
    }

    /// The handle of an auth fid or a file opened with `want`; or a directory listing.
    fn io_target(&self, fid: u32, reading: bool) -> Result<IoTarget, Error> {
        self.fids.with(|m| {
            let f = m.get(&fid).ok_or_else(|| unknown_fid(fid))?;
            if let Some(a) = &f.auth {
                let h: Arc<dyn Handle> = a.clone();
                return Ok(IoTarget::Handle(h, f.cancel.clone()));
            }
            match &f.open {
                None => Err(Error::new(format!("fid {fid} is not open"))),
                Some(Opened::Dir(l)) if reading => Ok(IoTarget::Dir(l.clone())),
                Some(Opened::Dir(_)) => Err(Error::permission_denied()),
                Some(Opened::File { handle, mode }) => {
                    if (reading && mode.reads()) || (!reading && mode.writes()) {
                        Ok(IoTarget::Handle(handle.clone(), f.cancel.clone()))
                    } else {
                        Err(Error::new(format!(
                            "fid {fid} is not open for {}",
                            if reading { "reading" } else { "writing" }
                        )))
                    }
                }
            }
        })
    }

    fn read(
        self: &Arc<Self>,
        tag: u16,
        fid: u32,
        offset: u64,
        count: u32,
        out: &mut Outbox,
    ) -> Handled {
        let count = count.min(self.msize.load(Ordering::Relaxed) - RREAD_HDR);
        match self.io_target(fid, true) {
            Err(e) => reply(out, tag, Err(e)),
            Ok(IoTarget::Dir(l)) => {
                let r = l.lock_unpoisoned().read(offset, count);
                reply(out, tag, r.map(|data| Body::Rread { data }))
            }
            Ok(IoTarget::Handle(h, cancel)) => {
                let fut = Box::pin(async move {
                    h.read(offset, count).await.map(|data| Body::Rread { data })
                });
                self.run_io(tag, cancel, fut, count as usize, out)
            }
        }
    }

    fn write(
        self: &Arc<Self>,
        tag: u16,
        fid: u32,
        offset: u64,
        data: Vec<u8>,
        out: &mut Outbox,
    ) -> Handled {
        match self.io_target(fid, false) {
            Err(e) => reply(out, tag, Err(e)),
            Ok(IoTarget::Dir(_)) => reply(out, tag, Err(Error::permission_denied())),
            Ok(IoTarget::Handle(h, cancel)) => {
                let fut = Box::pin(async move {
                    h.write(offset, data)
                        .await
                        .map(|count| Body::Rwrite { count })
                });
                self.run_io(tag, cancel, fut, 0, out)
            }
        }
    }

    /// Run a read or write: at once if it completes without waiting (so pipelined
    /// requests keep their order), else in its own task. `reserve` is the most
    /// reply data it can bring (the read's count; 0 for a write).
    fn run_io(
        self: &Arc<Self>,
        tag: u16,
        cancel: CancellationToken,
        mut fut: IoFuture,
        reserve: usize,
        out: &mut Outbox,
    ) -> Handled {
        let mut cx = Context::from_waker(futures::task::noop_waker_ref());
        if let Poll::Ready(r) = fut.as_mut().poll(&mut cx) {
            return reply(out, tag, r);
        }
        self.inflight.reserve(tag);
        let conn = self.clone();
        let task = tokio::spawn(async move {
            let (r, permit) = conn.wait_io(cancel, fut, reserve).await;
            let body = r.unwrap_or_else(|e| Body::Rerror { ename: e.0 });
            conn.writer
                .send_task_reply(&conn.inflight, tag, body, permit)
                .await;
        });
        self.inflight.attach(tag, task.abort_handle());
        Handled::Waiting(tag)
    }

    /// The outcome of a read or write that waits, or `cancelled`, with the
    /// reply budget's permit for its data. (Replies held back for it are
    /// released after [`crate::writer::HOLD_LIMIT`] by the connection's loop.)
    async fn wait_io(
        &self,
        cancel: CancellationToken,
        mut fut: IoFuture,
        reserve: usize,
    ) -> (Result<Body, Error>, Option<crate::replies::Permit>) {
        let gated = self.replies.gated(reserve, &mut fut);
        tokio::select! {
            biased;
            _ = cancel.cancelled() => (Err(Error::cancelled()), None),
            r = gated => r,
        }
    }

    fn clunk(&self, fid: u32) -> Result<(), Error> {
        let f = self
            .fids
            .with(|m| m.remove(&fid))
            .ok_or_else(|| unknown_fid(fid))?;
        f.close();
        Ok(())
    }

    fn stat(&self, fid: u32) -> Result<Body, Error> {
        let (node, is_auth) = self.fids.with(|m| {
            m.get(&fid)
                .map(|f| (f.node.clone(), f.auth.is_some()))
                .ok_or_else(|| unknown_fid(fid))
        })?;
        let stat = if is_auth {
            Stat {
                qid: Qid {
                    ty: QTAUTH,
                    version: 0,
                    path: AUTH_QID_PATH,
                },
                mode: DMAUTH | 0o600,
                name: "auth".into(),
                uid: self.info.user.to_string(),
                gid: self.info.user.to_string(),
                muid: self.info.user.to_string(),
                ..Stat::default()
            }
        } else {
            node.stat(&self.info.user, self.info.mtime)
        };
        Ok(Body::Rstat { stat })
    }

    fn wstat(&self, fid: u32, s: &Stat) -> Result<Body, Error> {
        let (node, is_auth) = self.fids.with(|m| {
            m.get(&fid)
                .map(|f| (f.node.clone(), f.auth.is_some()))
                .ok_or_else(|| unknown_fid(fid))
        })?;
        // A wstat that changes nothing succeeds (times may be set: touch(1)
        // does that). Every file here reports length 0, so truncating a
        // writable file to 0 is such a no-op: it is what `O_TRUNC` becomes
        // through 9pfuse (`echo … > ctl`), `dd of=` and Python. Anything that
        // would rename, chmod, chown or set another length fails.
        let writable_file = !is_auth && !node.is_dir() && node.mode() & 0o200 != 0;
        let noop = s.name.is_empty()
            && s.uid.is_empty()
            && s.gid.is_empty()
            && s.muid.is_empty()
            && (s.mode == u32::MAX || (!is_auth && s.mode == node.mode()))
            && (s.length == u64::MAX || (s.length == 0 && writable_file));
        if noop {
            Ok(Body::Rwstat)
        } else {
            Err(Error::permission_denied())
        }
    }
}

enum IoTarget {
    Handle(Arc<dyn Handle>, CancellationToken),
    Dir(Arc<Mutex<Listing>>),
}
