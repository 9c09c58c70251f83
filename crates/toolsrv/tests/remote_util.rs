//! A real OpenSSH server on loopback for the remote-deployment tests: a
//! generated host key and user key in a temp directory, `sshd -D -f <config>`
//! on a free port, an `ssh_config` for the client (passed to toolsrv as
//! `$TOOLSRV_SSH_CONFIG`), and a remote "home" and runtime directory of its own.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use crate::util::bin;

/// Where Debian puts sshd.
const SSHD: &str = "/usr/sbin/sshd";

/// One sshd and the directories of one test.
pub struct Sshd {
    pub dir: tempfile::TempDir,
    pub port: u16,
    child: Option<Child>,
}

fn keygen(path: &Path) {
    let st = Command::new("ssh-keygen")
        .args(["-q", "-t", "ed25519", "-N", "", "-f"])
        .arg(path)
        .status()
        .expect("ssh-keygen");
    assert!(st.success());
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .expect("bind")
        .local_addr()
        .expect("addr")
        .port()
}

impl Sshd {
    /// Start sshd, or `None` (with a note) when OpenSSH is not installed
    /// (`.ci/run` installs it).
    pub fn start() -> Option<Sshd> {
        if !Path::new(SSHD).exists() {
            eprintln!("skipped: {SSHD} is missing (apt-get install openssh-server)");
            return None;
        }
        // sshd's privilege separation directory.
        let _ = std::fs::create_dir_all("/run/sshd");
        let dir = tempfile::Builder::new()
            .prefix("tsr")
            .tempdir()
            .expect("tempdir");
        let d = dir.path();
        keygen(&d.join("hostkey"));
        keygen(&d.join("userkey"));
        std::fs::copy(d.join("userkey.pub"), d.join("authorized_keys")).expect("copy");
        for sub in ["rhome", "rrun", "lrun", "proj", "lcfg"] {
            std::fs::create_dir(d.join(sub)).expect("mkdir");
        }
        let mut last = String::new();
        for _ in 0..5 {
            let port = free_port();
            std::fs::write(
                d.join("sshd_config"),
                format!(
                    "Port {port}\nListenAddress 127.0.0.1\nHostKey {d}/hostkey\nPidFile {d}/sshd.pid\n\
                     AuthorizedKeysFile {d}/authorized_keys\nStrictModes no\nUsePAM no\n\
                     PasswordAuthentication no\nKbdInteractiveAuthentication no\n\
                     PermitRootLogin prohibit-password\nAllowStreamLocalForwarding yes\n\
                     AllowTcpForwarding local\nX11Forwarding no\nLogLevel VERBOSE\n",
                    d = d.display()
                ),
            )
            .expect("sshd_config");
            std::fs::write(
                d.join("ssh_config"),
                format!(
                    "Host *\n  HostName 127.0.0.1\n  Port {port}\n  User root\n  IdentityFile {d}/userkey\n  \
                     IdentitiesOnly yes\n  HostKeyAlias toolsrv-test\n  UserKnownHostsFile {d}/known_hosts\n  \
                     StrictHostKeyChecking yes\n  LogLevel ERROR\n",
                    d = d.display()
                ),
            )
            .expect("ssh_config");
            let hostkey = std::fs::read_to_string(d.join("hostkey.pub")).expect("hostkey");
            std::fs::write(d.join("known_hosts"), format!("toolsrv-test {hostkey}"))
                .expect("known_hosts");
            let mut child = Command::new(SSHD)
                .arg("-D")
                .arg("-f")
                .arg(d.join("sshd_config"))
                .arg("-E")
                .arg(d.join("sshd.log"))
                .stdin(Stdio::null())
                .spawn()
                .expect("spawn sshd");
            let start = Instant::now();
            while start.elapsed() < Duration::from_secs(5) {
                if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
                    return Some(Sshd {
                        dir,
                        port,
                        child: Some(child),
                    });
                }
                if let Ok(Some(_)) = child.try_wait() {
                    break;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            let _ = child.kill();
            let _ = child.wait();
            last = std::fs::read_to_string(d.join("sshd.log")).unwrap_or_default();
        }
        panic!("sshd did not start: {last}");
    }

    pub fn path(&self, p: &str) -> PathBuf {
        self.dir.path().join(p)
    }

    /// `toolsrv` with this test's environment: ssh config, local runtime
    /// directory, remote HOME and XDG_RUNTIME_DIR, remote --cwd, local config.
    pub fn toolsrv(&self) -> Command {
        let mut c = Command::new(bin());
        c.env("TOOLSRV_SSH_CONFIG", self.path("ssh_config"))
            .env("XDG_RUNTIME_DIR", self.path("lrun"))
            .env(
                "TOOLSRV_REMOTE_ENV",
                format!(
                    "HOME={} XDG_RUNTIME_DIR={}",
                    self.path("rhome").display(),
                    self.path("rrun").display()
                ),
            )
            .env("TOOLSRV_REMOTE_CWD", self.path("proj"))
            .env("OLLIE_CFG_PATH", self.path("lcfg"))
            .env_remove("TOOLSRV_SOCKET")
            .env_remove("TOOLSRV_SECRET")
            .stdin(Stdio::null());
        c
    }

    /// Run toolsrv with `args`; its output.
    pub fn run(&self, args: &[&str]) -> Output {
        self.toolsrv().args(args).output().expect("run toolsrv")
    }

    /// Run toolsrv with `args`, which must succeed; its stdout.
    pub fn ok(&self, args: &[&str]) -> String {
        let out = self.run(args);
        assert!(
            out.status.success(),
            "toolsrv {args:?} failed: {}\n{}\nsupervisor log:\n{}",
            out.status,
            String::from_utf8_lossy(&out.stderr),
            self.supervisor_log()
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// `ssh <host> <command>` with the test's config.
    pub fn ssh(&self, command: &str) -> Output {
        Command::new("ssh")
            .arg("-F")
            .arg(self.path("ssh_config"))
            .arg("localhost")
            .arg(command)
            .stdin(Stdio::null())
            .output()
            .expect("ssh")
    }

    /// The local per-address directory of `ssh://localhost`.
    pub fn local_dir(&self) -> Option<PathBuf> {
        let base = self.path("lrun/toolsrv/remote");
        std::fs::read_dir(base)
            .ok()?
            .flatten()
            .map(|e| e.path())
            .find(|p| p.is_dir())
    }

    pub fn supervisor_log(&self) -> String {
        self.local_dir()
            .and_then(|d| std::fs::read_to_string(d.join("supervisor.log")).ok())
            .unwrap_or_default()
    }

    /// The remote server's state directory (default socket).
    pub fn remote_state(&self) -> PathBuf {
        self.path("rrun/toolsrv/toolsrv.sock.d")
    }

    /// Live processes whose command line mentions this test's directory
    /// (sshd itself excluded).
    pub fn processes(&self) -> Vec<String> {
        let marker = self.dir.path().to_string_lossy().into_owned();
        let mut out = Vec::new();
        for e in std::fs::read_dir("/proc").expect("/proc").flatten() {
            let name = e.file_name();
            let Some(pid) = name.to_str().and_then(|n| n.parse::<u32>().ok()) else {
                continue;
            };
            let Ok(cmd) = std::fs::read(format!("/proc/{pid}/cmdline")) else {
                continue;
            };
            let cmd = String::from_utf8_lossy(&cmd).replace('\0', " ");
            if cmd.contains(&marker) && !cmd.contains("sshd") {
                out.push(format!("{pid}: {cmd}"));
            }
        }
        out
    }

    /// Sockets left anywhere under this test's directory.
    pub fn sockets(&self) -> Vec<PathBuf> {
        fn walk(p: &Path, out: &mut Vec<PathBuf>) {
            use std::os::unix::fs::FileTypeExt;
            let Ok(rd) = std::fs::read_dir(p) else { return };
            for e in rd.flatten() {
                let Ok(t) = e.file_type() else { continue };
                if t.is_dir() {
                    walk(&e.path(), out);
                } else if t.is_socket() {
                    out.push(e.path());
                }
            }
        }
        let mut out = Vec::new();
        walk(self.dir.path(), &mut out);
        out
    }
}

impl Drop for Sshd {
    fn drop(&mut self) {
        // Whatever a failed test left: bring the remote down, then sshd.
        if self.local_dir().is_some() {
            let _ = self.run(&["remote", "down", "localhost"]);
        }
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// Poll until `cond` holds (true) or `limit` passes (false).
pub fn within(limit: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let start = Instant::now();
    while start.elapsed() < limit {
        if cond() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    cond()
}
