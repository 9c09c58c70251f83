//! Path conventions: `~` expansion and the Ollie configuration directory.

use std::path::{Path, PathBuf};

/// `$HOME`, or `/` when unset.
pub fn home() -> PathBuf {
    std::env::var_os("HOME")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/"))
}

/// Expand a leading `~` or `~/` to `$HOME`.
pub fn expand_tilde(p: &Path) -> PathBuf {
    let Some(s) = p.to_str() else {
        return p.to_path_buf();
    };
    if s == "~" {
        home()
    } else if let Some(rest) = s.strip_prefix("~/") {
        home().join(rest)
    } else {
        p.to_path_buf()
    }
}

/// The Ollie config directory: `$OLLIE_CFG_PATH`, else `$XDG_CONFIG_HOME/ollie`,
/// else `~/.config/ollie`.
pub fn config_dir() -> PathBuf {
    if let Some(p) = std::env::var_os("OLLIE_CFG_PATH").filter(|v| !v.is_empty()) {
        return expand_tilde(Path::new(&p));
    }
    if let Some(p) = std::env::var_os("XDG_CONFIG_HOME").filter(|v| !v.is_empty()) {
        return expand_tilde(Path::new(&p)).join("ollie");
    }
    home().join(".config").join("ollie")
}

/// toolsrv's cache directory: `$XDG_CACHE_HOME/toolsrv`, else
/// `~/.cache/toolsrv` (`None` without a home directory).
pub fn cache_dir() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("XDG_CACHE_HOME").filter(|v| !v.is_empty()) {
        return Some(expand_tilde(Path::new(&p)).join("toolsrv"));
    }
    std::env::var_os("HOME")
        .filter(|h| !h.is_empty() && h != "/")
        .map(|h| PathBuf::from(h).join(".cache").join("toolsrv"))
}

/// The default tools directory: the first entry of `$OLLIE_TOOLS_PATH`, else
/// `<config dir>/tools`.
pub fn default_tools_dir() -> PathBuf {
    if let Ok(v) = std::env::var("OLLIE_TOOLS_PATH") {
        if let Some(first) = v.split(':').find(|s| !s.is_empty()) {
            return expand_tilde(Path::new(first));
        }
    }
    config_dir().join("tools")
}

/// What a path given on the command line must name.
#[derive(Clone, Copy)]
pub enum Kind {
    /// A directory.
    Directory,
    /// A regular file (or a link to one).
    File,
}

/// `flag`'s value `p`, `~` expanded, which must exist as a `kind`; the error
/// names the flag and the path, and says how to get the default instead
/// (`to_default`).
pub fn given(p: &Path, flag: &str, kind: Kind, to_default: &str) -> anyhow::Result<PathBuf> {
    let p = expand_tilde(p);
    let (is, name) = match kind {
        Kind::Directory => (p.is_dir(), "directory"),
        Kind::File => (p.is_file(), "file"),
    };
    if is {
        return Ok(p);
    }
    if p.exists() {
        anyhow::bail!("{flag} {}: not a {name}", p.display());
    }
    anyhow::bail!(
        "{flag} {}: no such {name} (leave {flag} out {to_default})",
        p.display()
    )
}

/// `--cwd` (`~` expanded), else the current directory: canonical, and a
/// directory.
pub fn working_dir(given: Option<&Path>) -> anyhow::Result<PathBuf> {
    use anyhow::Context;
    let cwd = match given {
        Some(p) => expand_tilde(p),
        None => std::env::current_dir().context("cannot read the current directory")?,
    };
    let cwd = std::fs::canonicalize(&cwd).map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => {
            anyhow::anyhow!("--cwd {}: no such directory", cwd.display())
        }
        _ => anyhow::anyhow!("--cwd {}: {e}", cwd.display()),
    })?;
    if !cwd.is_dir() {
        anyhow::bail!("--cwd {}: not a directory", cwd.display());
    }
    Ok(cwd)
}
