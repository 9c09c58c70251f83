//! Proptest strategies shared by the integration tests: one strategy per
//! message variant, so each variant can be exercised on its own.

#![allow(dead_code)] // each test binary uses a different subset

use proptest::collection::vec;
use proptest::prelude::*;
use toolsrv_wire::{Body, Frame, Qid, Stat, MAXWELEM};

/// Number of message variants (every 9P2000 type but `Terror`).
pub const VARIANTS: usize = 27;

/// Short strings of arbitrary Unicode (multi-byte characters included).
pub fn arb_string() -> impl Strategy<Value = String> {
    "\\PC{0,12}"
}

/// Qid type bytes: any byte, or (for codecs that drop unknown bits) only the
/// bits 9P2000 defines.
pub fn arb_qid_ty(known_bits_only: bool) -> BoxedStrategy<u8> {
    if known_bits_only {
        any::<u8>().prop_map(|b| b & 0xEC).boxed()
    } else {
        any::<u8>().boxed()
    }
}

/// Any qid.
pub fn arb_qid(known_bits_only: bool) -> impl Strategy<Value = Qid> {
    (arb_qid_ty(known_bits_only), any::<u32>(), any::<u64>()).prop_map(|(ty, version, path)| Qid {
        ty,
        version,
        path,
    })
}

/// Any stat entry with short strings.
pub fn arb_stat(known_bits_only: bool) -> impl Strategy<Value = Stat> {
    (
        (any::<u16>(), any::<u32>(), arb_qid(known_bits_only)),
        (any::<u32>(), any::<u32>(), any::<u32>(), any::<u64>()),
        (arb_string(), arb_string(), arb_string(), arb_string()),
    )
        .prop_map(
            |((ty, dev, qid), (mode, atime, mtime, length), (name, uid, gid, muid))| Stat {
                ty,
                dev,
                qid,
                mode,
                atime,
                mtime,
                length,
                name,
                uid,
                gid,
                muid,
            },
        )
}

fn arb_data() -> impl Strategy<Value = Vec<u8>> {
    vec(any::<u8>(), 0..64)
}

/// The strategy for variant number `i` (0..VARIANTS, in type-number order).
pub fn arb_body_variant(i: usize, known_bits_only: bool) -> BoxedStrategy<Body> {
    let k = known_bits_only;
    match i {
        0 => (any::<u32>(), arb_string())
            .prop_map(|(msize, version)| Body::Tversion { msize, version })
            .boxed(),
        1 => (any::<u32>(), arb_string())
            .prop_map(|(msize, version)| Body::Rversion { msize, version })
            .boxed(),
        2 => (any::<u32>(), arb_string(), arb_string())
            .prop_map(|(afid, uname, aname)| Body::Tauth { afid, uname, aname })
            .boxed(),
        3 => arb_qid(k).prop_map(|aqid| Body::Rauth { aqid }).boxed(),
        4 => (any::<u32>(), any::<u32>(), arb_string(), arb_string())
            .prop_map(|(fid, afid, uname, aname)| Body::Tattach {
                fid,
                afid,
                uname,
                aname,
            })
            .boxed(),
        5 => arb_qid(k).prop_map(|qid| Body::Rattach { qid }).boxed(),
        6 => arb_string()
            .prop_map(|ename| Body::Rerror { ename })
            .boxed(),
        7 => any::<u16>()
            .prop_map(|oldtag| Body::Tflush { oldtag })
            .boxed(),
        8 => Just(Body::Rflush).boxed(),
        9 => (any::<u32>(), any::<u32>(), vec(arb_string(), 0..=MAXWELEM))
            .prop_map(|(fid, newfid, wnames)| Body::Twalk {
                fid,
                newfid,
                wnames,
            })
            .boxed(),
        10 => vec(arb_qid(k), 0..=MAXWELEM)
            .prop_map(|wqids| Body::Rwalk { wqids })
            .boxed(),
        11 => (any::<u32>(), any::<u8>())
            .prop_map(|(fid, mode)| Body::Topen { fid, mode })
            .boxed(),
        12 => (arb_qid(k), any::<u32>())
            .prop_map(|(qid, iounit)| Body::Ropen { qid, iounit })
            .boxed(),
        13 => (any::<u32>(), arb_string(), any::<u32>(), any::<u8>())
            .prop_map(|(fid, name, perm, mode)| Body::Tcreate {
                fid,
                name,
                perm,
                mode,
            })
            .boxed(),
        14 => (arb_qid(k), any::<u32>())
            .prop_map(|(qid, iounit)| Body::Rcreate { qid, iounit })
            .boxed(),
        15 => (any::<u32>(), any::<u64>(), any::<u32>())
            .prop_map(|(fid, offset, count)| Body::Tread { fid, offset, count })
            .boxed(),
        16 => arb_data().prop_map(|data| Body::Rread { data }).boxed(),
        17 => (any::<u32>(), any::<u64>(), arb_data())
            .prop_map(|(fid, offset, data)| Body::Twrite { fid, offset, data })
            .boxed(),
        18 => any::<u32>()
            .prop_map(|count| Body::Rwrite { count })
            .boxed(),
        19 => any::<u32>().prop_map(|fid| Body::Tclunk { fid }).boxed(),
        20 => Just(Body::Rclunk).boxed(),
        21 => any::<u32>().prop_map(|fid| Body::Tremove { fid }).boxed(),
        22 => Just(Body::Rremove).boxed(),
        23 => any::<u32>().prop_map(|fid| Body::Tstat { fid }).boxed(),
        24 => arb_stat(k).prop_map(|stat| Body::Rstat { stat }).boxed(),
        25 => (any::<u32>(), arb_stat(k))
            .prop_map(|(fid, stat)| Body::Twstat { fid, stat })
            .boxed(),
        _ => Just(Body::Rwstat).boxed(),
    }
}

