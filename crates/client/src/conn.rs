//! One 9P connection over a Unix socket.
//!
//! - Writing: frames are encoded into one shared buffer under a short lock and
//!   written at once with a non-blocking `try_write` by the caller itself (no task
//!   hop). Frames queued together (a pipelined batch, or frames of several callers
//!   that arrive while the socket is full) leave in a single write. Only when the
//!   socket would block is a flusher task spawned to finish the buffer.
//! - Reading: a reader task decodes frames and routes each reply by tag to the
//!   oneshot channel of the waiting request.
//! - Tags and fids come from free-list allocators; a tag is freed when its reply
//!   arrives (or, for a flushed request, when the `Rflush` arrives), a fid when
//!   the reply to its internal `Tclunk` arrives.
//! - When the connection dies every waiting request fails with
//!   [`ClientError::Disconnected`].

use std::future::Future;
use std::io::ErrorKind;
use std::os::fd::AsFd;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::UnixStream;
use tokio::sync::oneshot;
use toolsrv_base::LockUnpoisoned;
use toolsrv_wire::{decode, encode, encode_twrite, Body, Frame, HEADER_LEN, NOTAG, VERSION_9P2000};

use crate::alloc::{FidAllocator, TagAllocator};
use crate::error::ClientError;

/// The msize the client asks for by default, and the most it accepts.
pub(crate) const REQUESTED_MSIZE: u32 = 1 << 20;
/// Room for the header of `Rread`/`Twrite` (IOHDRSZ).
pub(crate) const IO_HEADER: u32 = 24;
/// The smallest msize the client accepts from a server.
pub(crate) const MIN_MSIZE: u32 = 256;

/// What to do with the reply of an outstanding tag.
enum Waiter {
    /// The tag is not in use.
    Free,
    /// A caller waits for the reply.
    Reply {
        tx: oneshot::Sender<Body>,
        clunk_fid: Option<u32>,
    },
    /// Nobody waits; discard the reply. `flush_tag` is the tag of the `Tflush`
    /// sent for this request, if any.
    Abandoned {
        clunk_fid: Option<u32>,
        flush_tag: Option<u16>,
    },
    /// This tag carries a `Tflush` of `oldtag`.
    Flush { oldtag: u16 },
}

/// Connection state behind one lock.
struct State {
    tags: TagAllocator,
    fids: FidAllocator,
    waiters: Vec<Waiter>,
    /// Encoded frames not yet written; `out[out_pos..]` is pending.
    out: Vec<u8>,
    out_pos: usize,
    /// A flusher task owns the writing of `out`.
    flushing: bool,
    /// A task is scheduled to write detached requests (see [`Conn::send_detached`]).
    lazy_scheduled: bool,
    dead: bool,
    /// Requests encoded so far (for tests and diagnostics).
    sent: u64,
}

impl State {
    /// Queue one request.
    fn encode(&mut self, tag: u16, msg: Msg<'_>) {
        self.sent += 1;
        encode_msg(tag, msg, &mut self.out);
    }
}

/// One request's message.
pub(crate) enum Msg<'a> {
    /// Any message, encoded by the wire codec.
    Body(Body),
    /// A `Twrite`, encoded straight from the borrowed data (no copy into a `Body`).
    Write {
        fid: u32,
        offset: u64,
        data: &'a [u8],
    },
}

/// One request of a batch.
pub(crate) struct Req<'a> {
    pub(crate) msg: Msg<'a>,
    /// Send `Tflush` if the reply future is dropped while outstanding.
    pub(crate) flush_on_drop: bool,
    /// Free this fid when the reply arrives (set on internal `Tclunk`s).
    pub(crate) clunk_fid: Option<u32>,
}

impl<'a> Req<'a> {
    /// A plain request.
    pub(crate) fn body(body: Body) -> Self {
        Req {
            msg: Msg::Body(body),
            flush_on_drop: false,
            clunk_fid: None,
        }
    }
    /// A `Tread` that is flushed if abandoned.
    pub(crate) fn read(fid: u32, offset: u64, count: u32) -> Self {
        Req {
            msg: Msg::Body(Body::Tread { fid, offset, count }),
            flush_on_drop: true,
            clunk_fid: None,
        }
    }
    /// A `Twrite` of borrowed data.
    pub(crate) fn write(fid: u32, offset: u64, data: &'a [u8]) -> Self {
        Req {
            msg: Msg::Write { fid, offset, data },
            flush_on_drop: false,
            clunk_fid: None,
        }
    }
    /// A `Tclunk` whose reply frees `fid`.
    pub(crate) fn clunk(fid: u32) -> Self {
        Req {
            msg: Msg::Body(Body::Tclunk { fid }),
            flush_on_drop: false,
            clunk_fid: Some(fid),
        }
    }
}

