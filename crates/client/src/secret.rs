//! Locating or creating the shared secret (docs/protocol.md, "Authentication";
//! docs/client.md, "Where a generated secret lives": moved out of the
//! socket's directory by issue 33).
//!
//! Order: `$TOOLSRV_SECRET`, else the content of the explicit secret file,
//! else of `<socket>.secret` when it exists (a legacy file, or one pinned
//! there: read in place, never moved), else of the socket's file in the
//! per-user secrets directory ([`crate::secret_store`]); if none exists a
//! new secret (32 random bytes as 64 lowercase hex characters) is generated
//! and stored there with mode 0600. The secret itself is never logged nor
//! put in an error message.
//!
//! A secret file is used only when it is owned by this process's uid and
//! neither group nor others may read or write it: anyone who can read it can
//! authenticate (and approve bypass requests), and anyone who can write it
//! chooses the secret this client sends. Otherwise it is an error naming the
//! file, its owner or mode, and the reason.

use std::ffi::OsString;
use std::fs::OpenOptions;
use std::io::{ErrorKind, Read, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use crate::error::ClientError;
use crate::secret_store;

/// The environment variable that overrides every secret file.
pub const SECRET_ENV: &str = "TOOLSRV_SECRET";
/// The server accepts secrets of at most this many bytes.
pub const MAX_SECRET_LEN: usize = 1024;

/// Resolve the shared secret for `socket` in the order of the module doc
/// (docs/cli.md, "The client"; where a generated secret lives there too).
///
/// `secret_file` is the `--secret-file` flag; when given it must exist. An
/// empty `$TOOLSRV_SECRET` counts as unset.
pub fn resolve_secret(socket: &Path, secret_file: Option<&Path>) -> Result<String, ClientError> {
    let env = std::env::var(SECRET_ENV).ok();
    resolve_with_env(
        env,
        socket,
        secret_file,
        toolsrv_base::userdir::user_dir().as_deref(),
    )
}

/// [`resolve_secret`] with the environment variable's value and the per-user
/// directory passed in (testable without mutating the process environment).
pub(crate) fn resolve_with_env(
    env: Option<String>,
    socket: &Path,
    secret_file: Option<&Path>,
    user_dir: Option<&Path>,
) -> Result<String, ClientError> {
    if let Some(s) = env.filter(|s| !s.is_empty()) {
        if s.len() > MAX_SECRET_LEN {
            return Err(ClientError::Auth(format!(
                "${SECRET_ENV} is {} bytes long, more than the {MAX_SECRET_LEN} allowed",
                s.len()
            )));
        }
        return Ok(s);
    }
    if let Some(file) = secret_file {
        return match read_secret_file(file)? {
            Some(s) => Ok(s),
            None => Err(ClientError::Auth(format!(
                "secret file {} does not exist",
                file.display()
            ))),
        };
    }
    if let Some(s) = read_secret_file(&default_secret_path(socket))? {
        return Ok(s);
    }
    let Some(user_dir) = user_dir else {
        return Err(ClientError::Auth(format!(
            "no place for the secret of {}: neither XDG_RUNTIME_DIR, XDG_STATE_HOME nor HOME \
             is an absolute path (set one, or pass --secret-file or ${SECRET_ENV})",
            socket.display()
        )));
    };
    let path = secret_store::secret_path(user_dir, socket);
    if let Some(s) = read_secret_file(&path)? {
        return Ok(s);
    }
    for dir in [user_dir.to_path_buf(), secret_store::secrets_dir(user_dir)] {
        toolsrv_base::userdir::ensure_private_dir(&dir)
            .map_err(|e| ClientError::io(format!("cannot use {} for secrets", dir.display()), e))?;
    }
    let secret = create_secret_file(&path)?;
    secret_store::record_socket(&path, socket);
    secret_store::remove_stale(user_dir, &[socket.to_path_buf()], secret_store::STALE_AFTER);
    Ok(secret)
}

/// Whether a secret for `socket` is at hand without generating one:
/// `$TOOLSRV_SECRET`, `secret_file`, `<socket>.secret` or the socket's file
/// in the per-user secrets directory.
pub fn has_secret(socket: &Path, secret_file: Option<&Path>) -> bool {
    std::env::var_os(SECRET_ENV).is_some_and(|v| !v.is_empty())
        || secret_file.is_some()
        || default_secret_path(socket).exists()
        || toolsrv_base::userdir::user_dir()
            .is_some_and(|d| secret_store::secret_path(&d, socket).exists())
}

/// Where a secret for `socket` is or would be generated: the per-user
/// secrets directory's file (`None` without a per-user directory). Not
/// where a `$TOOLSRV_SECRET`, `--secret-file` or legacy `<socket>.secret`
/// comes from.
pub fn generated_secret_path(socket: &Path) -> Option<PathBuf> {
    toolsrv_base::userdir::user_dir().map(|d| secret_store::secret_path(&d, socket))
}

/// The file [`resolve_secret`] takes the secret of `socket` from when neither
/// `$TOOLSRV_SECRET` nor a `--secret-file` is given: `<socket>.secret` when it
/// exists, else the socket's file in the per-user secrets directory (whether
/// or not it exists yet); `<socket>.secret` without a per-user directory.
/// Which file that is depends on `$XDG_RUNTIME_DIR`, `$XDG_STATE_HOME` and
/// `$HOME`, so error messages name it.
pub fn secret_file_path(socket: &Path) -> PathBuf {
    let legacy = default_secret_path(socket);
    if legacy.exists() {
        return legacy;
    }
    generated_secret_path(socket).unwrap_or(legacy)
}

/// The secret in `<socket>.secret` only (no `$TOOLSRV_SECRET`, no
/// `--secret-file`, no per-user directory), created there if missing: for
/// sockets whose secret is pinned there, in a private directory, such as a
/// remote's forwarded socket.
pub fn socket_secret(socket: &Path) -> Result<String, ClientError> {
    let path = default_secret_path(socket);
    match read_secret_file(&path)? {
        Some(s) => Ok(s),
        None => create_secret_file(&path),
    }
}

/// `<socket>.secret`: where clients before issue 33 kept the secret, and
/// where `toolsrv remote` pins a forwarded socket's. Read when it exists,
/// never created by [`resolve_secret`].
pub fn default_secret_path(socket: &Path) -> PathBuf {
    toolsrv_base::Sibling::Secret.of(socket)
}

/// Read and trim a secret file; `Ok(None)` if it does not exist.
fn read_secret_file(path: &Path) -> Result<Option<String>, ClientError> {
    let file = match std::fs::File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == ErrorKind::NotFound => return Ok(None),
        Err(e) => {
            return Err(ClientError::io(
                format!("cannot open secret file {}", path.display()),
                e,
            ))
        }
    };
    check_owner_and_mode(path, &file)?;
    // Read a little more than the limit so that an oversized file is detected
    // without reading an unbounded amount.
    let mut buf = Vec::new();
    file.take(4 * MAX_SECRET_LEN as u64 + 1)
        .read_to_end(&mut buf)
        .map_err(|e| ClientError::io(format!("cannot read secret file {}", path.display()), e))?;
    let text = String::from_utf8(buf).map_err(|_| {
        ClientError::Auth(format!("secret file {} is not UTF-8 text", path.display()))
    })?;
    let trimmed = text.trim();
    if trimmed.is_empty() {
        return Err(ClientError::Auth(format!(
            "secret file {} is empty",
            path.display()
        )));
    }
    if trimmed.len() > MAX_SECRET_LEN {
        return Err(ClientError::Auth(format!(
            "secret file {} holds more than {MAX_SECRET_LEN} bytes",
            path.display()
        )));
    }
    Ok(Some(trimmed.to_owned()))
}

