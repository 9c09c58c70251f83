//! Git directories as the guard keeps them: each one's `config` as last seen
//! without a key that runs something (the baseline), and what to do when a
//! tool changes one: take the tool's new keys out again (or put the
//! baseline back), keeping the tool's version in quarantine.

use std::io::Write;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use toolsrv_gitguard::{check_config_change, Finding, Kind, Scope};

/// The largest config read (git's own are a few KiB).
pub(super) const CONFIG_MAX: u64 = 1 << 20;

/// Names in a Git directory that redirect where its configuration, hooks or
/// objects' work tree come from: a tool's new one is moved to quarantine.
pub(super) const REDIRECTS: &[&str] = &["commondir", "config.worktree"];
/// Directories in a Git directory that hold other Git directories (linked
/// worktrees, submodules), each with its own config and hooks.
pub(super) const NESTED: &[&str] = &["worktrees", "modules"];

/// A config file git reads that the guard keeps: a repository's `config`,
/// or a file the human's config includes that lies where tools write.
#[derive(Debug, Default)]
pub(super) struct Watched {
    /// The Git directory whose git reads it.
    pub(super) git_dir: PathBuf,
    /// The file as last seen clean (`None`: there was none).
    pub(super) baseline: Option<Vec<u8>>,
    /// The version the baseline is, to tell a change at a rescan.
    pub(super) stamp: Option<Stamp>,
    /// A change seen at a rescan that adds a key that runs something, and
    /// no tool's event for it yet: adopted (the human's) if it is still
    /// there at the next rescan.
    pub(super) suspect: Option<Stamp>,
}

/// What the human's `config` (its baseline) makes git read or run from
/// outside the Git directory: the hooks directory `core.hooksPath` names,
/// and the files `include.path` / `includeIf.*.path` name (absolute;
/// `~` and unreadable values left out).
pub(super) fn outside_reads(config: &[u8], config_file: &Path) -> (Vec<PathBuf>, Vec<PathBuf>) {
    let parsed = toolsrv_gitguard::Config::parse(config).unwrap_or_else(|e| e.partial);
    let git_dir = config_file.parent().unwrap_or(config_file);
    let work_tree = git_dir.parent().unwrap_or(git_dir);
    let (mut hooks, mut includes) = (Vec::new(), Vec::new());
    for e in parsed.entries() {
        let Some(v) = e
            .value
            .as_deref()
            .filter(|v| !v.is_empty() && !v.starts_with('~'))
        else {
            continue;
        };
        let (section, key) = (e.section.to_ascii_lowercase(), e.key.to_ascii_lowercase());
        let v = Path::new(v);
        if section == "core" && key == "hookspath" {
            hooks.push(lexical(&work_tree.join(v)));
        } else if (section == "include" || section == "includeif") && key == "path" {
            includes.push(lexical(&git_dir.join(v)));
        }
    }
    (hooks, includes)
}

/// `p` with `.` and `..` taken out lexically.
fn lexical(p: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in p.components() {
        match c {
            std::path::Component::ParentDir => {
                out.pop();
            }
            std::path::Component::CurDir => {}
            c => out.push(c),
        }
    }
    out
}

/// A file's version.
pub(super) type Stamp = (u64, u64, u64, i64, i64, i64, i64);

/// The version of `path` (not following a link), if it is a regular file.
pub(super) fn stamp(path: &Path) -> Option<Stamp> {
    let m = std::fs::symlink_metadata(path).ok()?;
    m.is_file().then(|| {
        (
            m.dev(),
            m.ino(),
            m.size(),
            m.mtime(),
            m.mtime_nsec(),
            m.ctime(),
            m.ctime_nsec(),
        )
    })
}

/// `path`'s bytes, when it is a regular file of at most [`CONFIG_MAX`]
/// bytes reached without a symbolic link.
pub(super) fn read_config(path: &Path) -> std::io::Result<Option<Vec<u8>>> {
    use std::io::Read;
    let fd = match open_file(path, libc::O_RDONLY) {
        Ok(fd) => fd,
        Err(e) if e.raw_os_error() == Some(libc::ENOENT) => return Ok(None),
        Err(e) => return Err(e),
    };
    let f = std::fs::File::from(fd);
    let m = f.metadata()?;
    if !m.is_file() {
        return Err(std::io::Error::other("not a regular file"));
    }
    if m.len() > CONFIG_MAX {
        return Err(std::io::Error::other(format!(
            "{} bytes, more than the {CONFIG_MAX} read",
            m.len()
        )));
    }
    let mut out = Vec::with_capacity(m.len() as usize);
    f.take(CONFIG_MAX + 1).read_to_end(&mut out)?;
    Ok(Some(out))
}

