//! [`Quarantine`]: where what must not stay in a user's directory goes,
//! kept (never deleted) in the server's own state.
//!
//! `move_in(path)` moves the file, directory or symbolic link at `path`
//! (never what a link points to) to `<state>/quarantine/<time>-<n>-<name>`
//! and writes `<time>-<n>.json` beside it: the original path, the kind,
//! the time and how it was moved. Against a tool racing the move:
//!
//! - the parent directory is opened one component at a time from `/`,
//!   `O_PATH | O_NOFOLLOW`: a symbolic link anywhere in the parent's path
//!   (one a tool swapped in for a directory, say) is refused, never
//!   followed, so nothing outside the named directory can be moved;
//! - the entry is moved by `renameat2(RENAME_NOREPLACE)` from that
//!   descriptor: atomic, never following the name, never replacing a
//!   quarantined entry;
//! - across filesystems (`EXDEV`) the entry is copied (regular files,
//!   directories, symbolic links as links; each opened `O_NOFOLLOW`; at most
//!   [`CopyLimits`]: beyond them the copy is marked truncated) and then
//!   removed from its parent's descriptor, whatever it holds by then.

use std::ffi::{CStr, CString, OsStr};
use std::io::{self, Read, Write};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::DirBuilderExt;
use std::path::{Component, Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::SystemTime;

use serde::{Deserialize, Serialize};

use crate::sys;
use crate::time;

/// Bounds of a copy across filesystems.
#[derive(Debug, Clone, Copy)]
pub struct CopyLimits {
    /// Bytes of file content copied in all.
    pub bytes: u64,
    /// Entries (files, directories, links) copied.
    pub entries: u64,
    /// Directory levels copied (and removed) below the entry.
    pub depth: u32,
}

impl Default for CopyLimits {
    fn default() -> Self {
        CopyLimits {
            bytes: 64 << 20,
            entries: 10_000,
            depth: 64,
        }
    }
}

/// What an entry was when it was moved.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum EntryKind {
    /// A regular file.
    File,
    /// A directory (with whatever it held).
    Directory,
    /// A symbolic link (the link itself).
    Symlink,
    /// A FIFO, socket or device node.
    Other,
}

/// How an entry got into the quarantine.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum How {
    /// Renamed (same filesystem): exactly what was there.
    Rename,
    /// Copied, then removed (another filesystem).
    Copy,
}

/// One quarantined entry: what `<time>-<n>.json` holds, and where.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Record {
    /// The path it was moved from (lossy where not UTF-8; see `original_hex`).
    pub original: String,
    /// The original path's bytes in hex, when they are not UTF-8.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub original_hex: Option<String>,
    /// Its name in the quarantine directory.
    pub entry: String,
    /// What it was.
    pub kind: EntryKind,
    /// When it was moved (RFC 3339, UTC).
    pub time: String,
    /// How it was moved.
    pub how: How,
    /// Whether a copy left things out ([`CopyLimits`], or entries that are
    /// neither files, directories nor links).
    #[serde(default)]
    pub truncated: bool,
    /// What the caller said about it (the run, the rule).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    /// The entry's path now (not stored).
    #[serde(skip)]
    pub path: PathBuf,
    /// The record's own path (not stored).
    #[serde(skip)]
    pub record: PathBuf,
}

impl Record {
    /// The path it was moved from, exactly.
    pub fn original_path(&self) -> PathBuf {
        match &self.original_hex {
            Some(h) => {
                let bytes: Vec<u8> = (0..h.len() / 2)
                    .filter_map(|i| u8::from_str_radix(&h[2 * i..2 * i + 2], 16).ok())
                    .collect();
                PathBuf::from(OsStr::from_bytes(&bytes))
            }
            None => PathBuf::from(&self.original),
        }
    }
}

