//! A raw, blocking 9P2000 client speaking frames built with the project's
//! codec: for tests that need to send exactly the bytes they mean.

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;

use toolsrv_wire::{decode, decode_stat, encode, read_frame, Body, Frame, Stat, NOFID, NOTAG};

use crate::WAIT;

/// The largest reply a [`Raw`] accepts (the server's msize is at most 1 MiB).
const MAX_FRAME: u32 = 16 << 20;

/// The first fid [`Raw::fid`] hands out: far above the small fids tests
/// choose by hand.
const FIRST_FID: u32 = 1 << 20;

/// A raw 9P2000 connection. Fid 0 is the root once attached; the helpers
/// that need a fid of their own take one from [`Raw::fid`] and clunk it.
pub struct Raw {
    /// The connection (reads time out after [`WAIT`]).
    pub s: UnixStream,
    next_tag: u16,
    next_fid: u32,
}

impl Raw {
    /// Connect to `path`, with reads bounded by [`WAIT`].
    pub fn connect(path: &Path) -> Raw {
        let s = UnixStream::connect(path)
            .unwrap_or_else(|e| panic!("connect to {}: {e}", path.display()));
        s.set_read_timeout(Some(WAIT)).expect("read timeout");
        Raw::from_stream(s)
    }

    /// A raw connection over an already connected stream.
    pub fn from_stream(s: UnixStream) -> Raw {
        Raw {
            s,
            next_tag: 1,
            next_fid: FIRST_FID,
        }
    }

    /// A fresh tag (never `NOTAG`, never 0).
    pub fn tag(&mut self) -> u16 {
        self.next_tag = self.next_tag.wrapping_add(1).max(1);
        if self.next_tag == NOTAG {
            self.next_tag = 1;
        }
        self.next_tag
    }

    /// A fid this connection has not handed out before.
    pub fn fid(&mut self) -> u32 {
        self.next_fid += 1;
        self.next_fid
    }

    /// Send one frame.
    pub fn send(&mut self, tag: u16, body: Body) {
        let mut buf = Vec::new();
        encode(&Frame { tag, body }, &mut buf);
        self.s.write_all(&buf).expect("send");
    }

    /// Send a `Tread` of `count` bytes at offset 0 of `fid` without waiting
    /// for the reply; its tag.
    pub fn send_read(&mut self, fid: u32, count: u32) -> u16 {
        let tag = self.tag();
        self.send(
            tag,
            Body::Tread {
                fid,
                offset: 0,
                count,
            },
        );
        tag
    }

    /// Send raw bytes (malformed frames, partial frames).
    pub fn send_bytes(&mut self, b: &[u8]) {
        self.s.write_all(b).expect("send bytes");
    }

    /// Receive one frame (panics on timeout or EOF).
    pub fn recv(&mut self) -> Frame {
        self.try_recv().expect("no reply within the timeout")
    }

    /// Receive one frame, or `None` on EOF or timeout.
    pub fn try_recv(&mut self) -> Option<Frame> {
        let frame = read_frame(&mut self.s, MAX_FRAME).ok()?;
        Some(decode(&frame).expect("server sent an undecodable frame"))
    }

    /// Whether the server closed the connection (EOF) within the timeout.
    pub fn closed(&mut self) -> bool {
        let mut b = [0u8; 1];
        matches!(self.s.read(&mut b), Ok(0))
    }

    /// One request, one reply (asserting the reply's tag).
    pub fn rpc(&mut self, body: Body) -> Body {
        let tag = self.tag();
        self.send(tag, body);
        let f = self.recv();
        assert_eq!(f.tag, tag, "reply tag");
        f.body
    }

    /// A request that must succeed.
    pub fn ok(&mut self, body: Body) -> Body {
        match self.rpc(body) {
            Body::Rerror { ename } => panic!("unexpected Rerror: {ename}"),
            b => b,
        }
    }

    /// A request that must fail; returns the error text.
    pub fn err(&mut self, body: Body) -> String {
        match self.rpc(body) {
            Body::Rerror { ename } => ename,
            b => panic!("expected Rerror, got {b:?}"),
        }
    }

    /// `Tversion` with `msize`; the server's msize and version.
    pub fn version(&mut self, msize: u32) -> (u32, String) {
        self.send(
            NOTAG,
            Body::Tversion {
                msize,
                version: "9P2000".into(),
            },
        );
        match self.recv().body {
            Body::Rversion { msize, version } => (msize, version),
            b => panic!("expected Rversion, got {b:?}"),
        }
    }

    /// `Tattach` of fid 0 without authentication (`--no-auth` servers).
    pub fn attach(&mut self) {
        self.ok(Body::Tattach {
            fid: 0,
            afid: NOFID,
            uname: "t".into(),
            aname: String::new(),
        });
    }