/// A connection: shared by the client handle, the reader and flusher tasks.
pub(crate) struct Conn {
    stream: UnixStream,
    /// The server's uid (`SO_PEERCRED` at connect), if the kernel told.
    peer_uid: Option<u32>,
    state: Mutex<State>,
    msize: u32,
    runtime: tokio::runtime::Handle,
}

impl Conn {
    /// Connect to `socket`, negotiate `9P2000` with at most `max_msize` and
    /// start the reader task.
    pub(crate) async fn connect(
        socket: &std::path::Path,
        max_msize: u32,
    ) -> Result<Arc<Conn>, ClientError> {
        if !(MIN_MSIZE..=REQUESTED_MSIZE).contains(&max_msize) {
            return Err(ClientError::Protocol(format!(
                "msize {max_msize} is outside {MIN_MSIZE}..={REQUESTED_MSIZE}"
            )));
        }
        let mut stream = UnixStream::connect(socket)
            .await
            .map_err(|e| ClientError::io(format!("cannot connect to {}", socket.display()), e))?;
        let peer_uid = stream.peer_cred().ok().map(|c| c.uid());
        let msize = negotiate_version(&mut stream, max_msize).await?;
        let conn = Arc::new(Conn {
            stream,
            peer_uid,
            state: Mutex::new(State {
                tags: TagAllocator::default(),
                fids: FidAllocator::default(),
                waiters: Vec::new(),
                out: Vec::new(),
                out_pos: 0,
                flushing: false,
                lazy_scheduled: false,
                dead: false,
                sent: 0,
            }),
            msize,
            runtime: tokio::runtime::Handle::current(),
        });
        let reader = conn.clone();
        tokio::spawn(async move { reader.read_loop().await });
        Ok(conn)
    }

    /// The uid the server process runs as (`SO_PEERCRED`), if known.
    pub(crate) fn peer_uid(&self) -> Option<u32> {
        self.peer_uid
    }

    /// The negotiated msize.
    pub(crate) fn msize(&self) -> u32 {
        self.msize
    }

    /// The largest read or write count per message.
    pub(crate) fn max_io(&self) -> u32 {
        self.msize - IO_HEADER
    }

    /// Allocate a fid.
    pub(crate) fn alloc_fid(&self) -> Result<u32, ClientError> {
        let mut st = self.state.lock_unpoisoned();
        if st.dead {
            return Err(ClientError::Disconnected);
        }
        st.fids
            .alloc()
            .ok_or_else(|| ClientError::Protocol("all fids are in use".into()))
    }

    /// Whether the connection is closed (by us, the server, or an I/O error).
    pub(crate) fn is_dead(&self) -> bool {
        self.state.lock_unpoisoned().dead
    }

    /// Number of tags allocated: requests whose reply (or flush) is awaited.
    pub(crate) fn tags_in_use(&self) -> usize {
        self.state.lock_unpoisoned().tags.in_use()
    }

    /// Number of fids allocated (for tests and diagnostics).
    pub(crate) fn fids_in_use(&self) -> usize {
        self.state.lock_unpoisoned().fids.in_use()
    }

    /// Number of requests sent (queued for the socket) so far.
    pub(crate) fn requests_sent(&self) -> u64 {
        self.state.lock_unpoisoned().sent
    }

    /// Send a batch of requests in one write; the returned futures yield the
    /// replies in the same order.
    pub(crate) fn send(self: &Arc<Self>, reqs: Vec<Req<'_>>) -> Result<Vec<Pending>, ClientError> {
        let mut st = self.state.lock_unpoisoned();
        if st.dead {
            return Err(ClientError::Disconnected);
        }
        let mut tags = Vec::with_capacity(reqs.len());
        for _ in 0..reqs.len() {
            match st.tags.alloc() {
                Some(t) => tags.push(t),
                None => {
                    for t in tags {
                        st.tags.free(t);
                    }
                    return Err(no_tag());
                }
            }
        }
        let pending = reqs
            .into_iter()
            .zip(tags)
            .map(|(req, tag)| self.enqueue_locked(&mut st, tag, req))
            .collect::<Vec<_>>();
        let flushed = self.flush_locked(&mut st);
        // Unlock before a failure drops the futures (their Drop locks too).
        drop(st);
        flushed.map(|()| pending)
    }

