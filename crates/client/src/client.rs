//! The client handle and its high-level operations.

use std::borrow::Cow;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use toolsrv_wire::{decode_stat, Body, Stat, ORDWR, OREAD, OWRITE};

use crate::auth::Auth;
use crate::conn::{Pending, Req, REQUESTED_MSIZE};
use crate::error::ClientError;
use crate::file::{FidGuard, RemoteFile};
use crate::reply;
use crate::session::{Session, Slot};
use crate::walk::Walk;

/// A connection to a toolsrv server. Cheap to clone; all clones share one
/// connection, which closes when the last clone (and every [`RemoteFile`]) is
/// dropped. Several requests may be outstanding at once.
///
/// Reconnect: when the server goes away (a restart), requests in flight fail
/// with [`ClientError::Disconnected`], and the next request on any clone
/// reconnects and authenticates again with the saved secret (trying with
/// backoff for up to 5 s, see [`Client::set_reconnect_timeout`]); every clone
/// then uses the new connection and the new token. [`RemoteFile`]s opened
/// before stay on the old connection and fail with `Disconnected`.
#[derive(Clone)]
pub struct Client {
    inner: Arc<Slot>,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let s = self.inner.current();
        f.debug_struct("Client")
            .field("msize", &s.conn.msize())
            .field("authenticated", &s.token.is_some())
            .field("connected", &!s.is_dead())
            .finish()
    }
}

impl Client {
    /// Connect to the server listening on `socket`, negotiate 9P2000 (msize
    /// 1 MiB at most) and attach, authenticating per `auth`. The first
    /// connection is not retried: an absent server fails at once.
    pub async fn connect(socket: &Path, auth: Auth) -> Result<Client, ClientError> {
        Client::connect_with_msize(socket, auth, REQUESTED_MSIZE).await
    }

    /// [`Client::connect`] asking for at most `msize` (256 ..= 1 MiB) instead of
    /// 1 MiB: smaller messages, more of them (useful for tests of splitting).
    pub async fn connect_with_msize(
        socket: &Path,
        auth: Auth,
        msize: u32,
    ) -> Result<Client, ClientError> {
        let first = Session::open(socket, &auth, msize).await?;
        Ok(Client {
            inner: Arc::new(Slot::new(socket, auth, msize, first)),
        })
    }

    /// How long a request keeps trying to reconnect after the connection was
    /// lost (default 5 s; `Duration::ZERO` turns reconnecting off, so requests
    /// after a disconnect fail with [`ClientError::Disconnected`]). Applies to
    /// every clone.
    pub fn set_reconnect_timeout(&self, timeout: Duration) {
        self.inner.set_window(timeout);
    }

    /// Whether the current connection is open. After a disconnect this is
    /// false until a request reconnects.
    pub fn is_connected(&self) -> bool {
        !self.inner.current().is_dead()
    }

    /// The session token read during authentication (64 hex characters), or
    /// `None` when the server does not require authentication. After a
    /// reconnect to a restarted server this is the new server's token. The
    /// returned handle shares the string (no copy) and stays valid after a
    /// later reconnect; call again to see the current token.
    pub fn token(&self) -> Option<Arc<str>> {
        self.inner.token()
    }

    /// The fid attached to the root (always 0: the first fid allocated), for
    /// raw requests sent with [`Client::rpc`].
    pub fn root_fid(&self) -> u32 {
        self.inner.current().root
    }

    /// The negotiated msize.
    pub fn msize(&self) -> u32 {
        self.inner.current().conn.msize()
    }

    /// How many fids this connection currently holds (the root and auth fids
    /// included); a fid is released when the server answers its `Tclunk`.
    pub fn fids_in_use(&self) -> usize {
        self.inner.current().conn.fids_in_use()
    }

    /// How many requests (`Tflush` and `Tclunk` included) this connection
    /// has sent so far: for tests and diagnostics, e.g. to check that a call
    /// costs the messages it should.
    pub fn requests_sent(&self) -> u64 {
        self.inner.current().conn.requests_sent()
    }

