//! No door out but the rules: pathname Unix sockets (issue 33).
//!
//! Landlock ABI 7 has no right for `connect(2)` on a pathname socket, and a
//! read-only mount does not stop one. The filesystem view is built from the
//! rules: a socket outside every rule does not exist in it, and one under a
//! read-only rule is masked. Each test listens on a real socket in a thread
//! that records every connection it accepts, and a tool tries to connect.

use std::os::unix::net::UnixListener;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use crate::procs_util::{call, load};
use crate::util::{wait_until, Launch, Raw, Server, WAIT};

/// A listener that counts the connections it accepts, until dropped.
struct Recorder {
    path: PathBuf,
    accepted: Arc<AtomicUsize>,
}

impl Recorder {
    fn bind(path: &Path) -> Recorder {
        let l = UnixListener::bind(path).expect("bind the test listener");
        let accepted = Arc::new(AtomicUsize::new(0));
        let count = accepted.clone();
        std::thread::spawn(move || {
            for c in l.incoming() {
                if c.is_ok() {
                    count.fetch_add(1, Ordering::SeqCst);
                }
            }
        });
        Recorder {
            path: path.to_path_buf(),
            accepted,
        }
    }

    fn accepted(&self) -> usize {
        self.accepted.load(Ordering::SeqCst)
    }
}

impl Drop for Recorder {
    fn drop(&mut self) {
        // Unblocks the accept loop; it ends when the socket file goes too.
        let _ = std::os::unix::net::UnixStream::connect(&self.path);
        let _ = std::fs::remove_file(&self.path);
    }
}

/// A tool's attempt to connect to `sock`: prints `connected` or the error.
fn connect_cmd(sock: &Path) -> String {
    format!(
        "/usr/bin/python3 -c 'import socket,sys\ns=socket.socket(socket.AF_UNIX)\ntry:\n  s.connect(sys.argv[1]); print(\"connected\")\nexcept OSError as e: print(\"refused:\", e)' '{}'",
        sock.display()
    )
}

fn tmp() -> (tempfile::TempDir, PathBuf) {
    let d = tempfile::tempdir().expect("tempdir");
    let p = std::fs::canonicalize(d.path()).expect("canonical");
    (d, p)
}

fn shell(srv: &Server) -> Raw {
    let mut c = srv.attached();
    load(&mut c, "a1", "shell");
    c
}

fn sh(c: &mut Raw, cmd: &str) -> String {
    let r = call(c, &[("tool", "shell"), ("agent", "a1"), ("command", cmd)]);
    r["content"][0]["text"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

/// Attack (issue 33, high): a socket outside every rule (an ssh-agent in
/// `$XDG_RUNTIME_DIR`, a session bus, `docker.sock`): the built-in policy
/// names no such directory, but on 8877a1f the view started from the
/// host's tree and a tool connected to any socket it could name.
///
/// Expected: the tool's connect fails and the listener accepts nothing.
#[test]
fn a_socket_outside_every_rule_is_unreachable() {
    let (_d, dir) = tmp();
    let rec = Recorder::bind(&dir.join("agent.sock"));
    let srv = Launch::new().arg("--no-auth").start();
    let mut c = shell(&srv);
    let text = sh(&mut c, &connect_cmd(&rec.path));
    assert!(
        text.contains("refused:") && !text.contains("connected"),
        "{text}"
    );
    assert_eq!(rec.accepted(), 0, "the tool reached the socket: {text}");
}

/// Attack (issue 33, high): a socket under a read-only rule: the rule lets
/// tools read the directory, and a read-only mount does not stop
/// `connect(2)`. Also one bound there after the server started.
///
/// Expected: neither is reachable (the first at once, the later one within
/// the rescan's bound), and nothing else in the directory is lost: its
/// files stay readable.
#[test]
fn a_socket_under_a_read_only_rule_is_masked_also_when_it_appears_later() {
    let (_d, dir) = tmp();
    std::fs::write(dir.join("notes.txt"), "readable\n").expect("notes");
    let first = Recorder::bind(&dir.join("bus.sock"));
    let (_p, pdir) = tmp();
    let policy = pdir.join("sandbox.yaml");
    let rules = serde_json::json!({
        "filesystem": {
            "ro": ["/etc", dir.display().to_string()],
            "rox": ["/usr", "/bin", "/sbin", "/lib", "/lib64"],
            "rw": ["/dev/null"],
            "rwx": ["{CWD}"],
        },
        "advanced": {"add_exec": true},
    });
    std::fs::write(&policy, rules.to_string()).expect("policy");
    let srv = Launch::new()
        .args(["--no-auth", "--sandbox", &policy.display().to_string()])
        .start();
    let mut c = shell(&srv);
    let notes = dir.join("notes.txt").display().to_string();
    assert_eq!(sh(&mut c, &format!("cat '{notes}'")), "readable\n");
    let text = sh(&mut c, &connect_cmd(&first.path));
    assert!(!text.contains("connected"), "{text}");
    assert_eq!(first.accepted(), 0, "{text}");
    let later = Recorder::bind(&dir.join("later.sock"));
    let masked = wait_until(WAIT, || {
        sh(&mut c, &connect_cmd(&later.path)).contains("refused:")
    });
    assert!(
        masked,
        "a socket bound later under a read-only rule stayed reachable"
    );
    let before = later.accepted();
    let text = sh(&mut c, &connect_cmd(&later.path));
    assert!(text.contains("refused:"), "{text}");
    assert_eq!(later.accepted(), before, "{text}");
}

/// Control: a socket a tool makes in its workspace works, for the tool and
/// for another run.
#[test]
fn a_socket_a_tool_makes_in_its_workspace_works() {
    let srv = Launch::new().arg("--no-auth").start();
    let mut c = shell(&srv);
    let script = "/usr/bin/python3 -c 'import socket,os\nl=socket.socket(socket.AF_UNIX); l.bind(\"own.sock\"); l.listen(1)\nc=socket.socket(socket.AF_UNIX); c.connect(\"own.sock\"); a,_=l.accept(); c.send(b\"hi\"); print(a.recv(2).decode())'";
    assert_eq!(sh(&mut c, script), "hi\n");
    assert!(srv.cwd().join("own.sock").exists());
}
