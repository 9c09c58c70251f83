//! Encoding of message bodies: their exact wire length (so the frame can be
//! reserved once) and the bytes themselves, appended straight into `out`.

use crate::message::Body;
use crate::stat::{put_stat, stat_len};
use crate::writer::{put_qid, put_str, put_u16, put_u32, put_u64, put_u8, str_len, QID_LEN};

/// Longest data field written: the largest frame (Twrite, 23 bytes of header and
/// fixed fields) must still fit `size[4]`.
const MAX_DATA: usize = u32::MAX as usize - 23;

/// Longest element list written in a Twalk/Rwalk: what `nw[2]` can count.
const MAX_LIST: usize = u16::MAX as usize;

fn data_of(data: &[u8]) -> &[u8] {
    &data[..data.len().min(MAX_DATA)]
}

fn list_of<T>(items: &[T]) -> &[T] {
    &items[..items.len().min(MAX_LIST)]
}

/// Wire length of the body (everything after `size[4] type[1] tag[2]`).
pub(crate) fn body_len(body: &Body) -> usize {
    match body {
        Body::Tversion { version, .. } | Body::Rversion { version, .. } => 4 + str_len(version),
        Body::Tauth { uname, aname, .. } => 4 + str_len(uname) + str_len(aname),
        Body::Rauth { .. } | Body::Rattach { .. } => QID_LEN,
        Body::Tattach { uname, aname, .. } => 8 + str_len(uname) + str_len(aname),
        Body::Rerror { ename } => str_len(ename),
        Body::Tflush { .. } => 2,
        Body::Rflush | Body::Rclunk | Body::Rremove | Body::Rwstat => 0,
        Body::Twalk { wnames, .. } => {
            10 + list_of(wnames).iter().map(|w| str_len(w)).sum::<usize>()
        }
        Body::Rwalk { wqids } => 2 + QID_LEN * list_of(wqids).len(),
        Body::Topen { .. } => 5,
        Body::Ropen { .. } | Body::Rcreate { .. } => QID_LEN + 4,
        Body::Tcreate { name, .. } => 4 + str_len(name) + 4 + 1,
        Body::Tread { .. } => 16,
        Body::Rread { data } => 4 + data_of(data).len(),
        Body::Twrite { data, .. } => twrite_len(data),
        Body::Rwrite { .. } | Body::Tclunk { .. } | Body::Tremove { .. } | Body::Tstat { .. } => 4,
        Body::Rstat { stat } => 2 + stat_len(stat),
        Body::Twstat { stat, .. } => 4 + 2 + stat_len(stat),
    }
}

/// Append the body's fields to `out`.
pub(crate) fn put_body(out: &mut Vec<u8>, body: &Body) {
    match body {
        Body::Tversion { msize, version } | Body::Rversion { msize, version } => {
            put_u32(out, *msize);
            put_str(out, version);
        }
        Body::Tauth { afid, uname, aname } => {
            put_u32(out, *afid);
            put_str(out, uname);
            put_str(out, aname);
        }
        Body::Rauth { aqid: qid } | Body::Rattach { qid } => put_qid(out, qid),
        Body::Tattach {
            fid,
            afid,
            uname,
            aname,
        } => {
            put_u32(out, *fid);
            put_u32(out, *afid);
            put_str(out, uname);
            put_str(out, aname);
        }
        Body::Rerror { ename } => put_str(out, ename),
        Body::Tflush { oldtag } => put_u16(out, *oldtag),
        Body::Rflush | Body::Rclunk | Body::Rremove | Body::Rwstat => {}
        Body::Twalk {
            fid,
            newfid,
            wnames,
        } => {
            put_u32(out, *fid);
            put_u32(out, *newfid);
            let wnames = list_of(wnames);
            put_u16(out, u16::try_from(wnames.len()).unwrap_or(u16::MAX));
            for w in wnames {
                put_str(out, w);
            }
        }
        Body::Rwalk { wqids } => {
            let wqids = list_of(wqids);
            put_u16(out, u16::try_from(wqids.len()).unwrap_or(u16::MAX));
            for q in wqids {
                put_qid(out, q);
            }
        }
        Body::Topen { fid, mode } => {
            put_u32(out, *fid);
            put_u8(out, *mode);
        }
        Body::Ropen { qid, iounit } | Body::Rcreate { qid, iounit } => {
            put_qid(out, qid);
            put_u32(out, *iounit);
        }
        Body::Tcreate {
            fid,
            name,
            perm,
            mode,
        } => {
            put_u32(out, *fid);
            put_str(out, name);
            put_u32(out, *perm);
            put_u8(out, *mode);
        }
        Body::Tread { fid, offset, count } => {
            put_u32(out, *fid);
            put_u64(out, *offset);
            put_u32(out, *count);
        }
        Body::Rread { data } => put_data(out, data),
        Body::Twrite { fid, offset, data } => put_twrite(out, *fid, *offset, data),
        Body::Rwrite { count } => put_u32(out, *count),
        Body::Tclunk { fid } | Body::Tremove { fid } | Body::Tstat { fid } => put_u32(out, *fid),
        Body::Rstat { stat } => {
            put_u16(out, u16::try_from(stat_len(stat)).unwrap_or(u16::MAX));
            put_stat(out, stat);
        }
        Body::Twstat { fid, stat } => {
            put_u32(out, *fid);
            put_u16(out, u16::try_from(stat_len(stat)).unwrap_or(u16::MAX));
            put_stat(out, stat);
        }
    }
}

/// Wire length of a `Twrite` body of `data`.
pub(crate) fn twrite_len(data: &[u8]) -> usize {
    16 + data_of(data).len()
}

/// Append the fields of a `Twrite` body: `fid[4] offset[8] count[4] data[count]`.
pub(crate) fn put_twrite(out: &mut Vec<u8>, fid: u32, offset: u64, data: &[u8]) {
    put_u32(out, fid);
    put_u64(out, offset);
    put_data(out, data);
}

fn put_data(out: &mut Vec<u8>, data: &[u8]) {
    let data = data_of(data);
    put_u32(out, u32::try_from(data.len()).unwrap_or(u32::MAX));
    out.extend_from_slice(data);
}
