//! Differential tests against an independent 9P2000 codec, the `ninep` crate:
//! ours encodes → theirs decodes, theirs encodes → ours decodes, and both
//! produce the same bytes, for every message variant.
//!
//! `ninep` keeps only the qid type bits it knows (0xEC), so qids here use only
//! those bits; otherwise it expresses every 9P2000 message.

use crate::common::for_every_variant;
use ninep::sansio::protocol::{
    Data, FileType, NineP, Qid as NQid, RawStat, Rdata, Rmessage, SharedBuf, Tdata, Tmessage,
};
use ninep::sync::SyncNineP;
use proptest::prelude::*;
use toolsrv_wire::{decode, encode_to_vec, samples, Body, Frame, Qid, Stat};

/// A message in ninep's types: T and R messages are separate types there.
#[derive(Debug, PartialEq)]
enum Theirs {
    T(Tmessage),
    R(Rmessage),
}

fn nqid(q: &Qid) -> NQid {
    NQid {
        ty: FileType::from_bits_truncate(q.ty),
        version: q.version,
        path: q.path,
    }
}

fn qid(q: &NQid) -> Qid {
    Qid {
        ty: q.ty.bits(),
        version: q.version,
        path: q.path,
    }
}

/// The stat's inner size[2], computed here from stat(5) rather than by our codec.
fn inner_size(s: &Stat) -> u16 {
    (2 + 4 + 13 + 4 + 4 + 4 + 8 + 2 * 4 + s.name.len() + s.uid.len() + s.gid.len() + s.muid.len())
        as u16
}

fn raw_stat(s: &Stat) -> RawStat {
    RawStat {
        size: inner_size(s),
        ty: s.ty,
        dev: s.dev,
        qid: nqid(&s.qid),
        mode: s.mode,
        atime: s.atime,
        mtime: s.mtime,
        length: s.length,
        name: s.name.clone(),
        uid: s.uid.clone(),
        gid: s.gid.clone(),
        muid: s.muid.clone(),
    }
}

fn stat(r: &RawStat) -> Stat {
    Stat {
        ty: r.ty,
        dev: r.dev,
        qid: qid(&r.qid),
        mode: r.mode,
        atime: r.atime,
        mtime: r.mtime,
        length: r.length,
        name: r.name.clone(),
        uid: r.uid.clone(),
        gid: r.gid.clone(),
        muid: r.muid.clone(),
    }
}

fn data_bytes(d: &Data) -> Vec<u8> {
    let with_count = d.write_9p_bytes().expect("ninep encodes data");
    with_count[4..].to_vec()
}

fn to_theirs(f: &Frame) -> Theirs {
    let t = |content| Theirs::T(Tmessage::new(f.tag, content));
    let r = |content| Theirs::R(Rmessage::new(f.tag, content));
    match &f.body {
        Body::Tversion { msize, version } => t(Tdata::Version {
            msize: *msize,
            version: version.clone(),
        }),
        Body::Rversion { msize, version } => r(Rdata::Version {
            msize: *msize,
            version: version.clone(),
        }),
        Body::Tauth { afid, uname, aname } => t(Tdata::Auth {
            afid: *afid,
            uname: uname.clone(),
            aname: aname.clone(),
        }),
        Body::Rauth { aqid } => r(Rdata::Auth { aqid: nqid(aqid) }),
        Body::Tattach {
            fid,
            afid,
            uname,
            aname,
        } => t(Tdata::Attach {
            fid: *fid,
            afid: *afid,
            uname: uname.clone(),
            aname: aname.clone(),
        }),
        Body::Rattach { qid } => r(Rdata::Attach { aqid: nqid(qid) }),
        Body::Rerror { ename } => r(Rdata::Error {
            ename: ename.clone(),
        }),
        Body::Tflush { oldtag } => t(Tdata::Flush { old_tag: *oldtag }),
        Body::Rflush => r(Rdata::Flush {}),
        Body::Twalk {
            fid,
            newfid,
            wnames,
        } => t(Tdata::Walk {
            fid: *fid,
            new_fid: *newfid,
            wnames: wnames.clone(),
        }),
        Body::Rwalk { wqids } => r(Rdata::Walk {
            wqids: wqids.iter().map(nqid).collect(),
        }),
        Body::Topen { fid, mode } => t(Tdata::Open {
            fid: *fid,
            mode: *mode,
        }),
        Body::Ropen { qid, iounit } => r(Rdata::Open {
            qid: nqid(qid),
            iounit: *iounit,
        }),
        Body::Tcreate {
            fid,
            name,
            perm,
            mode,
        } => t(Tdata::Create {
            fid: *fid,
            name: name.clone(),
            perm: *perm,
            mode: *mode,
        }),
        Body::Rcreate { qid, iounit } => r(Rdata::Create {
            qid: nqid(qid),
            iounit: *iounit,
        }),
        Body::Tread { fid, offset, count } => t(Tdata::Read {
            fid: *fid,
            offset: *offset,
            count: *count,
        }),
        Body::Rread { data } => r(Rdata::Read {
            data: Data::from(data.clone()),
        }),
        Body::Twrite { fid, offset, data } => t(Tdata::Write {
            fid: *fid,
            offset: *offset,
            data: Data::from(data.clone()),
        }),
        Body::Rwrite { count } => r(Rdata::Write { count: *count }),
        Body::Tclunk { fid } => t(Tdata::Clunk { fid: *fid }),
        Body::Rclunk => r(Rdata::Clunk {}),
        Body::Tremove { fid } => t(Tdata::Remove { fid: *fid }),
        Body::Rremove => r(Rdata::Remove {}),
        Body::Tstat { fid } => t(Tdata::Stat { fid: *fid }),
        Body::Rstat { stat } => r(Rdata::Stat {
            size: inner_size(stat) + 2,
            stat: raw_stat(stat),
        }),
        Body::Twstat { fid, stat } => t(Tdata::Wstat {
            fid: *fid,
            size: inner_size(stat) + 2,
            stat: raw_stat(stat),
        }),
        Body::Rwstat => r(Rdata::Wstat {}),
    }
}

