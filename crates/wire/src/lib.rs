//! The 9P2000 wire format.
//!
//! - [`message`]: the message types (`Frame` = tag + [`Body`]), [`Qid`], [`Stat`].
//! - [`codec`]: [`encode`] and [`decode`] of whole frames (`size[4] type[1] tag[2]` ...),
//!   and of stat(5) entries for directory reads.
//! - [`read_frame`]: one whole frame from a blocking reader, bounded by msize.
//! - [`samples`]: one example frame of every message type.
//!
//! Decoding is total: hostile bytes produce a [`DecodeError`], never a panic, and
//! nothing is allocated beyond what the frame itself holds (the caller bounds the
//! frame by the negotiated msize before decoding). A frame whose header was
//! readable keeps its tag in the error, so a server can answer `Rerror` for it.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod codec;
mod decode_body;
mod encode_body;
mod frame_io;
pub mod message;
mod reader;
pub mod samples;
mod stat;
mod writer;

pub use codec::{
    decode, decode_stat, encode, encode_rread_header, encode_stat, encode_to_vec, encode_twrite,
    encoded_len, DecodeError,
};
pub use frame_io::read_frame;
pub use message::*;
pub use stat::StatError;
