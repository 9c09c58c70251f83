//! Hostile input: every malformed frame yields the exact error, keeps its tag,
//! and never allocates more than the frame holds.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use toolsrv_wire::{
    decode, decode_stat, encode_stat, encode_to_vec, msgtype, samples, Body, DecodeError, Frame,
    Qid, StatError,
};

/// Records, per thread, the largest single allocation requested.
struct PeakAlloc;

thread_local! {
    static PEAK: Cell<usize> = const { Cell::new(0) };
}

// Safety: every method forwards to `System` with the caller's layout and
// pointer unchanged; the only addition is a thread-local `Cell` update, which
// neither allocates nor re-enters the allocator.
unsafe impl GlobalAlloc for PeakAlloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let _ = PEAK.try_with(|p| p.set(p.get().max(layout.size())));
        // Safety: same contract as our caller's.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // Safety: `ptr` came from `System.alloc` with this layout.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let _ = PEAK.try_with(|p| p.set(p.get().max(new_size)));
        // Safety: same contract as our caller's.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOC: PeakAlloc = PeakAlloc;

/// Decode `buf` and return the result with the largest allocation made meanwhile.
fn decode_measured(buf: &[u8]) -> (Result<Frame, DecodeError>, usize) {
    PEAK.with(|p| p.set(0));
    let r = decode(buf);
    (r, PEAK.with(Cell::get))
}

/// A frame with the given type, tag and body bytes, its size field correct.
fn raw(ty: u8, tag: u16, body: &[u8]) -> Vec<u8> {
    let mut v = Vec::with_capacity(7 + body.len());
    v.extend_from_slice(&(7 + body.len() as u32).to_le_bytes());
    v.push(ty);
    v.extend_from_slice(&tag.to_le_bytes());
    v.extend_from_slice(body);
    v
}

fn set_size(buf: &mut [u8], size: u32) {
    buf[..4].copy_from_slice(&size.to_le_bytes());
}

fn body_err(tag: u16, ty: u8, reason: &str) -> Result<Frame, DecodeError> {
    Err(DecodeError::Body {
        tag,
        ty,
        reason: reason.to_owned(),
    })
}

#[test]
fn truncated_frames_of_every_type_keep_their_tag() {
    for frame in samples::every_message() {
        let full = encode_to_vec(&frame);
        let ty = frame.body.type_id();
        let name = msgtype::name(ty).unwrap_or("?");
        for cut in 7..full.len() {
            // Size field agrees with the shorter buffer: the body is truncated.
            let mut short = full[..cut].to_vec();
            set_size(&mut short, cut as u32);
            assert_eq!(
                decode(&short),
                body_err(frame.tag, ty, &format!("truncated {name}")),
                "{name} cut at {cut}"
            );
            // Size field still claims the full length: it disagrees with the buffer.
            assert_eq!(
                decode(&full[..cut]),
                body_err(
                    frame.tag,
                    ty,
                    &format!(
                        "size field {} does not match frame length {cut}",
                        full.len()
                    )
                ),
                "{name} cut at {cut}, size unchanged"
            );
        }
        for cut in 0..7 {
            assert_eq!(
                decode(&full[..cut]),
                Err(DecodeError::Framing(cut as u32)),
                "{name} cut to {cut} bytes"
            );
        }
    }
}

#[test]
fn size_field_lies() {
    let full = encode_to_vec(&Frame {
        tag: 77,
        body: Body::Tclunk { fid: 3 },
    });
    for lie in [full.len() as u32 + 1, full.len() as u32 - 1, 8, u32::MAX] {
        let mut buf = full.clone();
        set_size(&mut buf, lie);
        assert_eq!(
            decode(&buf),
            body_err(
                77,
                msgtype::TCLUNK,
                &format!(
                    "size field {lie} does not match frame length {}",
                    full.len()
                )
            )
        );
    }
    for tiny in 0..7u32 {
        let mut buf = full.clone();
        set_size(&mut buf, tiny);
        assert_eq!(decode(&buf), Err(DecodeError::Framing(tiny)));
    }
    assert_eq!(
        DecodeError::Framing(3).to_string(),
        "frame too short: 3 bytes"
    );
}

#[test]
fn trailing_bytes_after_a_body_are_rejected() {
    for frame in samples::every_message() {
        let mut buf = encode_to_vec(&frame);
        buf.extend_from_slice(&[0xAA, 0xBB]);
        let len = buf.len() as u32;
        set_size(&mut buf, len);
        let ty = frame.body.type_id();
        let name = msgtype::name(ty).unwrap_or("?");
        assert_eq!(
            decode(&buf),
            body_err(frame.tag, ty, &format!("trailing bytes after {name}: 2"))
        );
    }
}

