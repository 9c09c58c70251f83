//! The built-in tool set, embedded in the binary and written out by
//! `toolsrv init` (or to a private directory when no tools directory
//! exists). The files are ordinary tools, readable and copyable by users.

use std::fs::{self, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

/// One embedded tool file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BuiltinFile {
    /// The file name inside the tools directory.
    pub name: &'static str,
    /// The file's contents.
    pub bytes: &'static [u8],
    /// Whether it is written with mode 0755 (else 0644).
    pub executable: bool,
}

macro_rules! builtin {
    ($name:literal, $exec:literal) => {
        BuiltinFile {
            name: $name,
            bytes: include_bytes!(concat!(env!("CARGO_MANIFEST_DIR"), "/builtin/", $name)),
            executable: $exec,
        }
    };
}

static BUILTIN: &[BuiltinFile] = &[
    builtin!("file_edit", true),
    builtin!("file_glob", true),
    builtin!("file_grep", true),
    builtin!("file_read", true),
    builtin!("file_write", true),
    builtin!("shell", true),
];

/// Every built-in tool file.
pub fn builtin_files() -> &'static [BuiltinFile] {
    BUILTIN
}

/// Creates `dir` (and its parents) and writes every built-in file that does
/// not exist there yet, never overwriting; returns the paths written.
pub fn write_builtin(dir: &Path) -> io::Result<Vec<PathBuf>> {
    fs::create_dir_all(dir)?;
    let mut written = Vec::new();
    for file in BUILTIN {
        let path = dir.join(file.name);
        let mode = if file.executable { 0o755 } else { 0o644 };
        let mut out = match OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(mode)
            .open(&path)
        {
            Ok(out) => out,
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(e),
        };
        out.write_all(file.bytes)?;
        // The umask may have cleared bits of the requested mode.
        fs::set_permissions(&path, std::os::unix::fs::PermissionsExt::from_mode(mode))?;
        written.push(path);
    }
    Ok(written)
}

/// The built-in tool set, installed once under `base` (a directory private to
/// this user, e.g. `~/.cache/toolsrv`) at a content-addressed path: every
/// server of the same version shares it, and a killed server leaves nothing
/// behind. Returns that directory.
///
/// An existing copy is used only when it is owned by this user, writable by
/// nobody else, and holds exactly the embedded files; otherwise a fresh copy
/// is written to a temporary directory beside it and renamed into place (a
/// concurrent server that won the rename is fine: its copy is checked too).
pub fn install_builtin(base: &Path) -> io::Result<PathBuf> {
    fs::create_dir_all(base)?;
    check_private(base)?;
    let dir = base.join(format!("builtin-{:016x}", builtin_digest()));
    if is_intact(&dir) {
        return Ok(dir);
    }
    let tmp = base.join(format!(
        ".builtin-{}-{:x}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.subsec_nanos())
            .unwrap_or(0)
    ));
    write_builtin(&tmp)?;
    fs::set_permissions(&tmp, std::os::unix::fs::PermissionsExt::from_mode(0o755))?;
    if fs::rename(&tmp, &dir).is_err() {
        // Another server installed it first, or a broken copy is in the way.
        let _ = fs::remove_dir_all(&tmp);
        if !is_intact(&dir) {
            fs::remove_dir_all(&dir)?;
            write_builtin(&dir)?;
        }
    }
    if is_intact(&dir) {
        Ok(dir)
    } else {
        Err(io::Error::other(format!(
            "{} does not hold the built-in tools as written",
            dir.display()
        )))
    }
}

/// FNV-1a over every built-in file's name, mode and bytes.
fn builtin_digest() -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    let mut eat = |b: &[u8]| {
        for &x in b {
            h ^= u64::from(x);
            h = h.wrapping_mul(0x0000_0100_0000_01b3);
        }
    };
    for f in BUILTIN {
        eat(f.name.as_bytes());
        eat(&[0, u8::from(f.executable)]);
        eat(f.bytes);
        eat(&[0xff]);
    }
    h
}

/// `dir` is owned by this user and writable by nobody else.
fn check_private(dir: &Path) -> io::Result<()> {
    use std::os::unix::fs::MetadataExt;
    let m = fs::symlink_metadata(dir)?;
    let me = toolsrv_base::effective_uid();
    if !m.is_dir() || m.uid() != me || m.mode() & 0o022 != 0 {
        return Err(io::Error::other(format!(
            "{} is not a directory of this user that only it can write (owner {}, mode {:o})",
            dir.display(),
            m.uid(),
            m.mode() & 0o7777
        )));
    }
    Ok(())
}

/// `dir` holds exactly the embedded files, with their modes, and is private.
fn is_intact(dir: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    if check_private(dir).is_err() {
        return false;
    }
    let Ok(entries) = fs::read_dir(dir) else {
        return false;
    };
    if entries.count() != BUILTIN.len() {
        return false;
    }
    BUILTIN.iter().all(|f| {
        let p = dir.join(f.name);
        let want = if f.executable { 0o755 } else { 0o644 };
        fs::symlink_metadata(&p).is_ok_and(|m| m.is_file() && m.mode() & 0o7777 == want)
            && fs::read(&p).is_ok_and(|b| b == f.bytes)
    })
}
