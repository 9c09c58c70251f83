//! The 9P server core alone: `serve_connection` over an in-memory byte
//! stream (`tokio::io::duplex`), a small tree of test files, and a client
//! that writes raw frames and reads replies one by one.

// Test code: an unexpected failure is a panic that names it.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use tokio::io::{AsyncReadExt, AsyncWriteExt, DuplexStream};
use tokio::sync::Notify;
use toolsrv_testkit::{read_frame, Frames};
use toolsrv_vfs::tree::{dir, file};
use toolsrv_vfs::{
    serve_connection, serve_connection_with, ConnInfo, Error, File, Handle, Limits, NoAuth, Node,
    OpenMode,
};
use toolsrv_wire::{encode_to_vec, Body, Frame, Qid, NOFID, NOTAG, OREAD, OWRITE};

/// How long a reply may take before the test fails.
const WAIT: Duration = Duration::from_secs(5);

/// A file whose content is fixed.
struct Text(&'static str);

impl File for Text {
    fn open(&self, _: OpenMode, _: &ConnInfo) -> Result<Arc<dyn Handle>, Error> {
        Ok(Arc::new(TextHandle(self.0)))
    }
}

struct TextHandle(&'static str);

#[async_trait]
impl Handle for TextHandle {
    async fn read(&self, offset: u64, count: u32) -> Result<Vec<u8>, Error> {
        let b = self.0.as_bytes();
        let start = (offset as usize).min(b.len());
        let end = (start + count as usize).min(b.len());
        Ok(b[start..end].to_vec())
    }
}

/// A file whose reads wait until `release` is notified, then answer "done";
/// `clunks` counts close hooks.
#[derive(Clone, Default)]
struct Gate {
    release: Arc<Notify>,
    clunks: Arc<AtomicUsize>,
}

impl File for Gate {
    fn open(&self, _: OpenMode, _: &ConnInfo) -> Result<Arc<dyn Handle>, Error> {
        Ok(Arc::new(self.clone()))
    }
}

#[async_trait]
impl Handle for Gate {
    async fn read(&self, _: u64, _: u32) -> Result<Vec<u8>, Error> {
        self.release.notified().await;
        Ok(b"done".to_vec())
    }
    async fn write(&self, _: u64, data: Vec<u8>) -> Result<u32, Error> {
        Ok(data.len() as u32)
    }
    fn clunk(&self) {
        self.clunks.fetch_add(1, Ordering::SeqCst);
    }
}

/// The test tree: `/hello` (0444), `/gate` (0666), `/sub/deep` (0444).
fn tree(gate: &Gate) -> Node {
    dir(
        "/",
        0o555,
        vec![
            file("hello", 0o444, Text("hello, world")),
            file("gate", 0o666, gate.clone()),
            dir("sub", 0o555, vec![file("deep", 0o444, Text("deep"))]),
        ],
    )
}

fn info() -> ConnInfo {
    ConnInfo {
        id: 1,
        peer_uid: None,
        peer_pid: None,
        peer_is_descendant: false,
        user: "tester".into(),
        mtime: 0,
        requests: Default::default(),
    }
}

/// The client end of one served connection.
struct Peer {
    frames: Frames<DuplexStream>,
    gate: Gate,
    server: tokio::task::JoinHandle<()>,
}

impl Peer {
    /// A connection served with `limits`, not yet versioned.
    fn with(limits: Limits) -> Peer {
        let gate = Gate::default();
        let (client, server) = tokio::io::duplex(1 << 20);
        let root = tree(&gate);
        let server = tokio::spawn(serve_connection_with(
            server,
            root,
            Arc::new(NoAuth),
            info(),
            limits,
        ));
        Peer {
            frames: Frames::with_limit(client, WAIT),
            gate,
            server,
        }
    }

    /// A connection versioned and attached as fid 0.
    async fn attached() -> Peer {
        let mut p = Peer::with(Limits::default());
        p.handshake().await;
        p
    }

    async fn handshake(&mut self) {
        let r = self
            .rpc(
                NOTAG,
                Body::Tversion {
                    msize: 8192,
                    version: "9P2000".into(),
                },
            )
            .await;
        assert!(matches!(r, Body::Rversion { msize: 8192, .. }), "{r:?}");
        let r = self.rpc(1, attach(0)).await;
        assert!(matches!(r, Body::Rattach { .. }), "{r:?}");
    }

    async fn send(&mut self, tag: u16, body: Body) {
        self.frames.send(tag, body).await;
    }

    async fn send_raw(&mut self, bytes: &[u8]) {
        self.frames.send_raw(bytes).await;
    }

    /// The next reply.
    async fn recv(&mut self) -> Frame {
        self.frames.recv().await
    }

    /// Whether a reply arrives within `d`.
    async fn quiet_for(&mut self, d: Duration) -> bool {
        self.frames.quiet_for(d).await
    }

    async fn rpc(&mut self, tag: u16, body: Body) -> Body {
        self.frames.rpc(tag, body).await
    }

    async fn walk(&mut self, fid: u32, newfid: u32, names: &[&str]) -> Body {
        self.rpc(
            2,
            Body::Twalk {
                fid,
                newfid,
                wnames: names.iter().map(|s| s.to_string()).collect(),
            },
        )
        .await
    }

    async fn open(&mut self, fid: u32, mode: u8) -> Body {
        self.rpc(3, Body::Topen { fid, mode }).await
    }
}

fn attach(fid: u32) -> Body {
    Body::Tattach {
        fid,
        afid: NOFID,
        uname: "tester".into(),
        aname: String::new(),
    }
}

fn read(fid: u32) -> Body {
    Body::Tread {
        fid,
        offset: 0,
        count: 100,
    }
}

fn ename(b: &Body) -> &str {
    match b {
        Body::Rerror { ename } => ename,
        other => panic!("expected Rerror, got {other:?}"),
    }
}

fn wqids(b: Body) -> Vec<Qid> {
    match b {
        Body::Rwalk { wqids } => wqids,
        other => panic!("expected Rwalk, got {other:?}"),
    }
}

/// One whole reply frame from `io`, decoded.

#[tokio::test]
async fn requests_before_version_are_refused() {
    let mut p = Peer::with(Limits::default());
    let r = p.rpc(1, attach(0)).await;
    assert_eq!(ename(&r), "version not negotiated: send Tversion first");
}

#[tokio::test]
async fn an_unknown_version_is_answered_unknown() {
    let mut p = Peer::with(Limits::default());
    let r = p
        .rpc(
            NOTAG,
            Body::Tversion {
                msize: 8192,
                version: "9P3000".into(),
            },
        )
        .await;
    assert!(
        matches!(&r, Body::Rversion { version, .. } if version == "unknown"),
        "{r:?}"
    );
}

#[tokio::test]
async fn msize_is_capped_and_a_tiny_one_refused() {
    let mut p = Peer::with(Limits::default());
    let r = p
        .rpc(
            NOTAG,
            Body::Tversion {
                msize: u32::MAX,
                version: "9P2000".into(),
            },
        )
        .await;
    assert!(
        matches!(r, Body::Rversion { msize, .. } if msize == toolsrv_vfs::MAX_MSIZE),
        "{r:?}"
    );
    let r = p
        .rpc(
            NOTAG,
            Body::Tversion {
                msize: 100,
                version: "9P2000".into(),
            },
        )
        .await;
    assert!(ename(&r).contains("too small"), "{r:?}");
}

#[tokio::test]
async fn a_file_is_walked_opened_and_read() {
    let mut p = Peer::attached().await;
    assert_eq!(wqids(p.walk(0, 1, &["hello"]).await).len(), 1);
    assert!(matches!(p.open(1, OREAD).await, Body::Ropen { .. }));
    let r = p.rpc(4, read(1)).await;
    assert_eq!(
        r,
        Body::Rread {
            data: b"hello, world".to_vec()
        }
    );
}

#[tokio::test]
async fn dot_dot_at_the_root_is_the_root() {
    let mut p = Peer::attached().await;
    let root = match p.rpc(9, Body::Tstat { fid: 0 }).await {
        Body::Rstat { stat } => stat.qid,
        other => panic!("{other:?}"),
    };
    let q = wqids(p.walk(0, 1, &[".."]).await);
    assert_eq!(q, vec![root]);
    // And `..` out of a subdirectory comes back to the root as well.
    let q = wqids(p.walk(0, 2, &["sub", "..", "..", "hello"]).await);
    assert_eq!(q.len(), 4);
    assert_eq!(q[1], root);
    assert_eq!(q[2], root);
}

#[tokio::test]
async fn a_walk_failing_at_the_first_name_is_file_not_found_and_later_partial() {
    let mut p = Peer::attached().await;
    assert_eq!(ename(&p.walk(0, 1, &["nope"]).await), "file not found");
    let q = wqids(p.walk(0, 1, &["sub", "nope"]).await);
    assert_eq!(q.len(), 1, "a partial Rwalk");
    // The partial walk made no fid.
    assert_eq!(ename(&p.open(1, OREAD).await), "unknown fid 1");
}

#[tokio::test]
async fn a_walk_through_a_file_is_not_a_directory() {
    let mut p = Peer::attached().await;
    // From a directory, the file ends a partial walk.
    assert_eq!(wqids(p.walk(0, 1, &["hello", "x"]).await).len(), 1);
    // From the file itself, the walk fails.
    wqids(p.walk(0, 1, &["hello"]).await);
    assert_eq!(
        ename(&p.walk(1, 2, &["x"]).await),
        "not a directory: \"hello\""
    );
}

#[tokio::test]
async fn a_walk_of_more_than_sixteen_names_is_refused_with_its_tag() {
    let mut p = Peer::attached().await;
    // Twalk with nwname 17, encoded by hand (the encoder would not make it).
    let mut body = Vec::new();
    body.extend_from_slice(&0u32.to_le_bytes());
    body.extend_from_slice(&1u32.to_le_bytes());
    body.extend_from_slice(&17u16.to_le_bytes());
    for _ in 0..17 {
        body.extend_from_slice(&3u16.to_le_bytes());
        body.extend_from_slice(b"sub");
    }
    let mut frame = ((7 + body.len()) as u32).to_le_bytes().to_vec();
    frame.push(110); // Twalk
    frame.extend_from_slice(&77u16.to_le_bytes());
    frame.extend_from_slice(&body);
    p.send_raw(&frame).await;
    let f = p.recv().await;
    assert_eq!(f.tag, 77);
    ename(&f.body);
    // The connection is still usable.
    assert_eq!(wqids(p.walk(0, 1, &["sub"]).await).len(), 1);
}

#[tokio::test]
async fn sixteen_names_walk() {
    let mut p = Peer::attached().await;
    let names = [".."; 16];
    assert_eq!(wqids(p.walk(0, 1, &names).await).len(), 16);
}

#[tokio::test]
async fn opening_a_read_only_file_for_writing_is_denied() {
    let mut p = Peer::attached().await;
    wqids(p.walk(0, 1, &["hello"]).await);
    assert_eq!(ename(&p.open(1, OWRITE).await), "permission denied");
}

#[tokio::test]
async fn flush_of_a_blocked_read_answers_rflush_and_never_the_read() {
    let mut p = Peer::attached().await;
    wqids(p.walk(0, 1, &["gate"]).await);
    assert!(matches!(p.open(1, OREAD).await, Body::Ropen { .. }));
    p.send(10, read(1)).await;
    let r = p.rpc(11, Body::Tflush { oldtag: 10 }).await;
    assert_eq!(r, Body::Rflush);
    // Releasing the gate now answers nothing for the flushed tag.
    p.gate.release.notify_waiters();
    assert!(p.quiet_for(Duration::from_millis(200)).await);
    // The tag may be used again.
    let r = p.rpc(10, Body::Tstat { fid: 1 }).await;
    assert!(matches!(r, Body::Rstat { .. }), "{r:?}");
}

#[tokio::test]
async fn clunk_cancels_a_blocked_read_and_runs_the_close_hook_once() {
    let mut p = Peer::attached().await;
    wqids(p.walk(0, 1, &["gate"]).await);
    assert!(matches!(p.open(1, OREAD).await, Body::Ropen { .. }));
    p.send(10, read(1)).await;
    p.send(11, Body::Tclunk { fid: 1 }).await;
    let mut replies = [p.recv().await, p.recv().await];
    replies.sort_by_key(|f| f.tag);
    assert_eq!(ename(&replies[0].body), "cancelled");
    assert_eq!(replies[1].body, Body::Rclunk);
    assert_eq!(p.gate.clunks.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn a_blocked_read_completes_when_its_handler_does() {
    let mut p = Peer::attached().await;
    wqids(p.walk(0, 1, &["gate"]).await);
    assert!(matches!(p.open(1, OREAD).await, Body::Ropen { .. }));
    p.send(10, read(1)).await;
    // Other requests are served meanwhile.
    let r = p.rpc(12, Body::Tstat { fid: 0 }).await;
    assert!(matches!(r, Body::Rstat { .. }));
    // notify_one stores a permit, so the read wakes even if it has not polled yet.
    p.gate.release.notify_one();
    let f = p.recv().await;
    assert_eq!(f.tag, 10);
    assert_eq!(
        f.body,
        Body::Rread {
            data: b"done".to_vec()
        }
    );
}

#[tokio::test]
async fn an_oversize_frame_is_refused_and_its_bytes_skipped() {
    let mut p = Peer::attached().await;
    // A Twrite frame of 20,000 bytes against msize 8192.
    let n = 20_000u32;
    let mut frame = n.to_le_bytes().to_vec();
    frame.push(118); // Twrite
    frame.extend_from_slice(&5u16.to_le_bytes());
    frame.resize(n as usize, 0xAB);
    p.send_raw(&frame).await;
    let f = p.recv().await;
    assert_eq!(f.tag, 5);
    assert_eq!(ename(&f.body), "message too large");
    // The next frame is read from the right place.
    assert_eq!(wqids(p.walk(0, 1, &["hello"]).await).len(), 1);
}

#[tokio::test]
async fn a_frame_shorter_than_a_header_closes_the_connection() {
    let mut p = Peer::attached().await;
    p.send_raw(&3u32.to_le_bytes()).await;
    tokio::time::timeout(WAIT, &mut p.server)
        .await
        .expect("the connection ends")
        .expect("no panic");
}

#[tokio::test]
async fn a_body_that_does_not_decode_gets_rerror_with_its_tag() {
    let mut p = Peer::attached().await;
    // A Tclunk whose fid is cut short.
    let mut frame = 9u32.to_le_bytes().to_vec();
    frame.push(120); // Tclunk
    frame.extend_from_slice(&42u16.to_le_bytes());
    frame.extend_from_slice(&[1, 2]);
    p.send_raw(&frame).await;
    let f = p.recv().await;
    assert_eq!(f.tag, 42);
    ename(&f.body);
}

#[tokio::test]
async fn tversion_resets_fids_and_cancels_waiting_reads() {
    let mut p = Peer::attached().await;
    wqids(p.walk(0, 1, &["gate"]).await);
    assert!(matches!(p.open(1, OREAD).await, Body::Ropen { .. }));
    p.send(10, read(1)).await;
    p.handshake().await;
    // Fid 1 is gone (fid 0 was attached anew by the handshake), and its close hook ran.
    assert_eq!(ename(&p.rpc(4, read(1)).await), "unknown fid 1");
    assert_eq!(p.gate.clunks.load(Ordering::SeqCst), 1);
    // The aborted read answered nothing.
    p.gate.release.notify_waiters();
    assert!(p.quiet_for(Duration::from_millis(200)).await);
}

#[tokio::test]
async fn pipelined_requests_are_answered_in_order_in_one_burst() {
    let mut p = Peer::attached().await;
    let frames = [
        Frame {
            tag: 1,
            body: Body::Twalk {
                fid: 0,
                newfid: 1,
                wnames: vec!["hello".into()],
            },
        },
        Frame {
            tag: 2,
            body: Body::Topen {
                fid: 1,
                mode: OREAD,
            },
        },
        Frame {
            tag: 3,
            body: read(1),
        },
        Frame {
            tag: 4,
            body: Body::Tclunk { fid: 1 },
        },
    ];
    let bytes: Vec<u8> = frames.iter().flat_map(encode_to_vec).collect();
    p.send_raw(&bytes).await;
    let tags: Vec<u16> = [
        p.recv().await,
        p.recv().await,
        p.recv().await,
        p.recv().await,
    ]
    .iter()
    .map(|f| f.tag)
    .collect();
    assert_eq!(tags, vec![1, 2, 3, 4]);
}

#[tokio::test]
async fn a_tag_in_use_is_refused() {
    let mut p = Peer::attached().await;
    wqids(p.walk(0, 1, &["gate"]).await);
    assert!(matches!(p.open(1, OREAD).await, Body::Ropen { .. }));
    p.send(10, read(1)).await;
    let r = p.rpc(10, Body::Tstat { fid: 0 }).await;
    assert_eq!(ename(&r), "tag 10 is already in use");
}

#[tokio::test]
async fn fids_beyond_the_limit_are_refused_and_the_connection_stays_usable() {
    let mut p = Peer::with(Limits {
        max_fids: 3,
        ..Limits::default()
    });
    p.handshake().await;
    wqids(p.walk(0, 1, &["hello"]).await);
    wqids(p.walk(0, 2, &["hello"]).await);
    assert_eq!(ename(&p.walk(0, 3, &["hello"]).await), "too many fids");
    // Walking a fid onto itself needs no new fid.
    wqids(p.walk(2, 2, &[]).await);
    p.rpc(5, Body::Tclunk { fid: 2 }).await;
    wqids(p.walk(0, 3, &["hello"]).await);
}

#[tokio::test]
async fn the_auth_timeout_closes_a_connection_that_never_attaches() {
    let mut p = Peer::with(Limits {
        auth_timeout: Some(Duration::from_millis(50)),
        ..Limits::default()
    });
    tokio::time::timeout(WAIT, &mut p.server)
        .await
        .expect("the connection ends")
        .expect("no panic");
}

#[tokio::test]
async fn closing_the_connection_clunks_every_fid() {
    let mut p = Peer::attached().await;
    wqids(p.walk(0, 1, &["gate"]).await);
    assert!(matches!(p.open(1, OREAD).await, Body::Ropen { .. }));
    p.send(10, read(1)).await;
    let Peer {
        frames,
        gate,
        server,
    } = p;
    drop(frames);
    tokio::time::timeout(WAIT, server)
        .await
        .expect("the connection ends")
        .expect("no panic");
    assert_eq!(gate.clunks.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn create_and_remove_are_denied() {
    let mut p = Peer::attached().await;
    wqids(p.walk(0, 1, &["hello"]).await);
    let r = p
        .rpc(
            6,
            Body::Tcreate {
                fid: 0,
                name: "x".into(),
                perm: 0o644,
                mode: OWRITE,
            },
        )
        .await;
    assert_eq!(ename(&r), "permission denied");
    let r = p.rpc(7, Body::Tremove { fid: 1 }).await;
    assert_eq!(ename(&r), "permission denied");
    // Tremove clunked the fid all the same.
    assert_eq!(ename(&p.rpc(8, read(1)).await), "unknown fid 1");
}

#[tokio::test]
async fn a_directory_lists_its_children() {
    let mut p = Peer::attached().await;
    wqids(p.walk(0, 1, &[]).await);
    assert!(matches!(p.open(1, OREAD).await, Body::Ropen { .. }));
    let r = p
        .rpc(
            4,
            Body::Tread {
                fid: 1,
                offset: 0,
                count: 4000,
            },
        )
        .await;
    let data = match r {
        Body::Rread { data } => data,
        other => panic!("{other:?}"),
    };
    let mut names = Vec::new();
    let mut at = 0;
    while at < data.len() {
        let (stat, n) = toolsrv_wire::decode_stat(&data[at..]).expect("a stat entry");
        names.push(stat.name);
        at += n;
    }
    assert_eq!(names, vec!["hello", "gate", "sub"]);
}

#[tokio::test]
async fn serve_connection_takes_any_byte_stream() {
    // The default-limits entry point, over the other end of a duplex pipe.
    let gate = Gate::default();
    let (mut client, server) = tokio::io::duplex(4096);
    tokio::spawn(serve_connection(
        server,
        tree(&gate),
        Arc::new(NoAuth),
        info(),
    ));
    let bytes = encode_to_vec(&Frame {
        tag: NOTAG,
        body: Body::Tversion {
            msize: 4096,
            version: "9P2000".into(),
        },
    });
    client.write_all(&bytes).await.expect("write");
    let f = read_frame(&mut client).await;
    assert!(matches!(f.body, Body::Rversion { msize: 4096, .. }));
}

/// Frames sent in one write with the attach (read ahead into the small
/// pre-attach buffer) are served after it, in order, once the connection
/// switches to its larger buffer.
#[tokio::test]
async fn requests_pipelined_behind_the_attach_are_served_in_order() {
    let mut p = Peer::with(Limits::default());
    let r = p
        .rpc(
            NOTAG,
            Body::Tversion {
                msize: 65536,
                version: "9P2000".into(),
            },
        )
        .await;
    assert!(matches!(r, Body::Rversion { .. }), "{r:?}");
    let mut bytes = encode_to_vec(&Frame {
        tag: 1,
        body: attach(0),
    });
    for (i, tag) in (2..40u16).enumerate() {
        let fid = 1 + i as u32;
        bytes.extend(encode_to_vec(&Frame {
            tag,
            body: Body::Twalk {
                fid: 0,
                newfid: fid,
                wnames: vec!["sub".into(), "deep".into()],
            },
        }));
    }
    p.send_raw(&bytes).await;
    let f = p.recv().await;
    assert!(matches!(f.body, Body::Rattach { .. }), "{f:?}");
    for tag in 2..40u16 {
        let f = p.recv().await;
        assert_eq!(f.tag, tag);
        assert_eq!(wqids(f.body).len(), 2);
    }
}

/// Before the attach, a frame larger than 8 KiB closes the connection (its
/// announced length is never allocated); after it, the msize agreed applies.
#[tokio::test]
async fn a_large_frame_before_the_attach_closes_the_connection() {
    let mut p = Peer::with(Limits::default());
    let r = p
        .rpc(
            NOTAG,
            Body::Tversion {
                msize: 1 << 20,
                version: "9P2000".into(),
            },
        )
        .await;
    assert!(
        matches!(r, Body::Rversion { msize, .. } if msize == 1 << 20),
        "{r:?}"
    );
    let mut frame = (1u32 << 20).to_le_bytes().to_vec();
    frame.extend_from_slice(&[118, 5, 0]);
    p.send_raw(&frame).await;
    let mut b = [0u8; 1];
    let n = tokio::time::timeout(WAIT, p.frames.io().read(&mut b))
        .await
        .expect("closed in time")
        .expect("read");
    assert_eq!(n, 0, "the connection stayed open");
    tokio::time::timeout(WAIT, p.server)
        .await
        .expect("served to the end")
        .expect("no panic");
}
