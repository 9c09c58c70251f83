//! 9P2000 message types, as in intro(5) of the Plan 9 manual.

/// Size of the frame header: `size[4] type[1] tag[2]`.
pub const HEADER_LEN: usize = 7;
/// The tag used by `Tversion`.
pub const NOTAG: u16 = 0xFFFF;
/// "No fid", e.g. the afid of an unauthenticated `Tattach`.
pub const NOFID: u32 = 0xFFFF_FFFF;
/// At most this many names in one `Twalk` (and qids in one `Rwalk`).
pub const MAXWELEM: usize = 16;
/// The protocol version string.
pub const VERSION_9P2000: &str = "9P2000";

/// Qid type bit: a directory.
pub const QTDIR: u8 = 0x80;
/// Qid type bit: an append-only file.
pub const QTAPPEND: u8 = 0x40;
/// Qid type bit: an exclusive-use file.
pub const QTEXCL: u8 = 0x20;
/// Qid type bit: an authentication file (the afid of `Tauth`).
pub const QTAUTH: u8 = 0x08;
/// Qid type of a plain file (no bits set).
pub const QTFILE: u8 = 0x00;

/// Mode bit of a stat entry (high bits of `mode`): a directory.
pub const DMDIR: u32 = 0x8000_0000;
/// Mode bit of a stat entry: append-only.
pub const DMAPPEND: u32 = 0x4000_0000;
/// Mode bit of a stat entry: exclusive use.
pub const DMEXCL: u32 = 0x2000_0000;
/// Mode bit of a stat entry: an authentication file.
pub const DMAUTH: u32 = 0x0800_0000;

/// Open mode (low two bits of `Topen`/`Tcreate` mode): read.
pub const OREAD: u8 = 0;
/// Open mode: write.
pub const OWRITE: u8 = 1;
/// Open mode: read and write.
pub const ORDWR: u8 = 2;
/// Open mode: execute (read permission plus execute check).
pub const OEXEC: u8 = 3;
/// Open flag: truncate the file.
pub const OTRUNC: u8 = 0x10;
/// Open flag: remove the file when the fid is clunked.
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
    /// For kernel use (0 from this server).
    pub ty: u16,
    /// For kernel use (0 from this server).
    pub dev: u32,
    /// The file's qid.
    pub qid: Qid,
    /// Permission bits plus `DMDIR` etc.
    pub mode: u32,
    /// Last access time, seconds since the epoch.
    pub atime: u32,
    /// Last modification time, seconds since the epoch.
    pub mtime: u32,
    /// Length in bytes (0 for directories and synthetic streams).
    pub length: u64,
    /// Last path element (`/` for the root).
    pub name: String,
    /// Owner name.
    pub uid: String,
    /// Group name.
    pub gid: String,
    /// Name of the user who last modified the file.
    pub muid: String,
}

impl Stat {
    /// The `Twstat` entry that changes nothing: every integer field all ones
    /// and every string empty ("don't touch", stat(5)). Set the fields to
    /// change on a copy.
    pub fn unchanged() -> Stat {
        Stat {
            ty: u16::MAX,
            dev: u32::MAX,
            qid: Qid {
                ty: u8::MAX,
                version: u32::MAX,
                path: u64::MAX,
            },
            mode: u32::MAX,
            atime: u32::MAX,
            mtime: u32::MAX,
            length: u64::MAX,
            ..Stat::default()
        }
    }
}

/// One message: its tag and its body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Frame {
    /// The tag chosen by the client; the reply carries the same tag.
    pub tag: u16,
    /// The message itself.
    pub body: Body,
}

