//! Replies to a pipelined batch that ends with a read which waits: the
//! replies before it are held back to leave in one write with the read's
//! reply, and released anyway when the read keeps waiting.

use std::io::Read;
use std::time::{Duration, Instant};

use toolsrv_wire::{decode, encode, read_frame, Body, Frame, ORDWR, OREAD};

use crate::procs_util::{bg, payload, tools_session};
use crate::util::Raw;

/// A tool that takes a few milliseconds: well within the 20 ms hold.
const BRIEF: &str = "description: Sleep briefly\ncommand: sleep 0.005\n";

/// Send `bodies` (tags 1, 2, ...) in one write.
fn send_batch(c: &mut Raw, bodies: Vec<Body>) {
    let mut buf = Vec::new();
    for (i, body) in bodies.into_iter().enumerate() {
        encode(
            &Frame {
                tag: i as u16 + 1,
                body,
            },
            &mut buf,
        );
    }
    c.send_bytes(&buf);
}

/// The complete frames at the start of `bytes` (a cut-off last frame is left).
fn frames_in(mut bytes: &[u8]) -> Vec<Frame> {
    let mut frames = Vec::new();
    while let Ok(frame) = read_frame(&mut bytes, 1 << 20) {
        frames.push(decode(&frame).expect("decodable reply"));
    }
    frames
}

/// Read until `want` frames have arrived; also returns how many came in the
/// first read.
fn read_frames(c: &mut Raw, want: usize) -> (Vec<Frame>, usize) {
    let mut bytes = Vec::new();
    let mut first = None;
    let mut buf = vec![0u8; 1 << 16];
    loop {
        let n = c.s.read(&mut buf).expect("read replies");
        assert!(n > 0, "the server closed the connection");
        bytes.extend_from_slice(&buf[..n]);
        let frames = frames_in(&bytes);
        first.get_or_insert(frames.len());
        if frames.len() >= want {
            return (frames, first.unwrap_or(0));
        }
    }
}

#[test]
fn replies_before_a_waiting_read_leave_with_its_reply() {
    let (_srv, mut c) = tools_session(&[("brief.yaml", BRIEF)], &[]);
    let request = payload(&[("tool", "brief"), ("agent", "a1")]);
    // Sent at once the first three replies would reach us a tool run before
    // the fourth; held back, all four arrive in one write. A run can exceed
    // the hold on a loaded machine, so most attempts (not all) must coalesce.
    let mut coalesced = 0;
    for fid in 1..=10u32 {
        send_batch(
            &mut c,
            vec![
                Body::Twalk {
                    fid: 0,
                    newfid: fid,
                    wnames: vec!["proc".into(), "new".into()],
                },
                Body::Topen { fid, mode: ORDWR },
                Body::Twrite {
                    fid,
                    offset: 0,
                    data: request.as_bytes().to_vec(),
                },
                Body::Tread {
                    fid,
                    offset: 0,
                    count: 8192,
                },
            ],
        );
        let (frames, first) = read_frames(&mut c, 4);
        let tags: Vec<u16> = frames.iter().map(|f| f.tag).collect();
        assert_eq!(tags, [1, 2, 3, 4], "replies in request order");
        assert!(
            matches!(&frames[3].body, Body::Rread { data } if data.starts_with(b"{")),
            "{:?}",
            frames[3].body
        );
        if first == 4 {
            coalesced += 1;
        }
        c.ok(Body::Tclunk { fid });
    }
    assert!(
        coalesced >= 3,
        "only {coalesced} of 10 batches arrived in one write"
    );
}

#[test]
fn replies_held_for_a_read_that_keeps_waiting_are_released() {
    let sleeper = "description: Sleep\ncommand: sleep 5\n";
    let (_srv, mut c) = tools_session(&[("sleeper.yaml", sleeper)], &[]);
    let pid = bg(&mut c, &[("tool", "sleeper"), ("agent", "a1")]).expect("background run");
    let t = Instant::now();
    send_batch(
        &mut c,
        vec![
            Body::Twalk {
                fid: 0,
                newfid: 7,
                wnames: vec!["proc".into(), pid.to_string(), "wait".into()],
            },
            Body::Topen {
                fid: 7,
                mode: OREAD,
            },
            Body::Tread {
                fid: 7,
                offset: 0,
                count: 64,
            },
        ],
    );
    let (frames, _) = read_frames(&mut c, 2);
    let waited = t.elapsed();
    assert!(matches!(frames[0].body, Body::Rwalk { .. }), "{frames:?}");
    assert!(matches!(frames[1].body, Body::Ropen { .. }), "{frames:?}");
    assert!(
        waited < Duration::from_secs(3),
        "the walk and open replies took {waited:?}: held until the process ended"
    );
    assert_eq!(frames.len(), 2, "the wait read answered early: {frames:?}");
}