#[test]
fn huge_counts_do_not_allocate() {
    // Twrite claiming 4 GiB of data in a 23-byte frame.
    let mut body = Vec::new();
    body.extend_from_slice(&9u32.to_le_bytes());
    body.extend_from_slice(&0u64.to_le_bytes());
    body.extend_from_slice(&u32::MAX.to_le_bytes());
    let (r, peak) = decode_measured(&raw(msgtype::TWRITE, 5, &body));
    assert_eq!(r, body_err(5, msgtype::TWRITE, "truncated Twrite"));
    assert!(peak < 1024, "Twrite allocated {peak} bytes");

    // Rread claiming 4 GiB with a few bytes present.
    let mut body = u32::MAX.to_le_bytes().to_vec();
    body.extend_from_slice(b"abc");
    let (r, peak) = decode_measured(&raw(msgtype::RREAD, 6, &body));
    assert_eq!(r, body_err(6, msgtype::RREAD, "truncated Rread"));
    assert!(peak < 1024, "Rread allocated {peak} bytes");

    // A string claiming 65535 bytes.
    let mut body = 8192u32.to_le_bytes().to_vec();
    body.extend_from_slice(&u16::MAX.to_le_bytes());
    body.extend_from_slice(b"9P");
    let (r, peak) = decode_measured(&raw(msgtype::TVERSION, 7, &body));
    assert_eq!(r, body_err(7, msgtype::TVERSION, "truncated Tversion"));
    assert!(peak < 1024, "Tversion allocated {peak} bytes");

    // Twalk claiming 65535 names.
    let mut body = [1u32.to_le_bytes(), 2u32.to_le_bytes()].concat();
    body.extend_from_slice(&u16::MAX.to_le_bytes());
    let (r, peak) = decode_measured(&raw(msgtype::TWALK, 8, &body));
    assert_eq!(
        r,
        body_err(8, msgtype::TWALK, "too many walk elements: 65535")
    );
    assert!(peak < 1024, "Twalk allocated {peak} bytes");

    // Rstat whose n claims 65535 bytes.
    let (r, peak) = decode_measured(&raw(msgtype::RSTAT, 9, &u16::MAX.to_le_bytes()));
    assert_eq!(r, body_err(9, msgtype::RSTAT, "truncated Rstat"));
    assert!(peak < 1024, "Rstat allocated {peak} bytes");

    // A well-formed 64 KiB Rread allocates about what it holds, which shows the
    // measurement above is real.
    let big = encode_to_vec(&Frame {
        tag: 1,
        body: Body::Rread {
            data: vec![7; 65536],
        },
    });
    let (r, peak) = decode_measured(&big);
    assert!(r.is_ok());
    assert!(peak >= 65536, "peak {peak}");
}

#[test]
fn invalid_utf8_in_any_string_field() {
    let bad: &[u8] = &[2, 0, 0xC3, 0x28];
    // Tversion version.
    let body = [&8192u32.to_le_bytes()[..], bad].concat();
    assert_eq!(
        decode(&raw(msgtype::TVERSION, 1, &body)),
        body_err(1, msgtype::TVERSION, "invalid UTF-8 in string")
    );
    // Second walk name.
    let body = [
        &0u32.to_le_bytes()[..],
        &1u32.to_le_bytes(),
        &2u16.to_le_bytes(),
        &[1, 0, b'a'],
        bad,
    ]
    .concat();
    assert_eq!(
        decode(&raw(msgtype::TWALK, 2, &body)),
        body_err(2, msgtype::TWALK, "invalid UTF-8 in string")
    );
    // Rerror ename: a lone continuation byte.
    assert_eq!(
        decode(&raw(msgtype::RERROR, 3, &[1, 0, 0x80])),
        body_err(3, msgtype::RERROR, "invalid UTF-8 in string")
    );
    // muid of an Rstat: corrupt the last byte of the sample's "ünïcode".
    let mut buf = encode_to_vec(&Frame {
        tag: 4,
        body: Body::Rstat {
            stat: samples::stat(),
        },
    });
    let last = buf.len() - 1;
    buf[last] = 0xFF;
    assert_eq!(
        decode(&buf),
        body_err(4, msgtype::RSTAT, "invalid UTF-8 in string")
    );
}

