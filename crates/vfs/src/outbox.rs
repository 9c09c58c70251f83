//! Replies queued for one write. Small frames are packed into one buffer; the
//! data of a large `Rread` stays its own segment behind its encoded header, so
//! bulk output (following `proc/<pid>/out`) is never copied into a frame.

use std::io::IoSlice;

use tokio::io::{AsyncWrite, AsyncWriteExt};
use toolsrv_wire::{encode, encode_rread_header, Body, Frame};

use crate::replies::Permit;

/// `Rread` data at least this long is written from its own buffer.
const BIG_READ: usize = 16 * 1024;

/// Encoded replies waiting to be written, in order.
#[derive(Default)]
pub(crate) struct Outbox {
    /// Segments before `tail`, in order.
    segs: Vec<Vec<u8>>,
    /// Small frames being packed.
    tail: Vec<u8>,
    /// `Rread` data queued and not yet covered by a permit of the reply budget.
    unaccounted: usize,
    /// The reply budget's permits for what is queued: dropped once written.
    permit: Option<Permit>,
}

impl Outbox {
    /// Queue the reply `body` to `tag`.
    pub(crate) fn push(&mut self, tag: u16, body: Body) {
        if let Body::Rread { data } = &body {
            self.unaccounted += data.len();
        }
        self.push_frame(tag, body);
    }

    /// Queue the reply `body` to `tag`, its data covered by `permit`.
    pub(crate) fn push_covered(&mut self, tag: u16, body: Body, permit: Option<Permit>) {
        self.push_frame(tag, body);
        self.cover(permit);
    }

    /// Bytes of `Rread` data queued since the last [`Outbox::cover`]ed count.
    pub(crate) fn unaccounted(&self) -> usize {
        self.unaccounted
    }

    /// Attach permits for queued data; the unaccounted count starts again.
    pub(crate) fn cover(&mut self, permit: Option<Permit>) {
        self.unaccounted = 0;
        self.permit = match (self.permit.take(), permit) {
            (Some(mut a), Some(b)) => {
                a.merge(b);
                Some(a)
            }
            (a, b) => a.or(b),
        };
    }

    fn push_frame(&mut self, tag: u16, body: Body) {
        match body {
            Body::Rread { data } if data.len() >= BIG_READ => {
                encode_rread_header(tag, data.len() as u32, &mut self.tail);
                self.segs.push(std::mem::take(&mut self.tail));
                self.segs.push(data);
            }
            body => encode(&Frame { tag, body }, &mut self.tail),
        }
    }

    /// Move everything queued in `other` behind what is queued here.
    pub(crate) fn append(&mut self, other: &mut Outbox) {
        let unaccounted = self.unaccounted + other.unaccounted;
        self.cover(other.permit.take());
        self.unaccounted = unaccounted;
        other.unaccounted = 0;
        if other.segs.is_empty() {
            self.tail.append(&mut other.tail);
            return;
        }
        if !self.tail.is_empty() {
            self.segs.push(std::mem::take(&mut self.tail));
        }
        self.segs.append(&mut other.segs);
        self.tail = std::mem::take(&mut other.tail);
    }

    /// Whether nothing is queued.
    pub(crate) fn is_empty(&self) -> bool {
        self.segs.is_empty() && self.tail.is_empty()
    }

    /// Write everything queued (vectored), leaving the outbox empty.
    pub(crate) async fn write_to<W: AsyncWrite + Unpin + ?Sized>(
        &mut self,
        w: &mut W,
    ) -> std::io::Result<()> {
        if !self.tail.is_empty() {
            self.segs.push(std::mem::take(&mut self.tail));
        }
        let segs = std::mem::take(&mut self.segs);
        // Whatever happens, what was queued is gone once this returns.
        let _permit = self.permit.take();
        self.unaccounted = 0;
        let (mut i, mut off) = (0usize, 0usize);
        while i < segs.len() {
            let mut slices: Vec<IoSlice<'_>> = Vec::with_capacity(segs.len() - i);
            slices.push(IoSlice::new(&segs[i][off..]));
            slices.extend(segs[i + 1..].iter().map(|s| IoSlice::new(s)));
            let mut n = w.write_vectored(&slices).await?;
            if n == 0 {
                return Err(std::io::ErrorKind::WriteZero.into());
            }
            while i < segs.len() && n >= segs[i].len() - off {
                n -= segs[i].len() - off;
                i += 1;
                off = 0;
            }
            off += n;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use toolsrv_wire::decode;

    /// Concatenate what `write_to` would send, without a socket.
    fn bytes(o: &Outbox) -> Vec<u8> {
        let mut v: Vec<u8> = o.segs.concat();
        v.extend_from_slice(&o.tail);
        v
    }

    #[test]
    fn a_big_read_is_framed_exactly_like_the_codec_would() {
        let data = vec![7u8; BIG_READ + 3];
        let mut o = Outbox::default();
        o.push(1, Body::Rclunk);
        o.push(2, Body::Rread { data: data.clone() });
        o.push(3, Body::Rflush);
        let mut want = Vec::new();
        encode(
            &Frame {
                tag: 1,
                body: Body::Rclunk,
            },
            &mut want,
        );
        encode(
            &Frame {
                tag: 2,
                body: Body::Rread { data },
            },
            &mut want,
        );
        encode(
            &Frame {
                tag: 3,
                body: Body::Rflush,
            },
            &mut want,
        );
        assert_eq!(bytes(&o), want);
        let n = 7;
        assert_eq!(decode(&want[..n]).unwrap().body, Body::Rclunk);
    }

    #[test]
    fn append_keeps_the_order_of_small_and_big_frames() {
        let big = || Body::Rread {
            data: vec![1u8; BIG_READ],
        };
        let mut a = Outbox::default();
        a.push(1, Body::Rclunk);
        a.push(2, big());
        a.push(3, Body::Rflush);
        let mut b = Outbox::default();
        b.push(4, Body::Rclunk);
        b.push(5, big());
        b.push(6, Body::Rflush);
        let mut want = bytes(&a);
        want.extend_from_slice(&bytes(&b));
        a.append(&mut b);
        assert!(b.is_empty());
        assert_eq!(bytes(&a), want);
        // Small frames only, onto an empty and onto a non-empty outbox.
        let mut c = Outbox::default();
        c.push(7, Body::Rclunk);
        let mut empty = Outbox::default();
        empty.append(&mut c);
        assert!(c.is_empty());
        let mut d = Outbox::default();
        d.push(8, Body::Rflush);
        let mut want = bytes(&empty);
        want.extend_from_slice(&bytes(&d));
        empty.append(&mut d);
        assert_eq!(bytes(&empty), want);
    }
}
