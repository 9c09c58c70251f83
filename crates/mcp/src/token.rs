//! The HTTP transport's bearer token.

use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

use rand::RngCore;

use crate::error::BridgeError;

/// 32 random bytes as 64 lowercase hex characters.
pub fn generate_token() -> String {
    let mut b = [0u8; 32];
    rand::rng().fill_bytes(&mut b);
    hex::encode(b)
}

/// Writes `token` to `path` with mode 0600, replacing what was there
/// atomically (a private temporary file renamed over it), so nobody ever
/// reads a half-written token or a file with wider permissions.
pub fn write_token_file(path: &Path, token: &str) -> Result<(), BridgeError> {
    let dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let tmp = dir.join(format!(".{}.{}.tmp", file_name(path), std::process::id()));
    let err = |e| BridgeError::io(format!("cannot write the token file {}", path.display()), e);
    let _ = std::fs::remove_file(&tmp);
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&tmp)
        .map_err(err)?;
    f.write_all(token.as_bytes())
        .and_then(|_| f.write_all(b"\n"))
        .and_then(|_| f.sync_all())
        .map_err(err)?;
    std::fs::rename(&tmp, path).map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        err(e)
    })
}

fn file_name(path: &Path) -> String {
    path.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "token".into())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn tokens_are_64_hex_and_differ() {
        let (a, b) = (generate_token(), generate_token());
        assert_eq!(a.len(), 64);
        assert!(a
            .bytes()
            .all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase()));
        assert_ne!(a, b);
    }

    #[test]
    fn token_file_is_0600_and_replaced() {
        let dir = tempfile::tempdir().ok();
        let Some(dir) = dir else { return };
        let p = dir.path().join("t");
        assert!(std::fs::write(&p, "old").is_ok());
        assert!(std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o644)).is_ok());
        assert!(write_token_file(&p, "abc").is_ok());
        assert_eq!(std::fs::read_to_string(&p).ok().as_deref(), Some("abc\n"));
        let mode = std::fs::metadata(&p)
            .map(|m| m.permissions().mode() & 0o777)
            .ok();
        assert_eq!(mode, Some(0o600));
        assert_eq!(
            std::fs::read_dir(dir.path()).map(|d| d.count()).ok(),
            Some(1)
        );
    }
}
