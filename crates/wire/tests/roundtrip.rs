//! Property tests: encode then decode gives back the same value, for every
//! message variant and for stat entries.

use crate::common::{arb_stat, for_every_variant, variant_index, VARIANTS};
use proptest::collection::vec;
use proptest::prelude::*;
use toolsrv_wire::{
    decode, decode_stat, encode, encode_stat, encode_to_vec, encoded_len, msgtype, samples,
};

#[test]
fn every_variant_round_trips() {
    for_every_variant(128, false, |frame| {
        let bytes = encode_to_vec(frame);
        prop_assert_eq!(bytes.len(), encoded_len(frame));
        let size = u32::from_le_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]);
        prop_assert_eq!(size as usize, bytes.len());
        prop_assert_eq!(bytes[4], frame.body.type_id());
        prop_assert_eq!(u16::from_le_bytes([bytes[5], bytes[6]]), frame.tag);
        prop_assert_eq!(decode(&bytes), Ok(frame.clone()));
        Ok(())
    });
}

#[test]
fn encode_appends_after_existing_bytes() {
    for_every_variant(16, false, |frame| {
        let mut out = b"prefix".to_vec();
        encode(frame, &mut out);
        prop_assert_eq!(&out[..6], b"prefix");
        prop_assert_eq!(decode(&out[6..]), Ok(frame.clone()));
        Ok(())
    });
}

proptest! {
    #[test]
    fn stat_entry_round_trips(stat in arb_stat(false)) {
        let mut out = Vec::new();
        encode_stat(&stat, &mut out);
        let size = u16::from_le_bytes([out[0], out[1]]);
        prop_assert_eq!(usize::from(size) + 2, out.len());
        prop_assert_eq!(decode_stat(&out), Ok((stat, out.len())));
    }

    #[test]
    fn concatenated_stat_entries_decode_in_order(stats in vec(arb_stat(false), 0..8)) {
        let mut out = Vec::new();
        for s in &stats {
            encode_stat(s, &mut out);
        }
        let mut rest = &out[..];
        let mut back = Vec::new();
        while !rest.is_empty() {
            let (s, used) = decode_stat(rest).map_err(|e| TestCaseError::fail(e.to_string()))?;
            back.push(s);
            rest = &rest[used..];
        }
        prop_assert_eq!(back, stats);
    }
}

#[test]
fn samples_cover_every_message_type_once() {
    let frames = samples::every_message();
    let indices: Vec<usize> = frames.iter().map(|f| variant_index(&f.body)).collect();
    assert_eq!(indices, (0..VARIANTS).collect::<Vec<_>>());
    for f in &frames {
        assert_eq!(decode(&encode_to_vec(f)), Ok(f.clone()));
    }
}

#[test]
fn type_names_match_type_numbers() {
    assert_eq!(msgtype::name(msgtype::TVERSION), Some("Tversion"));
    assert_eq!(msgtype::name(msgtype::RERROR), Some("Rerror"));
    assert_eq!(msgtype::name(msgtype::RWSTAT), Some("Rwstat"));
    assert_eq!(msgtype::name(msgtype::TERROR), None);
    assert_eq!(msgtype::name(99), None);
    assert_eq!(msgtype::name(128), None);
    for f in samples::every_message() {
        let name = msgtype::name(f.body.type_id()).unwrap_or("none");
        let debug = format!("{:?}", f.body);
        assert!(debug.starts_with(name), "{name} vs {debug}");
    }
}

#[test]
fn overlong_strings_are_clipped_at_a_char_boundary() {
    // 'é' is two bytes: 40000 of them are 80000 bytes, over the 65535 limit.
    let long = "é".repeat(40_000);
    let frame = toolsrv_wire::Frame {
        tag: 1,
        body: toolsrv_wire::Body::Rerror {
            ename: long.clone(),
        },
    };
    let bytes = encode_to_vec(&frame);
    assert_eq!(bytes.len(), encoded_len(&frame));
    match decode(&bytes) {
        Ok(toolsrv_wire::Frame {
            body: toolsrv_wire::Body::Rerror { ename },
            ..
        }) => {
            assert_eq!(ename.len(), 65534);
            assert!(long.starts_with(&ename));
        }
        other => panic!("unexpected {other:?}"),
    }
    // A stat whose strings together exceed size[2] still yields a valid entry.
    let mut stat = samples::stat();
    stat.name = "n".repeat(40_000);
    stat.uid = "u".repeat(40_000);
    let frame = toolsrv_wire::Frame {
        tag: 2,
        body: toolsrv_wire::Body::Rstat { stat },
    };
    let bytes = encode_to_vec(&frame);
    assert_eq!(bytes.len(), encoded_len(&frame));
    let back = decode(&bytes);
    assert!(back.is_ok(), "{back:?}");
}
