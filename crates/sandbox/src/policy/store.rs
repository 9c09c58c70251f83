//! [`PolicyStore`]: the policy file and its profiles, re-read when they change.

use super::{Policy, PolicyError, DEFAULT_POLICY};
use std::collections::HashMap;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};
use toolsrv_base::{FileStamp, LockUnpoisoned};

/// One watched file: the version last looked at and the last policy that parsed.
#[derive(Debug)]
struct Entry {
    /// `None`: the file did not exist.
    seen: Option<FileStamp>,
    /// The last good policy (`None` only for a profile that never parsed).
    good: Option<Arc<Policy>>,
}

#[derive(Debug)]
struct State {
    main: Entry,
    profiles: HashMap<String, Entry>,
    /// When the main policy in effect was loaded.
    main_loaded: std::time::SystemTime,
    /// Why the policy file's latest version is not in effect: it does not
    /// parse (`None`: the file is what is in effect).
    main_broken: Option<String>,
}

/// The sandbox policy in effect and the named profiles beside it.
///
/// `current()` and `profile()` re-stat their file on every call and re-parse it
/// when its identity (device, inode, size, mtime, ctime) changed. A file that
/// stops parsing keeps the last good policy and is logged once per change.
/// `Send + Sync`; the lock is never held across file I/O or parsing.
#[derive(Debug)]
pub struct PolicyStore {
    path: Option<PathBuf>,
    state: Mutex<State>,
}

/// Result of looking at a file: its fingerprint and, if it changed, the new contents.
enum Look {
    Missing,
    Same,
    Changed(FileStamp, Box<Result<Policy, PolicyError>>),
}

impl PolicyStore {
    /// Loads `path`. If it does not exist, the embedded default policy is used
    /// (logged at info) and the file is still watched, so creating it later takes
    /// effect. If it exists and does not parse or cannot be read, the error.
    pub fn open(path: &Path) -> Result<PolicyStore, PolicyError> {
        let (seen, policy) = match fs::metadata(path) {
            Ok(meta) => {
                let fp = FileStamp::of(&meta);
                (Some(fp), load(path)?)
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                tracing::info!(path = %path.display(), "sandbox policy file not found; using the built-in default policy");
                (None, embedded())
            }
            Err(source) => {
                return Err(PolicyError::Io {
                    file: path.to_path_buf(),
                    source,
                })
            }
        };
        Ok(PolicyStore {
            path: Some(path.to_path_buf()),
            state: Mutex::new(State {
                main: Entry {
                    seen,
                    good: Some(Arc::new(policy)),
                },
                profiles: HashMap::new(),
                main_loaded: std::time::SystemTime::now(),
                main_broken: None,
            }),
        })
    }

    /// A store that serves only the embedded default policy and no file
    /// (no profiles other than `default`).
    pub fn embedded_default() -> PolicyStore {
        PolicyStore {
            path: None,
            state: Mutex::new(State {
                main: Entry {
                    seen: None,
                    good: Some(Arc::new(embedded())),
                },
                profiles: HashMap::new(),
                main_loaded: std::time::SystemTime::now(),
                main_broken: None,
            }),
        }
    }

    /// The watched policy file (`None` for [`PolicyStore::embedded_default`]).
    pub fn path(&self) -> Option<&Path> {
        self.path.as_deref()
    }

    /// The policy in effect, re-read first if the file changed. A policy file
    /// that disappears falls back to the embedded default (logged at info).
    pub fn current(&self) -> Arc<Policy> {
        let Some(path) = &self.path else {
            return self.main_policy(&self.lock().main);
        };
        let seen = self.lock().main.seen;
        match look(path, seen) {
            Look::Same => self.main_policy(&self.lock().main),
            Look::Missing if seen.is_none() => self.main_policy(&self.lock().main),
            Look::Missing => {
                tracing::info!(path = %path.display(), "sandbox policy file removed; using the built-in default policy");
                let policy = Arc::new(embedded());
                let mut state = self.lock();
                state.main = Entry {
                    seen: None,
                    good: Some(policy.clone()),
                };
                state.main_loaded = std::time::SystemTime::now();
                state.main_broken = None;
                policy
            }
            Look::Changed(fp, result) => {
                let mut state = self.lock();
                state.main.seen = Some(fp);
                match *result {
                    Ok(policy) => {
                        tracing::info!(path = %path.display(), "sandbox policy reloaded");
                        let policy = Arc::new(policy);
                        state.main.good = Some(policy.clone());
                        state.main_loaded = std::time::SystemTime::now();
                        state.main_broken = None;
                        policy
                    }
                    Err(e) => {
                        tracing::error!(error = %e, "sandbox policy not reloaded; keeping the last good policy");
                        state.main_broken = Some(e.to_string());
                        self.main_policy(&state.main)
                    }
                }
            }
        }
    }