    /// Send one request; the future yields its reply.
    pub(crate) fn call(self: &Arc<Self>, req: Req<'_>) -> Result<Pending, ClientError> {
        let mut st = self.state.lock_unpoisoned();
        if st.dead {
            return Err(ClientError::Disconnected);
        }
        let tag = st.tags.alloc().ok_or_else(no_tag)?;
        let pending = self.enqueue_locked(&mut st, tag, req);
        let flushed = self.flush_locked(&mut st);
        // Unlock before a failure drops the future (its Drop locks too).
        drop(st);
        flushed.map(|()| pending)
    }

    /// Register a waiter for `tag` and encode the request into the queue.
    fn enqueue_locked(self: &Arc<Self>, st: &mut State, tag: u16, req: Req<'_>) -> Pending {
        let (tx, rx) = oneshot::channel();
        set_waiter(
            st,
            tag,
            Waiter::Reply {
                tx,
                clunk_fid: req.clunk_fid,
            },
        );
        st.encode(tag, req.msg);
        Pending {
            conn: self.clone(),
            tag,
            rx,
            flush_on_drop: req.flush_on_drop,
            done: false,
        }
    }

    /// Send one request whose reply nobody waits for (e.g. `Tclunk` from a
    /// destructor). Never blocks. The frame is queued and written by a task
    /// spawned for it, unless a request sent before that task runs takes it
    /// along in its own write: so a background clunk usually costs no write of
    /// its own and reaches the server together with the next request.
    /// Failures mean the connection is gone, which clunks every fid anyway.
    pub(crate) fn send_detached(self: &Arc<Self>, req: Req<'_>) {
        let mut st = self.state.lock_unpoisoned();
        if st.dead {
            return;
        }
        let Some(tag) = st.tags.alloc() else {
            tracing::warn!("no free tag for a detached request; dropping it");
            return;
        };
        set_waiter(
            &mut st,
            tag,
            Waiter::Abandoned {
                clunk_fid: req.clunk_fid,
                flush_tag: None,
            },
        );
        st.encode(tag, req.msg);
        if !st.lazy_scheduled {
            st.lazy_scheduled = true;
            let conn = self.clone();
            self.runtime.spawn(async move {
                let mut st = conn.state.lock_unpoisoned();
                st.lazy_scheduled = false;
                if !st.dead {
                    let _ = conn.flush_locked(&mut st);
                }
            });
        }
    }

    /// The future of `tag` was dropped: if the request is still outstanding,
    /// send `Tflush(tag)`; `tag` is freed when the `Rflush` (or the reply) arrives.
    fn abandon(self: &Arc<Self>, tag: u16, rx: &mut oneshot::Receiver<Body>, flush: bool) {
        let mut st = self.state.lock_unpoisoned();
        // Under the lock the reader cannot be half-way through delivering it.
        if !matches!(rx.try_recv(), Err(oneshot::error::TryRecvError::Empty)) {
            return; // answered, or the connection died
        }
        let clunk_fid = match st.waiters.get(tag as usize) {
            Some(Waiter::Reply { clunk_fid, .. }) => *clunk_fid,
            _ => return,
        };
        let flush_tag = if flush && !st.dead {
            st.tags.alloc()
        } else {
            None
        };
        set_waiter(
            &mut st,
            tag,
            Waiter::Abandoned {
                clunk_fid,
                flush_tag,
            },
        );
        if let Some(ft) = flush_tag {
            set_waiter(&mut st, ft, Waiter::Flush { oldtag: tag });
            st.encode(ft, Msg::Body(Body::Tflush { oldtag: tag }));
            let _ = self.flush_locked(&mut st);
        }
    }

    /// Write as much of the queue as the socket takes now; if it would block,
    /// hand the rest to a flusher task.
    fn flush_locked(self: &Arc<Self>, st: &mut State) -> Result<(), ClientError> {
        if st.flushing {
            return Ok(());
        }
        match self.write_some(st) {
            Ok(true) => Ok(()),
            Ok(false) => {
                st.flushing = true;
                let conn = self.clone();
                self.runtime.spawn(async move { conn.flusher().await });
                Ok(())
            }
            Err(e) => {
                tracing::debug!("write to the server failed: {e}");
                self.kill_locked(st);
                Err(ClientError::Disconnected)
            }
        }
    }

