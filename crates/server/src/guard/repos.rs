//! The Git directories the guard keeps: each config file git reads (a
//! repository's `config`, and what the human's config includes from where
//! tools write) with its last clean version, and the hooks directories the
//! human's `core.hooksPath` points at where tools write.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};

use super::git::{self, Watched};

/// The guard's Git bookkeeping.
#[derive(Debug, Default)]
pub(super) struct Repos {
    /// The Git directories known.
    dirs: HashSet<PathBuf>,
    /// The config files kept, by path.
    pub(super) files: HashMap<PathBuf, Watched>,
    /// The human's hooks directories outside a Git directory (husky's
    /// `.husky/_`), each with the Git directory that runs them.
    pub(super) hook_dirs: HashMap<PathBuf, PathBuf>,
}

impl Repos {
    /// Whether `git_dir` is known.
    pub(super) fn knows(&self, git_dir: &Path) -> bool {
        self.dirs.contains(git_dir)
    }

    /// Starts keeping `git_dir`, its `config` as it is now the baseline
    /// (`fresh`: a tool's new one, whose every key counts: no baseline).
    pub(super) fn add(&mut self, git_dir: &Path, fresh: bool) {
        if !self.dirs.insert(git_dir.to_path_buf()) {
            return;
        }
        let config = git_dir.join("config");
        let baseline = if fresh {
            None
        } else {
            git::read_config(&config).ok().flatten()
        };
        let stamp = if fresh { None } else { git::stamp(&config) };
        self.files.insert(
            config.clone(),
            Watched {
                git_dir: git_dir.to_path_buf(),
                baseline,
                stamp,
                suspect: None,
            },
        );
        self.derive(&config);
    }

    /// From the baseline of `config`: the human's hooks directory and
    /// included files, kept too.
    fn derive(&mut self, config: &Path) {
        let Some(w) = self.files.get(config) else {
            return;
        };
        let Some(base) = &w.baseline else { return };
        let git_dir = w.git_dir.clone();
        let (hooks, includes) = git::outside_reads(base, config);
        for h in hooks {
            if !h.starts_with(&git_dir) {
                self.hook_dirs.insert(h, git_dir.clone());
            }
        }
        for inc in includes {
            if self.files.contains_key(&inc) {
                continue;
            }
            let baseline = git::read_config(&inc).ok().flatten();
            self.files.insert(
                inc.clone(),
                Watched {
                    git_dir: git_dir.clone(),
                    stamp: git::stamp(&inc),
                    baseline,
                    suspect: None,
                },
            );
        }
    }

    /// The directories outside the Git directories to mark for writes: the
    /// human's hooks directories and those of included files.
    pub(super) fn outside_dirs(&self) -> Vec<PathBuf> {
        let mut out: Vec<PathBuf> = self
            .hook_dirs
            .keys()
            .cloned()
            .chain(
                self.files
                    .keys()
                    .filter(|f| f.file_name() != Some(std::ffi::OsStr::new("config")))
                    .filter_map(|f| f.parent().map(Path::to_path_buf)),
            )
            .filter(|d| d.is_dir())
            .collect();
        out.sort();
        out.dedup();
        out
    }

    /// The human's (or the client's) new version of `file`: its baseline.
    pub(super) fn adopt(&mut self, file: &Path) {
        if let Some(w) = self.files.get_mut(file) {
            w.baseline = git::read_config(file).ok().flatten();
            w.stamp = git::stamp(file);
            w.suspect = None;
            self.derive(file);
        }
    }

    /// The clean version `bytes` of `file` is its baseline now.
    pub(super) fn settled(&mut self, file: &Path, bytes: Option<Vec<u8>>) {
        if let Some(w) = self.files.get_mut(file) {
            w.baseline = bytes;
            w.stamp = git::stamp(file);
            w.suspect = None;
        }
    }

    /// At each rescan: a file that changed without a tool's event is the
    /// human's (or a tool's whose event is still to come): adopted at once
    /// when it adds nothing that runs, else at the next rescan if it is
    /// still there as it was.
    pub(super) fn rebaseline(&mut self, workspace: &Path) {
        let mut derive = Vec::new();
        for (f, w) in self.files.iter_mut() {
            let now = git::stamp(f);
            if now == w.stamp {
                w.suspect = None;
                continue;
            }
            let Ok(bytes) = git::read_config(f) else {
                continue;
            };
            let adopt = match (&bytes, w.suspect) {
                (_, Some(s)) if Some(s) == now => true,
                (None, _) => true,
                (Some(b), _) => matches!(
                    git::judge(w.baseline.as_deref(), b, &w.git_dir, workspace),
                    git::Verdict::Clean(_)
                ),
            };
            if adopt {
                w.baseline = bytes;
                w.stamp = now;
                w.suspect = None;
                derive.push(f.clone());
            } else {
                w.suspect = now;
            }
        }
        for f in derive {
            self.derive(&f);
        }
    }
}
