//! docs/policy-format.md, "Protected paths", identity: a server run by an ordinary user runs tools that
//! see its uid and gid (`id -un` is its user, files they make are its), that
//! hold no capability, and a connection from another uid is still refused.
//!
//! This machine runs the tests as root: each test makes a system user of its
//! own (removed afterwards), a temp directory that user owns, a copy of the
//! binary there, and runs the server and its client as that user. Both
//! modes are tested: the server's own user namespace (the default) and the
//! per-run maps of a server kept out of one (`TOOLSRV_USERNS=per-run`, what a
//! host without unprivileged user namespaces gets).

use std::io::{Read, Write};
use std::os::unix::fs::MetadataExt;
use std::os::unix::net::UnixStream;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::util::{toolsrv_bin, wait_until, Launch, Server, WAIT};

/// A system user made for one test, removed on drop.
struct TestUser {
    name: String,
    uid: u32,
    gid: u32,
    /// Made by the test (removed on drop), not an account of the system.
    made: bool,
}

impl TestUser {
    /// Makes the system user `name` (or takes over the one a killed test
    /// left), removed on drop.
    fn create(name: &str) -> TestUser {
        if id_of(name, "-u").is_none() {
            let st = Command::new("useradd")
                .args([
                    "--system",
                    "--no-create-home",
                    "--shell",
                    "/usr/sbin/nologin",
                ])
                .arg(name)
                .status()
                .expect("run useradd");
            assert!(st.success(), "useradd {name}: {st}");
        }
        TestUser {
            name: name.to_string(),
            uid: id_of(name, "-u").expect("uid of the new user"),
            gid: id_of(name, "-g").expect("gid of the new user"),
            made: true,
        }
    }

    /// An account of the system, used as it is and never removed.
    fn existing(name: &str) -> Option<TestUser> {
        Some(TestUser {
            name: name.to_string(),
            uid: id_of(name, "-u")?,
            gid: id_of(name, "-g")?,
            made: false,
        })
    }
}

impl Drop for TestUser {
    fn drop(&mut self) {
        if !self.made {
            return;
        }
        // userdel refuses while a process of the user lives: the server's
        // watchdog may still be tearing down for a moment after the kill.
        wait_until(WAIT, || {
            let _ = Command::new("userdel")
                .arg(&self.name)
                .stderr(Stdio::null())
                .status();
            id_of(&self.name, "-u").is_none()
        });
    }
}

/// `id <flag> <name>` as a number.
fn id_of(name: &str, flag: &str) -> Option<u32> {
    let out = Command::new("id").arg(flag).arg(name).output().ok()?;
    if !out.status.success() {
        return None;
    }
    String::from_utf8_lossy(&out.stdout).trim().parse().ok()
}

/// A policy that also lets tools read `/proc` (for `CapEff`).
const POLICY: &str = r#"filesystem:
  ro: [/etc, /proc, /dev/urandom]
  rox: [/usr, /bin, /sbin, /lib, /lib64]
  rw: [/dev/null]
  rwx: ["{CWD}"]
env: [PATH, HOME]
advanced:
  add_exec: true
"#;

/// A `--no-auth` server run as `user` from a copy of the binary in a temp
/// directory the user owns; its env gets `env`.
struct UserServer {
    dir: tempfile::TempDir,
    bin: PathBuf,
    work: PathBuf,
    server: Server,
}

/// A cgroup v2 directory delegated to a user the way systemd's `Delegate=yes`
/// does (the directory and its `cgroup.procs`, `cgroup.subtree_control` and
/// `cgroup.threads` are the user's); removed on drop once empty.
struct Delegated {
    dir: PathBuf,
}

impl Delegated {
    /// A fresh group in the unified hierarchy, or `None` where there is none.
    fn create(user: &TestUser, name: &str) -> Option<Delegated> {
        let unified = ["/sys/fs/cgroup/unified", "/sys/fs/cgroup"]
            .into_iter()
            .map(Path::new)
            .find(|p| {
                p.join("cgroup.procs").exists() && p.join("cgroup.subtree_control").exists()
            })?;
        let dir = unified.join(name);
        let _ = std::fs::remove_dir(&dir);
        std::fs::create_dir(&dir).expect("make the delegated group");
        for f in [
            "",
            "cgroup.procs",
            "cgroup.subtree_control",
            "cgroup.threads",
        ] {
            std::os::unix::fs::chown(dir.join(f), Some(user.uid), Some(user.gid))
                .expect("delegate the group");
        }
        Some(Delegated { dir })
    }
}