/// Why an entry could not be quarantined.
#[derive(Debug, thiserror::Error)]
pub enum QuarantineError {
    /// Only absolute paths of normal components are moved.
    #[error("cannot quarantine {0}: not an absolute path to an entry")]
    NotAbsolute(PathBuf),
    /// A component of the parent is a symbolic link (or not a directory).
    #[error("cannot quarantine {path}: {at} is a symbolic link or not a directory (not followed)")]
    NotFollowed {
        /// The path asked for.
        path: PathBuf,
        /// The component that is not a directory.
        at: PathBuf,
    },
    /// Nothing is there (any more).
    #[error("cannot quarantine {0}: no such entry")]
    Missing(PathBuf),
    /// A system call failed.
    #[error("cannot quarantine {path}: {what}: {source}")]
    Io {
        /// The path asked for.
        path: PathBuf,
        /// The step.
        what: &'static str,
        /// The OS error.
        #[source]
        source: io::Error,
    },
}

/// The quarantine directory of a server's state.
#[derive(Debug)]
pub struct Quarantine {
    dir: PathBuf,
    fd: OwnedFd,
    next: AtomicU64,
    limits: CopyLimits,
}

impl Quarantine {
    /// `<state_dir>/quarantine`, made (mode 0700, like `state_dir` when it
    /// is made too) if missing.
    ///
    /// Both must be directories of this process's user, not symbolic links
    /// (a planted link would send what is quarantined elsewhere): else an
    /// error.
    pub fn new(state_dir: &Path) -> io::Result<Quarantine> {
        let dir = state_dir.join("quarantine");
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&dir)?;
        for d in [state_dir, &dir] {
            let m = std::fs::symlink_metadata(d)?;
            if !m.is_dir() {
                return Err(io::Error::new(
                    io::ErrorKind::AlreadyExists,
                    format!("{} is not a directory", d.display()),
                ));
            }
            if std::os::unix::fs::MetadataExt::uid(&m) != toolsrv_base::effective_uid() {
                return Err(io::Error::new(
                    io::ErrorKind::PermissionDenied,
                    format!("{} belongs to another user", d.display()),
                ));
            }
        }
        let fd = sys::open(
            &cstring(&dir)?,
            libc::O_PATH | libc::O_DIRECTORY | libc::O_NOFOLLOW,
        )?;
        Ok(Quarantine {
            dir,
            fd,
            next: AtomicU64::new(1),
            limits: CopyLimits::default(),
        })
    }

    /// The same, with other bounds for copies across filesystems.
    pub fn with_limits(mut self, limits: CopyLimits) -> Quarantine {
        self.limits = limits;
        self
    }

    /// The quarantine directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Moves the entry at `path` in (see the module's note).
    pub fn move_in(&self, path: &Path) -> Result<Record, QuarantineError> {
        self.move_in_noted(path, None)
    }

    /// [`move_in`](Self::move_in), keeping `note` in the record.
    pub fn move_in_noted(
        &self,
        path: &Path,
        note: Option<&str>,
    ) -> Result<Record, QuarantineError> {
        let io = |what| {
            move |source| QuarantineError::Io {
                path: path.to_path_buf(),
                what,
                source,
            }
        };
        let (parent, name) = open_parent(path)?;
        let cname = CString::new(name.as_bytes())
            .map_err(|_| QuarantineError::NotAbsolute(path.to_path_buf()))?;
        let st = match sys::lstatat(parent.as_fd(), &cname) {
            Ok(st) => st,
            Err(e) if e.raw_os_error() == Some(libc::ENOENT) => {
                return Err(QuarantineError::Missing(path.to_path_buf()))
            }
            Err(e) => return Err(io("stat")(e)),
        };
        let kind = kind_of(st.st_mode);
        let now = SystemTime::now();
        let stamp = time::stamp(now);
        let mut truncated = false;
        // A number is taken by making its record, empty (O_EXCL): two
        // quarantines on one directory never share one.
        let (n, entry, how, record_file) = loop {
            let n = self.next.fetch_add(1, Ordering::Relaxed);
            let reserved = CString::new(format!("{stamp}-{n}.json"))
                .map_err(|e| io("name")(io::Error::other(e)))?;
            let record_file = match sys::openat(
                self.fd.as_fd(),
                &reserved,
                libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL | libc::O_NOFOLLOW,
                0o600,
            ) {
                Ok(f) => (reserved, f),
                Err(e) if e.raw_os_error() == Some(libc::EEXIST) => continue,
                Err(e) => return Err(io("make the record")(e)),
            };
            let give_back = |r: &(CString, OwnedFd)| {
                let _ = sys::unlinkat(self.fd.as_fd(), &r.0, 0);
            };
            let entry = entry_name(&stamp, n, name);
            let centry =
                CString::new(entry.as_bytes()).map_err(|e| io("name")(io::Error::other(e)))?;
            match sys::rename_noreplace(parent.as_fd(), &cname, self.fd.as_fd(), &centry) {
                Ok(()) => break (n, entry, How::Rename, record_file),
                Err(e) if e.raw_os_error() == Some(libc::EEXIST) => give_back(&record_file),
                Err(e) if e.raw_os_error() == Some(libc::ENOENT) => {
                    give_back(&record_file);
                    return Err(QuarantineError::Missing(path.to_path_buf()));
                }
                Err(e) if e.raw_os_error() == Some(libc::EXDEV) => {
                    let mut budget = self.limits;
                    match copy_tree(
                        parent.as_fd(),
                        &cname,
                        self.fd.as_fd(),
                        &centry,
                        &mut budget,
                        0,
                    ) {
                        Ok(t) => truncated = t,
                        Err(e) if e.raw_os_error() == Some(libc::EEXIST) => {
                            give_back(&record_file);
                            continue;
                        }
                        Err(e) => {
                            give_back(&record_file);
                            return Err(io("copy across filesystems")(e));
                        }
                    }
                    if let Err(e) = remove_tree(parent.as_fd(), &cname, self.limits.depth, 0) {
                        give_back(&record_file);
                        return Err(io("remove after the copy")(e));
                    }
                    break (n, entry, How::Copy, record_file);
                }
                Err(e) => {
                    give_back(&record_file);
                    return Err(io("rename")(e));
                }
            }
        };
        let original = path.as_os_str();
        let record = Record {
            original: original.to_string_lossy().into_owned(),
            original_hex: std::str::from_utf8(original.as_bytes()).is_err().then(|| {
                original
                    .as_bytes()
                    .iter()
                    .map(|b| format!("{b:02x}"))
                    .collect()
            }),
            entry: entry.to_string_lossy().into_owned(),
            kind,
            time: time::rfc3339(now),
            how,
            truncated,
            note: note.map(str::to_string),
            path: self.dir.join(&entry),
            record: self.dir.join(format!("{stamp}-{n}.json")),
        };
        self.write_record(&record, record_file)
            .map_err(io("write the record"))?;
        Ok(record)
    }

    /// Every record, oldest first.
    pub fn list(&self) -> io::Result<Vec<Record>> {
        let mut out = Vec::new();
        for e in std::fs::read_dir(&self.dir)? {
            let e = e?;
            let name = e.file_name();
            let Some(name) = name.to_str() else { continue };
            let Some(stem) = name.strip_suffix(".json") else {
                continue;
            };
            let Some((stamp, n)) = stem.rsplit_once('-') else {
                continue;
            };
            if !time::is_stamp(stamp) || n.is_empty() || !n.bytes().all(|c| c.is_ascii_digit()) {
                continue;
            }
            let Ok(text) = std::fs::read(e.path()) else {
                continue;
            };
            let Ok(mut r) = serde_json::from_slice::<Record>(&text) else {
                continue;
            };
            r.path = self.dir.join(&r.entry);
            r.record = e.path();
            out.push((stamp.to_string(), n.parse::<u64>().unwrap_or(0), r));
        }
        out.sort_by(|a, b| (&a.0, a.1).cmp(&(&b.0, b.1)));
        Ok(out.into_iter().map(|(_, _, r)| r).collect())
    }

    /// Writes `r` into its record (`reserved`: made empty when its number
    /// was taken): into a temporary file renamed over it, so a reader never
    /// sees half a record (an empty one, which [`list`](Self::list) skips,
    /// at most).
    fn write_record(&self, r: &Record, reserved: (CString, OwnedFd)) -> io::Result<()> {
        let (name, placeholder) = reserved;
        drop(placeholder);
        let json = serde_json::to_vec_pretty(r).map_err(io::Error::other)?;
        let mut tmp = b".".to_vec();
        tmp.extend_from_slice(name.as_bytes());
        tmp.extend_from_slice(b".tmp");
        let tmp = CString::new(tmp).map_err(io::Error::other)?;
        let fd = sys::openat(
            self.fd.as_fd(),
            &tmp,
            libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL | libc::O_NOFOLLOW,
            0o600,
        )?;
        let mut f = std::fs::File::from(fd);
        f.write_all(&json)?;
        f.write_all(b"\n")?;
        drop(f);
        sys::rename(self.fd.as_fd(), &tmp, self.fd.as_fd(), &name)
    }
}