/// Refuse a secret file that another uid owns or that group or others may
/// read or write. Checked on the opened file, so the file checked is the file
/// read.
fn check_owner_and_mode(path: &Path, file: &std::fs::File) -> Result<(), ClientError> {
    use std::os::unix::fs::MetadataExt;
    let meta = file
        .metadata()
        .map_err(|e| ClientError::io(format!("cannot stat secret file {}", path.display()), e))?;
    let me = toolsrv_base::effective_uid();
    if meta.uid() != me {
        return Err(ClientError::Auth(format!(
            "secret file {} is owned by uid {}, not by this user (uid {me}); refusing to use it",
            path.display(),
            meta.uid()
        )));
    }
    let mode = meta.mode() & 0o7777;
    if mode & 0o066 != 0 {
        return Err(ClientError::Auth(format!(
            "secret file {} has mode {mode:04o}: group or others may {} it; \
             refusing to use it (chmod 600 it)",
            path.display(),
            if mode & 0o044 != 0 { "read" } else { "write" }
        )));
    }
    Ok(())
}

/// A new secret: 32 random bytes as 64 lowercase hex characters.
fn generate_secret() -> String {
    let bytes: [u8; 32] = rand::random();
    hex::encode(bytes)
}

/// Create `path` holding a new secret, mode 0600, atomically: the secret is
/// written to a private temporary file which is then hard-linked to `path`
/// (the link fails if `path` exists). If another client created `path`
/// meanwhile, its secret is used instead, so concurrent first connections
/// agree on one secret and nobody ever reads a half-written file.
fn create_secret_file(path: &Path) -> Result<String, ClientError> {
    let secret = generate_secret();
    let mut tmp = OsString::from(path.as_os_str());
    tmp.push(format!(
        ".tmp.{}.{}",
        std::process::id(),
        hex::encode(rand::random::<[u8; 8]>())
    ));
    let tmp = PathBuf::from(tmp);
    let mut file = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&tmp)
        .map_err(|e| ClientError::io(format!("cannot create secret file {}", tmp.display()), e))?;
    let written = file
        .write_all(secret.as_bytes())
        .and_then(|()| file.sync_all())
        .map_err(|e| ClientError::io(format!("cannot write secret file {}", tmp.display()), e));
    drop(file);
    // Ok(true): our file is in place; Ok(false): someone else's was first.
    let linked = written.and_then(|()| match std::fs::hard_link(&tmp, path) {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == ErrorKind::AlreadyExists => Ok(false),
        Err(e) => Err(ClientError::io(
            format!("cannot create secret file {}", path.display()),
            e,
        )),
    });
    // The temporary name is private; failing to remove it only leaves litter.
    let _ = std::fs::remove_file(&tmp);
    if linked? {
        return Ok(secret);
    }
    match read_secret_file(path)? {
        Some(s) => Ok(s),
        None => Err(ClientError::Auth(format!(
            "secret file {} vanished while it was being created",
            path.display()
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    /// Write a secret file with mode 0600 (what the checks require).
    fn write_private(path: &Path, content: &str) {
        std::fs::write(path, content).expect("write");
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600)).expect("chmod");
    }

    fn tmpdir(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!(
            "toolsrv-client-secret-{name}-{}-{}",
            std::process::id(),
            hex::encode(rand::random::<[u8; 4]>())
        ));
        std::fs::create_dir_all(&dir).expect("create temp dir");
        dir
    }

    /// The per-user directory of a test: `<dir>/user`.
    fn user(dir: &Path) -> PathBuf {
        dir.join("user")
    }

    #[test]
    fn env_var_wins_over_files() {
        let dir = tmpdir("env");
        let sock = dir.join("s");
        write_private(&default_secret_path(&sock), "from-file\n");
        let got = resolve_with_env(Some("from-env".into()), &sock, None, Some(&user(&dir)))
            .expect("resolve");
        assert_eq!(got, "from-env");
        let _ = std::fs::remove_dir_all(dir);
    }

    #[test]
    fn public_function_reads_the_real_env_var() {
        // The only test that touches the process environment.
        let dir = tmpdir("realenv");
        let sock = dir.join("s");
        std::env::set_var(SECRET_ENV, "real-env-secret");
        let got = resolve_secret(&sock, None);
        std::env::remove_var(SECRET_ENV);
        assert_eq!(got.expect("resolve"), "real-env-secret");
        assert!(!default_secret_path(&sock).exists());
        let _ = std::fs::remove_dir_all(dir);
    }

    #[test]
    fn explicit_file_is_read_and_trimmed() {
        let dir = tmpdir("explicit");
        let sock = dir.join("s");
        let file = dir.join("my.secret");
        write_private(&file, "  hunter2 \n");
        write_private(&default_secret_path(&sock), "other");
        let got = resolve_with_env(None, &sock, Some(&file), Some(&user(&dir))).expect("resolve");
        assert_eq!(got, "hunter2");
        let _ = std::fs::remove_dir_all(dir);
    }

    #[test]
    fn missing_explicit_file_is_an_error_naming_it() {
        let dir = tmpdir("missing");
        let file = dir.join("nope.secret");
        let err = resolve_with_env(None, &dir.join("s"), Some(&file), Some(&user(&dir)))
            .expect_err("must fail");
        assert!(err.to_string().contains("nope.secret"), "{err}");
    }

    #[test]
    fn default_file_is_read() {
        let dir = tmpdir("default");
        let sock = dir.join("s");
        write_private(&default_secret_path(&sock), "\tabc\n");
        assert_eq!(
            resolve_with_env(None, &sock, None, Some(&user(&dir))).expect("resolve"),
            "abc"
        );
        let _ = std::fs::remove_dir_all(dir);
    }

    #[test]
    fn empty_file_is_an_error_naming_the_file() {
        let dir = tmpdir("empty");
        let sock = dir.join("s");
        write_private(&default_secret_path(&sock), " \n");
        let err = resolve_with_env(None, &sock, None, Some(&user(&dir))).expect_err("must fail");
        let msg = err.to_string();
        assert!(msg.contains("s.secret") && msg.contains("empty"), "{msg}");
        let _ = std::fs::remove_dir_all(dir);
    }

    #[test]
    fn a_secret_file_others_may_read_or_write_is_refused() {
        let dir = tmpdir("mode");
        let sock = dir.join("s");
        let file = default_secret_path(&sock);
        for (mode, verb) in [
            (0o644, "read"),
            (0o640, "read"),
            (0o604, "read"),
            (0o620, "write"),
        ] {
            write_private(&file, "hunter2");
            std::fs::set_permissions(&file, std::fs::Permissions::from_mode(mode)).expect("chmod");
            let err =
                resolve_with_env(None, &sock, None, Some(&user(&dir))).expect_err("must refuse");
            let msg = err.to_string();
            assert!(
                msg.contains("s.secret")
                    && msg.contains(&format!("{mode:04o}"))
                    && msg.contains(verb),
                "{msg}"
            );
            assert!(!msg.contains("hunter2"), "{msg}");
        }
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o400)).expect("chmod");
        assert_eq!(
            resolve_with_env(None, &sock, None, Some(&user(&dir))).expect("0400 is fine"),
            "hunter2"
        );
        let _ = std::fs::remove_dir_all(dir);
    }

    #[test]
    fn a_secret_file_of_another_owner_is_refused() {
        let dir = tmpdir("owner");
        let file = dir.join("their.secret");
        write_private(&file, "hunter2");
        let me = toolsrv_base::effective_uid();
        if me != 0 || std::os::unix::fs::chown(&file, Some(65534), Some(65534)).is_err() {
            // Only root can give a file away; nothing to check otherwise.
            return;
        }
        let err = resolve_with_env(None, &dir.join("s"), Some(&file), Some(&user(&dir)))
            .expect_err("must refuse");
        assert!(err.to_string().contains("owned by uid 65534"), "{err}");
        let _ = std::fs::remove_dir_all(dir);
    }

    #[test]
    fn generated_secret_is_hex_mode_0600_stable_and_not_beside_the_socket() {
        let dir = tmpdir("gen");
        let sock = dir.join("s");
        let first = resolve_with_env(None, &sock, None, Some(&user(&dir))).expect("generate");
        assert_eq!(first.len(), 64);
        assert!(first
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)));
        let file = secret_store::secret_path(&user(&dir), &sock);
        let meta = std::fs::metadata(&file).expect("stat");
        assert_eq!(meta.permissions().mode() & 0o777, 0o600);
        for d in [user(&dir), secret_store::secrets_dir(&user(&dir))] {
            let m = std::fs::metadata(&d).expect("stat dir");
            assert_eq!(m.permissions().mode() & 0o777, 0o700, "{}", d.display());
        }
        let second = resolve_with_env(None, &sock, None, Some(&user(&dir))).expect("read back");
        assert_eq!(first, second);
        assert!(
            !default_secret_path(&sock).exists(),
            "nothing beside the socket"
        );
        // No temporary files are left behind; the socket is recorded.
        let mut names: Vec<_> = std::fs::read_dir(secret_store::secrets_dir(&user(&dir)))
            .expect("readdir")
            .filter_map(|e| e.ok())
            .map(|e| e.file_name())
            .collect();
        names.sort();
        let key = secret_store::socket_key(&sock);
        assert_eq!(
            names,
            vec![
                OsString::from(&key),
                OsString::from(format!("{key}.socket"))
            ]
        );
        let _ = std::fs::remove_dir_all(dir);
    }

    #[test]
    fn a_legacy_secret_beside_the_socket_is_read_in_place_and_not_moved() {
        let dir = tmpdir("legacy");
        let sock = dir.join("s");
        write_private(&default_secret_path(&sock), "legacy-secret\n");
        let got = resolve_with_env(None, &sock, None, Some(&user(&dir))).expect("resolve");
        assert_eq!(got, "legacy-secret");
        assert!(default_secret_path(&sock).exists());
        assert!(!user(&dir).exists(), "nothing generated");
        let _ = std::fs::remove_dir_all(dir);
    }

    #[test]
    fn without_a_per_user_directory_nothing_is_generated() {
        let dir = tmpdir("nouser");
        let err = resolve_with_env(None, &dir.join("s"), None, None).expect_err("no place");
        assert!(err.to_string().contains("XDG_RUNTIME_DIR"), "{err}");
        assert!(!default_secret_path(&dir.join("s")).exists());
        let _ = std::fs::remove_dir_all(dir);
    }

    #[test]
    fn a_socket_secret_is_pinned_beside_the_socket() {
        let dir = tmpdir("pinned");
        let sock = dir.join("s");
        let s = socket_secret(&sock).expect("create");
        assert_eq!(
            std::fs::read_to_string(default_secret_path(&sock)).unwrap(),
            s
        );
        assert_eq!(socket_secret(&sock).expect("read"), s);
        let _ = std::fs::remove_dir_all(dir);
    }

    #[test]
    fn concurrent_generation_agrees_on_one_secret() {
        let dir = tmpdir("race");
        let sock = dir.join("s");
        let barrier = std::sync::Arc::new(std::sync::Barrier::new(8));
        let handles: Vec<_> = (0..8)
            .map(|_| {
                let sock = sock.clone();
                let home = user(&dir);
                let barrier = barrier.clone();
                std::thread::spawn(move || {
                    barrier.wait();
                    resolve_with_env(None, &sock, None, Some(&home))
                })
            })
            .collect();
        let secrets: Vec<String> = handles
            .into_iter()
            .map(|h| h.join().expect("thread").expect("resolve"))
            .collect();
        let on_disk =
            std::fs::read_to_string(secret_store::secret_path(&user(&dir), &sock)).expect("read");
        assert!(
            secrets.iter().all(|s| *s == on_disk),
            "{secrets:?} vs {on_disk}"
        );
        let _ = std::fs::remove_dir_all(dir);
    }
}
