//! Test harness: the real `toolsrv` binary on a temp socket, and a raw 9P2000
//! connection built on the project's wire codec.

#![allow(dead_code)]

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use toolsrv_wire::{decode, decode_stat, encode, Body, Frame, Stat, NOFID};

/// How long any single wait in a test may take.
pub const WAIT: Duration = Duration::from_secs(10);

/// The binary under test: this build's, or `$TOOLSRV_TEST_BIN` (to show that
/// a regression test fails against an older build).
pub fn bin() -> &'static str {
    static BIN: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    BIN.get_or_init(|| {
        std::env::var("TOOLSRV_TEST_BIN")
            .unwrap_or_else(|_| env!("CARGO_BIN_EXE_toolsrv").to_string())
    })
}

/// Poll `cond` every few milliseconds until it holds or `limit` passes.
pub fn wait_until(limit: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let start = Instant::now();
    while start.elapsed() < limit {
        if cond() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    cond()
}

/// A running `toolsrv serve` in its own temp directory; killed on drop.
pub struct Server {
    /// The server's `--cwd` ([`Server::start`], [`Server::start_in`],
    /// [`start_server_in`]), or the directory of its socket
    /// ([`start_server_at`]).
    pub dir: tempfile::TempDir,
    pub socket: PathBuf,
    pub child: Option<Child>,
    pub log: PathBuf,
    /// The socket's directory when it is not `dir`.
    pub run: Option<tempfile::TempDir>,
    /// More directories the server uses (a tools directory outside the cwd).
    pub keep: Vec<tempfile::TempDir>,
}

impl Server {
    /// Start with extra flags (e.g. `--no-auth`) and wait until the socket answers.
    pub fn start(extra: &[&str]) -> Server {
        let dir = tempfile::tempdir().expect("tempdir");
        Server::start_in(dir, extra)
    }

    /// Start in a given temp dir (the server's `--cwd`; socket, log and
    /// config directory in a directory of their own, see [`start_server_in`]).
    pub fn start_in(dir: tempfile::TempDir, extra: &[&str]) -> Server {
        start_server_in(dir, &[], extra)
    }

    /// The server's log so far.
    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// A raw connection, versioned.
    pub fn raw(&self) -> Raw {
        let mut r = Raw::connect(&self.socket);
        r.version(65536);
        r
    }

    /// A raw connection, versioned and attached as fid 0 (`--no-auth` servers).
    pub fn attached(&self) -> Raw {
        let mut r = self.raw();
        r.ok(Body::Tattach {
            fid: 0,
            afid: NOFID,
            uname: "t".into(),
            aname: String::new(),
        });
        r
    }

    /// A raw connection authenticated with `secret` and attached as fid 0; returns the token.
    pub fn authed(&self, secret: &str) -> (Raw, String) {
        let mut r = self.raw();
        let token = r.authenticate(secret).expect("authentication");
        (r, token)
    }

    /// The OS pid of the server.
    pub fn pid(&self) -> u32 {
        self.child.as_ref().map(|c| c.id()).unwrap_or(0)
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            // Safety: plain kill(2) of our own child.
            unsafe { libc::kill(c.id() as i32, libc::SIGKILL) };
            let _ = c.wait();
        }
    }
}

/// A raw 9P2000 connection speaking frames built with the project's codec.
pub struct Raw {
    pub s: UnixStream,
    next_tag: u16,
}

impl Raw {
    pub fn connect(path: &Path) -> Raw {
        let s = UnixStream::connect(path).expect("connect");
        s.set_read_timeout(Some(WAIT)).expect("timeout");
        Raw { s, next_tag: 1 }
    }

    /// A raw connection over an already connected stream.
    pub fn from_stream(s: UnixStream) -> Raw {
        Raw { s, next_tag: 1 }
    }

    pub fn tag(&mut self) -> u16 {
        self.next_tag = self.next_tag.wrapping_add(1).max(1);
        self.next_tag
    }

    pub fn send(&mut self, tag: u16, body: Body) {
        let mut buf = Vec::new();
        encode(&Frame { tag, body }, &mut buf);
        self.s.write_all(&buf).expect("send");
    }

    pub fn send_bytes(&mut self, b: &[u8]) {
        self.s.write_all(b).expect("send bytes");
    }

    /// Receive one frame (panics on timeout).
    pub fn recv(&mut self) -> Frame {
        self.try_recv().expect("no reply within the timeout")
    }