    /// Tauth + write secret + read token + Tattach fid 0; the token, or the
    /// server's error.
    pub fn authenticate(&mut self, secret: &str) -> Result<String, String> {
        let afid = self.fid();
        match self.rpc(Body::Tauth {
            afid,
            uname: "agent".into(),
            aname: String::new(),
        }) {
            Body::Rauth { .. } => {}
            Body::Rerror { ename } => return Err(ename),
            b => panic!("{b:?}"),
        }
        if let Body::Rerror { ename } = self.rpc(Body::Twrite {
            fid: afid,
            offset: 0,
            data: secret.as_bytes().to_vec(),
        }) {
            self.rpc(Body::Tclunk { fid: afid });
            return Err(ename);
        }
        let token = match self.ok(Body::Tread {
            fid: afid,
            offset: 0,
            count: 4096,
        }) {
            Body::Rread { data } => String::from_utf8(data).expect("token utf8"),
            b => panic!("{b:?}"),
        };
        self.ok(Body::Tattach {
            fid: 0,
            afid,
            uname: "agent".into(),
            aname: String::new(),
        });
        self.ok(Body::Tclunk { fid: afid });
        Ok(token)
    }

    /// Walk from fid 0 to `path` as `newfid`. A partial walk creates no fid
    /// and is reported as `file not found`, as clients do.
    pub fn walk(&mut self, newfid: u32, path: &str) -> Result<(), String> {
        let wnames: Vec<String> = path
            .split('/')
            .filter(|s| !s.is_empty())
            .map(String::from)
            .collect();
        let n = wnames.len();
        match self.rpc(Body::Twalk {
            fid: 0,
            newfid,
            wnames,
        }) {
            Body::Rwalk { wqids } if wqids.len() == n => Ok(()),
            Body::Rwalk { .. } => Err("file not found".into()),
            Body::Rerror { ename } => Err(ename),
            b => panic!("{b:?}"),
        }
    }

    /// Walk + open; panics on failure.
    pub fn open(&mut self, fid: u32, path: &str, mode: u8) {
        self.walk(fid, path).expect("walk");
        self.ok(Body::Topen { fid, mode });
    }

    /// Read a whole open fid (panics on an error).
    pub fn read_all(&mut self, fid: u32) -> Vec<u8> {
        self.try_read_all(fid)
            .unwrap_or_else(|e| panic!("unexpected Rerror: {e}"))
    }

    /// Read a whole open fid, or the first error.
    fn try_read_all(&mut self, fid: u32) -> Result<Vec<u8>, String> {
        let mut out = Vec::new();
        loop {
            match self.rpc(Body::Tread {
                fid,
                offset: out.len() as u64,
                count: 8192,
            }) {
                Body::Rread { data } if data.is_empty() => return Ok(out),
                Body::Rread { data } => out.extend_from_slice(&data),
                Body::Rerror { ename } => return Err(ename),
                b => panic!("{b:?}"),
            }
        }
    }

    /// Walk, open, read all, clunk.
    pub fn read_file(&mut self, path: &str) -> Vec<u8> {
        let fid = self.fid();
        self.open(fid, path, toolsrv_wire::OREAD);
        let d = self.read_all(fid);
        self.ok(Body::Tclunk { fid });
        d
    }

    /// Open `path` with `mode`, write `data` (if any), read everything
    /// (unless the mode is write-only), clunk. Any `Rerror` along the way is
    /// returned.
    pub fn transact(&mut self, path: &str, mode: u8, data: &[u8]) -> Result<Vec<u8>, String> {
        let fid = self.fid();
        self.walk(fid, path)?;
        let r = self.transact_fid(fid, mode, data);
        self.rpc(Body::Tclunk { fid });
        r
    }

    fn transact_fid(&mut self, fid: u32, mode: u8, data: &[u8]) -> Result<Vec<u8>, String> {
        if let Body::Rerror { ename } = self.rpc(Body::Topen { fid, mode }) {
            return Err(ename);
        }
        if !data.is_empty() {
            if let Body::Rerror { ename } = self.rpc(Body::Twrite {
                fid,
                offset: 0,
                data: data.to_vec(),
            }) {
                return Err(ename);
            }
        }
        if mode & 3 == toolsrv_wire::OWRITE {
            return Ok(Vec::new());
        }
        self.try_read_all(fid)
    }

    /// Write `data` to `path` (open `OWRITE`).
    pub fn write(&mut self, path: &str, data: &str) -> Result<(), String> {
        self.transact(path, toolsrv_wire::OWRITE, data.as_bytes())
            .map(|_| ())
    }

    /// Write-then-read `path` (open `ORDWR`) as a string.
    pub fn ask(&mut self, path: &str, data: &str) -> Result<String, String> {
        self.transact(path, toolsrv_wire::ORDWR, data.as_bytes())
            .map(|d| String::from_utf8(d).expect("utf8 reply"))
    }

    /// Read `path` as JSON.
    pub fn json(&mut self, path: &str) -> serde_json::Value {
        serde_json::from_slice(&self.read_file(path)).expect("JSON")
    }

    /// The stat entries of a directory.
    pub fn list(&mut self, path: &str) -> Vec<Stat> {
        let data = self.read_file(path);
        let mut out = Vec::new();
        let mut rest = &data[..];
        while !rest.is_empty() {
            let (st, n) = decode_stat(rest).expect("stat entry");
            out.push(st);
            rest = &rest[n..];
        }
        out
    }
}