fn cstring(p: &Path) -> io::Result<CString> {
    CString::new(p.as_os_str().as_bytes()).map_err(io::Error::other)
}

/// `<stamp>-<n>-<name>`, the name cut (at a character boundary where it is
/// UTF-8) so that the whole fits in 255 bytes.
fn entry_name(stamp: &str, n: u64, name: &OsStr) -> std::ffi::OsString {
    let prefix = format!("{stamp}-{n}-");
    let room = 255usize.saturating_sub(prefix.len());
    let b = name.as_bytes();
    let mut cut = b.len().min(room);
    if let Ok(s) = std::str::from_utf8(b) {
        while cut > 0 && !s.is_char_boundary(cut) {
            cut -= 1;
        }
    }
    let mut out = std::ffi::OsString::from(prefix);
    out.push(OsStr::from_bytes(&b[..cut]));
    out
}

fn kind_of(mode: libc::mode_t) -> EntryKind {
    match mode & libc::S_IFMT {
        libc::S_IFREG => EntryKind::File,
        libc::S_IFDIR => EntryKind::Directory,
        libc::S_IFLNK => EntryKind::Symlink,
        _ => EntryKind::Other,
    }
}

/// The parent of `path` opened `O_PATH`, one component at a time from `/`
/// without following any symbolic link, and the entry's name.
fn open_parent(path: &Path) -> Result<(OwnedFd, &OsStr), QuarantineError> {
    let bad = || QuarantineError::NotAbsolute(path.to_path_buf());
    let mut comps = path.components();
    if comps.next() != Some(Component::RootDir) {
        return Err(bad());
    }
    let rest: Vec<&OsStr> = comps
        .map(|c| match c {
            Component::Normal(n) => Ok(n),
            _ => Err(bad()),
        })
        .collect::<Result<_, _>>()?;
    let Some((name, dirs)) = rest.split_last() else {
        return Err(bad());
    };
    let mut fd = sys::open(c"/", libc::O_PATH | libc::O_DIRECTORY).map_err(|source| {
        QuarantineError::Io {
            path: path.to_path_buf(),
            what: "open /",
            source,
        }
    })?;
    let mut at = PathBuf::from("/");
    for d in dirs {
        at.push(d);
        let c = CString::new(d.as_bytes()).map_err(|_| bad())?;
        fd = match sys::openat(
            fd.as_fd(),
            &c,
            libc::O_PATH | libc::O_NOFOLLOW | libc::O_DIRECTORY,
            0,
        ) {
            Ok(next) => next,
            Err(e) if matches!(e.raw_os_error(), Some(libc::ENOTDIR) | Some(libc::ELOOP)) => {
                return Err(QuarantineError::NotFollowed {
                    path: path.to_path_buf(),
                    at,
                })
            }
            Err(e) if e.raw_os_error() == Some(libc::ENOENT) => {
                return Err(QuarantineError::Missing(path.to_path_buf()))
            }
            Err(source) => {
                return Err(QuarantineError::Io {
                    path: path.to_path_buf(),
                    what: "open a parent directory",
                    source,
                })
            }
        };
    }
    Ok((fd, name))
}

