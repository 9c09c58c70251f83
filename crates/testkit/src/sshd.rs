//! A throwaway OpenSSH server on loopback: generated host and user keys in a
//! temp directory, `sshd -D -f <config>` on a free port, an `ssh_config` for
//! the client (given to toolsrv as `$TOOLSRV_SSH_CONFIG`), and a remote home
//! and runtime directory of its own.

use std::io;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Where Debian puts sshd.
pub const SSHD: &str = "/usr/sbin/sshd";

/// How many free ports are tried (another process may take one first).
const ATTEMPTS: usize = 5;

/// One running sshd and its directory: `hostkey`, `userkey`,
/// `sshd_config`, `ssh_config`, `sshd.log`, and the directories `rhome`
/// (remote HOME), `rrun` (remote runtime dir), `lrun` (local runtime dir),
/// `proj` (remote cwd) and `lcfg` (local config).
pub struct Sshd {
    /// The directory.
    pub dir: tempfile::TempDir,
    /// The port it listens on (127.0.0.1).
    pub port: u16,
    child: Option<Child>,
}

fn keygen(path: &Path) -> io::Result<()> {
    let st = Command::new("ssh-keygen")
        .args(["-q", "-t", "ed25519", "-N", "", "-f"])
        .arg(path)
        .status()
        .map_err(|e| io::Error::new(e.kind(), format!("cannot run ssh-keygen: {e}")))?;
    if st.success() {
        Ok(())
    } else {
        Err(io::Error::other(format!("ssh-keygen failed: {st}")))
    }
}

fn free_port() -> io::Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port())
}

impl Sshd {
    /// Whether OpenSSH's server is installed (`.ci/run` installs it).
    pub fn available() -> bool {
        Path::new(SSHD).exists()
    }

    /// Start sshd; an error when it is not installed or does not listen.
    pub fn start() -> io::Result<Sshd> {
        if !Sshd::available() {
            return Err(io::Error::new(
                io::ErrorKind::NotFound,
                format!("{SSHD} is missing (apt-get install openssh-server)"),
            ));
        }
        // sshd's privilege separation directory.
        let _ = std::fs::create_dir_all("/run/sshd");
        let dir = tempfile::Builder::new().prefix("tsr").tempdir()?;
        let d = dir.path();
        keygen(&d.join("hostkey"))?;
        keygen(&d.join("userkey"))?;
        std::fs::copy(d.join("userkey.pub"), d.join("authorized_keys"))?;
        for sub in ["rhome", "rrun", "lrun", "proj", "lcfg"] {
            std::fs::create_dir(d.join(sub))?;
        }
        let hostkey = std::fs::read_to_string(d.join("hostkey.pub"))?;
        std::fs::write(d.join("known_hosts"), format!("toolsrv-test {hostkey}"))?;
        let mut last = String::new();
        for _ in 0..ATTEMPTS {
            let port = free_port()?;
            write_configs(d, port)?;
            let mut child = Command::new(SSHD)
                .arg("-D")
                .arg("-f")
                .arg(d.join("sshd_config"))
                .arg("-E")
                .arg(d.join("sshd.log"))
                .stdin(Stdio::null())
                .spawn()
                .map_err(|e| io::Error::new(e.kind(), format!("cannot start {SSHD}: {e}")))?;
            let start = Instant::now();
            while start.elapsed() < Duration::from_secs(5) {
                if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
                    return Ok(Sshd {
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
        Err(io::Error::other(format!("sshd did not start: {last}")))
    }

    /// A path in its directory.
    pub fn path(&self, p: &str) -> PathBuf {
        self.dir.path().join(p)
    }

    /// `bin` (a `toolsrv`) with the environment that points it at this
    /// sshd: ssh config, local runtime directory, remote HOME and
    /// XDG_RUNTIME_DIR, remote `--cwd`, local config; no socket or secret
    /// from the caller's environment.
    pub fn toolsrv(&self, bin: &Path) -> Command {
        let mut c = Command::new(bin);
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
}

/// The server's and the client's configuration for `port`.
fn write_configs(d: &Path, port: u16) -> io::Result<()> {
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
    )?;
    std::fs::write(
        d.join("ssh_config"),
        format!(
            "Host *\n  HostName 127.0.0.1\n  Port {port}\n  User root\n  IdentityFile {d}/userkey\n  \
             IdentitiesOnly yes\n  HostKeyAlias toolsrv-test\n  UserKnownHostsFile {d}/known_hosts\n  \
             StrictHostKeyChecking yes\n  LogLevel ERROR\n",
            d = d.display()
        ),
    )
}

impl Drop for Sshd {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}
