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