/// The body of every 9P2000 T- and R-message. Message type numbers are in
/// [`Body::type_id`].
#[derive(Debug, Clone, PartialEq, Eq)]
#[allow(missing_docs)] // field names are those of intro(5), described on each variant
pub enum Body {
    /// Negotiate msize and protocol version: `msize[4] version[s]`.
    Tversion { msize: u32, version: String },
    /// The server's msize and version: `msize[4] version[s]`.
    Rversion { msize: u32, version: String },
    /// Open an authentication fid: `afid[4] uname[s] aname[s]`.
    Tauth {
        afid: u32,
        uname: String,
        aname: String,
    },
    /// The auth file's qid (type `QTAUTH`): `aqid[13]`.
    Rauth { aqid: Qid },
    /// Attach `fid` to the root, authenticated by `afid` (or `NOFID`): `fid[4] afid[4] uname[s] aname[s]`.
    Tattach {
        fid: u32,
        afid: u32,
        uname: String,
        aname: String,
    },
    /// The root's qid: `qid[13]`.
    Rattach { qid: Qid },
    /// A failed request: `ename[s]`.
    Rerror { ename: String },
    /// Abandon the request tagged `oldtag`: `oldtag[2]`.
    Tflush { oldtag: u16 },
    /// The flush is done; no reply will follow for `oldtag`.
    Rflush,
    /// Walk `fid` through `wnames` (at most 16) to `newfid`: `fid[4] newfid[4] nwname[2] nwname*wname[s]`.
    Twalk {
        fid: u32,
        newfid: u32,
        wnames: Vec<String>,
    },
    /// One qid per element walked: `nwqid[2] nwqid*qid[13]`.
    Rwalk { wqids: Vec<Qid> },
    /// Open `fid` with `mode` (`OREAD`... plus flags): `fid[4] mode[1]`.
    Topen { fid: u32, mode: u8 },
    /// The opened file's qid and I/O unit: `qid[13] iounit[4]`.
    Ropen { qid: Qid, iounit: u32 },
    /// Create `name` in the directory `fid`: `fid[4] name[s] perm[4] mode[1]`.
    Tcreate {
        fid: u32,
        name: String,
        perm: u32,
        mode: u8,
    },
    /// The created file's qid and I/O unit: `qid[13] iounit[4]`.
    Rcreate { qid: Qid, iounit: u32 },
    /// Read `count` bytes at `offset`: `fid[4] offset[8] count[4]`.
    Tread { fid: u32, offset: u64, count: u32 },
    /// The bytes read: `count[4] data[count]`.
    Rread { data: Vec<u8> },
    /// Write `data` at `offset`: `fid[4] offset[8] count[4] data[count]`.
    Twrite {
        fid: u32,
        offset: u64,
        data: Vec<u8>,
    },
    /// How many bytes were written: `count[4]`.
    Rwrite { count: u32 },
    /// Forget `fid`: `fid[4]`.
    Tclunk { fid: u32 },
    /// The fid is forgotten.
    Rclunk,
    /// Remove the file of `fid` and forget the fid: `fid[4]`.
    Tremove { fid: u32 },
    /// The file is removed.
    Rremove,
    /// Ask for the stat entry of `fid`: `fid[4]`.
    Tstat { fid: u32 },
    /// The stat entry as encoded by [`crate::encode_stat`] is carried inside
    /// `stat[n]`; here it is decoded.
    Rstat { stat: Stat },
    /// Change the stat entry of `fid`: `fid[4] n[2] stat[n]`.
    Twstat { fid: u32, stat: Stat },
    /// The stat entry was changed.
    Rwstat,
}

/// Message type numbers of 9P2000.
#[allow(missing_docs)]
pub mod msgtype {
    /// The name of message type `ty` (e.g. `Twalk`), or `None` for a number that
    /// is not a 9P2000 message (including the illegal `Terror`).
    pub fn name(ty: u8) -> Option<&'static str> {
        const NAMES: [&str; 28] = [
            "Tversion", "Rversion", "Tauth", "Rauth", "Tattach", "Rattach", "Terror", "Rerror",
            "Tflush", "Rflush", "Twalk", "Rwalk", "Topen", "Ropen", "Tcreate", "Rcreate", "Tread",
            "Rread", "Twrite", "Rwrite", "Tclunk", "Rclunk", "Tremove", "Rremove", "Tstat",
            "Rstat", "Twstat", "Rwstat",
        ];
        if ty == TERROR {
            return None;
        }
        NAMES.get(usize::from(ty.checked_sub(TVERSION)?)).copied()
    }

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
        Body::Rerror {
            ename: ename.into(),
        }
    }
}