/// Opens the absolute `path` with `flags`, following no symbolic link on
/// the way or at the end.
fn open_file(path: &Path, flags: i32) -> std::io::Result<OwnedFd> {
    let parent = path.parent().ok_or_else(|| einval(path))?;
    let name = path.file_name().ok_or_else(|| einval(path))?;
    let dir = toolsrv_sandbox::open_no_symlinks(parent)?;
    openat(dir.as_fd(), name.as_bytes(), flags, 0)
}

fn einval(path: &Path) -> std::io::Error {
    std::io::Error::new(
        std::io::ErrorKind::InvalidInput,
        format!("{} has no parent", path.display()),
    )
}

fn openat(
    dir: std::os::fd::BorrowedFd<'_>,
    name: &[u8],
    flags: i32,
    mode: libc::mode_t,
) -> std::io::Result<OwnedFd> {
    let c = std::ffi::CString::new(name).map_err(std::io::Error::other)?;
    // Safety: a valid descriptor and a NUL-terminated name.
    let fd = unsafe {
        libc::openat(
            dir.as_raw_fd(),
            c.as_ptr(),
            flags | libc::O_NOFOLLOW | libc::O_CLOEXEC,
            mode as libc::c_uint,
        )
    };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // Safety: a new descriptor this function owns.
    Ok(unsafe { <OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(fd) })
}

/// What a tool's change of `config` in `git_dir` comes to.
pub(super) enum Verdict {
    /// Nothing that runs: the new baseline.
    Clean(Vec<u8>),
    /// Keys that run something: write `replacement` in its place (`None`:
    /// nothing clean to put back, the file goes to quarantine whole).
    Restore {
        findings: Vec<Finding>,
        replacement: Option<Vec<u8>>,
    },
}

/// Judges `after` (the tool's version) against `before` (the baseline).
pub(super) fn judge(
    before: Option<&[u8]>,
    after: &[u8],
    git_dir: &Path,
    workspace: &Path,
) -> Verdict {
    let scope = Scope { git_dir, workspace };
    let findings = check_config_change(before, after, Some(&scope));
    if findings.is_empty() {
        return Verdict::Clean(after.to_vec());
    }
    // The tool's version without the lines of what it added keeps whatever
    // else changed meanwhile (the human's own `git config user.name`); if
    // that is not clean either, the baseline.
    let replacement = without_lines(after, &findings)
        .filter(|c| check_config_change(before, c, Some(&scope)).is_empty())
        .or_else(|| before.map(<[u8]>::to_vec));
    Verdict::Restore {
        findings,
        replacement,
    }
}

/// `text` without the lines of the config entries of `findings` (and their
/// continuation lines); `None` when one cannot be taken out on its own (an
/// entry on a section header's line, an unparsable file).
fn without_lines(text: &[u8], findings: &[Finding]) -> Option<Vec<u8>> {
    let lines: Vec<&[u8]> = text.split_inclusive(|b| *b == b'\n').collect();
    let mut drop = vec![false; lines.len()];
    for f in findings {
        if f.kind != Kind::ConfigKey {
            return None;
        }
        let start = f.line?.checked_sub(1)?;
        let mut i = start;
        loop {
            let line = lines.get(i)?;
            if i == start && line.trim_ascii_start().starts_with(b"[") {
                return None;
            }
            drop[i] = true;
            let body = line.strip_suffix(b"\n").unwrap_or(line);
            let body = body.strip_suffix(b"\r").unwrap_or(body);
            if !body.ends_with(b"\\") {
                break;
            }
            i += 1;
        }
    }
    Some(
        lines
            .iter()
            .zip(&drop)
            .filter(|(_, d)| !**d)
            .flat_map(|(l, _)| l.iter().copied())
            .collect(),
    )
}