    /// When the policy file's latest version does not parse: why (`file:line:
    /// reason`) and when the policy still in effect was loaded. Up to date
    /// as of the last [`PolicyStore::current`].
    pub fn not_reloaded(&self) -> Option<(String, std::time::SystemTime)> {
        let state = self.lock();
        state
            .main_broken
            .clone()
            .map(|why| (why, state.main_loaded))
    }

    /// The named profile: `default` is [`PolicyStore::current`], any other name is
    /// `<dir of the policy file>/sandbox/<name>.yaml`, re-read when it changes.
    pub fn profile(&self, name: &str) -> Result<Arc<Policy>, PolicyError> {
        if name == "default" {
            return Ok(self.current());
        }
        if !valid_profile_name(name) {
            return Err(PolicyError::InvalidProfileName(name.to_string()));
        }
        let dir = self
            .path
            .as_deref()
            .map(|p| p.parent().unwrap_or_else(|| Path::new(".")))
            .ok_or_else(|| PolicyError::UnknownProfile(name.to_string()))?;
        let file = dir.join("sandbox").join(format!("{name}.yaml"));
        let seen = self.lock().profiles.get(name).and_then(|e| e.seen);
        match look(&file, seen) {
            Look::Missing => {
                self.lock().profiles.remove(name);
                Err(PolicyError::UnknownProfile(name.to_string()))
            }
            Look::Same => {
                let state = self.lock();
                match state.profiles.get(name).and_then(|e| e.good.clone()) {
                    Some(p) => Ok(p),
                    // Never parsed: parse again to report the error again.
                    None => {
                        drop(state);
                        load(&file).map(Arc::new)
                    }
                }
            }
            Look::Changed(fp, result) => {
                let mut state = self.lock();
                let entry = state.profiles.entry(name.to_string()).or_insert(Entry {
                    seen: None,
                    good: None,
                });
                entry.seen = Some(fp);
                match *result {
                    Ok(policy) => {
                        let policy = Arc::new(policy);
                        entry.good = Some(policy.clone());
                        Ok(policy)
                    }
                    Err(e) => match &entry.good {
                        Some(good) => {
                            tracing::error!(error = %e, "sandbox profile not reloaded; keeping the last good version");
                            Ok(good.clone())
                        }
                        None => Err(e),
                    },
                }
            }
        }
    }

    /// Same as the free function [`write_default`]: writes the embedded default
    /// policy to `<dir>/sandbox.yaml` unless that file exists.
    pub fn write_default(dir: &Path) -> io::Result<Option<PathBuf>> {
        write_default(dir)
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock_unpoisoned()
    }

    fn main_policy(&self, entry: &Entry) -> Arc<Policy> {
        entry.good.clone().unwrap_or_else(|| Arc::new(embedded()))
    }
}

/// Writes the embedded default policy to `<dir>/sandbox.yaml` (creating `dir`)
/// unless that file exists. Returns the path written, or `None` if it existed.
pub fn write_default(dir: &Path) -> io::Result<Option<PathBuf>> {
    fs::create_dir_all(dir)?;
    let path = dir.join("sandbox.yaml");
    match fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&path)
    {
        Ok(mut file) => {
            io::Write::write_all(&mut file, DEFAULT_POLICY.as_bytes())?;
            file.sync_all()?;
            Ok(Some(path))
        }
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => Ok(None),
        Err(e) => Err(e),
    }
}

/// `[A-Za-z0-9._-]+`, not starting with `.`.
fn valid_profile_name(name: &str) -> bool {
    !name.is_empty()
        && !name.starts_with('.')
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
}

/// Stats `path` and, when its fingerprint differs from `seen`, reads and parses it.
fn look(path: &Path, seen: Option<FileStamp>) -> Look {
    match fs::metadata(path) {
        Ok(meta) => {
            let fp = FileStamp::of(&meta);
            if Some(fp) == seen {
                Look::Same
            } else {
                Look::Changed(fp, Box::new(load(path)))
            }
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => Look::Missing,
        Err(source) if seen.is_none() => Look::Changed(
            FileStamp::UNKNOWN,
            Box::new(Err(PolicyError::Io {
                file: path.to_path_buf(),
                source,
            })),
        ),
        Err(e) => {
            tracing::debug!(path = %path.display(), error = %e, "cannot stat sandbox policy; keeping the last version");
            Look::Same
        }
    }
}

fn load(path: &Path) -> Result<Policy, PolicyError> {
    let text = fs::read_to_string(path).map_err(|source| PolicyError::Io {
        file: path.to_path_buf(),
        source,
    })?;
    Policy::parse(&text, path)
}

/// The embedded default; it is tested to parse, so a failure cannot happen in
/// practice, but it falls back to the all-defaults policy rather than panicking.
fn embedded() -> Policy {
    Policy::parse(DEFAULT_POLICY, Path::new("<built-in sandbox.yaml>")).unwrap_or_else(|e| {
        tracing::error!(error = %e, "built-in sandbox policy does not parse");
        Policy::default()
    })
}
