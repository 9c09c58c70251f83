//! The system's OpenSSH, driven through one multiplexed connection per host:
//! a master (`ssh -M -N`, owned by the supervisor) and short-lived clients
//! that ride on its control socket (`-S`): remote commands, `-O check`,
//! `-O forward`, `-O exit`. Users' keys, agents, `~/.ssh/config` and
//! ProxyJump apply as they do for any ssh.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use toolsrv_client::SshAddress;

use crate::error::RemoteError;
use crate::quote;

/// The ssh client configuration file to use instead of `~/.ssh/config`
/// (passed as `-F`), e.g. for tests.
pub const SSH_CONFIG_ENV: &str = "TOOLSRV_SSH_CONFIG";

/// Scripts longer than this go to `sh -s` on standard input (see [`Ssh::run`]).
const MAX_ARG_SCRIPT: usize = 64 * 1024;

/// What a remote command reads on its standard input.
pub enum Input<'a> {
    /// Nothing (`/dev/null`).
    None,
    /// These bytes.
    Bytes(&'a [u8]),
    /// This local file's content.
    File(&'a Path),
}

/// How to reach one host.
#[derive(Debug, Clone)]
pub struct Ssh {
    addr: SshAddress,
    control: PathBuf,
    config: Option<PathBuf>,
}

/// ssh expands `%` tokens in control paths: write a literal `%` as `%%`.
fn escape_percent(p: &Path) -> String {
    p.to_string_lossy().replace('%', "%%")
}

/// Where the master binds its control socket, as it names it: its standard
/// input is the socket's directory ([`Ssh::master`]).
pub(crate) const HIDDEN_CONTROL_DIR: &str = "/proc/self/fd/0";

impl Ssh {
    /// `addr` through the control socket `control`, with `config` as `-F`.
    pub fn new(addr: SshAddress, control: PathBuf, config: Option<PathBuf>) -> Ssh {
        Ssh {
            addr,
            control,
            config,
        }
    }

    /// The address.
    pub fn address(&self) -> &SshAddress {
        &self.addr
    }

    /// `ssh [-F cfg] -S ctl [-p port] [-l user]` with `extra` options.
    fn base(&self, extra: &[&str]) -> Command {
        self.with_control(&self.control, extra)
    }

    /// [`Ssh::base`] with the control socket given as `control`.
    fn with_control(&self, control: &Path, extra: &[&str]) -> Command {
        let mut c = Command::new("ssh");
        if let Some(f) = &self.config {
            c.arg("-F").arg(f);
        }
        c.arg("-S").arg(escape_percent(control));
        if let Some(p) = self.addr.port {
            c.arg("-p").arg(p.to_string());
        }
        if let Some(u) = &self.addr.user {
            c.arg("-l").arg(u);
        }
        c.args(extra);
        c
    }

    /// The master connection: no command, no terminal, nothing on TCP
    /// (forwards are Unix sockets added with [`Ssh::forward`]). It exits
    /// when the connection drops (keep-alives notice a dead peer in ~15 s).
    ///
    /// Its standard input is the control socket's directory, and it binds
    /// its control socket as `/proc/self/fd/0/<name>`: the address the kernel
    /// reports for the listening socket (`ss -x`, `unix_diag`, open to any
    /// process, sandboxed tools included) is that path, which names nothing
    /// outside the master, so the socket's directory (whose random name
    /// keeps it unknown to tools, [`crate::local::LocalDir::control`])
    /// appears nowhere a tool can read.
    pub fn master(&self) -> Result<Command, RemoteError> {
        let (Some(dir), Some(name)) = (self.control.parent(), self.control.file_name()) else {
            return Err(RemoteError::NotControlSocket(self.control.clone()));
        };
        let dir_fd = std::fs::File::open(dir)
            .map_err(|e| RemoteError::io(format!("cannot open {}", dir.display()), e))?;
        let hidden = Path::new(HIDDEN_CONTROL_DIR).join(name);
        let mut c = self.with_control(
            &hidden,
            &[
                "-M",
                "-N",
                "-T",
                "-o",
                "ControlPersist=no",
                "-o",
                "BatchMode=yes",
                "-o",
                "ConnectTimeout=10",
                "-o",
                "ServerAliveInterval=5",
                "-o",
                "ServerAliveCountMax=3",
                "-o",
                "ExitOnForwardFailure=yes",
                "-o",
                "StreamLocalBindUnlink=yes",
                "-o",
                "StreamLocalBindMask=0177",
                "-o",
                "ClearAllForwardings=yes",
            ],
        );
        c.arg("--").arg(&self.addr.host);
        c.stdin(dir_fd);
        Ok(c)
    }

    /// A control command (`-O check`, `-O exit`, `-O forward`).
    fn control(&self, op: &str, extra: &[&str]) -> Command {
        let mut c = self.base(&["-O", op]);
        c.args(extra);
        c.arg("--").arg(&self.addr.host);
        c.stdin(Stdio::null());
        c
    }

    /// Whether the master answers on the control socket.
    pub fn check(&self) -> bool {
        self.control("check", &[])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    }

    /// Ask the master to exit (its forwards close with it).
    pub fn exit(&self) {
        let _ = self
            .control("exit", &[])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
    }

    /// Forward the local socket `local` (created 0600 by the master, a stale
    /// file replaced) to the remote socket `remote`.
    pub fn forward(&self, local: &Path, remote: &str) -> Result<(), RemoteError> {
        let l = local.to_string_lossy();
        if l.contains(':') || remote.contains(':') {
            return Err(RemoteError::ColonInSocket {
                local: l.into_owned(),
                remote: remote.to_string(),
            });
        }
        let spec = format!("{l}:{remote}");
        let out = self
            .control("forward", &["-L", &spec])
            .output()
            .map_err(|e| RemoteError::io("cannot run ssh", e))?;
        if !out.status.success() {
            return Err(RemoteError::Forward {
                spec,
                stderr: String::from_utf8_lossy(&out.stderr).trim().to_string(),
            });
        }
        Ok(())
    }

    /// Run `script` with the remote user's `sh` over the master connection;
    /// its standard output on success. The script travels as one quoted word
    /// (the remote login shell, whatever it is, hands it to `sh -c`).
    ///
    /// A script too long for one remote argument (Linux caps one at 128 KiB;
    /// a large configuration's update script can pass that) is read by
    /// `sh -s` from standard input instead, when that is free.
    pub fn run(&self, script: &str, input: Input<'_>) -> Result<String, RemoteError> {
        let mut c = self.base(&["-T", "-o", "ControlMaster=no", "-o", "BatchMode=yes"]);
        c.arg("--").arg(&self.addr.host);
        let input = match input {
            Input::None if script.len() > MAX_ARG_SCRIPT => {
                c.arg("sh -s");
                Input::Bytes(script.as_bytes())
            }
            other => {
                c.arg(format!("sh -c {}", quote::sh(script)));
                other
            }
        };
        c.stdout(Stdio::piped()).stderr(Stdio::piped());
        let out = match input {
            Input::None => c
                .stdin(Stdio::null())
                .output()
                .map_err(|e| RemoteError::io("cannot run ssh", e))?,
            Input::File(f) => {
                let file = std::fs::File::open(f)
                    .map_err(|e| RemoteError::io(format!("cannot open {}", f.display()), e))?;
                c.stdin(file)
                    .output()
                    .map_err(|e| RemoteError::io("cannot run ssh", e))?
            }
            Input::Bytes(b) => {
                let mut child = c
                    .stdin(Stdio::piped())
                    .spawn()
                    .map_err(|e| RemoteError::io("cannot run ssh", e))?;
                if let Some(mut stdin) = child.stdin.take() {
                    // Written from a thread: a long script may fill the pipe
                    // before ssh reads it, while we must also read its output.
                    let data = b.to_vec();
                    std::thread::spawn(move || {
                        let _ = stdin.write_all(&data);
                    });
                }
                child
                    .wait_with_output()
                    .map_err(|e| RemoteError::io("cannot run ssh", e))?
            }
        };
        if !out.status.success() {
            let address = self.addr.to_string();
            let stderr = String::from_utf8_lossy(&out.stderr).trim().to_string();
            return Err(match out.status.code() {
                Some(255) => RemoteError::Ssh { address, stderr },
                _ => RemoteError::RemoteCommand { address, stderr },
            });
        }
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }
}