/// Copies the entry `name` of `src` to `dst_name` in `dst` (no link
/// followed) within `budget`; whether something was left out.
fn copy_tree(
    src: BorrowedFd<'_>,
    name: &CStr,
    dst: BorrowedFd<'_>,
    dst_name: &CStr,
    budget: &mut CopyLimits,
    depth: u32,
) -> io::Result<bool> {
    if budget.entries == 0 {
        return Ok(true);
    }
    budget.entries -= 1;
    let st = sys::lstatat(src, name)?;
    match kind_of(st.st_mode) {
        EntryKind::Symlink => {
            let target = sys::readlinkat(src, name)?;
            let target = CString::new(target).map_err(io::Error::other)?;
            sys::symlinkat(&target, dst, dst_name)?;
            Ok(false)
        }
        EntryKind::File => {
            let from = sys::openat(
                src,
                name,
                libc::O_RDONLY | libc::O_NOFOLLOW | libc::O_NONBLOCK,
                0,
            )?;
            if kind_of(sys::lstatat(from.as_fd(), c"")?.st_mode) != EntryKind::File {
                return Ok(true);
            }
            let to = sys::openat(
                dst,
                dst_name,
                libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL | libc::O_NOFOLLOW,
                0o600,
            )?;
            let mut from = std::fs::File::from(from).take(budget.bytes);
            let mut to = std::fs::File::from(to);
            let copied = io::copy(&mut from, &mut to)?;
            budget.bytes -= copied;
            // Whether more was there than the budget allowed.
            let mut probe = [0u8; 1];
            let more = from.into_inner().read(&mut probe).is_ok_and(|n| n > 0);
            Ok(more)
        }
        EntryKind::Directory => {
            sys::mkdirat(dst, dst_name, 0o700)?;
            if depth >= budget.depth {
                return Ok(true);
            }
            let from = sys::openat(
                src,
                name,
                libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW,
                0,
            )?;
            let to = sys::openat(
                dst,
                dst_name,
                libc::O_PATH | libc::O_DIRECTORY | libc::O_NOFOLLOW,
                0,
            )?;
            let mut truncated = false;
            for e in sys::read_dir_names(from.as_fd())? {
                let c = CString::new(e).map_err(io::Error::other)?;
                match copy_tree(from.as_fd(), &c, to.as_fd(), &c, budget, depth + 1) {
                    Ok(t) => truncated |= t,
                    // Removed meanwhile: nothing to keep.
                    Err(e) if e.raw_os_error() == Some(libc::ENOENT) => {}
                    Err(e) => return Err(e),
                }
            }
            Ok(truncated)
        }
        EntryKind::Other => Ok(true),
    }
}

