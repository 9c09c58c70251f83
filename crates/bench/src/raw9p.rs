//! A minimal 9P2000 connection on the project's wire codec with no client
//! library in between: the same four pipelined requests `read_file` sends,
//! so the bench can tell library time from server time, and a sync tool call
//! pipelined as the independent C bench sends it ([`Raw9p::call_tool`]).

use std::path::Path;

use tokio::io::{AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::unix::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::UnixStream;
use toolsrv_wire::{decode, encode, Body, Frame, NOFID, NOTAG, ORDWR, OREAD};

/// The msize offered.
const MSIZE: u32 = 65536;
/// The root fid.
const ROOT: u32 = 0;
/// The fid used for each file read.
const FILE: u32 = 1;
/// The afid used while authenticating.
const AFID: u32 = 2;
/// The second fid [`Raw9p::read_file_clunk_after`] alternates with [`FILE`].
const FILE_B: u32 = 3;

/// Why a raw session failed.
#[derive(Debug, thiserror::Error)]
pub enum RawError {
    /// Socket I/O failed.
    #[error("raw 9P connection: {0}")]
    Io(#[from] std::io::Error),
    /// The server sent bytes that do not decode.
    #[error("raw 9P connection: undecodable reply: {0}")]
    Decode(String),
    /// The server answered something other than what was expected.
    #[error("raw 9P connection: {request} got {reply}")]
    Unexpected {
        /// The request.
        request: &'static str,
        /// The reply, debug-printed.
        reply: String,
    },
}

/// An attached raw connection.
#[derive(Debug)]
pub struct Raw9p {
    r: BufReader<OwnedReadHalf>,
    w: OwnedWriteHalf,
    out: Vec<u8>,
    tag: u16,
    /// Replies to Tclunks sent without waiting, still to be read.
    unread_clunks: usize,
    /// The fid the next [`Raw9p::read_file_clunk_after`] or [`Raw9p::call_tool`] uses.
    next_fid: u32,
    /// The fid of the previous [`Raw9p::call_tool`], clunked with the next one.
    call_fid: Option<u32>,
}

impl Raw9p {
    /// Connect, negotiate 9P2000 and attach (authenticating with `secret` if given).
    pub async fn connect(socket: &Path, secret: Option<&str>) -> Result<Raw9p, RawError> {
        let (r, w) = UnixStream::connect(socket).await?.into_split();
        let mut c = Raw9p {
            r: BufReader::with_capacity(MSIZE as usize, r),
            w,
            out: Vec::new(),
            tag: 0,
            unread_clunks: 0,
            next_fid: FILE,
            call_fid: None,
        };
        let version = Body::Tversion {
            msize: MSIZE,
            version: "9P2000".into(),
        };
        c.push(NOTAG, version);
        c.flush().await?;
        expect(c.recv().await?, "Tversion", |b| {
            matches!(b, Body::Rversion { .. })
        })?;
        let afid = match secret {
            None => NOFID,
            Some(s) => {
                c.call(
                    "Tauth",
                    Body::Tauth {
                        afid: AFID,
                        uname: "agent".into(),
                        aname: String::new(),
                    },
                    |b| matches!(b, Body::Rauth { .. }),
                )
                .await?;
                c.call(
                    "Twrite secret",
                    Body::Twrite {
                        fid: AFID,
                        offset: 0,
                        data: s.as_bytes().to_vec(),
                    },
                    |b| matches!(b, Body::Rwrite { .. }),
                )
                .await?;
                AFID
            }
        };
        c.call(
            "Tattach",
            Body::Tattach {
                fid: ROOT,
                afid,
                uname: "agent".into(),
                aname: String::new(),
            },
            |b| matches!(b, Body::Rattach { .. }),
        )
        .await?;
        if afid != NOFID {
            c.call("Tclunk afid", Body::Tclunk { fid: AFID }, |b| {
                matches!(b, Body::Rclunk)
            })
            .await?;
        }
        Ok(c)
    }

    /// Twalk+Topen+Tread+Tclunk of the one-element `name` in one write; the
    /// four replies are then read. Returns the data read.
    pub async fn read_file(&mut self, name: &str) -> Result<Vec<u8>, RawError> {
        for _ in 0..std::mem::take(&mut self.unread_clunks) {
            expect(self.recv().await?, "Tclunk", |b| matches!(b, Body::Rclunk))?;
        }
        self.push_open_read(FILE, name);
        let t = self.next_tag();
        self.push(t, Body::Tclunk { fid: FILE });
        self.flush().await?;
        let data = self.recv_open_read().await?;
        expect(self.recv().await?, "Tclunk", |b| matches!(b, Body::Rclunk))?;
        Ok(data)
    }

    /// As the client library does it: Twalk+Topen+Tread in one write, and
    /// after the Rread a Tclunk whose reply is not waited for (it is read at
    /// the start of the next call). Alternates between two fids.
    pub async fn read_file_clunk_after(&mut self, name: &str) -> Result<Vec<u8>, RawError> {
        let fid = self.next_fid;
        self.next_fid = if fid == FILE { FILE_B } else { FILE };
        self.push_open_read(fid, name);
        self.flush().await?;
        for _ in 0..std::mem::take(&mut self.unread_clunks) {
            expect(self.recv().await?, "Tclunk", |b| matches!(b, Body::Rclunk))?;
        }
        let data = self.recv_open_read().await?;
        let t = self.next_tag();
        self.push(t, Body::Tclunk { fid });
        self.flush().await?;
        self.unread_clunks += 1;
        Ok(data)
    }

    /// One sync call of a tool through `proc/new`, pipelined as the C bench
    /// (`callbench.c`) sends it: the previous call's Tclunk, then Twalk to
    /// `proc/new`, Topen `ORDWR`, Twrite of `payload` (an encoded request)
    /// and Tread, all in one write; the replies are matched by tag. Returns
    /// the result the Tread got (the fid is clunked with the next call).
    /// Alternates between two fids.
    pub async fn call_tool(&mut self, payload: &[u8]) -> Result<Vec<u8>, RawError> {
        for _ in 0..std::mem::take(&mut self.unread_clunks) {
            expect(self.recv().await?, "Tclunk", |b| matches!(b, Body::Rclunk))?;
        }
        let fid = self.next_fid;
        self.next_fid = if fid == FILE { FILE_B } else { FILE };
        let mut sent: Vec<(u16, &'static str)> = Vec::with_capacity(5);
        if let Some(prev) = self.call_fid.take() {
            sent.push((self.queue(Body::Tclunk { fid: prev }), "Tclunk"));
        }
        let walk = Body::Twalk {
            fid: ROOT,
            newfid: fid,
            wnames: vec!["proc".into(), "new".into()],
        };
        sent.push((self.queue(walk), "Twalk proc/new"));
        sent.push((self.queue(Body::Topen { fid, mode: ORDWR }), "Topen"));
        let write = Body::Twrite {
            fid,
            offset: 0,
            data: payload.to_vec(),
        };
        sent.push((self.queue(write), "Twrite"));
        let read = Body::Tread {
            fid,
            offset: 0,
            count: MSIZE - 24,
        };
        let read_tag = self.queue(read);
        sent.push((read_tag, "Tread"));
        self.flush().await?;
        self.call_fid = Some(fid);
        let mut result = None;
        while !sent.is_empty() {
            let reply = self.recv_frame().await?;
            let Some(i) = sent.iter().position(|&(t, _)| t == reply.tag) else {
                return Err(unexpected("a pipelined call", &reply.body));
            };
            let (tag, request) = sent.swap_remove(i);
            match reply.body {
                Body::Rread { data } if tag == read_tag => result = Some(data),
                Body::Rclunk | Body::Rwalk { .. } | Body::Ropen { .. } | Body::Rwrite { .. }
                    if tag != read_tag => {}
                b => return Err(unexpected(request, &b)),
            }
        }
        result.ok_or_else(|| RawError::Decode("no Rread for the call".into()))
    }

    /// Queue `body` under the next tag; the tag.
    fn queue(&mut self, body: Body) -> u16 {
        let t = self.next_tag();
        self.push(t, body);
        t
    }

    /// Queue Twalk (from the root to the one-element `name`, as `fid`),
    /// Topen and a Tread of as much as fits.
    fn push_open_read(&mut self, fid: u32, name: &str) {
        let walk = Body::Twalk {
            fid: ROOT,
            newfid: fid,
            wnames: vec![name.to_string()],
        };
        let t = self.next_tag();
        self.push(t, walk);
        let t = self.next_tag();
        self.push(t, Body::Topen { fid, mode: OREAD });
        let read = Body::Tread {
            fid,
            offset: 0,
            count: MSIZE - 24,
        };
        let t = self.next_tag();
        self.push(t, read);
    }

    /// The replies to [`Self::push_open_read`]: the data read.
    async fn recv_open_read(&mut self) -> Result<Vec<u8>, RawError> {
        expect(self.recv().await?, "Twalk", |b| {
            matches!(b, Body::Rwalk { .. })
        })?;
        expect(self.recv().await?, "Topen", |b| {
            matches!(b, Body::Ropen { .. })
        })?;
        match self.recv().await? {
            Body::Rread { data } => Ok(data),
            b => Err(unexpected("Tread", &b)),
        }
    }

    fn next_tag(&mut self) -> u16 {
        self.tag = self.tag.wrapping_add(1) % NOTAG;
        self.tag
    }

    fn push(&mut self, tag: u16, body: Body) {
        encode(&Frame { tag, body }, &mut self.out);
    }

    async fn flush(&mut self) -> Result<(), RawError> {
        self.w.write_all(&self.out).await?;
        self.out.clear();
        Ok(())
    }

    async fn call(
        &mut self,
        request: &'static str,
        body: Body,
        ok: impl Fn(&Body) -> bool,
    ) -> Result<(), RawError> {
        let t = self.next_tag();
        self.push(t, body);
        self.flush().await?;
        expect(self.recv().await?, request, ok)
    }

    /// The next reply's body (replies arrive in request order here: every
    /// request of this module but [`Raw9p::call_tool`]'s is answered at once).
    async fn recv(&mut self) -> Result<Body, RawError> {
        self.recv_frame().await.map(|f| f.body)
    }

    /// The next reply.
    async fn recv_frame(&mut self) -> Result<Frame, RawError> {
        let mut size = [0u8; 4];
        self.r.read_exact(&mut size).await?;
        let n = u32::from_le_bytes(size) as usize;
        if n < 7 || n > MSIZE as usize {
            return Err(RawError::Decode(format!("frame size {n} out of range")));
        }
        let mut buf = vec![0u8; n];
        buf[..4].copy_from_slice(&size);
        self.r.read_exact(&mut buf[4..]).await?;
        decode(&buf).map_err(|e| RawError::Decode(e.to_string()))
    }
}

fn unexpected(request: &'static str, b: &Body) -> RawError {
    RawError::Unexpected {
        request,
        reply: format!("{b:?}"),
    }
}

fn expect(b: Body, request: &'static str, ok: impl Fn(&Body) -> bool) -> Result<(), RawError> {
    if ok(&b) {
        Ok(())
    } else {
        Err(unexpected(request, &b))
    }
}