fn from_theirs(m: &Theirs) -> Frame {
    let (tag, body) = match m {
        Theirs::T(Tmessage { tag, content }) => (
            *tag,
            match content {
                Tdata::Version { msize, version } => Body::Tversion {
                    msize: *msize,
                    version: version.clone(),
                },
                Tdata::Auth { afid, uname, aname } => Body::Tauth {
                    afid: *afid,
                    uname: uname.clone(),
                    aname: aname.clone(),
                },
                Tdata::Attach {
                    fid,
                    afid,
                    uname,
                    aname,
                } => Body::Tattach {
                    fid: *fid,
                    afid: *afid,
                    uname: uname.clone(),
                    aname: aname.clone(),
                },
                Tdata::Flush { old_tag } => Body::Tflush { oldtag: *old_tag },
                Tdata::Walk {
                    fid,
                    new_fid,
                    wnames,
                } => Body::Twalk {
                    fid: *fid,
                    newfid: *new_fid,
                    wnames: wnames.clone(),
                },
                Tdata::Open { fid, mode } => Body::Topen {
                    fid: *fid,
                    mode: *mode,
                },
                Tdata::Create {
                    fid,
                    name,
                    perm,
                    mode,
                } => Body::Tcreate {
                    fid: *fid,
                    name: name.clone(),
                    perm: *perm,
                    mode: *mode,
                },
                Tdata::Read { fid, offset, count } => Body::Tread {
                    fid: *fid,
                    offset: *offset,
                    count: *count,
                },
                Tdata::Write { fid, offset, data } => Body::Twrite {
                    fid: *fid,
                    offset: *offset,
                    data: data_bytes(data),
                },
                Tdata::Clunk { fid } => Body::Tclunk { fid: *fid },
                Tdata::Remove { fid } => Body::Tremove { fid: *fid },
                Tdata::Stat { fid } => Body::Tstat { fid: *fid },
                Tdata::Wstat { fid, stat: s, .. } => Body::Twstat {
                    fid: *fid,
                    stat: stat(s),
                },
            },
        ),
        Theirs::R(Rmessage { tag, content }) => (
            *tag,
            match content {
                Rdata::Version { msize, version } => Body::Rversion {
                    msize: *msize,
                    version: version.clone(),
                },
                Rdata::Auth { aqid } => Body::Rauth { aqid: qid(aqid) },
                Rdata::Error { ename } => Body::Rerror {
                    ename: ename.clone(),
                },
                Rdata::Attach { aqid } => Body::Rattach { qid: qid(aqid) },
                Rdata::Flush {} => Body::Rflush,
                Rdata::Walk { wqids } => Body::Rwalk {
                    wqids: wqids.iter().map(qid).collect(),
                },
                Rdata::Open { qid: q, iounit } => Body::Ropen {
                    qid: qid(q),
                    iounit: *iounit,
                },
                Rdata::Create { qid: q, iounit } => Body::Rcreate {
                    qid: qid(q),
                    iounit: *iounit,
                },
                Rdata::Read { data } => Body::Rread {
                    data: data_bytes(data),
                },
                Rdata::Write { count } => Body::Rwrite { count: *count },
                Rdata::Clunk {} => Body::Rclunk,
                Rdata::Remove {} => Body::Rremove,
                Rdata::Stat { stat: s, .. } => Body::Rstat { stat: stat(s) },
                Rdata::Wstat {} => Body::Rwstat,
            },
        ),
    };
    Frame { tag, body }
}

