//! Encoding and decoding of whole frames and stat entries.
//! (Implementation pending: see the wire helper's task.)

use crate::message::{Frame, Stat};

/// Why a frame could not be decoded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    /// Fewer than 7 bytes, or a size field below 7: the frame has no usable header.
    /// A server closes the connection on this.
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

/// Decode one whole frame. `buf` must be exactly the frame: size[4] included,
/// and its length equal to the size field.
pub fn decode(buf: &[u8]) -> Result<Frame, DecodeError> {
    let _ = buf;
    todo!()
}

/// Append the encoded frame to `out`.
pub fn encode(frame: &Frame, out: &mut Vec<u8>) {
    let _ = (frame, out);
    todo!()
}

/// Encode a frame into a new vector.
pub fn encode_to_vec(frame: &Frame) -> Vec<u8> {
    let mut v = Vec::new();
    encode(frame, &mut v);
    v
}

/// Append a stat entry (with its leading size[2]) to `out`, as in directory reads.
pub fn encode_stat(stat: &Stat, out: &mut Vec<u8>) {
    let _ = (stat, out);
    todo!()
}

/// Decode one stat entry (with its leading size[2]) from the front of `buf`;
/// returns it and the number of bytes consumed.
pub fn decode_stat(buf: &[u8]) -> Result<(Stat, usize), String> {
    let _ = buf;
    todo!()
}