impl Drop for Delegated {
    fn drop(&mut self) {
        // The server's watchdog removes its groups once it is gone.
        wait_until(WAIT, || std::fs::remove_dir(&self.dir).is_ok());
    }
}

fn start_as(user: &TestUser, env: &[(&str, &str)]) -> UserServer {
    start_in(user, env, None, POLICY)
}

/// [`start_as`], the server started in the cgroup `cgroup` when given.
fn start_in(
    user: &TestUser,
    env: &[(&str, &str)],
    cgroup: Option<&Path>,
    policy: &str,
) -> UserServer {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path();
    for sub in ["home", "work", "cfg", "cache"] {
        std::fs::create_dir(root.join(sub)).expect("mkdir");
    }
    let bin = root.join("toolsrv");
    // Copied by another process: a descriptor of ours open for writing would
    // be inherited by children other tests fork meanwhile, and exec of the
    // copy would fail with ETXTBSY until they exec.
    let st = Command::new("install")
        .args(["-m", "0755"])
        .arg(toolsrv_bin())
        .arg(&bin)
        .status()
        .expect("run install");
    assert!(st.success(), "install {}: {st}", bin.display());
    std::fs::write(root.join("sandbox.yaml"), policy).expect("policy");
    for p in [
        root.to_path_buf(),
        root.join("home"),
        root.join("work"),
        root.join("cfg"),
        root.join("cache"),
        bin.clone(),
        root.join("sandbox.yaml"),
    ] {
        std::os::unix::fs::chown(&p, Some(user.uid), Some(user.gid)).expect("chown");
    }
    let (uid, gid) = (user.uid, user.gid);
    let procs = cgroup.map(|d| {
        std::fs::OpenOptions::new()
            .write(true)
            .open(d.join("cgroup.procs"))
            .expect("open the group's cgroup.procs")
    });
    let server = Launch::with_bin(&bin)
        .cwd(&root.join("work"))
        .listen(&root.join("toolsrv.sock"))
        .log(&root.join("server.log"))
        .arg("--no-auth")
        .arg("--sandbox")
        .arg(root.join("sandbox.yaml"))
        .env("HOME", root.join("home"))
        .env("XDG_CACHE_HOME", root.join("cache"))
        .env("OLLIE_CFG_PATH", root.join("cfg"))
        .env("TMPDIR", root.join("home"))
        .envs(env.iter().copied())
        .unconnected()
        .tweak(move |c| {
            c.uid(uid).gid(gid);
            if let Some(procs) = procs {
                use std::os::fd::IntoRawFd;
                let fd = procs.into_raw_fd();
                // Safety: the closure only calls write(2) on a descriptor
                // opened before the fork (close-on-exec: gone at exec).
                unsafe {
                    c.pre_exec(move || {
                        if libc::write(fd, b"0".as_ptr().cast(), 1) == 1 {
                            Ok(())
                        } else {
                            Err(std::io::Error::last_os_error())
                        }
                    });
                }
            }
        })
        .start();
    let work = root.join("work");
    UserServer {
        dir,
        bin,
        work,
        server,
    }
}

impl UserServer {
    /// `toolsrv call shell command=<command>` run as `user`: stdout, and
    /// whether it exited 0. Bounded by [`WAIT`].
    fn call_as(&self, user: &TestUser, command: &str) -> (String, bool) {
        let mut child = Command::new(&self.bin)
            .arg("--socket")
            .arg(&self.server.socket)
            .args(["call", "--no-stream", "shell"])
            .arg(format!("command={command}"))
            .env("HOME", self.dir.path().join("home"))
            .env_remove("TOOLSRV_SECRET")
            .env_remove("TOOLSRV_SOCKET")
            .current_dir(&self.work)
            .uid(user.uid)
            .gid(user.gid)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("run the client as the test user");
        let done = wait_until(WAIT, || matches!(child.try_wait(), Ok(Some(_))));
        if !done {
            let _ = child.kill();
        }
        let status = child.wait().expect("wait for the client");
        let mut out = String::new();
        let mut err = String::new();
        child
            .stdout
            .take()
            .unwrap()
            .read_to_string(&mut out)
            .unwrap();
        child
            .stderr
            .take()
            .unwrap()
            .read_to_string(&mut err)
            .unwrap();
        assert!(
            done,
            "the client did not finish within {WAIT:?}: {out}{err}"
        );
        (format!("{out}{err}"), status.success())
    }
}

