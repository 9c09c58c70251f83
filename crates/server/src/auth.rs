//! Shared-secret authentication (CONTRACT §3).
//!
//! The first accepted secret is stored (in memory only) and a 64-hex-digit session
//! token is created; later clients must present the same secret and get the same
//! token. With `serve --secret-file` the secret is pinned from the start
//! ([`SecretAuth::pinned`]): only that secret is ever accepted, even from the
//! first client. The secret is compared in constant time and never logged.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use subtle::ConstantTimeEq;
use toolsrv_vfs::{Auth, AuthHandle, Error, Handle};

/// The largest secret accepted, in bytes.
pub const MAX_SECRET_LEN: usize = 1024;

/// Why a `--secret-file` cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum SecretFileError {
    /// The file cannot be opened or read.
    #[error("--secret-file {path}: {source}")]
    Read {
        /// The file.
        path: String,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// Owner, mode or content is not acceptable.
    #[error("--secret-file {path}: {reason}")]
    Unsafe {
        /// The file.
        path: String,
        /// Why.
        reason: String,
    },
}

/// Read a pinned secret (CONTRACT §3): the file must be owned by this
/// process's uid and readable by no one else; surrounding whitespace is
/// trimmed and 1 to [`MAX_SECRET_LEN`] bytes must remain.
pub fn read_secret_file(path: &std::path::Path) -> Result<Vec<u8>, SecretFileError> {
    use std::io::Read;
    use std::os::unix::fs::MetadataExt;
    let name = path.display().to_string();
    let read_err = |source| SecretFileError::Read {
        path: name.clone(),
        source,
    };
    let unsafe_err = |reason: String| SecretFileError::Unsafe {
        path: name.clone(),
        reason,
    };
    let mut f = std::fs::File::open(path).map_err(read_err)?;
    let meta = f.metadata().map_err(read_err)?;
    if !meta.is_file() {
        return Err(unsafe_err("not a regular file".into()));
    }
    // Safety: geteuid has no preconditions.
    let uid = unsafe { libc::geteuid() };
    if meta.uid() != uid {
        return Err(unsafe_err(format!(
            "owned by uid {}, not by the server's uid {uid}",
            meta.uid()
        )));
    }
    let mode = meta.mode() & 0o777;
    if mode & 0o077 != 0 {
        return Err(unsafe_err(format!(
            "mode {mode:04o} lets group or others access it (chmod 600)"
        )));
    }
    let mut raw = Vec::new();
    f.by_ref()
        .take(MAX_SECRET_LEN as u64 * 4 + 1)
        .read_to_end(&mut raw)
        .map_err(read_err)?;
    let trimmed = raw.trim_ascii();
    if trimmed.is_empty() || trimmed.len() > MAX_SECRET_LEN {
        return Err(unsafe_err(format!(
            "the secret must be 1 to {MAX_SECRET_LEN} bytes after trimming, got {}",
            trimmed.len()
        )));
    }
    Ok(trimmed.to_vec())
}

struct Stored {
    secret: Vec<u8>,
    token: String,
}

/// The server's secret and token, set by the first authenticated client.
#[derive(Default)]
pub struct SecretAuth {
    stored: Mutex<Option<Stored>>,
}

impl SecretAuth {
    /// A fresh authenticator with no secret stored.
    pub fn new() -> Arc<SecretAuth> {
        Arc::new(SecretAuth::default())
    }

    /// An authenticator whose secret is fixed (`serve --secret-file`): no
    /// client can set another one, the first included.
    pub fn pinned(secret: Vec<u8>) -> Arc<SecretAuth> {
        Arc::new(SecretAuth {
            stored: Mutex::new(Some(Stored {
                secret,
                token: hex::encode(rand::random::<[u8; 32]>()),
            })),
        })
    }

    /// The session token, once a secret was stored.
    pub fn token(&self) -> Option<String> {
        self.lock().as_ref().map(|s| s.token.clone())
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Option<Stored>> {
        self.stored.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Check `secret` (storing it if none is stored yet); returns the token.
    fn accept(&self, secret: &[u8]) -> Result<String, Error> {
        let mut g = self.lock();
        match &*g {
            Some(s) => {
                if bool::from(s.secret.as_slice().ct_eq(secret)) {
                    Ok(s.token.clone())
                } else {
                    Err(Error::new("authentication failed"))
                }
            }
            None => {
                let token = hex::encode(rand::random::<[u8; 32]>());
                *g = Some(Stored {
                    secret: secret.to_vec(),
                    token: token.clone(),
                });
                Ok(token)
            }
        }
    }
}

/// A server-side [`Auth`] that requires the shared secret.
pub struct SecretAuthPolicy(pub Arc<SecretAuth>);

impl Auth for SecretAuthPolicy {
    fn start(&self, _uname: &str, _aname: &str) -> Result<Arc<dyn AuthHandle>, Error> {
        Ok(Arc::new(AuthFid {
            auth: self.0.clone(),
            accepted: AtomicBool::new(false),
            token: Mutex::new(None),
        }))
    }
    fn allows_anonymous(&self) -> bool {
        false
    }
}

/// One auth fid: write the secret, read the token.
struct AuthFid {
    auth: Arc<SecretAuth>,
    accepted: AtomicBool,
    token: Mutex<Option<String>>,
}

#[async_trait]
impl Handle for AuthFid {
    async fn write(&self, _offset: u64, data: Vec<u8>) -> Result<u32, Error> {
        if data.is_empty() || data.len() > MAX_SECRET_LEN {
            return Err(Error::new(format!(
                "secret must be 1 to {MAX_SECRET_LEN} bytes, got {}",
                data.len()
            )));
        }
        let token = self.auth.accept(&data)?;
        *self.token.lock().unwrap_or_else(|p| p.into_inner()) = Some(token);
        self.accepted.store(true, Ordering::Release);
        Ok(data.len() as u32)
    }

    async fn read(&self, offset: u64, count: u32) -> Result<Vec<u8>, Error> {
        let token = self.token.lock().unwrap_or_else(|p| p.into_inner()).clone();
        let Some(token) = token else {
            return Err(Error::new(
                "authentication required: write the secret first",
            ));
        };
        Ok(crate::files::slice_at(token.as_bytes(), offset, count))
    }
}

impl AuthHandle for AuthFid {
    fn authenticated(&self) -> bool {
        self.accepted.load(Ordering::Acquire)
    }
}
