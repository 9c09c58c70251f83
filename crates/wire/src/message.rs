//! 9P2000 message types, as in intro(5) of the Plan 9 manual.

/// Size of the frame header: size[4] type[1] tag[2].
pub const HEADER_LEN: usize = 7;
/// The tag used by `Tversion`.
pub const NOTAG: u16 = 0xFFFF;
/// "No fid", e.g. the afid of an unauthenticated `Tattach`.
pub const NOFID: u32 = 0xFFFF_FFFF;
/// At most this many names in one `Twalk` (and qids in one `Rwalk`).
pub const MAXWELEM: usize = 16;
/// The protocol version string.
pub const VERSION_9P2000: &str = "9P2000";

/// Qid type bits.
pub const QTDIR: u8 = 0x80;
pub const QTAPPEND: u8 = 0x40;
pub const QTEXCL: u8 = 0x20;
pub const QTAUTH: u8 = 0x08;
pub const QTFILE: u8 = 0x00;

/// Mode bits of a stat entry (high bits of `mode`).
pub const DMDIR: u32 = 0x8000_0000;
pub const DMAPPEND: u32 = 0x4000_0000;
pub const DMEXCL: u32 = 0x2000_0000;
pub const DMAUTH: u32 = 0x0800_0000;

/// Open modes (low two bits) and flags of `Topen`/`Tcreate`.
pub const OREAD: u8 = 0;
pub const OWRITE: u8 = 1;
pub const ORDWR: u8 = 2;
pub const OEXEC: u8 = 3;
pub const OTRUNC: u8 = 0x10;
pub const ORCLOSE: u8 = 0x40;

/// A server's unique identification of a file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Qid {
    /// `QTDIR`, `QTAUTH`, ... bits.
    pub ty: u8,
    /// Version number, bumped when the file changes (0 for synthetic files).
    pub version: u32,
    /// Unique per file on the server.
    pub path: u64,
}

/// A stat(5) directory entry. `size[2]` is implicit (computed on encode).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Stat {
    pub ty: u16,
    pub dev: u32,
    pub qid: Qid,
    /// Permission bits plus `DMDIR` etc.
    pub mode: u32,
    pub atime: u32,
    pub mtime: u32,
    pub length: u64,
    pub name: String,
    pub uid: String,
    pub gid: String,
    pub muid: String,
}

/// One message: its tag and its body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Frame {
    pub tag: u16,
    pub body: Body,
}

/// The body of every 9P2000 T- and R-message. Message type numbers are in
/// [`Body::type_id`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Body {
    Tversion { msize: u32, version: String },
    Rversion { msize: u32, version: String },
    Tauth { afid: u32, uname: String, aname: String },
    Rauth { aqid: Qid },
    Tattach { fid: u32, afid: u32, uname: String, aname: String },
    Rattach { qid: Qid },
    Rerror { ename: String },
    Tflush { oldtag: u16 },
    Rflush,
    Twalk { fid: u32, newfid: u32, wnames: Vec<String> },
    Rwalk { wqids: Vec<Qid> },
    Topen { fid: u32, mode: u8 },
    Ropen { qid: Qid, iounit: u32 },
    Tcreate { fid: u32, name: String, perm: u32, mode: u8 },
    Rcreate { qid: Qid, iounit: u32 },
    Tread { fid: u32, offset: u64, count: u32 },
    Rread { data: Vec<u8> },
    Twrite { fid: u32, offset: u64, data: Vec<u8> },
    Rwrite { count: u32 },
    Tclunk { fid: u32 },
    Rclunk,
    Tremove { fid: u32 },
    Rremove,
    Tstat { fid: u32 },
    /// The stat entry as encoded by [`crate::encode_stat`] is carried inside
    /// `stat[n]`; here it is decoded.
    Rstat { stat: Stat },
    Twstat { fid: u32, stat: Stat },
    Rwstat,
}

/// Message type numbers of 9P2000.
pub mod msgtype {
    pub const TVERSION: u8 = 100;
    pub const RVERSION: u8 = 101;
    pub const TAUTH: u8 = 102;
    pub const RAUTH: u8 = 103;
    pub const TATTACH: u8 = 104;
    pub const RATTACH: u8 = 105;
    /// Illegal: there is no Terror; a frame of this type is answered `Rerror`.
    pub const TERROR: u8 = 106;
    pub const RERROR: u8 = 107;
    pub const TFLUSH: u8 = 108;
    pub const RFLUSH: u8 = 109;
    pub const TWALK: u8 = 110;
    pub const RWALK: u8 = 111;
    pub const TOPEN: u8 = 112;
    pub const ROPEN: u8 = 113;
    pub const TCREATE: u8 = 114;
    pub const RCREATE: u8 = 115;
    pub const TREAD: u8 = 116;
    pub const RREAD: u8 = 117;
    pub const TWRITE: u8 = 118;
    pub const RWRITE: u8 = 119;
    pub const TCLUNK: u8 = 120;
    pub const RCLUNK: u8 = 121;
    pub const TREMOVE: u8 = 122;
    pub const RREMOVE: u8 = 123;
    pub const TSTAT: u8 = 124;
    pub const RSTAT: u8 = 125;
    pub const TWSTAT: u8 = 126;
    pub const RWSTAT: u8 = 127;
}

impl Body {
    /// The message type number of this body.
    pub fn type_id(&self) -> u8 {
        use msgtype::*;
        match self {
            Body::Tversion { .. } => TVERSION,
            Body::Rversion { .. } => RVERSION,
            Body::Tauth { .. } => TAUTH,
            Body::Rauth { .. } => RAUTH,
            Body::Tattach { .. } => TATTACH,
            Body::Rattach { .. } => RATTACH,
            Body::Rerror { .. } => RERROR,
            Body::Tflush { .. } => TFLUSH,
            Body::Rflush => RFLUSH,
            Body::Twalk { .. } => TWALK,
            Body::Rwalk { .. } => RWALK,
            Body::Topen { .. } => TOPEN,
            Body::Ropen { .. } => ROPEN,
            Body::Tcreate { .. } => TCREATE,
            Body::Rcreate { .. } => RCREATE,
            Body::Tread { .. } => TREAD,
            Body::Rread { .. } => RREAD,
            Body::Twrite { .. } => TWRITE,
            Body::Rwrite { .. } => RWRITE,
            Body::Tclunk { .. } => TCLUNK,
            Body::Rclunk => RCLUNK,
            Body::Tremove { .. } => TREMOVE,
            Body::Rremove => RREMOVE,
            Body::Tstat { .. } => TSTAT,
            Body::Rstat { .. } => RSTAT,
            Body::Twstat { .. } => TWSTAT,
            Body::Rwstat => RWSTAT,
        }
    }

    /// Convenience constructor for an error reply.
    pub fn error(ename: impl Into<String>) -> Body {
        Body::Rerror { ename: ename.into() }
    }
}
