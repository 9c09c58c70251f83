//! Encoding and decoding of whole frames and stat entries.
//!
//! A frame is `size[4] type[1] tag[2]` body, little-endian, as in intro(5).
//! Decoding is total and bounded: every count is checked against the bytes that
//! remain in the frame before anything is allocated or copied.

use crate::decode_body::read_body;
use crate::encode_body::{body_len, put_body};
use crate::message::{msgtype, Frame, Stat, HEADER_LEN};
use crate::reader::Reader;
use crate::stat::{put_stat, read_stat, stat_len};

/// Why a frame could not be decoded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    /// Fewer than 7 bytes, or a size field below 7: the frame has no usable header.
    /// A server closes the connection on this. Holds the buffer length when it is
    /// shorter than a header, otherwise the size field.
    #[error("frame too short: {0} bytes")]
    Framing(u32),
    /// The header was readable but the body was not; `tag` lets the server answer `Rerror`.
    #[error("{reason}")]
    Body {
        /// The frame's tag.
        tag: u16,
        /// The frame's type byte.
        ty: u8,
        /// What was wrong, e.g. `truncated Twalk`, `invalid UTF-8 in string`, `unknown message type 200`.
        reason: String,
    },
}

/// Decode one whole frame. `buf` must be exactly the frame: `size[4]` included,
/// and its length equal to the size field.
pub fn decode(buf: &[u8]) -> Result<Frame, DecodeError> {
    let (size, ty, tag) = match *buf {
        [s0, s1, s2, s3, ty, t0, t1, ..] => (
            u32::from_le_bytes([s0, s1, s2, s3]),
            ty,
            u16::from_le_bytes([t0, t1]),
        ),
        _ => return Err(DecodeError::Framing(saturating_u32(buf.len()))),
    };
    if (size as usize) < HEADER_LEN {
        return Err(DecodeError::Framing(size));
    }
    let body_err = |reason: String| DecodeError::Body { tag, ty, reason };
    if size as usize != buf.len() {
        return Err(body_err(format!(
            "size field {size} does not match frame length {}",
            buf.len()
        )));
    }
    let name = msgtype::name(ty).unwrap_or("message");
    let mut r = Reader::new(buf.get(HEADER_LEN..).unwrap_or_default());
    let body = read_body(ty, &mut r).map_err(|f| body_err(f.reason(name)))?;
    r.finish().map_err(|f| body_err(f.reason(name)))?;
    Ok(Frame { tag, body })
}

fn saturating_u32(n: usize) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

/// The number of bytes [`encode`] appends for `frame` (`size[4]` included); use it to
/// check a reply against the negotiated msize before sending.
pub fn encoded_len(frame: &Frame) -> usize {
    HEADER_LEN + body_len(&frame.body)
}

/// Append the encoded frame to `out`.
///
/// Fields too long for their length prefix are clipped rather than corrupting
/// the frame: strings to 65535 bytes (at a char boundary), stat strings so the
/// entry fits its `size[2]`, walk lists to 65535 elements, data so the frame fits
/// `size[4]`. Walk lists longer than 16 are written as given (a peer rejects them).
pub fn encode(frame: &Frame, out: &mut Vec<u8>) {
    let len = encoded_len(frame);
    out.reserve(len);
    let start = out.len();
    out.extend_from_slice(&saturating_u32(len).to_le_bytes());
    out.push(frame.body.type_id());
    out.extend_from_slice(&frame.tag.to_le_bytes());
    put_body(out, &frame.body);
    debug_assert_eq!(out.len() - start, len, "encoded_len disagrees with encode");
}

/// Encode a frame into a new vector.
pub fn encode_to_vec(frame: &Frame) -> Vec<u8> {
    let mut v = Vec::new();
    encode(frame, &mut v);
    v
}

/// Append a stat entry (with its leading `size[2]`) to `out`, as in directory reads.
/// Strings are clipped (name first, muid last) so the entry fits its size field.
pub fn encode_stat(stat: &Stat, out: &mut Vec<u8>) {
    out.reserve(stat_len(stat));
    put_stat(out, stat);
}

/// Decode one stat entry (with its leading `size[2]`) from the front of `buf`;
/// returns it and the number of bytes consumed. The fields must fill the entry's
/// declared size exactly.
pub fn decode_stat(buf: &[u8]) -> Result<(Stat, usize), String> {
    let mut r = Reader::new(buf);
    let stat = read_stat(&mut r).map_err(|f| f.reason("stat entry"))?;
    Ok((stat, buf.len() - r.remaining()))
}