/// A frame whose body is variant number `i`.
pub fn arb_frame_variant(i: usize, known_bits_only: bool) -> impl Strategy<Value = Frame> {
    (any::<u16>(), arb_body_variant(i, known_bits_only)).prop_map(|(tag, body)| Frame { tag, body })
}

/// The variant number of `body`, in type-number order; an exhaustive match, so
/// a new variant fails to compile here until it gets a strategy above.
pub fn variant_index(body: &Body) -> usize {
    match body {
        Body::Tversion { .. } => 0,
        Body::Rversion { .. } => 1,
        Body::Tauth { .. } => 2,
        Body::Rauth { .. } => 3,
        Body::Tattach { .. } => 4,
        Body::Rattach { .. } => 5,
        Body::Rerror { .. } => 6,
        Body::Tflush { .. } => 7,
        Body::Rflush => 8,
        Body::Twalk { .. } => 9,
        Body::Rwalk { .. } => 10,
        Body::Topen { .. } => 11,
        Body::Ropen { .. } => 12,
        Body::Tcreate { .. } => 13,
        Body::Rcreate { .. } => 14,
        Body::Tread { .. } => 15,
        Body::Rread { .. } => 16,
        Body::Twrite { .. } => 17,
        Body::Rwrite { .. } => 18,
        Body::Tclunk { .. } => 19,
        Body::Rclunk => 20,
        Body::Tremove { .. } => 21,
        Body::Rremove => 22,
        Body::Tstat { .. } => 23,
        Body::Rstat { .. } => 24,
        Body::Twstat { .. } => 25,
        Body::Rwstat => 26,
    }
}

/// Run `check` on `cases` generated frames of every variant, asserting the
/// strategy for variant `i` really produces variant `i`.
pub fn for_every_variant(
    cases: u32,
    known_bits_only: bool,
    check: impl Fn(&Frame) -> Result<(), TestCaseError>,
) {
    for i in 0..VARIANTS {
        let mut runner = proptest::test_runner::TestRunner::new(ProptestConfig {
            cases,
            failure_persistence: None,
            ..ProptestConfig::default()
        });
        let result = runner.run(&arb_frame_variant(i, known_bits_only), |frame| {
            prop_assert_eq!(variant_index(&frame.body), i);
            check(&frame)
        });
        if let Err(e) = result {
            panic!("variant {i}: {e}");
        }
    }
}