#[test]
fn seventeen_walk_elements_are_rejected() {
    let names = vec!["x".to_owned(); 17];
    let buf = encode_to_vec(&Frame {
        tag: 10,
        body: Body::Twalk {
            fid: 0,
            newfid: 1,
            wnames: names,
        },
    });
    assert_eq!(
        decode(&buf),
        body_err(10, msgtype::TWALK, "too many walk elements: 17")
    );
    let buf = encode_to_vec(&Frame {
        tag: 11,
        body: Body::Rwalk {
            wqids: vec![Qid::default(); 17],
        },
    });
    assert_eq!(
        decode(&buf),
        body_err(11, msgtype::RWALK, "too many walk elements: 17")
    );
    // Sixteen is the limit and is fine.
    let sixteen = Frame {
        tag: 12,
        body: Body::Twalk {
            fid: 0,
            newfid: 1,
            wnames: vec!["y".to_owned(); 16],
        },
    };
    assert_eq!(decode(&encode_to_vec(&sixteen)), Ok(sixteen));
}

#[test]
fn unknown_types_keep_their_tag() {
    for ty in [200u8, msgtype::TERROR, 0, 99, 128, 255] {
        assert_eq!(
            decode(&raw(ty, 0x1234, &[1, 2, 3])),
            body_err(0x1234, ty, &format!("unknown message type {ty}"))
        );
        assert_eq!(
            decode(&raw(ty, 0x4321, &[])),
            body_err(0x4321, ty, &format!("unknown message type {ty}"))
        );
    }
}

/// An Rstat frame with explicit n and stat bytes (stat bytes include size[2]).
fn rstat_raw(n: u16, stat: &[u8]) -> Vec<u8> {
    raw(msgtype::RSTAT, 20, &[&n.to_le_bytes()[..], stat].concat())
}

#[test]
fn stat_size_disagreeing_with_n() {
    let mut entry = Vec::new();
    encode_stat(&samples::stat(), &mut entry);
    let n = entry.len() as u16;
    let inner = n - 2;

    // n one larger than the entry, with a padding byte present.
    let padded = [&entry[..], &[0]].concat();
    assert_eq!(
        decode(&rstat_raw(n + 1, &padded)),
        body_err(
            20,
            msgtype::RSTAT,
            &format!("stat size {inner} disagrees with n {}", n + 1)
        )
    );
    // Inner size one larger than n allows.
    let mut bigger = entry.clone();
    bigger[..2].copy_from_slice(&(inner + 1).to_le_bytes());
    assert_eq!(
        decode(&rstat_raw(n, &bigger)),
        body_err(
            20,
            msgtype::RSTAT,
            &format!("stat size {} disagrees with n {n}", inner + 1)
        )
    );
    // Inner size and n agree but the fields need more: truncated entry.
    let mut shrunk = entry[..entry.len() - 1].to_vec();
    shrunk[..2].copy_from_slice(&(inner - 1).to_le_bytes());
    assert_eq!(
        decode(&rstat_raw(n - 1, &shrunk)),
        body_err(20, msgtype::RSTAT, "truncated stat entry")
    );
    // Inner size and n agree but the fields leave a byte over.
    let mut grown = [&entry[..], &[0]].concat();
    grown[..2].copy_from_slice(&(inner + 1).to_le_bytes());
    assert_eq!(
        decode(&rstat_raw(n + 1, &grown)),
        body_err(20, msgtype::RSTAT, "trailing bytes in stat entry: 1")
    );
    // n too small to hold even the size field.
    assert_eq!(
        decode(&rstat_raw(1, &[0])),
        body_err(20, msgtype::RSTAT, "truncated stat entry")
    );
    assert_eq!(
        decode(&rstat_raw(0, &[])),
        body_err(20, msgtype::RSTAT, "truncated stat entry")
    );
    // Twstat goes through the same check.
    let body = [&1u32.to_le_bytes()[..], &(n + 1).to_le_bytes(), &padded].concat();
    assert_eq!(
        decode(&raw(msgtype::TWSTAT, 21, &body)),
        body_err(
            21,
            msgtype::TWSTAT,
            &format!("stat size {inner} disagrees with n {}", n + 1)
        )
    );
}

#[test]
fn decode_stat_rejects_short_and_padded_entries() {
    let mut entry = Vec::new();
    encode_stat(&samples::stat(), &mut entry);
    for cut in 0..entry.len() {
        assert_eq!(
            decode_stat(&entry[..cut]),
            Err(StatError::Truncated),
            "cut at {cut}"
        );
    }
    // Extra bytes after the entry are not consumed.
    let two = [&entry[..], &entry[..]].concat();
    assert_eq!(decode_stat(&two), Ok((samples::stat(), entry.len())));
    // Extra bytes inside the entry's declared size are an error.
    let mut grown = [&entry[..], &[9, 9]].concat();
    let inner = u16::from_le_bytes([entry[0], entry[1]]) + 2;
    grown[..2].copy_from_slice(&inner.to_le_bytes());
    assert_eq!(decode_stat(&grown), Err(StatError::Trailing(2)));
}
