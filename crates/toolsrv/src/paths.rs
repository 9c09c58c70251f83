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
