//! Interoperability with a 9P2000 codec this project did not write: the
//! `ninep` crate 0.6 (default features off, so only its sans-io codec and its
//! synchronous client). Every frame sent to the real `toolsrv` binary here is
//! built by ninep's encoder (`SyncNineP::write_to`) and every reply is decoded
//! by ninep's decoder (`Rmessage::read_from`); directory data is decoded with
//! ninep's stat decoder (`Vec<RawStat>: TryFrom<Data>`). Our own codec is not
//! used anywhere in this module.
//!
//! What ninep could not do, and how it is handled:
//! - ninep's `Data` keeps its bytes private; the payload of an `Rread` is taken
//!   from ninep's own encoding of the `Data` (its `count[4]` prefix dropped).
//! - ninep's client (`ninep::sync::client::Client`) cannot authenticate: it
//!   always attaches with `NOFID` and sends no `Tauth`. It is therefore used
//!   whole only against a `--no-auth` server; the authenticated session is
//!   driven frame by frame with ninep's message types.
//! - ninep's `Vec<RawStat>: TryFrom<Data>` stops silently at a truncated
//!   entry, so the tests also check that the decoded entries account for every
//!   byte of the directory data.
//! - ninep keeps only the qid type bits it knows (`0xEC`); the type bits the
//!   server uses (`QTDIR`, `QTAUTH`, plain file) are all among them.

use std::os::unix::net::UnixStream;

use ninep::sansio::protocol::{
    Data, FileType, NineP, RawStat, Rdata, Rmessage, SharedBuf, Tdata, Tmessage,
};
use ninep::sync::SyncNineP;

use crate::util::{Server, WAIT};

/// ninep's "no fid" (`NOFID`, `~0`).
const NOFID: u32 = u32::MAX;
/// ninep's "no tag" (`NOTAG`, `~0`), used for `Tversion`.
const NOTAG: u16 = u16::MAX;
/// The msize this client offers.
const MSIZE: u32 = 65536;
/// The directory-mode bit of a stat's mode (`DMDIR`).
const DMDIR: u32 = 0x8000_0000;

/// A connection that speaks only ninep's messages.
struct NinepConn {
    s: UnixStream,
    buf: SharedBuf,
    next_tag: u16,
}

impl NinepConn {
    fn connect(srv: &Server) -> NinepConn {
        let s = UnixStream::connect(&srv.socket).expect("connect");
        s.set_read_timeout(Some(WAIT)).expect("read timeout");
        NinepConn {
            s,
            buf: SharedBuf::default(),
            next_tag: 0,
        }
    }

    /// Send `content` with `tag` (encoded by ninep) and decode the reply (by ninep).
    fn call_tagged(&mut self, tag: u16, content: Tdata) -> Rdata {
        Tmessage::new(tag, content)
            .write_to(&mut self.s)
            .expect("ninep encodes and sends the request");
        let reply = Rmessage::read_from(MSIZE, &self.buf, &mut self.s)
            .expect("ninep decodes the server's reply");
        assert_eq!(reply.tag, tag, "reply tag");
        reply.content
    }

    /// One request with a fresh tag; returns the reply content.
    fn call(&mut self, content: Tdata) -> Rdata {
        self.next_tag = self.next_tag.wrapping_add(1) % NOTAG;
        self.call_tagged(self.next_tag, content)
    }

    /// One request that must not fail.
    fn ok(&mut self, content: Tdata) -> Rdata {
        match self.call(content) {
            Rdata::Error { ename } => panic!("unexpected Rerror: {ename}"),
            r => r,
        }
    }

    fn version(&mut self) {
        match self.call_tagged(NOTAG, Tdata::version(MSIZE, "9P2000")) {
            Rdata::Version { msize, version } => {
                assert_eq!(version, "9P2000");
                assert_eq!(msize, MSIZE);
            }
            r => panic!("expected Rversion, got {r:?}"),
        }
    }

