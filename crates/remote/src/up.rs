//! `toolsrv remote up`: the supervisor (SSH master) running, this binary on
//! the remote, the configuration sent, the secret pinned, the server running,
//! the local socket forwarded.

use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use toolsrv_client::SshAddress;

use crate::config::{self, SyncReport};
use crate::error::RemoteError;
use crate::install::{self, How, LocalBinary};
use crate::local::{write_private, LocalDir};
use crate::probe::{self, prelude};
use crate::server::{self, Health};
use crate::ssh::Ssh;
use crate::state::{self, RemoteServer, State};
use crate::supervisor;

/// What `up` needs.
#[derive(Debug, Clone)]
pub struct UpOptions {
    /// The remote.
    pub addr: SshAddress,
    /// The configuration directory to send (`None`: send nothing; the remote
    /// server uses the built-in policy and tools).
    pub config: Option<PathBuf>,
    /// The remote server's `--idle-timeout`.
    pub idle_timeout: Duration,
    /// The remote server's `--cwd` (default: [`DEFAULT_WORKSPACE`] in the
    /// remote `$HOME`, created by `up`; never `$HOME` itself).
    pub cwd: Option<String>,
    /// Variables set for every remote command.
    pub env: Vec<(String, String)>,
    /// `-F` for ssh.
    pub ssh_config: Option<PathBuf>,
    /// This binary.
    pub binary: PathBuf,
    /// Its version line (`toolsrv 0.1.0`).
    pub version: String,
    /// This host's (platform, arch), Go's names.
    pub host: (String, String),
}

/// The remote `--cwd` when none is given: this directory in the remote
/// `$HOME`, created (0700) by `up`. Not `$HOME` itself, whose dot files
/// (shell start-up files, `.local/share/toolsrv`, ...) would then lie under
/// the tools' writable `{CWD}`.
pub const DEFAULT_WORKSPACE: &str = "toolsrv-workspace";

/// How the server was left.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ServerOutcome {
    /// It was running and is kept.
    Kept,
    /// Started now.
    Started,
    /// Restarted (binary, secret, configuration layout or flags changed).
    Restarted,
}

/// What `up` did.
#[derive(Debug, Clone)]
pub struct UpReport {
    /// The local forwarded socket.
    pub local_socket: PathBuf,
    /// The remote socket.
    pub remote_socket: String,
    /// The remote binary and its version.
    pub binary: String,
    /// Its version.
    pub version: String,
    /// How the binary was found (`None`: nothing was checked, already up).
    pub how: Option<How>,
    /// The configuration transfer.
    pub sync: SyncReport,
    /// The server.
    pub server: ServerOutcome,
    /// Whether everything was up already and `--if-needed` skipped the work.
    pub skipped: bool,
}

/// Whether something answers on the local socket.
pub fn answers(socket: &std::path::Path) -> bool {
    UnixStream::connect(socket).is_ok()
}

/// With `if_needed`: when the supervisor runs and the forwarded socket
/// answers, return at once.
pub fn up(o: &UpOptions, if_needed: bool) -> Result<UpReport, RemoteError> {
    let dir = LocalDir::for_address(&o.addr)?;
    if if_needed {
        if let (Some(_), Some(st)) = (dir.supervisor(), State::load(&dir).ok().flatten()) {
            if answers(&st.local_socket) {
                return Ok(UpReport {
                    local_socket: st.local_socket,
                    remote_socket: st.remote.socket,
                    binary: st.remote.bin,
                    version: st.remote.version,
                    how: None,
                    sync: SyncReport::default(),
                    server: ServerOutcome::Kept,
                    skipped: true,
                });
            }
        }
    }
    dir.create()?;
    let _lock = dir.lock()?;
    let ssh = Ssh::new(o.addr.clone(), dir.control(), o.ssh_config.clone());
    supervisor::ensure_running(&dir, &ssh, &o.binary)?;
    deploy(o, &dir, &ssh)
}

/// The local secret, generated (32 random bytes, hex, 0600) when missing.
fn local_secret(dir: &LocalDir) -> Result<String, RemoteError> {
    let p = dir.secret();
    match std::fs::read_to_string(&p) {
        Ok(s) if !s.trim().is_empty() => Ok(s.trim().to_string()),
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
            Err(RemoteError::io(format!("cannot read {}", p.display()), e))
        }
        _ => {
            let s = hex::encode(rand::random::<[u8; 32]>());
            write_private(&p, s.as_bytes())?;
            Ok(s)
        }
    }
}

