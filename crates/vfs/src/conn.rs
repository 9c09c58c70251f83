//! The per-connection loop: reads frames from the byte stream, hands each
//! request to `dispatch`, and writes the replies it queued.

use std::future::Future;
use std::io::Cursor;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::task::Poll;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, BufReader, Chain};
use tokio::time::Instant;
use toolsrv_wire::{decode, Body, DecodeError, HEADER_LEN};

use crate::auth::Auth;
use crate::conninfo::ConnInfo;
use crate::dispatch::{Conn, Handled};
use crate::limits::{Limits, RequestBudget};
use crate::node::Node;
use crate::outbox::Outbox;
use crate::preauth::{Charge, PRE_AUTH_BUFFER, PRE_AUTH_MSIZE};
use crate::writer::{Writer, HOLD_LIMIT};

/// The read buffer of an attached connection.
const READ_BUFFER: usize = 64 << 10;
/// A frame's buffer grows by at most this much ahead of the bytes that
/// arrived: an announced length is never allocated before its bytes come.
const GROW_STEP: u64 = 64 << 10;

/// The connection's buffered reader: bytes read ahead when the buffer was
/// replaced come first (see [`enlarge`]), then the stream.
type Reader<R> = BufReader<Chain<Cursor<Vec<u8>>, R>>;

/// [`serve_connection_with`] the default [`Limits`] (no auth timeout).
pub async fn serve_connection<S>(stream: S, root: Node, auth: Arc<dyn Auth>, info: ConnInfo)
where
    S: AsyncRead + AsyncWrite + Send + 'static,
{
    serve_connection_with(stream, root, auth, info, Limits::default()).await
}

/// Serve one connection over `stream` (a Unix socket, an in-memory pipe,
/// any byte stream) until the peer closes it, sends a frame too short to
/// hold a header, or has not attached within `limits.auth_timeout`. Until it
/// attaches, it is bounded as [`crate::preauth`] says (a connection for which
/// the pre-attach budget has no room is closed at once). On return every fid
/// has been clunked (close hooks ran) and every waiting request abandoned.
pub async fn serve_connection_with<S>(
    stream: S,
    root: Node,
    auth: Arc<dyn Auth>,
    mut info: ConnInfo,
    limits: Limits,
) where
    S: AsyncRead + AsyncWrite + Send + 'static,
{
    let Some(charge) = Charge::take() else {
        tracing::debug!(
            conn = info.id,
            "the buffers of connections not yet attached are at their budget; closing connection"
        );
        return;
    };
    let (rd, wr) = tokio::io::split(stream);
    info.requests = RequestBudget::new(limits.max_request_bytes);
    let conn = Arc::new(Conn::new(
        root,
        auth,
        info,
        limits,
        Writer::new(Box::new(wr)),
    ));
    tokio::select! {
        // The loop first: a hold it starts is then seen by `release_held`
        // in the same poll.
        biased;
        () = read_loop(conn.clone(), rd, charge) => {}
        () = auth_deadline(&conn) => {
            tracing::debug!(conn = conn.info.id, "not attached within the auth timeout; closing connection");
        }
        () = release_held(&conn) => {}
    }
    conn.inflight.abort_all();
    conn.fids.clear();
}

/// Completes when the auth timeout passed without an attach; never otherwise.
async fn auth_deadline(conn: &Conn) {
    if let Some(d) = conn.limits.auth_timeout {
        tokio::time::sleep(d).await;
        if !conn.attached.load(Ordering::Acquire) {
            return;
        }
    }
    std::future::pending::<()>().await
}

/// Releases replies held back for a waiting request once they have waited
/// [`HOLD_LIMIT`] (see [`crate::writer`]); never completes. One timer for
/// the connection's life, moved to each new deadline: while calls follow
/// each other faster than the limit, the new deadline is never earlier than
/// the one the runtime already plans to wake for, so tokio need not wake its
/// driver to re-plan (it did for a timer made per waiting request).
async fn release_held(conn: &Conn) {
    let timer = tokio::time::sleep(HOLD_LIMIT);
    tokio::pin!(timer);
    let mut armed: Option<Instant> = None;
    loop {
        std::future::poll_fn(|cx| {
            let want = conn.writer.hold_deadline();
            if want != armed {
                if let Some(d) = want {
                    timer.as_mut().reset(d);
                }
                armed = want;
            }
            // Nothing held: this future is polled again whenever the
            // connection's task is (it shares the task with the loop that
            // holds replies).
            match armed {
                Some(_) => timer.as_mut().poll(cx),
                None => Poll::Pending,
            }
        })
        .await;
        armed = None;
        conn.writer.release().await;
    }
}