    /// How many requests on this connection await a reply, counting abandoned
    /// ones whose reply or `Rflush` has not arrived yet.
    pub fn outstanding_requests(&self) -> usize {
        self.inner.current().conn.tags_in_use()
    }

    /// A live session (reconnecting if needed), a fresh fid on it, and the
    /// first batch of requests, built by `build(session, fid)`, sent. If the
    /// connection turns out dead before anything was sent, it reconnects and
    /// tries once more (nothing reached the server, so this is safe for any
    /// request).
    async fn begin<'a>(
        &self,
        build: impl Fn(&Session, u32) -> Vec<Req<'a>>,
    ) -> Result<(Arc<Session>, u32, Vec<Pending>), ClientError> {
        let mut s = self.inner.session().await?;
        let mut retried = false;
        loop {
            let sent = s
                .conn
                .alloc_fid()
                .and_then(|fid| Ok((fid, s.conn.send(build(&s, fid))?)));
            match sent {
                Ok((fid, pending)) => return Ok((s, fid, pending)),
                Err(ClientError::Disconnected) if !retried => {
                    retried = true;
                    s = self.inner.reconnect(&s).await?;
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// Read the whole file at `path`.
    ///
    /// Twalk, Topen and Tread leave in one socket write and their replies are
    /// collected together: one round trip for files up to msize − 24 bytes.
    /// If that read fills the buffer, reading goes on at increasing offsets
    /// until a read returns 0 bytes. The Tclunk is sent when the reading is
    /// done, without waiting for its reply. (It is not pipelined behind the
    /// Tread: the server answers a read that cannot complete at once in its
    /// own task, and a clunk arriving meanwhile cancels it.)
    pub async fn read_file(&self, path: &str) -> Result<Vec<u8>, ClientError> {
        let walk = Walk::new(path);
        let (s, fid, pending) = self
            .begin(|s, fid| {
                let mut reqs = walk.reqs(s.root, fid);
                reqs.push(Req::body(Body::Topen { fid, mode: OREAD }));
                reqs.push(Req::read(fid, 0, s.conn.max_io()));
                reqs
            })
            .await?;
        let conn = &s.conn;
        let max = conn.max_io();
        // Dropped on every path out of here: clunks without waiting.
        let _guard = FidGuard::new(conn.clone(), fid);
        let mut pending = pending.into_iter();
        let mut first_err = walk.replies(&mut pending).await?;
        let mut next = || pending.next().ok_or_else(|| internal("missing reply"));
        keep_first(&mut first_err, reply::open(next()?.await?).err());
        let data = reply::read(next()?.await?);
        if let Some(e) = first_err {
            return Err(e);
        }
        let mut data = data?;
        if data.len() as u32 == max {
            loop {
                let body = conn.call(Req::read(fid, data.len() as u64, max))?.await?;
                let chunk = reply::read(body)?;
                if chunk.is_empty() {
                    break;
                }
                data.extend_from_slice(&chunk);
            }
        }
        Ok(data)
    }

    /// Write `data` to the file at `path` (opened `OWRITE`), in msize-bounded
    /// chunks at increasing offsets from 0.
    pub async fn write_file(&self, path: &str, data: &[u8]) -> Result<(), ClientError> {
        let file = self.open(path, OWRITE).await?;
        file.write_all(data).await
    }

    /// Open `path` read-write, write `request`, read the response, and clunk:
    /// the write-then-read files of docs/protocol.md, "Namespace" (`tools`, `tools_rev`,
    /// `proc/list`, `proc/new`, `proc/new.bg`).
    ///
    /// The response is fixed by the first read, and toolsrv answers every read
    /// of it with as much as was asked for, so a read that returns fewer bytes
    /// than asked is its last one (no extra round trip for the 0-byte read).
    /// When the request fits one message, walk, open, write and the first read
    /// leave in one socket write. Dropping the future cancels the request:
    /// the outstanding read is flushed and the fid clunked.
    pub async fn transact(&self, path: &str, request: &[u8]) -> Result<Vec<u8>, ClientError> {
        self.read_pipelined(path, ORDWR, End::ShortRead, |_| Cow::Borrowed(request))
            .await
    }

    /// [`Client::transact`] with a request built from the token of the
    /// connection it is sent on (`proc/new` payloads carry the token, which
    /// changes when the client reconnects to a restarted server).
    pub(crate) async fn transact_with_token(
        &self,
        path: &str,
        request: impl Fn(Option<&str>) -> String,
    ) -> Result<Vec<u8>, ClientError> {
        self.read_pipelined(path, ORDWR, End::ShortRead, |t| {
            Cow::Owned(request(t).into_bytes())
        })
        .await
    }

    /// Open `path` with `mode` (`OREAD`, `OWRITE`, `ORDWR`, ...).
    pub async fn open(&self, path: &str, mode: u8) -> Result<RemoteFile, ClientError> {
        let walk = Walk::new(path);
        let (s, fid, pending) = self
            .begin(|s, fid| {
                let mut reqs = walk.reqs(s.root, fid);
                reqs.push(Req::body(Body::Topen { fid, mode }));
                reqs
            })
            .await?;
        // From here on the fid is clunked whatever happens.
        let guard = FidGuard::new(s.conn.clone(), fid);
        let mut pending = pending.into_iter();
        let walked = walk.replies(&mut pending).await?;
        let opened = reply::open(
            pending
                .next()
                .ok_or_else(|| internal("missing Ropen"))?
                .await?,
        );
        if let Some(e) = walked {
            return Err(e);
        }
        let (qid, iounit) = opened?;
        Ok(RemoteFile::new(s, guard, qid, iounit))
    }

    /// List the directory at `path`: its stat entries in the server's order.
    pub async fn list_dir(&self, path: &str) -> Result<Vec<Stat>, ClientError> {
        let data = self
            .read_pipelined(path, OREAD, End::ZeroRead, |_| Cow::Borrowed(&[][..]))
            .await?;
        let mut rest = &data[..];
        let mut out = Vec::new();
        while !rest.is_empty() {
            let (stat, used) = decode_stat(rest).map_err(|e| {
                ClientError::Protocol(format!("bad stat entry in directory {path}: {e}"))
            })?;
            if used == 0 || used > rest.len() {
                return Err(ClientError::Protocol(format!(
                    "bad stat entry length {used} in directory {path}"
                )));
            }
            out.push(stat);
            rest = &rest[used..];
        }
        Ok(out)
    }

    /// The stat entry of `path` (walk, Tstat and Tclunk in one write).
    pub async fn stat(&self, path: &str) -> Result<Stat, ClientError> {
        let walk = Walk::new(path);
        let (_s, _fid, pending) = self
            .begin(|s, fid| {
                let mut reqs = walk.reqs(s.root, fid);
                reqs.push(Req::body(Body::Tstat { fid }));
                reqs.push(Req::clunk(fid));
                reqs
            })
            .await?;
        let mut pending = pending.into_iter();
        let walked = walk.replies(&mut pending).await?;
        let mut next = || pending.next().ok_or_else(|| internal("missing reply"));
        let stat = reply::stat(next()?.await?);
        let _ = next()?.await?;
        if let Some(e) = walked {
            return Err(e);
        }
        stat
    }

    /// Send one raw request and return the server's reply as is (`Rerror`
    /// included). For tests and diagnostics: fids used here must not collide
    /// with the client's own (which count up from 0); use high numbers.
    pub async fn rpc(&self, body: Body) -> Result<Body, ClientError> {
        let s = self.inner.session().await?;
        let reply = s.conn.call(Req::body(body))?;
        reply.await
    }

    /// Walk, open with `mode`, write the request (if any; built by `make` from
    /// the token of the connection used), then read until `end`; the first
    /// write and the first read are pipelined with the walk and open.
    async fn read_pipelined<'r>(
        &self,
        path: &str,
        mode: u8,
        end: End,
        make: impl Fn(Option<&str>) -> Cow<'r, [u8]>,
    ) -> Result<Vec<u8>, ClientError> {
        let walk = Walk::new(path);
        let mut s = self.inner.session().await?;
        let mut retried = false;
        let (request, fid, pending) = loop {
            let request = make(s.token());
            let max = s.conn.max_io();
            let first_write = request.len().min(max as usize);
            let sent = s.conn.alloc_fid().and_then(|fid| {
                let mut reqs = walk.reqs(s.root, fid);
                reqs.push(Req::body(Body::Topen { fid, mode }));
                if !request.is_empty() {
                    reqs.push(Req::write(fid, 0, &request[..first_write]));
                }
                if first_write == request.len() {
                    reqs.push(Req::read(fid, 0, max));
                }
                Ok((fid, s.conn.send(reqs)?))
            });
            match sent {
                Ok((fid, pending)) => break (request, fid, pending),
                // Nothing reached the server: safe to send on a new connection.
                Err(ClientError::Disconnected) if !retried => {
                    retried = true;
                    s = self.inner.reconnect(&s).await?;
                }
                Err(e) => return Err(e),
            }
        };
        let conn = &s.conn;
        let max = conn.max_io();
        let first_write = request.len().min(max as usize);
        let pipelined = first_write == request.len();
        let guard = FidGuard::new(conn.clone(), fid);
        let mut pending = pending.into_iter();
        let mut first_err = walk.replies(&mut pending).await?;
        let mut next = || pending.next().ok_or_else(|| internal("missing reply"));
        keep_first(&mut first_err, reply::open(next()?.await?).err());
        let mut written = 0usize;
        if !request.is_empty() {
            match reply::write(next()?.await?, first_write) {
                Ok(n) => written = n as usize,
                Err(e) => keep_first(&mut first_err, Some(e)),
            }
        }
        let first_read = if pipelined {
            Some(reply::read(next()?.await?))
        } else {
            None
        };
        if let Some(e) = first_err {
            return Err(e);
        }
        if pipelined && written != request.len() {
            return Err(ClientError::Protocol(format!(
                "server accepted only {written} of {} request bytes on {path}",
                request.len()
            )));
        }
        // The rest of a long request, then the reads.
        while written < request.len() {
            let chunk = &request[written..(written + max as usize).min(request.len())];
            let body = conn.call(Req::write(fid, written as u64, chunk))?.await?;
            let n = reply::write(body, chunk.len())?;
            if n == 0 {
                return Err(ClientError::Protocol(format!(
                    "server accepted 0 bytes of a write at offset {written} on {path}"
                )));
            }
            written += n as usize;
        }
        let mut data = match first_read {
            Some(r) => r?,
            None => reply::read(conn.call(Req::read(fid, 0, max))?.await?)?,
        };
        let mut last = data.len();
        while !end.reached(last, max) {
            let body = conn.call(Req::read(fid, data.len() as u64, max))?.await?;
            let chunk = reply::read(body)?;
            last = chunk.len();
            data.extend_from_slice(&chunk);
        }
        drop(guard); // clunk without waiting
        Ok(data)
    }
}

/// When a sequence of reads of one file is over.
#[derive(Debug, Clone, Copy)]
enum End {
    /// At a read that returns 0 bytes (directories, any file).
    ZeroRead,
    /// At a read that returns fewer bytes than asked for: a write-then-read
    /// response, whose reads toolsrv always fills (`docs/protocol.md`).
    ShortRead,
}

impl End {
    /// Whether a read that returned `got` bytes of the `asked` ends the sequence.
    fn reached(self, got: usize, asked: u32) -> bool {
        match self {
            End::ZeroRead => got == 0,
            End::ShortRead => got < asked as usize,
        }
    }
}

fn keep_first(slot: &mut Option<ClientError>, e: Option<ClientError>) {
    if slot.is_none() {
        *slot = e;
    }
}

fn internal(what: &str) -> ClientError {
    ClientError::Protocol(format!("internal error: {what}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn client_is_send_sync_and_clone() {
        fn check<T: Send + Sync + Clone + 'static>() {}
        check::<Client>();
        fn check_file<T: Send + Sync>() {}
        check_file::<RemoteFile>();
    }
}
