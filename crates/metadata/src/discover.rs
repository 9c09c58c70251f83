//! Discovery: the tools directory read afresh on every call, with parsed
//! metadata cached by the identity and stat of the files it came from.

use std::collections::{BTreeMap, HashMap};
use std::fs::{self, Metadata};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use toolsrv_base::{FileStamp, LockUnpoisoned};

use crate::error::MetaError;
use crate::host::Host;
use crate::info::ToolSummary;
use crate::parse::{load_tool, ScriptFile, ToolFiles};
use crate::tool::Tool;

/// Longest tool name accepted (docs/protocol.md, "Namespace").
pub const MAX_NAME_LEN: usize = 128;

/// Whether `name` is a valid tool name: 1–128 bytes of `[A-Za-z0-9._:@-]`.
pub fn valid_tool_name(name: &str) -> bool {
    (1..=MAX_NAME_LEN).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"._:@-".contains(&b))
}

/// The stats of every file a tool came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
struct Stamp {
    script: Option<FileStamp>,
    sidecar: Option<FileStamp>,
}

/// The outcome of reading one tool: a tool, not a tool, or an error.
type Loaded = Arc<Result<Option<Tool>, MetaError>>;

struct Cached {
    stamp: Stamp,
    loaded: Loaded,
}

/// The tools in one directory, resolved for one host.
///
/// Every call reads the directory (or stats the tool's files) afresh, so
/// tools added, changed or removed are seen without a restart; parsing is
/// skipped for files whose stat has not changed. The cache lock is never
/// held during file I/O. `Catalog` is `Send + Sync`.
pub struct Catalog {
    dir: PathBuf,
    host: Host,
    cache: Mutex<HashMap<String, Cached>>,
}

impl Catalog {
    /// A catalog of the tools in `dir`, evaluating variants for `host`.
    ///
    /// A relative `dir` is made absolute against the current directory now,
    /// so program paths derived from it stay valid whatever working
    /// directory a tool later runs in.
    pub fn new(dir: PathBuf, host: Host) -> Catalog {
        let dir = std::path::absolute(&dir).unwrap_or(dir);
        Catalog {
            dir,
            host,
            cache: Mutex::new(HashMap::new()),
        }
    }

    /// The tools directory (absolute).
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The host variants are evaluated for.
    pub fn host(&self) -> &Host {
        &self.host
    }

    /// Every tool available on this host, sorted by name.
    ///
    /// A tool whose file is bad is listed with an empty description and its
    /// error, `<file>: <reason>` (docs/protocol.md, "Namespace"; also logged with a warning
    /// when first parsed), so that `toolsrv all` shows what to fix; tools
    /// without a variant for this host are left out. A missing or unreadable
    /// directory lists nothing.
    pub fn all(&self) -> Vec<ToolSummary> {
        let entries = match fs::read_dir(&self.dir) {
            Ok(entries) => entries,
            Err(e) => {
                tracing::debug!(dir = %self.dir.display(), error = %e, "cannot list tools directory");
                return Vec::new();
            }
        };
        let mut found: BTreeMap<String, (ToolFiles, Stamp)> = BTreeMap::new();
        for entry in entries.flatten() {
            let file_name = entry.file_name();
            let Some(file_name) = file_name.to_str() else {
                continue;
            };
            if ignored(file_name) {
                continue;
            }
            let (name, is_sidecar) = match file_name.strip_suffix(".yaml") {
                Some(stem) if !stem.is_empty() => (stem, true),
                _ => (file_name, false),
            };
            if !valid_tool_name(name) {
                tracing::debug!(file = %entry.path().display(), "skipping file: not a valid tool name");
                continue;
            }
            let path = entry.path();
            let Some(meta) = regular_file(&path) else {
                continue;
            };
            let (files, stamp) = found.entry(name.to_string()).or_insert_with(|| {
                (
                    ToolFiles {
                        name: name.to_string(),
                        dir: self.dir.clone(),
                        script: None,
                        sidecar: None,
                    },
                    Stamp::default(),
                )
            });
            if is_sidecar {
                files.sidecar = Some(path);
                stamp.sidecar = Some(FileStamp::of(&meta));
            } else {
                files.script = Some(ScriptFile {
                    path,
                    executable: meta.permissions().mode() & 0o111 != 0,
                });
                stamp.script = Some(FileStamp::of(&meta));
            }
        }
        let mut out = Vec::with_capacity(found.len());
        for (files, stamp) in found.values() {
            match &*self.load(files, *stamp) {
                Ok(Some(tool)) => out.push(tool.summary()),
                Ok(None) | Err(MetaError::NoVariant { .. }) => {}
                Err(e) => out.push(ToolSummary {
                    name: files.name.clone(),
                    description: String::new(),
                    error: Some(e.to_string()),
                }),
            }
        }
        self.cache
            .lock_unpoisoned()
            .retain(|name, _| found.contains_key(name));
        out
    }

