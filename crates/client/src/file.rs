//! An open remote file.

use std::sync::Arc;

use toolsrv_wire::Qid;

use crate::conn::{Conn, Req};
use crate::error::ClientError;
use crate::reply;
use crate::session::Session;

/// Owns a fid: dropping it while armed sends `Tclunk` without waiting for the
/// reply, which is how an abandoned call is cancelled on the server.
pub(crate) struct FidGuard {
    pub(crate) conn: Arc<Conn>,
    pub(crate) fid: u32,
    pub(crate) armed: bool,
}

impl FidGuard {
    /// Guard `fid`.
    pub(crate) fn new(conn: Arc<Conn>, fid: u32) -> Self {
        FidGuard {
            conn,
            fid,
            armed: true,
        }
    }
}

impl Drop for FidGuard {
    fn drop(&mut self) {
        if self.armed {
            self.conn.send_detached(Req::clunk(self.fid));
        }
    }
}

/// A file opened with [`Client::open`](crate::Client::open). Dropping it without [`RemoteFile::clunk`]
/// clunks it in the background (fire and forget).
pub struct RemoteFile {
    // Keeps the connection open while the file is (the connection it was
    // opened on: after a reconnect the file fails with `Disconnected`).
    _session: Arc<Session>,
    guard: FidGuard,
    qid: Qid,
    iounit: u32,
    max_io: u32,
}

impl std::fmt::Debug for RemoteFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RemoteFile")
            .field("fid", &self.guard.fid)
            .field("qid", &self.qid)
            .field("iounit", &self.iounit)
            .finish()
    }
}

impl RemoteFile {
    pub(crate) fn new(session: Arc<Session>, guard: FidGuard, qid: Qid, iounit: u32) -> Self {
        let msize_io = guard.conn.max_io();
        let max_io = if iounit == 0 {
            msize_io
        } else {
            iounit.min(msize_io)
        };
        RemoteFile {
            _session: session,
            guard,
            qid,
            iounit,
            max_io,
        }
    }

    /// The qid returned by `Ropen`.
    pub fn qid(&self) -> Qid {
        self.qid
    }

    /// The iounit returned by `Ropen` (0: no limit beyond msize).
    pub fn iounit(&self) -> u32 {
        self.iounit
    }

    /// The largest count one read or write transfers.
    pub fn max_io(&self) -> u32 {
        self.max_io
    }

    /// Read at most `count` bytes (clamped to [`RemoteFile::max_io`]) at `offset`.
    /// Dropping the future while the read is outstanding sends `Tflush`.
    pub async fn read_at(&self, offset: u64, count: u32) -> Result<Vec<u8>, ClientError> {
        let count = count.min(self.max_io);
        let req = Req::read(self.guard.fid, offset, count);
        let body = self.guard.conn.call(req)?.await?;
        reply::read(body)
    }

    /// Read from offset 0 until a read returns 0 bytes.
    pub async fn read_to_end(&self) -> Result<Vec<u8>, ClientError> {
        let mut out = Vec::new();
        loop {
            let chunk = self.read_at(out.len() as u64, self.max_io).await?;
            if chunk.is_empty() {
                return Ok(out);
            }
            if out.is_empty() {
                out = chunk;
            } else {
                out.extend_from_slice(&chunk);
            }
        }
    }

    /// Write `data` (at most [`RemoteFile::max_io`] bytes of it) at `offset`;
    /// returns the count the server accepted.
    pub async fn write_at(&self, offset: u64, data: &[u8]) -> Result<u32, ClientError> {
        let n = data.len().min(self.max_io as usize);
        let req = Req::write(self.guard.fid, offset, &data[..n]);
        let body = self.guard.conn.call(req)?.await?;
        reply::write(body, n)
    }

    /// Write all of `data` from offset 0, in chunks at increasing offsets.
    pub async fn write_all(&self, data: &[u8]) -> Result<(), ClientError> {
        let mut done = 0usize;
        while done < data.len() {
            let n = self.write_at(done as u64, &data[done..]).await?;
            if n == 0 {
                return Err(ClientError::Protocol(format!(
                    "server accepted 0 bytes of a write at offset {done}"
                )));
            }
            done += n as usize;
        }
        Ok(())
    }

    /// Clunk the fid and wait for the reply.
    pub async fn clunk(mut self) -> Result<(), ClientError> {
        self.guard.armed = false;
        let fid = self.guard.fid;
        let body = self.guard.conn.call(Req::clunk(fid))?.await?;
        reply::clunk(body)
    }
}