/// Whether a connection from this process (root) gets a reply to
/// `Tversion`: the server must close it instead.
fn root_is_served(socket: &Path) -> bool {
    let Ok(mut s) = UnixStream::connect(socket) else {
        return false;
    };
    s.set_read_timeout(Some(WAIT)).unwrap();
    let version = b"9P2000";
    let mut msg = Vec::new();
    let size = 4 + 1 + 2 + 4 + 2 + version.len();
    msg.extend_from_slice(&(size as u32).to_le_bytes());
    msg.push(100); // Tversion
    msg.extend_from_slice(&0xffffu16.to_le_bytes());
    msg.extend_from_slice(&65536u32.to_le_bytes());
    msg.extend_from_slice(&(version.len() as u16).to_le_bytes());
    msg.extend_from_slice(version);
    if s.write_all(&msg).is_err() {
        return false;
    }
    let mut buf = [0u8; 64];
    matches!(s.read(&mut buf), Ok(n) if n > 0)
}

/// The checks both modes must pass.
fn tools_see_their_server_user(user: &TestUser, srv: &UserServer) {
    let (out, ok) = srv.call_as(
        user,
        "id -un; id -u; id -g; touch made; grep CapEff /proc/self/status",
    );
    assert!(ok, "the call failed: {out}");
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(
        lines.first().copied(),
        Some(user.name.as_str()),
        "id -un: {out}"
    );
    assert_eq!(
        lines.get(1).copied(),
        Some(user.uid.to_string().as_str()),
        "id -u: {out}"
    );
    assert_eq!(
        lines.get(2).copied(),
        Some(user.gid.to_string().as_str()),
        "id -g: {out}"
    );
    let capeff = lines
        .iter()
        .find_map(|l| l.strip_prefix("CapEff:"))
        .unwrap_or_else(|| panic!("no CapEff line: {out}"));
    assert_eq!(
        u64::from_str_radix(capeff.trim(), 16),
        Ok(0),
        "a tool holds capabilities: {out}"
    );
    let made = std::fs::metadata(srv.work.join("made")).expect("the tool made a file");
    assert_eq!(
        (made.uid(), made.gid()),
        (user.uid, user.gid),
        "the tool's file is owned by the server's user on the host"
    );
    assert!(
        !root_is_served(&srv.server.socket),
        "a connection from root (another uid) was served"
    );
    srv.server.wait_log("refused connection from another user");
}

#[test]
fn a_non_root_server_runs_tools_as_its_own_user_in_its_own_user_namespace() {
    let user = TestUser::create("tsrv-id-own");
    let srv = start_as(&user, &[]);
    srv.server.wait_log("own-user-namespace");
    tools_see_their_server_user(&user, &srv);
}

#[test]
fn without_its_own_user_namespace_each_run_maps_the_server_user() {
    let user = TestUser::create("tsrv-id-run");
    let srv = start_as(&user, &[("TOOLSRV_USERNS", "per-run")]);
    srv.server.wait_log("per-run-user-namespace");
    srv.server
        .wait_log("a PID namespace and a user namespace per run");
    tools_see_their_server_user(&user, &srv);
}

#[test]
fn a_non_root_server_in_its_own_user_namespace_still_uses_its_delegated_cgroup() {
    // Regression guard for the user namespace: cgroup delegation (the
    // server's writes beneath its own group, CLONE_INTO_CGROUP) works inside it.
    let user = TestUser::create("tsrv-id-cg");
    let Some(group) = Delegated::create(&user, "tsrv-id-cg") else {
        eprintln!("no cgroup v2 hierarchy here: nothing to delegate");
        return;
    };
    let srv = start_in(&user, &[], Some(&group.dir), POLICY);
    srv.server.wait_log("own-user-namespace");
    srv.server.wait_log("mechanism=Cgroup");
    let (out, ok) = srv.call_as(&user, "id -un; cat /proc/self/cgroup");
    assert!(ok, "the call failed: {out}");
    assert_eq!(out.lines().next(), Some(user.name.as_str()), "{out}");
    let v2 = out
        .lines()
        .find_map(|l| l.strip_prefix("0::"))
        .unwrap_or_else(|| panic!("no cgroup v2 line: {out}"));
    assert!(
        v2.starts_with(&format!("/tsrv-id-cg/toolsrv.{}/run.", srv.server.pid())),
        "the tool runs in a group of the server's: {out}"
    );
    drop(srv);
}

