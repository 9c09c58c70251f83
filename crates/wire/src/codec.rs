//! Encoding and decoding of whole frames and stat entries.
//!
//! A frame is `size[4] type[1] tag[2]` body, little-endian, as in intro(5).
//! Decoding is total and bounded: every count is checked against the bytes that
//! remain in the frame before anything is allocated or copied.

use crate::decode_body::read_body;
use crate::encode_body::{body_len, put_body, put_twrite, twrite_len};
use crate::message::{msgtype, Frame, Stat, HEADER_LEN};
use crate::reader::Reader;
use crate::stat::{put_stat, read_stat, stat_len, StatError};

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
    let start = put_header(out, len, frame.body.type_id(), frame.tag);
    put_body(out, &frame.body);
    debug_assert_eq!(out.len() - start, len, "encoded_len disagrees with encode");
}

/// Append a `Twrite` frame of borrowed `data`: the bytes [`encode`] appends for
/// `Body::Twrite { fid, offset, data }` (clipping included), without copying
/// the data into a [`Body`](crate::Body) first. For senders of large writes.
pub fn encode_twrite(tag: u16, fid: u32, offset: u64, data: &[u8], out: &mut Vec<u8>) {
    let len = HEADER_LEN + twrite_len(data);
    out.reserve(len);
    let start = put_header(out, len, msgtype::TWRITE, tag);
    put_twrite(out, fid, offset, data);
    debug_assert_eq!(
        out.len() - start,
        len,
        "twrite_len disagrees with put_twrite"
    );
}

/// Append the header of an `Rread` carrying `count` bytes: what [`encode`]
/// appends for `Body::Rread` before the data itself, for a server that
/// writes large data from its own buffer right behind it. `count` must fit
/// the frame's `size[4]` (the caller bounds it by msize).
pub fn encode_rread_header(tag: u16, count: u32, out: &mut Vec<u8>) {
    // Only the header is appended: the data's room is not reserved.
    let len = HEADER_LEN + 4 + count as usize;
    put_header(out, len, msgtype::RREAD, tag);
    out.extend_from_slice(&count.to_le_bytes());
}

/// Append the `size[4] type[1] tag[2]` of a frame of `len` bytes; returns
/// where the frame starts in `out`.
fn put_header(out: &mut Vec<u8>, len: usize, ty: u8, tag: u16) -> usize {
    let start = out.len();
    out.extend_from_slice(&saturating_u32(len).to_le_bytes());
    out.push(ty);
    out.extend_from_slice(&tag.to_le_bytes());
    start
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
pub fn decode_stat(buf: &[u8]) -> Result<(Stat, usize), StatError> {
    let mut r = Reader::new(buf);
    let stat = read_stat(&mut r)?;
    Ok((stat, buf.len() - r.remaining()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::Body;

    fn full(tag: u16, fid: u32, offset: u64, data: &[u8]) -> Vec<u8> {
        encode_to_vec(&Frame {
            tag,
            body: Body::Twrite {
                fid,
                offset,
                data: data.to_vec(),
            },
        })
    }

    #[test]
    fn encode_twrite_matches_encode_of_the_body() {
        let big: Vec<u8> = (0..70_000u32).map(|i| i as u8).collect();
        let cases: [(u16, u32, u64, &[u8]); 5] = [
            (0, 0, 0, b""),
            (1, 2, 3, b"hello"),
            (0xFFFE, u32::MAX - 1, u64::MAX, b"\0\xff\n"),
            (crate::NOTAG, crate::NOFID, 1 << 40, &big[..1]),
            (7, 9, 65_536, &big),
        ];
        for (tag, fid, offset, data) in cases {
            let mut out = Vec::new();
            encode_twrite(tag, fid, offset, data, &mut out);
            assert_eq!(out, full(tag, fid, offset, data), "tag {tag} fid {fid}");
            assert_eq!(
                decode(&out),
                Ok(Frame {
                    tag,
                    body: Body::Twrite {
                        fid,
                        offset,
                        data: data.to_vec()
                    }
                })
            );
        }
    }

    #[test]
    fn an_rread_header_and_its_data_are_the_encoded_rread() {
        for data in [&b""[..], b"x", &[7u8; 70_000][..]] {
            let mut out = vec![0xAA];
            encode_rread_header(9, data.len() as u32, &mut out);
            out.extend_from_slice(data);
            let mut want = vec![0xAA];
            encode(
                &Frame {
                    tag: 9,
                    body: crate::Body::Rread {
                        data: data.to_vec(),
                    },
                },
                &mut want,
            );
            assert_eq!(out, want, "{} bytes", data.len());
        }
    }

    #[test]
    fn encode_twrite_appends_after_existing_bytes() {
        let mut out = b"prefix".to_vec();
        encode_twrite(5, 6, 7, b"data", &mut out);
        encode_twrite(8, 9, 10, b"", &mut out);
        let mut want = b"prefix".to_vec();
        want.extend(full(5, 6, 7, b"data"));
        want.extend(full(8, 9, 10, b""));
        assert_eq!(out, want);
    }
}