/// Everything after the connection, under the directory's lock.
fn deploy(o: &UpOptions, dir: &LocalDir, ssh: &Ssh) -> Result<UpReport, RemoteError> {
    let pre = prelude(&o.env)?;
    let local = LocalBinary::new(o.binary.clone(), o.version.clone())?;
    let probe = probe::probe(ssh, &pre, &local.install_name())?;
    let bin = install::ensure(
        ssh,
        &pre,
        &probe,
        &local,
        (o.host.0.as_str(), o.host.1.as_str()),
    )?;
    let entries = match &o.config {
        Some(d) => config::manifest(d)?,
        None => Vec::new(),
    };
    let socket = match &o.addr.socket {
        Some(s) => s.clone(),
        None => format!("{}/toolsrv.sock", probe.runtime),
    };
    let workspace = o.cwd.is_none();
    let cwd = o
        .cwd
        .clone()
        .unwrap_or_else(|| format!("{}/{DEFAULT_WORKSPACE}", probe.home.trim_end_matches('/')));
    let inside = |p: &str, dir: &str| p.starts_with(&format!("{}/", dir.trim_end_matches('/')));
    // A socket in the remote state directory is hidden with it anyway.
    if inside(&socket, &cwd) && !inside(&socket, &probe.runtime) {
        return Err(RemoteError::SocketInCwd { socket, cwd });
    }
    let remote = RemoteServer {
        bin: bin.path.clone(),
        version: bin.version.clone(),
        state_dir: format!("{}/server-{}", probe.runtime, socket_key(&socket)),
        config_dir: format!("{}/config/server-{}", probe.data, socket_key(&socket)),
        socket,
        runtime_dir: Some(probe.runtime.clone()),
        cwd,
        idle_timeout_secs: o.idle_timeout.as_secs().max(1),
        env: o.env.clone(),
        layout: config::layout(&entries),
    };
    server::prepare(ssh, &pre, &remote)?;
    if workspace {
        server::workspace(ssh, &pre, &remote.cwd)?;
    }
    let secret_changed = server::write_secret(ssh, &pre, &remote, &local_secret(dir)?)?;
    let sync = config::sync(ssh, &pre, &probe.data, &remote.config_dir, &entries)?;
    let previous = State::load(dir).ok().flatten();
    let same_server = previous.as_ref().is_some_and(|p| p.remote == remote);
    // The record of the server the previous `up` started on this socket.
    let recorded = previous
        .as_ref()
        .filter(|p| p.remote.state_dir == remote.state_dir)
        .and_then(|p| p.process.clone());
    let health = server::health(ssh, &pre, &remote, recorded.as_ref())?;
    let (outcome, process) = match health {
        Health::Running(_) if same_server && !secret_changed => (ServerOutcome::Kept, recorded),
        Health::Running(_) | Health::Stopping => {
            for refused in server::kill(ssh, &pre, &remote, recorded.as_ref())? {
                state::event(dir, &refused);
            }
            let p = server::start(ssh, &pre, &remote)?;
            (ServerOutcome::Restarted, Some(p))
        }
        Health::Exited(_) | Health::Gone => {
            let p = server::start(ssh, &pre, &remote)?;
            (ServerOutcome::Started, Some(p))
        }
    };
    let server_started = match (outcome, &previous) {
        (ServerOutcome::Kept, Some(p)) => p.server_started,
        _ => state::now(),
    };
    let st = State {
        address: o.addr.to_string(),
        ssh_config: o.ssh_config.clone(),
        local_socket: dir.socket(),
        remote: remote.clone(),
        server_started,
        process,
    };
    st.save(dir)?;
    if !answers(&st.local_socket) {
        ssh.forward(&st.local_socket, &remote.socket)?;
        wait_for(&st.local_socket)?;
    }
    state::event(
        dir,
        &format!(
            "up: binary {} ({:?}), {} of {} configuration files sent, server {:?}",
            bin.path, bin.how, sync.sent, sync.files, outcome
        ),
    );
    Ok(UpReport {
        local_socket: st.local_socket,
        remote_socket: remote.socket,
        binary: bin.path,
        version: bin.version,
        how: Some(bin.how),
        sync,
        server: outcome,
        skipped: false,
    })
}

/// The name of a server's state directory: the first 16 hex digits of the
/// SHA-256 of its socket path (one state directory per socket).
fn socket_key(socket: &str) -> String {
    use sha2::{Digest, Sha256};
    hex::encode(Sha256::digest(socket.as_bytes()))[..16].to_string()
}

/// Wait (up to 5 s) for the forwarded socket to answer.
fn wait_for(socket: &std::path::Path) -> Result<(), RemoteError> {
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(5) {
        if answers(socket) {
            return Ok(());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    Err(RemoteError::ForwardSilent(socket.to_path_buf()))
}
