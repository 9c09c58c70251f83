//! `toolsrv serve`: turn the flags into a [`Config`], set up logging, and
//! hand over to the [`Daemon`]; any error before serving exits 1.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{bail, Result};
use toolsrv_server::{Config, Daemon};

use crate::cli::ServeArgs;
use crate::logwriter::{self, say};
use crate::paths::{self, expand_tilde, Kind};

/// How to get the built-in tools instead of a missing `--tools` directory.
const TOOLS_DEFAULT: &str = "to serve the built-in tools";
/// How to get the built-in policy instead of a missing `--sandbox` file.
const POLICY_DEFAULT: &str = "to use the built-in policy; `toolsrv init` writes it out";

/// Run the daemon; configuration errors found at startup exit 1.
pub fn main(args: ServeArgs, secret_file: Option<PathBuf>) -> ExitCode {
    let config = match resolve(args, secret_file) {
        Ok(c) => c,
        Err(e) => {
            say!("toolsrv: {e:#}");
            return ExitCode::from(1);
        }
    };
    if let Err(e) = logwriter::init(config.log.as_deref()) {
        say!("toolsrv: {e:#}");
        return ExitCode::from(1);
    }
    let logs_to_file = config.log.is_some();
    // Safety: single-threaded: nothing before this in `main` starts a thread
    // (logging writes from the calling thread).
    match unsafe { Daemon::prepare(config) } {
        Ok(daemon) => {
            daemon.serve();
            ExitCode::SUCCESS
        }
        Err(e) => {
            let e = anyhow::Error::from(e);
            // Said once: on stderr, and in the log file when there is one.
            if logs_to_file {
                tracing::error!("{e:#}");
            }
            say!("toolsrv: {e:#}");
            ExitCode::from(1)
        }
    }
}

/// Turn flags into a validated [`Config`].
fn resolve(a: ServeArgs, secret_file: Option<PathBuf>) -> Result<Config> {
    let cwd = paths::working_dir(a.cwd.as_deref())?;
    let listen = expand_tilde(&a.listen);
    if listen.as_os_str().is_empty() {
        bail!("--listen: empty socket path");
    }
    // A path the user typed must exist; only the default locations fall back
    // to the built-in tools and policy.
    let tools_dir = match a.tools {
        Some(p) => paths::given(&p, "--tools", Kind::Directory, TOOLS_DEFAULT)?,
        None => paths::default_tools_dir(),
    };
    let sandbox = match a.sandbox {
        Some(p) => paths::given(&p, "--sandbox", Kind::File, POLICY_DEFAULT)?,
        None => paths::config_dir().join("sandbox.yaml"),
    };
    let mut c = Config::new(listen, cwd, tools_dir, sandbox);
    c.yolo = a.yolo;
    c.no_auth = a.no_auth;
    c.idle_timeout = a.idle_timeout;
    c.idle_grace = a.idle_grace;
    c.ollie = a.ollie.map(|p| expand_tilde(&p)).or_else(|| {
        let ns = std::env::var_os("NAMESPACE").filter(|v| !v.is_empty())?;
        Some(PathBuf::from(ns).join("ollie"))
    });
    // Absolute: it is one of the server's protected files.
    c.log = a
        .log
        .map(|p| expand_tilde(&p))
        .map(|p| std::path::absolute(&p).unwrap_or(p));
    c.default_timeout = a.default_timeout;
    c.gc_age = a.gc_age;
    c.bypass_timeout = a.bypass_timeout;
    c.max_output = a.max_output;
    c.landlock_abi_limit = a.landlock_abi_limit;
    c.builtin_cache = paths::cache_dir();
    c.max_connections = a.max_connections as usize;
    c.auth_timeout = a.auth_timeout;
    c.retention.max_output_bytes = a.max_finished_output;
    c.retention.max_finished = a.max_finished;
    c.retention.max_background_per_agent = a.max_background as usize;
    c.audit = a
        .audit
        .as_deref()
        .map(|p| std::path::absolute(expand_tilde(p)).unwrap_or_else(|_| p.to_path_buf()));
    if let Some(f) = secret_file {
        if a.no_auth {
            bail!("--secret-file and --no-auth cannot be used together");
        }
        c.pin_secret(&expand_tilde(&f))?;
    }
    Ok(c)
}