/// Replaces the file `path` by `bytes` (same owner and mode), atomically;
/// the tool's version is kept beside it under `<name>.toolsrv-<n>` for the
/// caller to quarantine, whose path is returned (`None`: there was none).
pub(super) fn replace_file(path: &Path, bytes: &[u8]) -> std::io::Result<Option<PathBuf>> {
    let parent = path.parent().ok_or_else(|| einval(path))?;
    let name = path.file_name().ok_or_else(|| einval(path))?;
    let dir = toolsrv_sandbox::open_no_symlinks(parent)?;
    let dir = openat(dir.as_fd(), b".", libc::O_RDONLY | libc::O_DIRECTORY, 0)?;
    let meta = std::fs::symlink_metadata(path).ok();
    let n = std::process::id();
    let mut tmp = name.as_bytes().to_vec();
    tmp.extend_from_slice(format!(".toolsrv-new-{n}").as_bytes());
    let mut kept = name.as_bytes().to_vec();
    kept.extend_from_slice(format!(".toolsrv-{n}-{}", unique()).as_bytes());
    let f = openat(
        dir.as_fd(),
        &tmp,
        libc::O_WRONLY | libc::O_CREAT | libc::O_TRUNC,
        0o644,
    )?;
    let mut f = std::fs::File::from(f);
    f.write_all(bytes)?;
    if let Some(m) = meta.as_ref().filter(|m| m.is_file()) {
        // Safety: a valid descriptor.
        unsafe {
            libc::fchown(f.as_raw_fd(), m.uid(), m.gid());
            libc::fchmod(f.as_raw_fd(), m.mode() & 0o7777);
        }
    }
    drop(f);
    let kept_path = match meta {
        Some(_) => {
            linkat(dir.as_fd(), name.as_bytes(), &kept)?;
            Some(parent.join(std::ffi::OsStr::from_bytes(&kept)))
        }
        None => None,
    };
    renameat(dir.as_fd(), &tmp, name.as_bytes())?;
    Ok(kept_path)
}

fn unique() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    N.fetch_add(1, Ordering::Relaxed)
}

fn linkat(dir: std::os::fd::BorrowedFd<'_>, from: &[u8], to: &[u8]) -> std::io::Result<()> {
    let (f, t) = (cstr(from)?, cstr(to)?);
    // Safety: valid descriptors and NUL-terminated names.
    let r = unsafe { libc::linkat(dir.as_raw_fd(), f.as_ptr(), dir.as_raw_fd(), t.as_ptr(), 0) };
    if r != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

fn renameat(dir: std::os::fd::BorrowedFd<'_>, from: &[u8], to: &[u8]) -> std::io::Result<()> {
    let (f, t) = (cstr(from)?, cstr(to)?);
    // Safety: valid descriptors and NUL-terminated names.
    let r = unsafe { libc::renameat(dir.as_raw_fd(), f.as_ptr(), dir.as_raw_fd(), t.as_ptr()) };
    if r != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

fn cstr(b: &[u8]) -> std::io::Result<std::ffi::CString> {
    std::ffi::CString::new(b).map_err(std::io::Error::other)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn judged(before: Option<&str>, after: &str) -> (usize, Option<String>) {
        match judge(
            before.map(str::as_bytes),
            after.as_bytes(),
            Path::new("/w/.git"),
            Path::new("/w"),
        ) {
            Verdict::Clean(_) => (0, None),
            Verdict::Restore {
                findings,
                replacement,
            } => (
                findings.len(),
                replacement.map(|r| String::from_utf8(r).unwrap()),
            ),
        }
    }

    #[test]
    fn a_tools_new_key_that_runs_is_taken_out_and_the_rest_kept() {
        let before = "[core]\n\tbare = false\n";
        assert_eq!(
            judged(Some(before), "[core]\n\tbare = false\n[user]\n\tname = x\n"),
            (0, None)
        );
        let after = "[core]\n\tbare = false\n\tfsmonitor = evil \\\n  more\n[user]\n\tname = x\n";
        assert_eq!(
            judged(Some(before), after),
            (
                1,
                Some("[core]\n\tbare = false\n[user]\n\tname = x\n".into())
            )
        );
        // On a section header's line: the baseline comes back.
        assert_eq!(
            judged(Some(before), "[core] hooksPath = ../hk\n"),
            (1, Some(before.into()))
        );
        // A new repository's config: the key goes, the rest stays.
        assert_eq!(
            judged(None, "[core]\n\thooksPath = ../hk\n\tbare = false\n"),
            (1, Some("[core]\n\tbare = false\n".into()))
        );
        // Unparsable and new: nothing to put back.
        assert_eq!(judged(None, "[core\n").1, None);
    }
}