    fn attach(&mut self, afid: u32) {
        match self.ok(Tdata::attach(0, afid, "agent", String::new())) {
            Rdata::Attach { aqid } => assert_eq!(aqid.ty, FileType::DIRECTORY, "root qid"),
            r => panic!("expected Rattach, got {r:?}"),
        }
    }

    /// Twalk from the root (fid 0) to the single element `name` as `newfid`.
    fn walk1(&mut self, newfid: u32, name: &str) -> ninep::sansio::protocol::Qid {
        match self.ok(Tdata::walk(0, newfid, vec![name.to_string()])) {
            Rdata::Walk { wqids } => {
                assert_eq!(wqids.len(), 1, "walk to {name}: {wqids:?}");
                wqids[0]
            }
            r => panic!("expected Rwalk, got {r:?}"),
        }
    }

    /// Topen `fid` for reading.
    fn open_read(&mut self, fid: u32) {
        match self.ok(Tdata::open(fid, 0)) {
            Rdata::Open { .. } => {}
            r => panic!("expected Ropen, got {r:?}"),
        }
    }

    /// Tread until 0 bytes; returns everything read.
    fn read_all(&mut self, fid: u32) -> Vec<u8> {
        let mut out = Vec::new();
        loop {
            match self.ok(Tdata::read(fid, out.len() as u64, 8192)) {
                Rdata::Read { data } => {
                    let bytes = data_bytes(&data);
                    if bytes.is_empty() {
                        return out;
                    }
                    out.extend_from_slice(&bytes);
                }
                r => panic!("expected Rread, got {r:?}"),
            }
        }
    }

    fn clunk(&mut self, fid: u32) {
        match self.ok(Tdata::clunk(fid)) {
            Rdata::Clunk {} => {}
            r => panic!("expected Rclunk, got {r:?}"),
        }
    }

    /// Walk to `info`, open, read, clunk; check the JSON.
    fn read_info(&mut self, fid: u32) {
        let qid = self.walk1(fid, "info");
        assert_eq!(qid.ty, FileType::FILE, "info is a plain file");
        self.open_read(fid);
        let json = self.read_all(fid);
        self.clunk(fid);
        check_info(&json);
    }

    /// Open `/` (a clone of fid 0), read it whole, decode with ninep's stat decoder.
    fn list_root(&mut self, fid: u32) -> Vec<RawStat> {
        match self.ok(Tdata::walk(0, fid, Vec::new())) {
            Rdata::Walk { wqids } => assert!(wqids.is_empty()),
            r => panic!("expected Rwalk, got {r:?}"),
        }
        self.open_read(fid);
        let bytes = self.read_all(fid);
        self.clunk(fid);
        let stats = Vec::<RawStat>::try_from(Data::from(bytes.clone()))
            .expect("ninep decodes the directory data");
        let used: usize = stats.iter().map(|s| s.n_bytes()).sum();
        assert_eq!(used, bytes.len(), "entries account for every byte");
        for s in &stats {
            assert_eq!(
                usize::from(s.size) + 2,
                s.n_bytes(),
                "size[2] of {}",
                s.name
            );
        }
        stats
    }
}

/// The bytes of a ninep `Data` (its encoding minus the `count[4]` prefix).
fn data_bytes(d: &Data) -> Vec<u8> {
    let with_count = d.write_9p_bytes().expect("ninep encodes data");
    with_count[4..].to_vec()
}

fn check_info(json: &[u8]) {
    let v: serde_json::Value = serde_json::from_slice(json).expect("info is JSON");
    assert_eq!(v["platform"], "linux", "{v}");
    assert!(v["arch"].as_str().is_some_and(|a| !a.is_empty()), "{v}");
}

