//! Little-endian field writers that append straight into the output vector,
//! plus the clipping rules that keep every length field representable.

use crate::message::Qid;

/// Longest string a `len[2]` field can describe.
pub(crate) const MAX_STR: usize = u16::MAX as usize;

/// The longest prefix of `s` that is at most `max` bytes and ends on a char boundary.
pub(crate) fn clip(s: &str, max: usize) -> &str {
    if s.len() <= max {
        return s;
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    // `end` is a char boundary no larger than `s.len()`, so this cannot fail.
    s.get(..end).unwrap_or_default()
}

/// Append a one-byte field.
pub(crate) fn put_u8(out: &mut Vec<u8>, v: u8) {
    out.push(v);
}

/// Append a two-byte little-endian field.
pub(crate) fn put_u16(out: &mut Vec<u8>, v: u16) {
    out.extend_from_slice(&v.to_le_bytes());
}

/// Append a four-byte little-endian field.
pub(crate) fn put_u32(out: &mut Vec<u8>, v: u32) {
    out.extend_from_slice(&v.to_le_bytes());
}

/// Append an eight-byte little-endian field.
pub(crate) fn put_u64(out: &mut Vec<u8>, v: u64) {
    out.extend_from_slice(&v.to_le_bytes());
}

/// Append a string whose length the caller already clipped to [`MAX_STR`].
pub(crate) fn put_clipped_str(out: &mut Vec<u8>, s: &str) {
    put_u16(out, u16::try_from(s.len()).unwrap_or(u16::MAX));
    out.extend_from_slice(s.as_bytes());
}

/// Append a string, clipped to [`MAX_STR`] bytes.
pub(crate) fn put_str(out: &mut Vec<u8>, s: &str) {
    put_clipped_str(out, clip(s, MAX_STR));
}

/// Wire length of a string field (clipped as [`put_str`] clips it).
pub(crate) fn str_len(s: &str) -> usize {
    2 + clip(s, MAX_STR).len()
}

/// Append a qid: `type[1] vers[4] path[8]`.
pub(crate) fn put_qid(out: &mut Vec<u8>, q: &Qid) {
    put_u8(out, q.ty);
    put_u32(out, q.version);
    put_u64(out, q.path);
}

/// Wire length of a qid.
pub(crate) const QID_LEN: usize = 13;