#[test]
fn a_server_run_as_the_overflow_user_stays_out_of_a_user_namespace_and_refuses_other_users() {
    // Inside a user namespace every unmapped uid reads as the overflow uid
    // (65534): a server running as that uid could no longer tell its own
    // user's connections from anyone else's. It must stay out, and refuse root.
    let overflow: u32 = std::fs::read_to_string("/proc/sys/kernel/overflowuid")
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(65534);
    let name = String::from_utf8(
        Command::new("id")
            .args(["-nu", &overflow.to_string()])
            .output()
            .expect("run id")
            .stdout,
    )
    .unwrap_or_default();
    let Some(user) = TestUser::existing(name.trim()).filter(|u| u.uid == overflow) else {
        eprintln!("no account has the overflow uid {overflow} here");
        return;
    };
    let srv = start_as(&user, &[]);
    srv.server.wait_log("per-run-user-namespace");
    srv.server.wait_log("overflow uid");
    assert!(
        !root_is_served(&srv.server.socket),
        "a connection from root was served by a server running as the overflow uid"
    );
    srv.server.wait_log("refused connection from another user");
    let (out, ok) = srv.call_as(&user, "id -u");
    assert!(ok, "its own user is served: {out}");
    assert_eq!(out.lines().next(), Some(overflow.to_string().as_str()));
}

/// An HTTP upstream on the host's loopback answering `hello`, and the
/// policy that lists it as `up.test` (pinned to 127.0.0.1).
fn domains_upstream() -> (u16, String) {
    let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = l.local_addr().expect("addr").port();
    std::thread::spawn(move || {
        for c in l.incoming() {
            let Ok(mut c) = c else { continue };
            let _ = c.set_read_timeout(Some(std::time::Duration::from_secs(5)));
            let mut buf = [0u8; 1024];
            let _ = c.read(&mut buf);
            let _ = c.write_all(b"HTTP/1.0 200 OK\r\n\r\nhello-upstream");
        }
    });
    let policy = format!(
        "{POLICY}network:\n  domains: [\"up.test:{port}\"]\n  hosts: {{up.test: 127.0.0.1}}\n"
    );
    (port, policy)
}

/// bash's `/dev/tcp` to `host:port`, `GET /`: a program that ignores the
/// proxy variables.
fn raw_get(host: &str, port: u16) -> String {
    format!(
        "bash -c 'exec 3<>/dev/tcp/{host}/{port} && printf \"GET / HTTP/1.0\\r\\n\\r\\n\" >&3 && cat <&3'"
    )
}

#[test]
fn a_non_root_server_in_its_own_user_namespace_gives_runs_their_own_network() {
    let user = TestUser::create("tsrv-id-net");
    let (port, policy) = domains_upstream();
    let srv = start_in(&user, &[], None, &policy);
    srv.server.wait_log("own-user-namespace");
    srv.server
        .wait_log("each run under network.domains in a network namespace of its own");
    let (out, ok) = srv.call_as(&user, &raw_get("up.test", port));
    assert!(ok && out.contains("hello-upstream"), "{out}");
    let (out, ok) = srv.call_as(&user, &raw_get("127.0.0.1", port));
    assert!(!ok && !out.contains("hello-upstream"), "{out}");
}

#[test]
fn without_its_own_user_namespace_a_non_root_server_uses_the_fallback_and_fails_closed() {
    let user = TestUser::create("tsrv-id-netfb");
    let (port, policy) = domains_upstream();
    let srv = start_in(&user, &[("TOOLSRV_USERNS", "per-run")], None, &policy);
    srv.server.wait_log("per-run-user-namespace");
    srv.server.wait_log("the fallback for network.domains");
    let (out, ok) = srv.call_as(&user, &raw_get("127.0.0.1", port));
    assert!(!ok && !out.contains("hello-upstream"), "{out}");
    let (out, ok) = srv.call_as(&user, "echo \"$HTTP_PROXY\"");
    assert!(ok && out.contains("@127.0.0.1:"), "{out}");
}
