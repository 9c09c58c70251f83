//! `serve --secret-file F` (docs/protocol.md, "Authentication"): the pinned secret, read once at
//! startup from a file only the server's uid can read.

use std::io::Read;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use crate::auth::MAX_SECRET_LEN;

/// Why the secret file cannot be used (startup fails, exit 1).
#[derive(Debug, thiserror::Error)]
pub enum SecretFileError {
    /// It cannot be opened or read.
    #[error("--secret-file {path}: cannot read it: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// Not a regular file.
    #[error("--secret-file {0}: not a regular file")]
    NotAFile(PathBuf),
    /// Owned by another uid.
    #[error("--secret-file {path}: owned by uid {owner}, not by the server's uid {uid}")]
    Owner {
        /// The file.
        path: PathBuf,
        /// Its owner.
        owner: u32,
        /// The server's uid.
        uid: u32,
    },
    /// Group or others may access it.
    #[error(
        "--secret-file {path}: mode {mode:04o} lets group or others access it (want 0600 or 0400)"
    )]
    Mode {
        /// The file.
        path: PathBuf,
        /// Its permission bits.
        mode: u32,
    },
    /// Empty (after trimming) or longer than the protocol allows.
    #[error("--secret-file {path}: the secret must be 1 to {MAX_SECRET_LEN} bytes after trimming whitespace, got {len}")]
    Length {
        /// The file.
        path: PathBuf,
        /// The trimmed length.
        len: usize,
    },
}

/// A secret; never shown by `Debug`.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(Vec<u8>);

impl Secret {
    /// The secret's bytes.
    pub(crate) fn bytes(&self) -> &[u8] {
        &self.0
    }
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Secret(..)")
    }
}

/// Read the secret from `path`, which must be a regular file owned by `uid`
/// and not accessible to group or others (checked on the opened file, so a
/// swap of the path between check and read changes nothing). Surrounding
/// whitespace is trimmed.
pub fn load(path: &Path, uid: u32) -> Result<Secret, SecretFileError> {
    let read_err = |source| SecretFileError::Read {
        path: path.to_path_buf(),
        source,
    };
    let mut f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open(path)
        .map_err(read_err)?;
    let meta = f.metadata().map_err(read_err)?;
    if !meta.is_file() {
        return Err(SecretFileError::NotAFile(path.to_path_buf()));
    }
    if meta.uid() != uid {
        return Err(SecretFileError::Owner {
            path: path.to_path_buf(),
            owner: meta.uid(),
            uid,
        });
    }
    let mode = meta.mode() & 0o7777;
    if mode & 0o077 != 0 {
        return Err(SecretFileError::Mode {
            path: path.to_path_buf(),
            mode,
        });
    }
    let mut raw = Vec::new();
    f.by_ref()
        .take(64 * 1024)
        .read_to_end(&mut raw)
        .map_err(read_err)?;
    let secret = raw.trim_ascii();
    if secret.is_empty() || secret.len() > MAX_SECRET_LEN {
        return Err(SecretFileError::Length {
            path: path.to_path_buf(),
            len: secret.len(),
        });
    }
    Ok(Secret(secret.to_vec()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn uid() -> u32 {
        toolsrv_base::effective_uid()
    }

    fn file(text: &str, mode: u32) -> (tempfile::TempDir, PathBuf) {
        let d = tempfile::tempdir().expect("tempdir");
        let p = d.path().join("secret");
        std::fs::write(&p, text).expect("write");
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(mode)).expect("chmod");
        (d, p)
    }

    #[test]
    fn a_private_file_gives_its_trimmed_secret() {
        let (_d, p) = file("  s3cret\n", 0o600);
        assert_eq!(load(&p, uid()).expect("loads").bytes(), b"s3cret");
        assert_eq!(
            format!("{:?}", load(&p, uid()).expect("loads")),
            "Secret(..)"
        );
    }

    #[test]
    fn group_or_other_access_owner_and_length_are_refused_naming_the_file() {
        let (_d, p) = file("s3cret", 0o644);
        let e = load(&p, uid()).expect_err("0644").to_string();
        assert!(
            e.contains(&p.display().to_string()) && e.contains("0644"),
            "{e}"
        );
        let (_d, p) = file("s3cret", 0o600);
        let e = load(&p, uid().wrapping_add(1))
            .expect_err("owner")
            .to_string();
        assert!(e.contains("owned by uid"), "{e}");
        let (_d, p) = file(" \n", 0o600);
        let e = load(&p, uid()).expect_err("empty").to_string();
        assert!(e.contains("1 to 1024 bytes"), "{e}");
        let e = load(Path::new("/nonexistent/secret"), uid()).expect_err("missing");
        assert!(e.to_string().contains("/nonexistent/secret"), "{e}");
    }
}
