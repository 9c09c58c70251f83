//! Which server the client commands talk to (`--socket`, `$TOOLSRV_SOCKET`; a
//! local socket or an `ssh://` address), and connecting to it with the right
//! secret (docs/cli.md, "The client").

use std::path::PathBuf;

use anyhow::{anyhow, Context, Result};
use toolsrv_client::{Auth, Client};

use crate::cli::Global;

/// The socket or `ssh://` address: `--socket`, else `$TOOLSRV_SOCKET`.
pub(crate) fn socket_path(global: &Global) -> Result<PathBuf> {
    global
        .socket
        .clone()
        .or_else(|| {
            std::env::var_os("TOOLSRV_SOCKET")
                .filter(|v| !v.is_empty())
                .map(PathBuf::from)
        })
        .ok_or_else(|| anyhow!("no socket: pass --socket PATH or set TOOLSRV_SOCKET"))
}

/// Whether the socket is an `ssh://` address.
pub fn is_remote(global: &Global) -> bool {
    socket_path(global).is_ok_and(|s| {
        s.to_str()
            .is_some_and(|t| t.starts_with(toolsrv_client::address::SSH_SCHEME))
    })
}

/// A client of the server at [`socket_path`]: an `ssh://` one brought up if
/// needed; a local one authenticated with the resolved secret, or without one
/// when no secret exists yet and the server takes an unauthenticated attach.
pub(crate) async fn connect(global: &Global) -> Result<Client> {
    let socket = socket_path(global)?;
    if let toolsrv_client::Address::Ssh(a) = toolsrv_client::Address::parse(&socket)? {
        // Brought up if needed; the secret is the one pinned on the remote.
        let local = crate::remote_cmd::ensure_up(&a)?;
        let secret = toolsrv_client::secret::socket_secret(&local)?;
        let c = Client::connect(&local, Auth::Secret(secret))
            .await
            .with_context(|| format!("cannot connect to {a} through {}", local.display()))?;
        c.set_reconnect_timeout(toolsrv_client::remote::REMOTE_RECONNECT_WINDOW);
        return Ok(c);
    }
    let has_secret = toolsrv_client::secret::has_secret(&socket, global.secret_file.as_deref());
    if !has_secret {
        // First use: make a secret only for a server that is there and wants
        // one (a `--no-auth` server takes an unauthenticated attach).
        if let Err(e) = std::os::unix::net::UnixStream::connect(&socket) {
            return Err(no_server(&socket, e));
        }
        if let Ok(c) = Client::connect(&socket, Auth::None).await {
            return Ok(c);
        }
    }
    let secret = toolsrv_client::secret::resolve_secret(&socket, global.secret_file.as_deref())?;
    Client::connect(&socket, Auth::Secret(secret))
        .await
        .map_err(|e| match e {
            toolsrv_client::ClientError::Io { source, .. } => no_server(&socket, source),
            toolsrv_client::ClientError::Auth(m) if m == "authentication failed" => {
                anyhow!("{m}: {}", secret_source(global, &socket))
            }
            e => e.into(),
        })
}

/// Where the refused secret came from, in the order the client looks
/// (`$TOOLSRV_SECRET`, `--secret-file`, an existing `<socket>.secret`, the
/// per-user directory's file), and what to do.
fn secret_source(global: &Global, socket: &std::path::Path) -> String {
    let env = toolsrv_client::secret::SECRET_ENV;
    let default = toolsrv_client::secret::secret_file_path(socket);
    if std::env::var_os(env).is_some_and(|v| !v.is_empty()) {
        return format!(
            "the server at {} has another secret than the one in ${env} (set in this environment, it overrides --secret-file and {}): unset ${env}, or set it to the server's secret",
            socket.display(),
            default.display()
        );
    }
    match &global.secret_file {
        Some(f) => format!(
            "the server at {} has another secret than the one in {} (--secret-file)",
            socket.display(),
            f.display()
        ),
        None => format!(
            "the server at {} has another secret than the one in {} (it keeps the first secret a client sends, or the one of its own --secret-file; a client run with another $XDG_RUNTIME_DIR or $HOME keeps its secret in another file): pass the file of the server's secret with --secret-file, or restart the server",
            socket.display(),
            default.display()
        ),
    }
}

/// The error for a socket nobody answers on, with what to do about it.
fn no_server(socket: &std::path::Path, e: std::io::Error) -> anyhow::Error {
    let hint = match e.kind() {
        std::io::ErrorKind::NotFound | std::io::ErrorKind::ConnectionRefused => format!(
            " (is the server running? start it with `toolsrv serve --listen {}`)",
            socket.display()
        ),
        _ => String::new(),
    };
    anyhow!("cannot connect to {}: {e}{hint}", socket.display())
}