/// The root entries docs/protocol.md, "Namespace" names, with their modes.
fn check_root(stats: &[RawStat]) {
    let got: Vec<(&str, u32)> = stats.iter().map(|s| (s.name.as_str(), s.mode)).collect();
    for (name, mode) in crate::namespace::ROOT_ENTRIES {
        assert!(got.contains(&(name, mode)), "{name} {mode:o} in {got:?}");
    }
    for s in stats {
        let is_dir = s.mode & DMDIR != 0;
        let want_ty = if is_dir {
            FileType::DIRECTORY
        } else {
            FileType::FILE
        };
        assert_eq!(s.qid.ty, want_ty, "qid type of {}", s.name);
    }
}

#[test]
fn ninep_frames_drive_an_authenticated_session() {
    let srv = Server::start(&[]);
    let mut c = NinepConn::connect(&srv);
    c.version();
    let afid = 7;
    match c.ok(Tdata::auth(afid, "agent", String::new())) {
        Rdata::Auth { aqid } => assert_eq!(aqid.ty, FileType::AUTH, "afid qid type"),
        r => panic!("expected Rauth, got {r:?}"),
    }
    let secret = b"interop-secret".to_vec();
    match c.ok(Tdata::write(afid, 0, Data::from(secret.clone()))) {
        Rdata::Write { count } => assert_eq!(count as usize, secret.len()),
        r => panic!("expected Rwrite, got {r:?}"),
    }
    let token = match c.ok(Tdata::read(afid, 0, 4096)) {
        Rdata::Read { data } => String::from_utf8(data_bytes(&data)).expect("utf-8 token"),
        r => panic!("expected Rread, got {r:?}"),
    };
    assert_eq!(token.len(), 64, "token {token:?}");
    assert!(
        token
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)),
        "token {token:?} is lowercase hex"
    );
    c.attach(afid);
    c.clunk(afid);
    c.read_info(1);
    check_root(&c.list_root(2));
    // The fids were released: reusing them works.
    c.read_info(1);
}

#[test]
fn ninep_frames_see_auth_errors_as_rerror() {
    let srv = Server::start(&[]);
    let mut c = NinepConn::connect(&srv);
    c.version();
    match c.call(Tdata::attach(0, NOFID, "agent", String::new())) {
        Rdata::Error { ename } => assert_eq!(ename, "authentication required"),
        r => panic!("expected Rerror, got {r:?}"),
    }
}

#[test]
fn ninep_frames_drive_a_no_auth_session() {
    let srv = Server::start(&["--no-auth"]);
    let mut c = NinepConn::connect(&srv);
    c.version();
    match c.call(Tdata::auth(3, "agent", String::new())) {
        Rdata::Error { ename } => assert_eq!(ename, "authentication not required"),
        r => panic!("expected Rerror, got {r:?}"),
    }
    c.attach(NOFID);
    c.read_info(1);
    check_root(&c.list_root(2));
    match c.ok(Tdata::stat(0)) {
        Rdata::Stat { size, stat } => {
            assert_eq!(usize::from(size), stat.n_bytes(), "Rstat size[2]");
            assert_ne!(stat.mode & DMDIR, 0, "root is a directory: {stat:?}");
        }
        r => panic!("expected Rstat, got {r:?}"),
    }
}

#[test]
fn ninep_client_reads_info_and_lists_root_without_auth() {
    let srv = Server::start(&["--no-auth"]);
    let stream = UnixStream::connect(&srv.socket).expect("connect");
    stream.set_read_timeout(Some(WAIT)).expect("read timeout");
    let client = ninep::sync::client::Client::new_from_unix_stream("agent", "", stream)
        .expect("ninep's client connects and attaches");
    let info = client.read("info").expect("ninep's client reads info");
    check_info(&info);
    let names: Vec<String> = client
        .read_dir("/")
        .expect("ninep's client lists the root")
        .into_iter()
        .map(|s| s.name)
        .collect();
    for name in ["ctl", "tools", "all", "info", "tools_rev", "bypass", "proc"] {
        assert!(names.iter().any(|n| n == name), "{name} in {names:?}");
    }
    let st = client.stat("info").expect("ninep's client stats info");
    assert_eq!(st.name, "info");
}
