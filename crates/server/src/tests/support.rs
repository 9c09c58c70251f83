//! The one place that builds a [`Server`] in-process ([`Harness::start`]),
//! and [`Peer`]: a 9P client over a `tokio::io::duplex` pipe served by the
//! server's own namespace, as the accept loop would serve a socket.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use tokio::io::DuplexStream;
use toolsrv_sandbox::Containment;
use toolsrv_sandbox::PolicyStore;
use toolsrv_testkit::Frames;
use toolsrv_vfs::{ConnInfo, Limits, Node};
use toolsrv_wire::{Body, Frame, Stat, NOFID, NOTAG, ORDWR, OREAD, OWRITE};

/// The settings a test may change before its server is built (the one
/// name the tests use for the server's configuration type).
pub(super) use crate::config::Config as Settings;
use crate::server::Server;

/// How long any one test may take before it fails.
pub(super) const WAIT: Duration = Duration::from_secs(20);

/// Run a test's body, failing it if it takes longer than [`WAIT`].
pub(super) async fn bounded<F: std::future::Future>(f: F) -> F::Output {
    tokio::time::timeout(WAIT, f)
        .await
        .expect("the test finished in time")
}

/// Wait until `condition` holds, looking again every few milliseconds (for
/// state that changes in a task of the server's own, with nothing to await).
pub(super) async fn eventually(condition: impl Fn() -> bool) {
    while !condition() {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// A tool that prints its argument: `echo {text}` (metadata-only).
pub(super) const ECHO: (&str, &str) = (
    "echo.yaml",
    "description: Print a text\nparams:\n  text: {type: string, description: What to print, required: true}\ncommand: \"printf '%s' {text}\"\n",
);

/// A tool that runs a shell command: `sh -c {command}` (metadata-only).
pub(super) const SH: (&str, &str) = (
    "sh.yaml",
    "description: Run a command\nparams:\n  command: {type: string, description: The command, required: true}\ncommand: \"sh -c {command}\"\n",
);

/// A tool with typed, closed arguments.
pub(super) const TYPED: (&str, &str) = (
    "typed.yaml",
    "description: Typed arguments\ninputSchema:\n  type: object\n  properties:\n    n: {type: integer}\n    flag: {type: boolean}\n    name: {type: string}\n  required: [n]\n  additionalProperties: false\ncommand: \"echo {n} {name}\"\n",
);

/// One in-process server: its state, its namespace, its directories.
pub(super) struct Harness {
    /// The server's state.
    pub(super) server: Arc<Server>,
    /// The namespace every connection is served.
    root: Node,
    /// The server's `--cwd`.
    pub(super) cwd: PathBuf,
    /// The tools directory.
    pub(super) tools: PathBuf,
    _home: tempfile::TempDir,
}

impl Harness {
    /// A `--yolo --no-auth` server with `tools` (the sandbox is not the point).
    pub(super) fn yolo(tools: &[(&str, &str)]) -> Harness {
        Harness::start(tools, |c| c.yolo = true)
    }

    /// A `--no-auth` server with `tools` whose runs are confined by Landlock.
    pub(super) fn sandboxed(tools: &[(&str, &str)]) -> Harness {
        Harness::start(tools, |_| {})
    }

    /// The one construction of a server: a home directory holding `cwd/`
    /// and `tools/` (with `tools`, `(file name, text)`), `--no-auth`, the
    /// built-in policy, no containment beyond the process group, then
    /// `configure`.
    pub(super) fn start(tools: &[(&str, &str)], configure: impl FnOnce(&mut Settings)) -> Harness {
        let home = tempfile::Builder::new()
            .prefix("toolsrv-middle-")
            .tempdir()
            .expect("a home directory");
        let cwd = home.path().join("cwd");
        let tools_dir = home.path().join("tools");
        std::fs::create_dir(&cwd).expect("mkdir cwd");
        std::fs::create_dir(&tools_dir).expect("mkdir tools");
        for (name, text) in tools {
            write_tool(&tools_dir, name, text);
        }
        let mut config = Settings::new(
            home.path().join("toolsrv.sock"),
            cwd.clone(),
            tools_dir.clone(),
            home.path().join("sandbox.yaml"),
        );
        config.no_auth = true;
        configure(&mut config);
        let tools_dir = config.tools_dir.clone();
        let containment = Arc::new(Containment::start(Some("none")));
        let server = Server::new(
            config,
            PolicyStore::embedded_default(),
            None,
            containment,
            crate::watch::Watch::none(),
        )
        .expect("the server starts");
        let root = crate::namespace::spec(&server);
        Harness {
            server,
            root,
            cwd,
            tools: tools_dir,
            _home: home,
        }
    }

    /// A connection from a client that is not one of the server's tools,
    /// versioned and attached (fid 0 is the root).
    pub(super) async fn connect(&self) -> Peer {
        self.connect_as(Some(1), false).await
    }

    /// A connection from a peer with `peer_pid`, counted as one of the
    /// server's tools when `descendant`, versioned and attached.
    pub(super) async fn connect_as(&self, peer_pid: Option<i32>, descendant: bool) -> Peer {
        let mut p = self.connect_unattached(peer_pid, descendant);
        p.version().await;
        let r = p
            .rpc(Body::Tattach {
                fid: 0,
                afid: NOFID,
                uname: "tester".into(),
                aname: String::new(),
            })
            .await;
        assert!(matches!(r, Body::Rattach { .. }), "attach: {r:?}");
        p
    }

    /// A connection from a client, versioned, not attached.
    pub(super) async fn connect_versioned(&self) -> Peer {
        let mut p = self.connect_unattached(Some(1), false);
        p.version().await;
        p
    }

    /// A connection that authenticated with `secret` (docs/protocol.md, "Authentication") and
    /// attached; its token is [`Peer::token`].
    pub(super) async fn connect_authenticated(&self, secret: &[u8]) -> Peer {
        let mut p = self.connect_versioned().await;
        p.authenticate(secret)
            .await
            .expect("the secret is accepted");
        p
    }

    /// A connection not yet versioned.
    pub(super) fn connect_unattached(&self, peer_pid: Option<i32>, descendant: bool) -> Peer {
        let (client, served) = tokio::io::duplex(1 << 20);
        let info = ConnInfo {
            id: 1,
            peer_uid: Some(0),
            peer_pid,
            peer_is_descendant: descendant,
            user: self.server.user.clone(),
            mtime: self.server.started,
            requests: Default::default(),
        };
        tokio::spawn(toolsrv_vfs::serve_connection_with(
            served,
            self.root.clone(),
            self.server.auth_policy(),
            info,
            Limits::default(),
        ));
        Peer {
            frames: Frames::with_limit(client, WAIT),
            next_fid: 1,
            token: None,
        }
    }

    /// Write (or replace) one tool file.
    pub(super) fn write_tool(&self, name: &str, text: &str) {
        write_tool(&self.tools, name, text);
    }
}

impl Drop for Harness {
    fn drop(&mut self) {
        self.server.procs.stop_all();
    }
}

/// Write one tool file: names ending in `.yaml` are plain files, others executables.
fn write_tool(dir: &std::path::Path, name: &str, text: &str) {
    use std::os::unix::fs::PermissionsExt;
    let p = dir.join(name);
    std::fs::write(&p, text).expect("write a tool file");
    let mode = if name.ends_with(".yaml") {
        0o644
    } else {
        0o755
    };
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(mode)).expect("chmod a tool file");
}

/// A payload of `fields`, encoded as a client would.
pub(super) fn payload(fields: &[(&str, &str)]) -> String {
    toolsrv_protocol::encode_payload(fields)
}

/// The text of a ToolResult and whether it is an error.
pub(super) fn outcome(result: &Value) -> (bool, String) {
    let text = result["content"]
        .as_array()
        .and_then(|c| c.first())
        .and_then(|c| c["text"].as_str())
        .unwrap_or_else(|| panic!("a text result: {result}"))
        .to_string();
    (result["isError"].as_bool().expect("isError"), text)
}

/// The client end of one served connection. Requests go one at a time.
pub(super) struct Peer {
    frames: Frames<DuplexStream>,
    next_fid: u32,
    /// The session token read after authenticating.
    pub(super) token: Option<String>,
}

/// What an `Rerror` said.
pub(super) type Ename = String;

impl Peer {
    async fn version(&mut self) {
        self.send(
            NOTAG,
            Body::Tversion {
                msize: 65536,
                version: "9P2000".into(),
            },
        )
        .await;
        let r = self.recv().await;
        assert!(matches!(r.body, Body::Rversion { .. }), "version: {r:?}");
    }

    /// `Tauth`, write `secret`, read the token, attach as fid 0 with the afid.
    pub(super) async fn authenticate(&mut self, secret: &[u8]) -> Result<(), Ename> {
        let afid = self.fid();
        match self
            .rpc(Body::Tauth {
                afid,
                uname: "agent".into(),
                aname: String::new(),
            })
            .await
        {
            Body::Rauth { .. } => {}
            Body::Rerror { ename } => return Err(ename),
            other => panic!("auth: {other:?}"),
        }
        self.write(afid, secret).await?;
        let token = self.read_at(afid, 0).await?;
        self.token = Some(String::from_utf8(token).expect("a UTF-8 token"));
        match self
            .rpc(Body::Tattach {
                fid: 0,
                afid,
                uname: "agent".into(),
                aname: String::new(),
            })
            .await
        {
            Body::Rattach { .. } => Ok(()),
            Body::Rerror { ename } => Err(ename),
            other => panic!("attach: {other:?}"),
        }
    }

    /// Send one request with `tag`.
    pub(super) async fn send(&mut self, tag: u16, body: Body) {
        self.frames.send(tag, body).await;
    }

    /// The next reply.
    pub(super) async fn recv(&mut self) -> Frame {
        self.frames.recv().await
    }

    /// One request and its reply.
    pub(super) async fn rpc(&mut self, body: Body) -> Body {
        self.frames.rpc(1, body).await
    }

    /// A fresh fid number.
    pub(super) fn fid(&mut self) -> u32 {
        self.next_fid += 1;
        self.next_fid
    }

    /// Walk from the root to `path` ("" is the root itself) as a new fid.
    pub(super) async fn walk(&mut self, path: &str) -> Result<u32, Ename> {
        let fid = self.fid();
        let wnames: Vec<String> = path
            .split('/')
            .filter(|s| !s.is_empty())
            .map(String::from)
            .collect();
        let n = wnames.len();
        match self
            .rpc(Body::Twalk {
                fid: 0,
                newfid: fid,
                wnames,
            })
            .await
        {
            Body::Rwalk { wqids } if wqids.len() == n => Ok(fid),
            Body::Rwalk { wqids } => Err(format!("walked {} of {n} names", wqids.len())),
            Body::Rerror { ename } => Err(ename),
            other => panic!("walk {path}: {other:?}"),
        }
    }

    /// Walk to `path` and open it in `mode`.
    pub(super) async fn open(&mut self, path: &str, mode: u8) -> Result<u32, Ename> {
        let fid = self.walk(path).await?;
        match self.rpc(Body::Topen { fid, mode }).await {
            Body::Ropen { .. } => Ok(fid),
            Body::Rerror { ename } => {
                self.clunk(fid).await;
                Err(ename)
            }
            other => panic!("open {path}: {other:?}"),
        }
    }

    /// One read at `offset`.
    pub(super) async fn read_at(&mut self, fid: u32, offset: u64) -> Result<Vec<u8>, Ename> {
        match self
            .rpc(Body::Tread {
                fid,
                offset,
                count: 60000,
            })
            .await
        {
            Body::Rread { data } => Ok(data),
            Body::Rerror { ename } => Err(ename),
            other => panic!("read: {other:?}"),
        }
    }

    /// Reads until a read returns 0 bytes.
    pub(super) async fn read_all(&mut self, fid: u32) -> Result<Vec<u8>, Ename> {
        let mut out = Vec::new();
        loop {
            let data = self.read_at(fid, out.len() as u64).await?;
            if data.is_empty() {
                return Ok(out);
            }
            out.extend_from_slice(&data);
        }
    }

    /// One write at offset 0.
    pub(super) async fn write(&mut self, fid: u32, data: &[u8]) -> Result<u32, Ename> {
        match self
            .rpc(Body::Twrite {
                fid,
                offset: 0,
                data: data.to_vec(),
            })
            .await
        {
            Body::Rwrite { count } => Ok(count),
            Body::Rerror { ename } => Err(ename),
            other => panic!("write: {other:?}"),
        }
    }

    /// Clunk `fid`, which must succeed.
    pub(super) async fn clunk(&mut self, fid: u32) {
        let r = self.rpc(Body::Tclunk { fid }).await;
        assert_eq!(r, Body::Rclunk, "clunk");
    }

    /// The whole content of the file at `path`.
    pub(super) async fn read_file(&mut self, path: &str) -> Result<String, Ename> {
        let fid = self.open(path, OREAD).await?;
        let r = self.read_all(fid).await;
        self.clunk(fid).await;
        Ok(String::from_utf8(r?).expect("UTF-8"))
    }

    /// One write of `data` to the file at `path`.
    pub(super) async fn write_file(&mut self, path: &str, data: &str) -> Result<(), Ename> {
        let fid = self.open(path, OWRITE).await?;
        let r = self.write(fid, data.as_bytes()).await;
        self.clunk(fid).await;
        r.map(|_| ())
    }

    /// A write-then-read file: write `request`, read the whole response.
    pub(super) async fn ask(&mut self, path: &str, request: &str) -> Result<String, Ename> {
        let fid = self.open(path, ORDWR).await?;
        let r = match self.write(fid, request.as_bytes()).await {
            Ok(_) => self.read_all(fid).await,
            Err(e) => Err(e),
        };
        self.clunk(fid).await;
        Ok(String::from_utf8(r?).expect("UTF-8"))
    }

    /// One root `ctl` command.
    pub(super) async fn ctl(&mut self, command: &str) -> Result<(), Ename> {
        self.write_file("ctl", command).await
    }

    /// `load <agent> <tool>`, which must succeed.
    pub(super) async fn load(&mut self, agent: &str, tool: &str) {
        self.ctl(&format!("load {agent} {tool}"))
            .await
            .unwrap_or_else(|e| panic!("load {agent} {tool}: {e}"));
    }

    /// An agent's revision (`tools_rev`).
    pub(super) async fn rev(&mut self, agent: &str) -> u64 {
        let r = self.ask("tools_rev", agent).await.expect("tools_rev");
        r.parse()
            .unwrap_or_else(|_| panic!("a revision, got {r:?}"))
    }

    /// A synchronous call (`proc/new`): the ToolResult.
    pub(super) async fn call(&mut self, fields: &[(&str, &str)]) -> Value {
        let out = self
            .ask("proc/new", &payload(fields))
            .await
            .unwrap_or_else(|e| panic!("proc/new: Rerror {e:?}"));
        serde_json::from_str(&out).unwrap_or_else(|e| panic!("not JSON ({e}): {out}"))
    }

    /// A background call (`proc/new.bg`): the pid, or the `Rerror`.
    pub(super) async fn bg(&mut self, fields: &[(&str, &str)]) -> Result<u64, Ename> {
        let out = self.ask("proc/new.bg", &payload(fields)).await?;
        Ok(out.parse().unwrap_or_else(|_| panic!("a pid, got {out:?}")))
    }

    /// `proc/<pid>/stat` as JSON.
    pub(super) async fn proc_stat(&mut self, pid: u64) -> Result<Value, Ename> {
        let s = self.read_file(&format!("proc/{pid}/stat")).await?;
        Ok(serde_json::from_str(&s).expect("stat JSON"))
    }

    /// Wait for a process to end (`proc/<pid>/wait`): its exit code.
    pub(super) async fn wait(&mut self, pid: u64) -> Result<i64, Ename> {
        let s = self.read_file(&format!("proc/{pid}/wait")).await?;
        Ok(s.trim_end()
            .parse()
            .unwrap_or_else(|_| panic!("an exit code, got {s:?}")))
    }

    /// `stat` of `path`.
    pub(super) async fn stat(&mut self, path: &str) -> Result<Stat, Ename> {
        let fid = self.walk(path).await?;
        let r = self.rpc(Body::Tstat { fid }).await;
        self.clunk(fid).await;
        match r {
            Body::Rstat { stat } => Ok(stat),
            Body::Rerror { ename } => Err(ename),
            other => panic!("stat {path}: {other:?}"),
        }
    }

    /// The entries of the directory at `path`.
    pub(super) async fn list_dir(&mut self, path: &str) -> Result<Vec<Stat>, Ename> {
        let fid = self.open(path, OREAD).await?;
        let data = self.read_all(fid).await;
        self.clunk(fid).await;
        let data = data?;
        let mut stats = Vec::new();
        let mut at = 0;
        while at < data.len() {
            let (s, n) = toolsrv_wire::decode_stat(&data[at..]).expect("a stat entry");
            stats.push(s);
            at += n;
        }
        Ok(stats)
    }

    /// The names in the directory at `path`.
    pub(super) async fn names(&mut self, path: &str) -> Vec<String> {
        let mut v: Vec<String> = self
            .list_dir(path)
            .await
            .unwrap_or_else(|e| panic!("list {path}: {e}"))
            .into_iter()
            .map(|s| s.name)
            .collect();
        v.sort();
        v
    }
}
