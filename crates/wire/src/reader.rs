//! A bounds-checked cursor over one frame's bytes.
//!
//! Every read checks the remaining length before touching or copying bytes, so
//! a count field can never make the decoder allocate more than the frame holds.

use crate::message::{Qid, MAXWELEM};

/// What went wrong while reading a body; turned into a reason sentence by the codec.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Fault {
    /// A field reaches past the end of the bytes available.
    Truncated,
    /// A string's bytes are not UTF-8.
    InvalidUtf8,
    /// A `Twalk`/`Rwalk` count above [`MAXWELEM`].
    TooManyWalk(u16),
    /// Bytes left over after the last field.
    Trailing(usize),
    /// A problem inside a stat entry.
    Stat(crate::stat::StatError),
    /// A type byte that is not a 9P2000 message (including `Terror`).
    UnknownType(u8),
}

impl Fault {
    /// The reason sentence for this fault in a message called `name` (e.g. `Twalk`).
    pub(crate) fn reason(self, name: &str) -> String {
        match self {
            Fault::Truncated => format!("truncated {name}"),
            Fault::InvalidUtf8 => "invalid UTF-8 in string".to_owned(),
            Fault::TooManyWalk(n) => format!("too many walk elements: {n}"),
            Fault::Trailing(n) => format!("trailing bytes after {name}: {n}"),
            Fault::Stat(e) => e.to_string(),
            Fault::UnknownType(ty) => format!("unknown message type {ty}"),
        }
    }
}

/// A cursor that hands out little-endian fields from the front of a slice.
pub(crate) struct Reader<'a> {
    rest: &'a [u8],
}

impl<'a> Reader<'a> {
    /// A reader over `buf`.
    pub(crate) fn new(buf: &'a [u8]) -> Self {
        Reader { rest: buf }
    }

    /// Bytes not yet consumed.
    pub(crate) fn remaining(&self) -> usize {
        self.rest.len()
    }

    /// Take the next `n` bytes, or fail without consuming anything.
    pub(crate) fn bytes(&mut self, n: usize) -> Result<&'a [u8], Fault> {
        if n > self.rest.len() {
            return Err(Fault::Truncated);
        }
        let (head, tail) = self.rest.split_at(n);
        self.rest = tail;
        Ok(head)
    }

    fn array<const N: usize>(&mut self) -> Result<[u8; N], Fault> {
        let bytes = self.bytes(N)?;
        <[u8; N]>::try_from(bytes).map_err(|_| Fault::Truncated)
    }

    /// A one-byte field.
    pub(crate) fn u8(&mut self) -> Result<u8, Fault> {
        Ok(self.array::<1>()?[0])
    }

    /// A two-byte little-endian field.
    pub(crate) fn u16(&mut self) -> Result<u16, Fault> {
        self.array().map(u16::from_le_bytes)
    }

    /// A four-byte little-endian field.
    pub(crate) fn u32(&mut self) -> Result<u32, Fault> {
        self.array().map(u32::from_le_bytes)
    }

    /// An eight-byte little-endian field.
    pub(crate) fn u64(&mut self) -> Result<u64, Fault> {
        self.array().map(u64::from_le_bytes)
    }

    /// A string: `len[2]` then that many UTF-8 bytes.
    pub(crate) fn string(&mut self) -> Result<String, Fault> {
        let n = usize::from(self.u16()?);
        let bytes = self.bytes(n)?;
        std::str::from_utf8(bytes)
            .map(str::to_owned)
            .map_err(|_| Fault::InvalidUtf8)
    }

    /// A qid: `type[1] vers[4] path[8]`.
    pub(crate) fn qid(&mut self) -> Result<Qid, Fault> {
        Ok(Qid {
            ty: self.u8()?,
            version: self.u32()?,
            path: self.u64()?,
        })
    }

    /// A data field: `count[4]` then that many bytes (checked before copying).
    pub(crate) fn data(&mut self) -> Result<Vec<u8>, Fault> {
        let n = usize::try_from(self.u32()?).map_err(|_| Fault::Truncated)?;
        self.bytes(n).map(<[u8]>::to_vec)
    }

    /// A walk count: `nw[2]`, at most [`MAXWELEM`].
    pub(crate) fn walk_count(&mut self) -> Result<usize, Fault> {
        let n = self.u16()?;
        if usize::from(n) > MAXWELEM {
            return Err(Fault::TooManyWalk(n));
        }
        Ok(usize::from(n))
    }

    /// Succeed only if every byte was consumed.
    pub(crate) fn finish(self) -> Result<(), Fault> {
        if self.rest.is_empty() {
            Ok(())
        } else {
            Err(Fault::Trailing(self.rest.len()))
        }
    }
}