    /// Write queued bytes until done (`Ok(true)`) or the socket is full (`Ok(false)`).
    fn write_some(&self, st: &mut State) -> std::io::Result<bool> {
        while st.out_pos < st.out.len() {
            match self.stream.try_write(&st.out[st.out_pos..]) {
                Ok(0) => return Err(ErrorKind::WriteZero.into()),
                Ok(n) => st.out_pos += n,
                Err(e) if e.kind() == ErrorKind::WouldBlock => return Ok(false),
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        st.out.clear();
        st.out_pos = 0;
        if st.out.capacity() > 4 * self.msize as usize {
            st.out = Vec::new();
        }
        Ok(true)
    }

    /// Finish writing the queue when the socket was full.
    async fn flusher(self: Arc<Self>) {
        loop {
            if let Err(e) = self.stream.writable().await {
                tracing::debug!("waiting for the socket failed: {e}");
                let mut st = self.state.lock_unpoisoned();
                self.kill_locked(&mut st);
                return;
            }
            let mut st = self.state.lock_unpoisoned();
            if st.dead {
                return;
            }
            match self.write_some(&mut st) {
                Ok(true) => {
                    st.flushing = false;
                    return;
                }
                Ok(false) => {}
                Err(e) => {
                    tracing::debug!("write to the server failed: {e}");
                    self.kill_locked(&mut st);
                    return;
                }
            }
        }
    }

    /// Mark the connection dead: every waiter fails with `Disconnected` (its
    /// sender is dropped) and the socket is shut down so the reader ends.
    fn kill_locked(&self, st: &mut State) {
        if st.dead {
            return;
        }
        st.dead = true;
        st.waiters.clear();
        st.out = Vec::new();
        st.out_pos = 0;
        crate::sys::shutdown_both(self.stream.as_fd());
    }

    /// Close the connection (the server then clunks all our fids).
    pub(crate) fn shutdown(&self) {
        let mut st = self.state.lock_unpoisoned();
        self.kill_locked(&mut st);
    }

    /// Reader task: decode frames and route them until the connection ends.
    async fn read_loop(self: Arc<Self>) {
        let err = self.read_frames().await;
        tracing::debug!("connection closed: {err}");
        let mut st = self.state.lock_unpoisoned();
        self.kill_locked(&mut st);
    }

    async fn read_frames(&self) -> ClientError {
        let mut buf: Vec<u8> = vec![0; 64 * 1024];
        let (mut start, mut end) = (0usize, 0usize);
        loop {
            // Route every complete frame in the buffer.
            while end - start >= 4 {
                let size = u32::from_le_bytes([
                    buf[start],
                    buf[start + 1],
                    buf[start + 2],
                    buf[start + 3],
                ]);
                if (size as usize) < HEADER_LEN || size > self.msize {
                    return ClientError::Protocol(format!(
                        "server sent a frame of {size} bytes (msize {})",
                        self.msize
                    ));
                }
                let size = size as usize;
                if end - start < size {
                    if buf.len() - start < size {
                        // Make room: move the partial frame to the front and grow.
                        buf.copy_within(start..end, 0);
                        end -= start;
                        start = 0;
                        if buf.len() < size {
                            buf.resize(size, 0);
                        }
                    }
                    break;
                }
                match decode(&buf[start..start + size]) {
                    Ok(frame) => self.dispatch(frame),
                    Err(e) => {
                        return ClientError::Protocol(format!("undecodable reply from server: {e}"))
                    }
                }
                start += size;
            }
            if start == end {
                start = 0;
                end = 0;
            } else if start > buf.len() / 2 {
                buf.copy_within(start..end, 0);
                end -= start;
                start = 0;
            }
            if end == buf.len() {
                buf.resize(buf.len() * 2, 0);
            }
            match self.stream.try_read(&mut buf[end..]) {
                Ok(0) => return ClientError::Disconnected,
                Ok(n) => end += n,
                Err(e) if e.kind() == ErrorKind::WouldBlock => {
                    if let Err(e) = self.stream.readable().await {
                        return ClientError::io("waiting for the server failed", e);
                    }
                }
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => return ClientError::io("reading from the server failed", e),
            }
        }
    }

    /// Deliver one reply.
    fn dispatch(&self, frame: Frame) {
        let mut st = self.state.lock_unpoisoned();
        let tag = frame.tag;
        let waiter = match st.waiters.get_mut(tag as usize) {
            Some(w) => std::mem::replace(w, Waiter::Free),
            None => Waiter::Free,
        };
        match waiter {
            Waiter::Free => {
                tracing::warn!("reply with unknown tag {tag} ignored");
            }
            Waiter::Reply { tx, clunk_fid } => {
                let _ = tx.send(frame.body);
                st.tags.free(tag);
                if let Some(fid) = clunk_fid {
                    st.fids.free(fid);
                }
            }
            Waiter::Abandoned { clunk_fid, .. } => {
                st.tags.free(tag);
                if let Some(fid) = clunk_fid {
                    st.fids.free(fid);
                }
            }
            Waiter::Flush { oldtag } => {
                st.tags.free(tag);
                let ours = matches!(
                    st.waiters.get(oldtag as usize),
                    Some(Waiter::Abandoned { flush_tag: Some(ft), .. }) if *ft == tag
                );
                if ours {
                    // The flushed request will never be answered; its fid (if
                    // any) is in an unknown state, so it is not reused.
                    set_waiter(&mut st, oldtag, Waiter::Free);
                    st.tags.free(oldtag);
                }
            }
        }
    }
}

fn no_tag() -> ClientError {
    ClientError::Protocol("all 65535 tags are in use".into())
}

fn set_waiter(st: &mut State, tag: u16, w: Waiter) {
    let i = tag as usize;
    if st.waiters.len() <= i {
        st.waiters.resize_with(i + 1, || Waiter::Free);
    }
    st.waiters[i] = w;
}

/// Append one frame to `out`.
fn encode_msg(tag: u16, msg: Msg<'_>, out: &mut Vec<u8>) {
    match msg {
        Msg::Body(body) => encode(&Frame { tag, body }, out),
        Msg::Write { fid, offset, data } => encode_twrite(tag, fid, offset, data, out),
    }
}

/// `Tversion` / `Rversion` on the bare stream, before the reader starts.
async fn negotiate_version(stream: &mut UnixStream, requested: u32) -> Result<u32, ClientError> {
    let mut out = Vec::new();
    encode(
        &Frame {
            tag: NOTAG,
            body: Body::Tversion {
                msize: requested,
                version: VERSION_9P2000.into(),
            },
        },
        &mut out,
    );
    let disconnected = |e: std::io::Error| ClientError::io("version negotiation failed", e);
    stream.write_all(&out).await.map_err(disconnected)?;
    let mut size = [0u8; 4];
    stream.read_exact(&mut size).await.map_err(disconnected)?;
    let size = u32::from_le_bytes(size);
    if (size as usize) < HEADER_LEN || size > requested {
        return Err(ClientError::Protocol(format!(
            "server answered Tversion with a frame of {size} bytes"
        )));
    }
    let mut frame = vec![0u8; size as usize];
    frame[..4].copy_from_slice(&size.to_le_bytes());
    stream
        .read_exact(&mut frame[4..])
        .await
        .map_err(disconnected)?;
    let frame =
        decode(&frame).map_err(|e| ClientError::Protocol(format!("undecodable Rversion: {e}")))?;
    match frame.body {
        Body::Rversion { msize, version } => {
            if version != VERSION_9P2000 {
                return Err(ClientError::Protocol(format!(
                    "server speaks version {version:?}, not 9P2000"
                )));
            }
            if !(MIN_MSIZE..=requested).contains(&msize) {
                return Err(ClientError::Protocol(format!(
                    "server chose msize {msize}, outside {MIN_MSIZE}..={requested}"
                )));
            }
            Ok(msize)
        }
        Body::Rerror { ename } => Err(ClientError::Server(ename)),
        other => Err(ClientError::Protocol(format!(
            "server answered Tversion with message type {}",
            other.type_id()
        ))),
    }
}

/// The reply of one request. Dropping it before the reply arrives abandons the
/// request (with `Tflush` if it was sent with `flush_on_drop`).
pub(crate) struct Pending {
    conn: Arc<Conn>,
    tag: u16,
    rx: oneshot::Receiver<Body>,
    flush_on_drop: bool,
    done: bool,
}

impl Future for Pending {
    type Output = Result<Body, ClientError>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match Pin::new(&mut self.rx).poll(cx) {
            Poll::Ready(r) => {
                self.done = true;
                Poll::Ready(r.map_err(|_| ClientError::Disconnected))
            }
            Poll::Pending => Poll::Pending,
        }
    }
}

impl Drop for Pending {
    fn drop(&mut self) {
        if !self.done {
            let conn = self.conn.clone();
            conn.abandon(self.tag, &mut self.rx, self.flush_on_drop);
        }
    }
}
