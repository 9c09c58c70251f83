//! The stat(5) directory entry: `size[2] type[2] dev[4] qid[13] mode[4] atime[4]`
//! `mtime[4] length[8] name[s] uid[s] gid[s] muid[s]`.

use crate::message::Stat;
use crate::reader::{Fault, Reader};
use crate::writer::{clip, put_clipped_str, put_qid, put_u16, put_u32, put_u64, MAX_STR};

/// Bytes of the fixed fields after `size[2]`, plus the four `len[2]` of the strings.
const FIXED_LEN: usize = 2 + 4 + 13 + 4 + 4 + 4 + 8 + 4 * 2;

/// Largest value of the inner `size[2]`: the whole entry (`size[2]` included) must fit
/// the `n[2]` of `Rstat`/`Twstat`.
const MAX_INNER: usize = MAX_STR - 2;

/// The four strings as they will be written: each clipped so that the inner size
/// never exceeds [`MAX_INNER`] (name first, then uid, gid, muid).
fn clipped_strings(stat: &Stat) -> [&str; 4] {
    let mut budget = MAX_INNER - FIXED_LEN;
    [&stat.name, &stat.uid, &stat.gid, &stat.muid].map(|s| {
        let c = clip(s, budget);
        budget -= c.len();
        c
    })
}

/// The inner `size[2]` value of `stat` as encoded.
fn inner_len(strings: &[&str; 4]) -> usize {
    FIXED_LEN + strings.iter().map(|s| s.len()).sum::<usize>()
}

/// Encoded length of the whole entry, `size[2]` included.
pub(crate) fn stat_len(stat: &Stat) -> usize {
    2 + inner_len(&clipped_strings(stat))
}

/// Append the entry, `size[2]` included.
pub(crate) fn put_stat(out: &mut Vec<u8>, stat: &Stat) {
    let strings = clipped_strings(stat);
    put_u16(out, u16::try_from(inner_len(&strings)).unwrap_or(u16::MAX));
    put_u16(out, stat.ty);
    put_u32(out, stat.dev);
    put_qid(out, &stat.qid);
    put_u32(out, stat.mode);
    put_u32(out, stat.atime);
    put_u32(out, stat.mtime);
    put_u64(out, stat.length);
    for s in strings {
        put_clipped_str(out, s);
    }
}

/// Why a stat entry could not be decoded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StatError {
    /// The bytes end before the entry's declared size or before its last field.
    #[error("truncated stat entry")]
    Truncated,
    /// Bytes are left inside the entry's declared size after its last field.
    #[error("trailing bytes in stat entry: {0}")]
    Trailing(usize),
    /// One of its strings is not UTF-8.
    #[error("invalid UTF-8 in string")]
    InvalidUtf8,
    /// In `Twstat`/`Rstat`, the entry's own size is not the message's `n` - 2.
    #[error("stat size {inner} disagrees with n {n}")]
    SizeMismatch {
        /// The entry's `size[2]`.
        inner: u16,
        /// The message's `n[2]`.
        n: u16,
    },
}

/// Read one entry (`size[2]` included). The entry's fields must exactly fill its
/// declared size: a short entry is `truncated stat entry`, extra bytes inside it
/// are `trailing bytes in stat entry: N`.
pub(crate) fn read_stat(r: &mut Reader<'_>) -> Result<Stat, StatError> {
    let truncated = |_| StatError::Truncated;
    let size = r.u16().map_err(truncated)?;
    let entry = r.bytes(usize::from(size)).map_err(truncated)?;
    let mut e = Reader::new(entry);
    // The fields are integers, a qid and strings: running short or a string
    // that is not UTF-8 is all that can go wrong.
    let stat = read_fields(&mut e).map_err(|f| match f {
        Fault::InvalidUtf8 => StatError::InvalidUtf8,
        _ => StatError::Truncated,
    })?;
    if e.remaining() != 0 {
        return Err(StatError::Trailing(e.remaining()));
    }
    Ok(stat)
}

fn read_fields(e: &mut Reader<'_>) -> Result<Stat, Fault> {
    Ok(Stat {
        ty: e.u16()?,
        dev: e.u32()?,
        qid: e.qid()?,
        mode: e.u32()?,
        atime: e.u32()?,
        mtime: e.u32()?,
        length: e.u64()?,
        name: e.string()?,
        uid: e.string()?,
        gid: e.string()?,
        muid: e.string()?,
    })
}