fn their_bytes(m: &Theirs) -> Vec<u8> {
    match m {
        Theirs::T(t) => t.write_9p_bytes(),
        Theirs::R(r) => r.write_9p_bytes(),
    }
    .expect("ninep encodes the message")
}

/// Decode with ninep; T-messages have even type numbers, R-messages odd.
fn their_decode(bytes: &[u8]) -> std::io::Result<Theirs> {
    let sb = SharedBuf::default();
    let mut rd = bytes;
    if bytes.get(4).is_some_and(|ty| ty % 2 == 0) {
        Tmessage::read_from(u32::MAX, &sb, &mut rd).map(Theirs::T)
    } else {
        Rmessage::read_from(u32::MAX, &sb, &mut rd).map(Theirs::R)
    }
}

fn check_both_ways(frame: &Frame) -> Result<(), TestCaseError> {
    let theirs = to_theirs(frame);
    prop_assert_eq!(&from_theirs(&theirs), frame, "conversion is lossless");
    let ours_bytes = encode_to_vec(frame);
    let theirs_bytes = their_bytes(&theirs);
    prop_assert_eq!(&ours_bytes, &theirs_bytes, "same bytes");
    // Ours → theirs.
    let decoded = their_decode(&ours_bytes).map_err(|e| TestCaseError::fail(e.to_string()))?;
    prop_assert_eq!(&from_theirs(&decoded), frame);
    prop_assert_eq!(&decoded, &theirs);
    // Theirs → ours.
    prop_assert_eq!(decode(&theirs_bytes), Ok(frame.clone()));
    Ok(())
}

#[test]
fn every_variant_agrees_with_ninep() {
    for_every_variant(64, true, check_both_ways);
}

#[test]
fn samples_agree_with_ninep() {
    for frame in samples::every_message() {
        if let Err(e) = check_both_ways(&frame) {
            panic!("{frame:?}: {e}");
        }
    }
}

#[test]
fn directory_read_entries_agree_with_ninep() {
    let stats = [samples::stat(), Stat::default()];
    let mut ours = Vec::new();
    for s in &stats {
        toolsrv_wire::encode_stat(s, &mut ours);
    }
    let theirs: Vec<u8> = stats
        .iter()
        .flat_map(|s| raw_stat(s).write_9p_bytes().expect("ninep encodes stat"))
        .collect();
    assert_eq!(ours, theirs);
    let parsed = Vec::<RawStat>::try_from(Data::from(ours)).expect("ninep parses our entries");
    assert_eq!(parsed.iter().map(stat).collect::<Vec<_>>(), stats);
}

/// Whatever our decoder accepts, ninep accepts too and reads the same fields
/// (ninep is more lenient: trailing bytes, long walks and stat sizes are not
/// checked there, so the converse does not hold).
#[test]
fn accepted_mutants_agree_with_ninep() {
    let mut frames: Vec<Vec<u8>> = samples::every_message().iter().map(encode_to_vec).collect();
    let mut state: u64 = 0x1234_5678_9ABC_DEF1;
    let mut accepted = 0;
    for i in 0..20_000usize {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        let n = frames.len();
        let mut buf = frames[i % n].clone();
        // Only the bytes after the header, where both codecs parse fields.
        let pos = 7 + (state as usize >> 8) % (buf.len().max(8) - 7);
        if let Some(b) = buf.get_mut(pos) {
            *b ^= (state as u8) | 1;
        }
        if let Ok(ours) = decode(&buf) {
            accepted += 1;
            let theirs = their_decode(&buf).expect("ninep accepts what we accept");
            assert_eq!(theirs, to_theirs(&ours), "mutant {buf:?}");
            frames[i % n] = buf;
        }
    }
    assert!(accepted > 1000, "only {accepted} mutants accepted");
}