/// Read and handle requests until the peer closes or breaks framing.
/// `charge` is the connection's share of the pre-attach budget, held (with a
/// small buffer and frame limit) until it attaches.
async fn read_loop<R: AsyncRead + Unpin>(conn: Arc<Conn>, rd: R, charge: Charge) {
    let mut charge = Some(charge);
    let mut reader: Reader<R> =
        BufReader::with_capacity(PRE_AUTH_BUFFER, Cursor::new(Vec::new()).chain(rd));
    let mut out = Outbox::default();
    let mut frame = Vec::new();
    // The tag of the last request handled, if it waits in a task of its own.
    let mut waiting_last = None;
    loop {
        // Write the queued replies before waiting for input: unless a whole
        // frame is already buffered (then it is handled first, and its reply
        // joins the same write), or the batch ended with a request that waits
        // (then they leave with its reply; see `writer`).
        if !out.is_empty() && !holds_whole_frame(reader.buffer()) {
            if let Some(tag) = waiting_last {
                if conn
                    .writer
                    .hold(&mut out, &conn.inflight, tag)
                    .await
                    .is_err()
                {
                    break;
                }
            } else if conn.writer.send(&mut out).await.is_err() {
                break;
            }
        }
        let mut size = [0u8; 4];
        if reader.read_exact(&mut size).await.is_err() {
            break;
        }
        let n = u32::from_le_bytes(size);
        if (n as usize) < HEADER_LEN {
            tracing::debug!(
                conn = conn.info.id,
                size = n,
                "frame too short; closing connection"
            );
            break;
        }
        if charge.is_some() && n > PRE_AUTH_MSIZE {
            tracing::debug!(
                conn = conn.info.id,
                size = n,
                limit = PRE_AUTH_MSIZE,
                "frame larger than allowed before attach; closing connection"
            );
            break;
        }
        if n > conn.msize.load(Ordering::Relaxed) {
            let mut hdr = [0u8; 3];
            if reader.read_exact(&mut hdr).await.is_err() {
                break;
            }
            let tag = u16::from_le_bytes([hdr[1], hdr[2]]);
            let rest = u64::from(n) - HEADER_LEN as u64;
            let mut take = (&mut reader).take(rest);
            match tokio::io::copy(&mut take, &mut tokio::io::sink()).await {
                Ok(k) if k == rest => {}
                _ => break,
            }
            out.push(tag, Body::error("message too large"));
            waiting_last = None;
            continue;
        }
        frame.clear();
        frame.extend_from_slice(&size);
        // Grown as the bytes arrive, never to an announced length up front.
        let body = u64::from(n) - 4;
        frame.reserve(body.min(GROW_STEP) as usize);
        match (&mut reader).take(body).read_to_end(&mut frame).await {
            Ok(k) if k as u64 == body => {}
            _ => break,
        }
        waiting_last = match decode(&frame) {
            Ok(f) => match conn.handle(f, &mut out) {
                Handled::Replied => None,
                Handled::Waiting(tag) => Some(tag),
            },
            Err(DecodeError::Framing(_)) => break,
            Err(DecodeError::Body { tag, reason, .. }) => {
                out.push(tag, Body::error(reason));
                None
            }
        };
        if charge.is_some() && conn.attached.load(Ordering::Acquire) {
            charge = None;
            reader = enlarge(reader);
        }
        // Reply data queued at once must fit the reply budget; when it does not,
        // it is written now, and no request is read until the peer took it.
        let n = out.unaccounted();
        if n > 0 {
            match conn.replies.try_take(n) {
                Some(p) => out.cover(Some(p)),
                None => {
                    out.cover(None);
                    if conn.writer.send(&mut out).await.is_err() {
                        break;
                    }
                }
            }
        }
    }
    // Held replies too, for a peer that only shut down its sending side.
    let _ = conn.writer.send(&mut out).await;
}

/// `small`'s stream behind a buffer of [`READ_BUFFER`] bytes, the bytes
/// `small` had read ahead first.
fn enlarge<R: AsyncRead + Unpin>(small: Reader<R>) -> Reader<R> {
    // In order: what the buffer holds, what the cursor has not given yet, the stream.
    let mut ahead = small.buffer().to_vec();
    let (earlier, stream) = small.into_inner().into_inner();
    let at = usize::try_from(earlier.position()).unwrap_or(usize::MAX);
    ahead.extend_from_slice(earlier.get_ref().get(at..).unwrap_or_default());
    BufReader::with_capacity(READ_BUFFER, Cursor::new(ahead).chain(stream))
}

/// Whether `buf` starts with a complete frame (so reading it cannot wait).
fn holds_whole_frame(buf: &[u8]) -> bool {
    buf.len() >= 4 && buf.len() >= u32::from_le_bytes([buf[0], buf[1], buf[2], buf[3]]) as usize
}
