//! Shared-secret authentication (docs/protocol.md, "Authentication").
//!
//! The first accepted secret is stored (in memory only) and a 64-hex-digit session
//! token is created; later clients must present the same secret and get the same
//! token. The secret is compared in constant time and never logged. With
//! `--secret-file` the secret is pinned at startup ([`SecretAuth::pinned`]): no
//! client can set another.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use subtle::ConstantTimeEq;
use toolsrv_base::LockUnpoisoned;
use toolsrv_vfs::{Auth, AuthHandle, Error, Handle};

/// The largest secret accepted, in bytes.
pub(crate) const MAX_SECRET_LEN: usize = 1024;

struct Stored {
    secret: Vec<u8>,
    token: String,
}

/// The server's secret and token, set by the first authenticated client.
#[derive(Default)]
pub(crate) struct SecretAuth {
    stored: Mutex<Option<Stored>>,
}

impl SecretAuth {
    /// A fresh authenticator with no secret stored.
    pub(crate) fn new() -> Arc<SecretAuth> {
        Arc::new(SecretAuth::default())
    }

    /// An authenticator that accepts only `secret` (`serve --secret-file`):
    /// it is stored, with its token, before any client comes.
    pub(crate) fn pinned(secret: &[u8]) -> Arc<SecretAuth> {
        Arc::new(SecretAuth {
            stored: Mutex::new(Some(Stored {
                secret: secret.to_vec(),
                token: hex::encode(rand::random::<[u8; 32]>()),
            })),
        })
    }

    /// The session token, once a secret was stored.
    pub(crate) fn token(&self) -> Option<String> {
        self.stored
            .lock_unpoisoned()
            .as_ref()
            .map(|s| s.token.clone())
    }

    /// Check `secret` (storing it if none is stored yet); returns the token.
    fn accept(&self, secret: &[u8]) -> Result<String, Error> {
        let mut g = self.stored.lock_unpoisoned();
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
pub(crate) struct SecretAuthPolicy(pub(crate) Arc<SecretAuth>);

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
        *self.token.lock_unpoisoned() = Some(token);
        self.accepted.store(true, Ordering::Release);
        Ok(data.len() as u32)
    }

    async fn read(&self, offset: u64, count: u32) -> Result<Vec<u8>, Error> {
        let token = self.token.lock_unpoisoned().clone();
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