/// Removes the entry `name` of `dir`, a directory with what it holds (no
/// link followed), at most `max_depth` levels down.
fn remove_tree(dir: BorrowedFd<'_>, name: &CStr, max_depth: u32, depth: u32) -> io::Result<()> {
    match sys::unlinkat(dir, name, 0) {
        Ok(()) => return Ok(()),
        Err(e) if e.raw_os_error() == Some(libc::ENOENT) => return Ok(()),
        Err(e) if matches!(e.raw_os_error(), Some(libc::EISDIR) | Some(libc::EPERM)) => {}
        Err(e) => return Err(e),
    }
    if depth >= max_depth {
        return Err(io::Error::other("the directory tree is too deep to remove"));
    }
    let d = sys::openat(
        dir,
        name,
        libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW,
        0,
    )?;
    for e in sys::read_dir_names(d.as_fd())? {
        let c = CString::new(e).map_err(io::Error::other)?;
        remove_tree(d.as_fd(), &c, max_depth, depth + 1)?;
    }
    match sys::unlinkat(dir, name, libc::AT_REMOVEDIR) {
        Err(e) if e.raw_os_error() != Some(libc::ENOENT) => Err(e),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entry_names_fit_a_file_name() {
        let long = "é".repeat(200);
        let n = entry_name("20261201T223000.123Z", 7, OsStr::new(&long));
        assert!(n.len() <= 255, "{}", n.len());
        assert!(n.to_str().is_some());
        assert_eq!(
            entry_name("20261201T223000.123Z", 1, OsStr::new(".mcp.json")),
            "20261201T223000.123Z-1-.mcp.json"
        );
    }

    #[test]
    fn non_utf8_originals_round_trip() {
        let r = Record {
            original: "x".into(),
            original_hex: Some("2f61ff".into()),
            entry: "e".into(),
            kind: EntryKind::File,
            time: "t".into(),
            how: How::Rename,
            truncated: false,
            note: None,
            path: PathBuf::new(),
            record: PathBuf::new(),
        };
        assert_eq!(r.original_path().as_os_str().as_bytes(), b"/a\xff");
    }
}
