//! A deterministic mutation fuzzer that runs on stable under `cargo test`.
//!
//! Seeds are valid frames of every type; each iteration applies a few random
//! mutations (bit flips, interesting bytes, truncation, splicing, length-field
//! corruption, insertions, deletions), then checks that decoding never panics,
//! that errors are consistent with the header, and that anything that decodes
//! re-encodes to the very same bytes (so it also decodes to the same value).
//! Bounded by 200 000 iterations or 5 seconds, whichever comes first.

use std::time::{Duration, Instant};
use toolsrv_wire::{decode, encode_to_vec, samples, Body, DecodeError, Frame, Qid};

/// xorshift64*: small, fast, and reproducible from a fixed seed.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: usize) -> usize {
        if n == 0 {
            0
        } else {
            (self.next() % n as u64) as usize
        }
    }
}

/// The seed corpus: every sample frame plus edge cases (empty strings and
/// data, full 16-element walks, a directory-read Rread of stat entries).
fn corpus() -> Vec<Vec<u8>> {
    let mut frames = samples::every_message();
    let mut dir = Vec::new();
    toolsrv_wire::encode_stat(&samples::stat(), &mut dir);
    toolsrv_wire::encode_stat(&Default::default(), &mut dir);
    frames.extend([
        Frame {
            tag: 0,
            body: Body::Twalk {
                fid: 1,
                newfid: 2,
                wnames: (0..16).map(|i| format!("d{i}")).collect(),
            },
        },
        Frame {
            tag: 1,
            body: Body::Rwalk {
                wqids: vec![Qid::default(); 16],
            },
        },
        Frame {
            tag: 2,
            body: Body::Rread { data: dir },
        },
        Frame {
            tag: 3,
            body: Body::Rerror {
                ename: String::new(),
            },
        },
        Frame {
            tag: 4,
            body: Body::Twrite {
                fid: 0,
                offset: 0,
                data: Vec::new(),
            },
        },
    ]);
    frames.iter().map(encode_to_vec).collect()
}

const INTERESTING: [u32; 9] = [0, 1, 2, 7, 16, 17, 0x7F, 0xFFFF, 0xFFFF_FFFF];

fn mutate(rng: &mut Rng, buf: &mut Vec<u8>, corpus: &[Vec<u8>]) {
    let len = buf.len();
    match rng.below(8) {
        0 if len > 0 => {
            let i = rng.below(len);
            buf[i] ^= 1 << rng.below(8);
        }
        1 if len > 0 => {
            let i = rng.below(len);
            buf[i] = INTERESTING[rng.below(INTERESTING.len())] as u8;
        }
        2 => buf.truncate(rng.below(len + 1)),
        3 => {
            let other = &corpus[rng.below(corpus.len())];
            let cut = rng.below(len + 1);
            let from = rng.below(other.len() + 1);
            buf.truncate(cut);
            buf.extend_from_slice(&other[from..]);
        }
        4 if len >= 2 => {
            // Corrupt a two-byte length (string len, nwname, n of a stat).
            let i = rng.below(len - 1);
            let v = INTERESTING[rng.below(INTERESTING.len())] as u16;
            buf[i..i + 2].copy_from_slice(&v.to_le_bytes());
        }
        5 if len >= 4 => {
            // Corrupt a four-byte length (count of Rread/Twrite).
            let i = rng.below(len - 3);
            let v = INTERESTING[rng.below(INTERESTING.len())];
            buf[i..i + 4].copy_from_slice(&v.to_le_bytes());
        }
        6 => {
            let i = rng.below(len + 1);
            let n = 1 + rng.below(4);
            for _ in 0..n {
                buf.insert(i, rng.next() as u8);
            }
        }
        _ if len > 0 => {
            let i = rng.below(len);
            let n = (1 + rng.below(4)).min(len - i);
            buf.drain(i..i + n);
        }
        _ => {}
    }
}

/// Outcome counts, to check the loop really explores both sides.
#[derive(Default, Debug)]
struct Tally {
    ok: u64,
    framing: u64,
    body: u64,
}

fn check(buf: &[u8], tally: &mut Tally) {
    match decode(buf) {
        Ok(frame) => {
            tally.ok += 1;
            let again = encode_to_vec(&frame);
            assert_eq!(again, buf, "re-encoding {frame:?} changed the bytes");
            assert_eq!(decode(&again), Ok(frame));
        }
        Err(DecodeError::Framing(n)) => {
            tally.framing += 1;
            let size = buf
                .get(..4)
                .map(|s| u32::from_le_bytes([s[0], s[1], s[2], s[3]]));
            assert!(
                buf.len() < 7 || size.is_some_and(|s| s < 7),
                "framing error {n} on a {}-byte buffer with a usable header",
                buf.len()
            );
        }
        Err(DecodeError::Body { tag, ty, reason }) => {
            tally.body += 1;
            assert!(buf.len() >= 7, "body error on {} bytes", buf.len());
            assert_eq!(tag, u16::from_le_bytes([buf[5], buf[6]]), "{reason}");
            assert_eq!(ty, buf[4], "{reason}");
            assert!(!reason.is_empty());
        }
    }
}

#[test]
fn mutated_frames_never_panic_and_round_trip() {
    let corpus = corpus();
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    let mut tally = Tally::default();
    let deadline = Instant::now() + Duration::from_secs(5);
    for iter in 0..200_000u32 {
        if iter % 1024 == 0 && Instant::now() > deadline {
            break;
        }
        let mut buf = corpus[rng.below(corpus.len())].clone();
        for _ in 0..1 + rng.below(3) {
            mutate(&mut rng, &mut buf, &corpus);
        }
        // Usually repair the size field, so the body parser is what gets tested.
        if rng.below(4) != 0 && buf.len() >= 4 {
            let size = buf.len() as u32;
            buf[..4].copy_from_slice(&size.to_le_bytes());
        }
        check(&buf, &mut tally);
    }
    eprintln!("mutation fuzz outcomes: {tally:?}");
    // Each outcome must have been reached, or the mutator is not exploring.
    assert!(tally.ok > 100, "{tally:?}");
    assert!(tally.framing > 10, "{tally:?}");
    assert!(tally.body > 100, "{tally:?}");
}

#[test]
fn unmutated_seeds_decode() {
    let mut tally = Tally::default();
    for seed in corpus() {
        check(&seed, &mut tally);
    }
    assert_eq!(tally.ok as usize, corpus().len(), "{tally:?}");
}