    /// Receive one frame, or `None` on EOF/timeout.
    pub fn try_recv(&mut self) -> Option<Frame> {
        let mut size = [0u8; 4];
        self.s.read_exact(&mut size).ok()?;
        let n = u32::from_le_bytes(size) as usize;
        let mut buf = vec![0u8; n];
        buf[..4].copy_from_slice(&size);
        self.s.read_exact(&mut buf[4..]).ok()?;
        Some(decode(&buf).expect("server sent an undecodable frame"))
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

    pub fn version(&mut self, msize: u32) -> (u32, String) {
        self.send(
            toolsrv_wire::NOTAG,
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

    /// Tauth + write secret + read token + Tattach fid 0.
    pub fn authenticate(&mut self, secret: &str) -> Result<String, String> {
        let afid = 100;
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

    /// Walk from fid 0 to `path` as `newfid`.
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
            // A partial walk creates no fid; clients report it as not found.
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

    /// Read a whole open fid.
    pub fn read_all(&mut self, fid: u32) -> Vec<u8> {
        let mut out = Vec::new();
        loop {
            match self.ok(Body::Tread {
                fid,
                offset: out.len() as u64,
                count: 8192,
            }) {
                Body::Rread { data } if data.is_empty() => return out,
                Body::Rread { data } => out.extend_from_slice(&data),
                b => panic!("{b:?}"),
            }
        }
    }

    /// Walk, open, read all, clunk.
    pub fn read_file(&mut self, path: &str) -> Vec<u8> {
        self.open(50, path, 0);
        let d = self.read_all(50);
        self.ok(Body::Tclunk { fid: 50 });
        d
    }

    /// Open `path` with `mode`, write `data` (if any), read everything, clunk.
    /// Any Rerror along the way is returned.
    pub fn transact(&mut self, path: &str, mode: u8, data: &[u8]) -> Result<Vec<u8>, String> {
        let fid = 60;
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

    /// Write `data` to `path` (open OWRITE).
    pub fn write(&mut self, path: &str, data: &str) -> Result<(), String> {
        self.transact(path, toolsrv_wire::OWRITE, data.as_bytes())
            .map(|_| ())
    }

    /// Write-then-read `path` (open ORDWR) as a string.
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
        self.open(51, path, 0);
        let data = self.read_all(51);
        self.ok(Body::Tclunk { fid: 51 });
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

/// Start `toolsrv serve` with `--cwd cwd` and its socket, `<socket>.secret`,
/// log and config directory in a second temp directory ([`Server::run`]).
/// They are kept out of the cwd because the server carves them out of every
/// sandbox rule (CONTRACT §12): inside the cwd, tools could not create files
/// at the cwd's top level.
pub fn start_server_in(cwd: tempfile::TempDir, env: &[(&str, &str)], extra: &[&str]) -> Server {
    let run = tempfile::tempdir().expect("tempdir");
    let path = cwd.path().to_path_buf();
    let mut s = start_server_at(run, &path, env, extra);
    s.run = Some(std::mem::replace(&mut s.dir, cwd));
    s
}

/// Start `toolsrv serve` with its socket (`toolsrv.sock`), log and config
/// directory in `dir` but `--cwd cwd` (so the socket and `<socket>.secret` can
/// lie outside the cwd), with `env` added to the server's environment.
pub fn start_server_at(
    dir: tempfile::TempDir,
    cwd: &Path,
    env: &[(&str, &str)],
    extra: &[&str],
) -> Server {
    start_server_with(dir, cwd, env, extra, |_| {})
}

/// [`start_server_at`], with `tweak` applied to the command before it is spawned.
pub fn start_server_with(
    dir: tempfile::TempDir,
    cwd: &Path,
    env: &[(&str, &str)],
    extra: &[&str],
    tweak: impl FnOnce(&mut Command),
) -> Server {
    let socket = dir.path().join("toolsrv.sock");
    let log = dir.path().join("server.log");
    let mut cmd = Command::new(bin());
    tweak(&mut cmd);
    let child = cmd
        .arg("serve")
        .arg("--listen")
        .arg(&socket)
        .arg("--cwd")
        .arg(cwd)
        .arg("--log")
        .arg(&log)
        .args(extra)
        .env("RUST_LOG", "debug")
        .env("OLLIE_CFG_PATH", dir.path().join("cfg"))
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn toolsrv");
    let s = Server {
        dir,
        socket,
        child: Some(child),
        log,
        run: None,
        keep: Vec::new(),
    };
    assert!(
        wait_until(WAIT, || UnixStream::connect(&s.socket).is_ok()),
        "server did not come up; log:\n{}",
        s.log_text()
    );
    s
}

/// Build the example binary `name` (crates/toolsrv/examples/<name>.rs) with the
/// same cargo and profile as this test binary; returns its path.
pub fn build_example(name: &str) -> std::path::PathBuf {
    let exe = std::env::current_exe().expect("current_exe");
    // target/<profile>/deps/integration-<hash>
    let profile_dir = exe
        .parent()
        .and_then(std::path::Path::parent)
        .expect("test binary lives in target/<profile>/deps")
        .to_path_buf();
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let mut cmd = std::process::Command::new(cargo);
    cmd.args(["build", "--quiet", "--example", name, "-p", "toolsrv"])
        .arg("--manifest-path")
        .arg(concat!(env!("CARGO_MANIFEST_DIR"), "/Cargo.toml"));
    if profile_dir.file_name().is_some_and(|n| n == "release") {
        cmd.arg("--release");
    }
    let status = cmd
        .status()
        .unwrap_or_else(|e| panic!("run cargo build for {name}: {e}"));
    assert!(status.success(), "building the {name} example failed");
    let path = profile_dir.join("examples").join(name);
    assert!(path.exists(), "{} missing after the build", path.display());
    path
}
