//! [`Frames`]: the one asynchronous raw 9P2000 peer of the tests, over any
//! byte stream (an in-memory `tokio::io::duplex` pipe served in-process, or
//! a socket): whole frames out, whole frames in, every read bounded by
//! [`crate::WAIT`]. The suites' own peers (the server's in-process `Peer`,
//! the 9P core's) build their helpers on it.

use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use toolsrv_wire::{decode, encode_to_vec, Body, Frame};

/// A raw 9P connection's client end over `S`.
pub struct Frames<S> {
    io: S,
    limit: Duration,
}

impl<S: AsyncRead + AsyncWrite + Unpin> Frames<S> {
    /// Frames over `io`, each reply awaited at most [`crate::WAIT`].
    pub fn new(io: S) -> Frames<S> {
        Frames::with_limit(io, crate::WAIT)
    }

    /// Frames over `io`, each reply awaited at most `limit`.
    pub fn with_limit(io: S, limit: Duration) -> Frames<S> {
        Frames { io, limit }
    }

    /// The stream, for what frames cannot say (a half close, a drop).
    pub fn io(&mut self) -> &mut S {
        &mut self.io
    }

    /// Sends `body` with `tag`.
    pub async fn send(&mut self, tag: u16, body: Body) {
        self.send_raw(&encode_to_vec(&Frame { tag, body })).await;
    }

    /// Sends `bytes` as they are (a malformed or partial frame).
    pub async fn send_raw(&mut self, bytes: &[u8]) {
        self.io.write_all(bytes).await.expect("write to the server");
    }

    /// The next reply, within the limit; it must decode.
    pub async fn recv(&mut self) -> Frame {
        tokio::time::timeout(self.limit, read_frame(&mut self.io))
            .await
            .expect("a reply in time")
    }

    /// One request with `tag` and its reply's body (the reply must carry
    /// the same tag).
    pub async fn rpc(&mut self, tag: u16, body: Body) -> Body {
        self.send(tag, body).await;
        let f = self.recv().await;
        assert_eq!(f.tag, tag, "reply tag");
        f.body
    }

    /// Whether nothing arrives for `d`.
    pub async fn quiet_for(&mut self, d: Duration) -> bool {
        let mut b = [0u8; 1];
        tokio::time::timeout(d, self.io.read(&mut b)).await.is_err()
    }
}

/// Reads one whole frame (its size first) from `io` and decodes it, with
/// no time limit (for a stream that is not a [`Frames`]).
pub async fn read_frame(io: &mut (impl AsyncRead + Unpin)) -> Frame {
    let mut size = [0u8; 4];
    io.read_exact(&mut size).await.expect("a reply's size");
    let len = usize::try_from(u32::from_le_bytes(size)).expect("a size that fits");
    assert!(len >= 7, "a reply of {len} bytes is shorter than a header");
    let mut frame = size.to_vec();
    frame.resize(len, 0);
    io.read_exact(&mut frame[4..]).await.expect("a reply");
    decode(&frame).expect("a reply that decodes")
}
