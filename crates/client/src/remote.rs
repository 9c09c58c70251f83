//! `ssh://` addresses in the library: [`Client::connect_address`] brings the
//! remote server up with the `toolsrv` binary (`toolsrv remote up --if-needed
//! --print-socket`, which owns the SSH connection, the forward and recovery)
//! and connects to the local forwarded socket with the secret pinned there.

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::address::{Address, SshAddress};
use crate::auth::Auth;
use crate::client::Client;
use crate::error::ClientError;
use crate::secret;

/// The `toolsrv` binary the library runs for `ssh://` addresses: `$TOOLSRV_BIN`,
/// else `toolsrv` on `$PATH`.
pub const BIN_ENV: &str = "TOOLSRV_BIN";

/// How long requests keep trying to reconnect through a forwarded socket: long
/// enough for the supervisor to re-establish a dropped SSH connection (its
/// backoff starts at 0.2 s) or restart a remote server.
pub const REMOTE_RECONNECT_WINDOW: Duration = Duration::from_secs(30);

impl Client {
    /// Connect to `address`: a local socket path (secret per
    /// [`secret::resolve_secret`]) or `ssh://[user@]host[:port][/remote/socket]`
    /// (the remote server is brought up if needed; the secret is the one
    /// `toolsrv remote up` pinned, and reconnects wait up to
    /// [`REMOTE_RECONNECT_WINDOW`] for recovery).
    pub async fn connect_address(
        address: &Path,
        secret_file: Option<&Path>,
    ) -> Result<Client, ClientError> {
        match Address::parse(address).map_err(|e| ClientError::Auth(e.to_string()))? {
            Address::Local(socket) => {
                let s = secret::resolve_secret(&socket, secret_file)?;
                Client::connect(&socket, Auth::Secret(s)).await
            }
            Address::Ssh(a) => {
                let socket = bring_up(&a).await?;
                let s = secret::socket_secret(&socket)?;
                let c = Client::connect(&socket, Auth::Secret(s)).await?;
                c.set_reconnect_timeout(REMOTE_RECONNECT_WINDOW);
                Ok(c)
            }
        }
    }
}

/// Run `toolsrv remote up --if-needed --print-socket <address>`; its last
/// line of output is the local forwarded socket.
async fn bring_up(a: &SshAddress) -> Result<PathBuf, ClientError> {
    let bin = std::env::var_os(BIN_ENV)
        .filter(|v| !v.is_empty())
        .unwrap_or_else(|| "toolsrv".into());
    let out = tokio::process::Command::new(&bin)
        .args(["remote", "up", "--if-needed", "--print-socket"])
        .arg(a.to_string())
        .stdin(std::process::Stdio::null())
        .kill_on_drop(true)
        .output()
        .await
        .map_err(|e| {
            ClientError::io(
                format!(
                    "cannot run {} (set ${BIN_ENV} to the toolsrv binary)",
                    Path::new(&bin).display()
                ),
                e,
            )
        })?;
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        return Err(ClientError::Io {
            context: format!("cannot bring up {a}: {}", err.trim()),
            source: std::io::Error::other("toolsrv remote up failed"),
        });
    }
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text
        .lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("");
    if line.is_empty() {
        return Err(ClientError::Protocol(format!(
            "toolsrv remote up {a} printed no socket"
        )));
    }
    Ok(PathBuf::from(line.trim()))
}