    /// The tool `name` resolved for this host, read now.
    ///
    /// Fails with `unknown tool "<name>"` when there is no such tool, with
    /// `tool "<name>" has no variant for <platform>/<arch>` when it has
    /// variants but none for this host, and with the file's error when its
    /// metadata is bad.
    pub fn resolve(&self, name: &str) -> Result<Tool, MetaError> {
        let unknown = || MetaError::UnknownTool {
            name: name.to_string(),
        };
        if !valid_tool_name(name) || ignored(name) {
            return Err(unknown());
        }
        let mut files = ToolFiles {
            name: name.to_string(),
            dir: self.dir.clone(),
            script: None,
            sidecar: None,
        };
        let mut stamp = Stamp::default();
        let sidecar = self.dir.join(format!("{name}.yaml"));
        if let Some(meta) = regular_file(&sidecar) {
            files.sidecar = Some(sidecar);
            stamp.sidecar = Some(FileStamp::of(&meta));
        }
        if !name.ends_with(".yaml") {
            let script = self.dir.join(name);
            if let Some(meta) = regular_file(&script) {
                files.script = Some(ScriptFile {
                    path: script,
                    executable: meta.permissions().mode() & 0o111 != 0,
                });
                stamp.script = Some(FileStamp::of(&meta));
            }
        }
        if files.script.is_none() && files.sidecar.is_none() {
            return Err(unknown());
        }
        match &*self.load(&files, stamp) {
            Ok(Some(tool)) => Ok(tool.clone()),
            Ok(None) => Err(unknown()),
            Err(e) => Err(e.clone()),
        }
    }

    /// The cached outcome for `files` if its stamp is unchanged, else a
    /// fresh parse (done without holding the lock), then cached.
    fn load(&self, files: &ToolFiles, stamp: Stamp) -> Loaded {
        if let Some(hit) = self.cache.lock_unpoisoned().get(&files.name) {
            if hit.stamp == stamp {
                return hit.loaded.clone();
            }
        }
        let loaded: Loaded = Arc::new(load_tool(files, &self.host));
        match &*loaded {
            Err(MetaError::NoVariant { .. }) => {
                tracing::debug!(tool = %files.name, "tool has no variant for {}", self.host);
            }
            Err(e) => tracing::warn!(tool = %files.name, "bad tool file: {e}"),
            Ok(_) => {}
        }
        self.cache.lock_unpoisoned().insert(
            files.name.clone(),
            Cached {
                stamp,
                loaded: loaded.clone(),
            },
        );
        loaded
    }
}

/// Names discovery never looks at: dotfiles and editor backups (`~`).
fn ignored(file_name: &str) -> bool {
    file_name.starts_with('.') || file_name.ends_with('~')
}

/// The metadata of `path` (following symlinks) if it is a regular file.
fn regular_file(path: &Path) -> Option<Metadata> {
    fs::metadata(path).ok().filter(Metadata::is_file)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn catalog_is_send_sync() {
        fn check<T: Send + Sync>() {}
        check::<Catalog>();
    }

    #[test]
    fn relative_dir_is_made_absolute() {
        let cat = Catalog::new(PathBuf::from("some/tools"), Host::new("linux", "amd64"));
        assert!(cat.dir().is_absolute());
        assert!(cat.dir().ends_with("some/tools"));
    }

    #[test]
    fn tool_names() {
        assert!(valid_tool_name("file_read"));
        assert!(valid_tool_name("a.b:c@d-e"));
        assert!(!valid_tool_name(""));
        assert!(!valid_tool_name("a b"));
        assert!(!valid_tool_name("a/b"));
        assert!(!valid_tool_name(&"x".repeat(129)));
    }
}
