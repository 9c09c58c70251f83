//! A throwaway OpenSSH server on loopback for the `remote` bench (generated
//! host and user keys, `sshd -D` on a free port), the same set-up as the
//! remote-deployment tests.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, ensure, Context, Result};

/// Where Debian puts sshd.
pub const SSHD: &str = "/usr/sbin/sshd";

/// A running sshd and its directory (keys, configs, remote home).
pub struct Sshd {
    pub dir: tempfile::TempDir,
    child: Child,
}

fn keygen(path: &Path) -> Result<()> {
    let st = Command::new("ssh-keygen")
        .args(["-q", "-t", "ed25519", "-N", "", "-f"])
        .arg(path)
        .status()
        .context("cannot run ssh-keygen")?;
    ensure!(st.success(), "ssh-keygen failed");
    Ok(())
}

impl Sshd {
    /// Start it; fails when OpenSSH is not installed.
    pub fn start() -> Result<Sshd> {
        if !Path::new(SSHD).exists() {
            bail!("{SSHD} is missing (apt-get install openssh-server)");
        }
        let _ = std::fs::create_dir_all("/run/sshd");
        let dir = tempfile::Builder::new().prefix("tsb").tempdir()?;
        let d = dir.path().to_path_buf();
        keygen(&d.join("hostkey"))?;
        keygen(&d.join("userkey"))?;
        std::fs::copy(d.join("userkey.pub"), d.join("authorized_keys"))?;
        for sub in ["rhome", "rrun", "lrun", "proj"] {
            std::fs::create_dir(d.join(sub))?;
        }
        let port = std::net::TcpListener::bind("127.0.0.1:0")?
            .local_addr()?
            .port();
        std::fs::write(
            d.join("sshd_config"),
            format!(
                "Port {port}\nListenAddress 127.0.0.1\nHostKey {d}/hostkey\nPidFile {d}/sshd.pid\n\
                 AuthorizedKeysFile {d}/authorized_keys\nStrictModes no\nUsePAM no\n\
                 PasswordAuthentication no\nKbdInteractiveAuthentication no\n\
                 PermitRootLogin prohibit-password\nAllowStreamLocalForwarding yes\n\
                 AllowTcpForwarding local\nX11Forwarding no\n",
                d = d.display()
            ),
        )?;
        std::fs::write(
            d.join("ssh_config"),
            format!(
                "Host *\n  HostName 127.0.0.1\n  Port {port}\n  User root\n  IdentityFile {d}/userkey\n  \
                 IdentitiesOnly yes\n  HostKeyAlias toolsrv-bench\n  UserKnownHostsFile {d}/known_hosts\n  \
                 StrictHostKeyChecking yes\n  LogLevel ERROR\n",
                d = d.display()
            ),
        )?;
        let hostkey = std::fs::read_to_string(d.join("hostkey.pub"))?;
        std::fs::write(d.join("known_hosts"), format!("toolsrv-bench {hostkey}"))?;
        let mut child = Command::new(SSHD)
            .arg("-D")
            .arg("-f")
            .arg(d.join("sshd_config"))
            .arg("-E")
            .arg(d.join("sshd.log"))
            .stdin(Stdio::null())
            .spawn()
            .context("cannot start sshd")?;
        let start = Instant::now();
        while start.elapsed() < Duration::from_secs(5) {
            if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
                return Ok(Sshd { dir, child });
            }
            if let Ok(Some(st)) = child.try_wait() {
                bail!("sshd exited ({st})");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = child.kill();
        bail!("sshd did not listen on port {port}")
    }

    /// A path in its directory.
    pub fn path(&self, p: &str) -> PathBuf {
        self.dir.path().join(p)
    }

    /// `toolsrv` (`bin`) with the environment that points it at this sshd.
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
            .env("OLLIE_CFG_PATH", self.path("nocfg"))
            .stdin(Stdio::null());
        c
    }
}

impl Drop for Sshd {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
