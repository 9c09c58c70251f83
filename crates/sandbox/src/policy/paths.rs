//! Path variables: `{CWD}`, `{WORKSPACE}`, `{HOME}`, `{TMPDIR}`, the XDG
//! directories, the Ollie directories, `{TOOLSRV_TMPDIR}`, any other
//! `{ENV_VAR}`, and a leading `~`.

use std::collections::HashMap;
use std::path::PathBuf;

/// What path variables expand against: the request's working directory, the
/// workspace it lies in, and an environment snapshot (the server passes its
/// own environment).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PathContext {
    /// The request's working directory: `{CWD}`.
    pub cwd: PathBuf,
    /// The same directory, opened (the server always sets it): `{CWD}` rules
    /// are then resolved from this descriptor, beneath it, and never by
    /// looking up `cwd` again.
    pub workdir: Option<std::sync::Arc<crate::workdir::WorkDir>>,
    /// The workspace, opened: the server's `--cwd`, the outer boundary every
    /// request's working directory lies in: `{WORKSPACE}`. `{WORKSPACE}/x`
    /// rules are resolved beneath this descriptor. When `None`, `{WORKSPACE}`
    /// is the request's working directory (`{CWD}`).
    pub workspace: Option<std::sync::Arc<crate::workdir::WorkDir>>,
    /// The environment `{HOME}`, `{TMPDIR}`, `{XDG_*}` and other `{VAR}`s read.
    pub env: HashMap<String, String>,
}

impl PathContext {
    /// A set, non-empty variable.
    fn var(&self, name: &str) -> Option<&str> {
        self.env
            .get(name)
            .map(String::as_str)
            .filter(|v| !v.is_empty())
    }

    /// A set, absolute variable (XDG rule: relative values are ignored).
    fn abs_var(&self, name: &str) -> Option<PathBuf> {
        self.var(name)
            .map(PathBuf::from)
            .filter(|p| p.is_absolute())
    }

    fn home(&self) -> Option<PathBuf> {
        self.abs_var("HOME")
    }

    fn tmpdir(&self) -> PathBuf {
        self.abs_var("TMPDIR")
            .unwrap_or_else(|| PathBuf::from("/tmp"))
    }

    fn xdg(&self, name: &str, under_home: &str) -> Option<PathBuf> {
        self.abs_var(name)
            .or_else(|| self.home().map(|h| h.join(under_home)))
    }

    /// The private temporary directory `{TOOLSRV_TMPDIR}`: the server's own
    /// (named by [`crate::tmpdir::SERVER_TMPDIR_VAR`] in the environment,
    /// which the server sets to `<TMPDIR>/toolsrv-<uid>/<server>`; empty:
    /// none), else, for a caller that names none, `<TMPDIR or
    /// /tmp>/toolsrv-<uid>`. It must be a real directory owned by this user;
    /// created if missing, its mode tightened to 0700. `None` (with a
    /// warning) when it is unusable. Tools should get `TMPDIR` set to this
    /// directory.
    pub fn private_tmpdir(&self) -> Option<PathBuf> {
        let dir = match self.env.get(crate::tmpdir::SERVER_TMPDIR_VAR) {
            Some(v) if v.is_empty() => return None,
            Some(v) => PathBuf::from(v),
            None => crate::tmpdir::user_base(&self.tmpdir()),
        };
        if !dir.is_absolute() {
            tracing::warn!(path = %dir.display(), "private temporary directory is not absolute; skipped");
            return None;
        }
        match crate::tmpdir::ensure_private_dir(&dir) {
            Ok(()) => Some(dir),
            Err(e) => {
                tracing::warn!(path = %dir.display(), error = %e, "private temporary directory unusable; skipped");
                None
            }
        }
    }

    /// The value of one `{NAME}` variable; `None` when it has no value.
    fn lookup(&self, name: &str) -> Option<PathBuf> {
        match name {
            "CWD" => Some(
                self.workdir
                    .as_ref()
                    .map_or_else(|| self.cwd.clone(), |w| w.path().to_path_buf()),
            ),
            "WORKSPACE" => match &self.workspace {
                Some(w) => Some(w.path().to_path_buf()),
                None => self.lookup("CWD"),
            },
            "HOME" => self.home(),
            "TMPDIR" => Some(self.tmpdir()),
            "XDG_CONFIG_HOME" => self.xdg(name, ".config"),
            "XDG_DATA_HOME" => self.xdg(name, ".local/share"),
            "XDG_CACHE_HOME" => self.xdg(name, ".cache"),
            "XDG_STATE_HOME" => self.xdg(name, ".local/state"),
            "XDG_RUNTIME_DIR" => self
                .abs_var(name)
                .or_else(|| Some(PathBuf::from(format!("/run/user/{}", current_uid())))),
            "OLLIE_CFG_PATH" => self
                .abs_var(name)
                .or_else(|| self.lookup("XDG_CONFIG_HOME").map(|d| d.join("ollie"))),
            "OLLIE_DATA_PATH" => self
                .abs_var(name)
                .or_else(|| self.lookup("XDG_DATA_HOME").map(|d| d.join("ollie"))),
            "TOOLSRV_TMPDIR" => self.private_tmpdir(),
            other => self.var(other).map(PathBuf::from),
        }
    }

    /// Expands variables and a leading `~` in a policy path. `Err` says why the
    /// path has to be skipped (an unset variable, `~user`, a relative result).
    pub fn expand(&self, path: &str) -> Result<PathBuf, String> {
        let mut out = String::new();
        let mut rest = path;
        if let Some(after) = rest.strip_prefix('~') {
            if !(after.is_empty() || after.starts_with('/')) {
                return Err("\"~user\" paths are not supported".to_string());
            }
            let home = self.home().ok_or("HOME is not set")?;
            out.push_str(&home.to_string_lossy());
            rest = after;
        }
        while let Some(open) = rest.find('{') {
            out.push_str(&rest[..open]);
            let after = &rest[open + 1..];
            let close = after
                .find('}')
                .ok_or_else(|| "unclosed \"{\"".to_string())?;
            let name = &after[..close];
            let value = self
                .lookup(name)
                .ok_or_else(|| format!("variable {{{name}}} is not set"))?;
            out.push_str(&value.to_string_lossy());
            rest = &after[close + 1..];
        }
        out.push_str(rest);
        let expanded = PathBuf::from(out);
        if expanded.is_absolute() {
            Ok(expanded)
        } else {
            Err(format!(
                "expands to the relative path {}",
                expanded.display()
            ))
        }
    }
}

/// The real user id of this process.
pub(crate) fn current_uid() -> u32 {
    super::sys::getuid()
}
