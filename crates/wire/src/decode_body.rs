//! Decoding of message bodies (everything after `size[4] type[1] tag[2]`).

use crate::message::{msgtype as t, Body, Stat};
use crate::reader::{Fault, Reader};
use crate::stat::{read_stat, StatError};

/// Decode the body of a message of type `ty`; the caller checks that `r` is
/// then empty.
pub(crate) fn read_body(ty: u8, r: &mut Reader<'_>) -> Result<Body, Fault> {
    let body = match ty {
        t::TVERSION => Body::Tversion {
            msize: r.u32()?,
            version: r.string()?,
        },
        t::RVERSION => Body::Rversion {
            msize: r.u32()?,
            version: r.string()?,
        },
        t::TAUTH => Body::Tauth {
            afid: r.u32()?,
            uname: r.string()?,
            aname: r.string()?,
        },
        t::RAUTH => Body::Rauth { aqid: r.qid()? },
        t::TATTACH => Body::Tattach {
            fid: r.u32()?,
            afid: r.u32()?,
            uname: r.string()?,
            aname: r.string()?,
        },
        t::RATTACH => Body::Rattach { qid: r.qid()? },
        t::RERROR => Body::Rerror { ename: r.string()? },
        t::TFLUSH => Body::Tflush { oldtag: r.u16()? },
        t::RFLUSH => Body::Rflush,
        t::TWALK => {
            let fid = r.u32()?;
            let newfid = r.u32()?;
            let n = r.walk_count()?;
            let mut wnames = Vec::with_capacity(n);
            for _ in 0..n {
                wnames.push(r.string()?);
            }
            Body::Twalk {
                fid,
                newfid,
                wnames,
            }
        }
        t::RWALK => {
            let n = r.walk_count()?;
            let mut wqids = Vec::with_capacity(n);
            for _ in 0..n {
                wqids.push(r.qid()?);
            }
            Body::Rwalk { wqids }
        }
        t::TOPEN => Body::Topen {
            fid: r.u32()?,
            mode: r.u8()?,
        },
        t::ROPEN => Body::Ropen {
            qid: r.qid()?,
            iounit: r.u32()?,
        },
        t::TCREATE => Body::Tcreate {
            fid: r.u32()?,
            name: r.string()?,
            perm: r.u32()?,
            mode: r.u8()?,
        },
        t::RCREATE => Body::Rcreate {
            qid: r.qid()?,
            iounit: r.u32()?,
        },
        t::TREAD => Body::Tread {
            fid: r.u32()?,
            offset: r.u64()?,
            count: r.u32()?,
        },
        t::RREAD => Body::Rread { data: r.data()? },
        t::TWRITE => Body::Twrite {
            fid: r.u32()?,
            offset: r.u64()?,
            data: r.data()?,
        },
        t::RWRITE => Body::Rwrite { count: r.u32()? },
        t::TCLUNK => Body::Tclunk { fid: r.u32()? },
        t::RCLUNK => Body::Rclunk,
        t::TREMOVE => Body::Tremove { fid: r.u32()? },
        t::RREMOVE => Body::Rremove,
        t::TSTAT => Body::Tstat { fid: r.u32()? },
        t::RSTAT => Body::Rstat {
            stat: sized_stat(r)?,
        },
        t::TWSTAT => Body::Twstat {
            fid: r.u32()?,
            stat: sized_stat(r)?,
        },
        t::RWSTAT => Body::Rwstat,
        other => return Err(Fault::UnknownType(other)),
    };
    Ok(body)
}

/// `n[2] stat[n]`, where the stat entry's own `size[2]` must equal n - 2.
fn sized_stat(r: &mut Reader<'_>) -> Result<Stat, Fault> {
    let n = r.u16()?;
    let bytes = r.bytes(usize::from(n))?;
    if let [lo, hi, ..] = *bytes {
        let inner = u16::from_le_bytes([lo, hi]);
        if usize::from(inner) + 2 != usize::from(n) {
            return Err(Fault::Stat(StatError::SizeMismatch { inner, n }));
        }
    }
    read_stat(&mut Reader::new(bytes)).map_err(Fault::Stat)
}
