//! One example frame of every 9P2000 message type, with non-trivial field
//! values: seeds for fuzzing and fixtures for tests in this and other crates.

use crate::message::{Body, Frame, Qid, Stat, DMDIR, NOFID, NOTAG, ORDWR, OTRUNC, QTAUTH, QTDIR};

/// A stat entry with every field set.
pub fn stat() -> Stat {
    Stat {
        ty: 0x1234,
        dev: 0xdead_beef,
        qid: Qid {
            ty: QTDIR,
            version: 7,
            path: 0x0102_0304_0506_0708,
        },
        mode: DMDIR | 0o755,
        atime: 1_700_000_000,
        mtime: 1_700_000_001,
        length: 4096,
        name: "tools".to_owned(),
        uid: "agent".to_owned(),
        gid: "users".to_owned(),
        muid: "ünïcode".to_owned(),
    }
}

/// One frame per message type (27 frames, `Terror` excluded), in type order.
pub fn every_message() -> Vec<Frame> {
    let qid = Qid {
        ty: QTDIR,
        version: 3,
        path: 42,
    };
    let bodies = vec![
        Body::Tversion {
            msize: 8192,
            version: "9P2000".to_owned(),
        },
        Body::Rversion {
            msize: 8192,
            version: "9P2000".to_owned(),
        },
        Body::Tauth {
            afid: 1,
            uname: "agent".to_owned(),
            aname: String::new(),
        },
        Body::Rauth {
            aqid: Qid {
                ty: QTAUTH,
                version: 0,
                path: 9,
            },
        },
        Body::Tattach {
            fid: 0,
            afid: NOFID,
            uname: "agent".to_owned(),
            aname: "main".to_owned(),
        },
        Body::Rattach { qid },
        Body::Rerror {
            ename: "file not found".to_owned(),
        },
        Body::Tflush { oldtag: 5 },
        Body::Rflush,
        Body::Twalk {
            fid: 0,
            newfid: 1,
            wnames: vec!["proc".to_owned(), "new".to_owned()],
        },
        Body::Rwalk {
            wqids: vec![
                qid,
                Qid {
                    ty: 0,
                    version: 1,
                    path: 43,
                },
            ],
        },
        Body::Topen {
            fid: 1,
            mode: ORDWR | OTRUNC,
        },
        Body::Ropen { qid, iounit: 8168 },
        Body::Tcreate {
            fid: 1,
            name: "x".to_owned(),
            perm: 0o644,
            mode: ORDWR,
        },
        Body::Rcreate { qid, iounit: 0 },
        Body::Tread {
            fid: 1,
            offset: 1 << 40,
            count: 8168,
        },
        Body::Rread {
            data: b"hello\n".to_vec(),
        },
        Body::Twrite {
            fid: 1,
            offset: 3,
            data: vec![0, 1, 2, 255],
        },
        Body::Rwrite { count: 4 },
        Body::Tclunk { fid: 1 },
        Body::Rclunk,
        Body::Tremove { fid: 1 },
        Body::Rremove,
        Body::Tstat { fid: 1 },
        Body::Rstat { stat: stat() },
        Body::Twstat {
            fid: 1,
            stat: stat(),
        },
        Body::Rwstat,
    ];
    bodies
        .into_iter()
        .enumerate()
        .map(|(i, body)| Frame {
            tag: if i == 0 || i == 1 {
                NOTAG
            } else {
                u16::try_from(i).unwrap_or(0) * 257
            },
            body,
        })
        .collect()
}
