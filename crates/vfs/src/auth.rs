//! The authentication hook: `Tauth` creates an [`AuthHandle`], `Tattach` asks it
//! whether the secret was accepted.

use std::sync::Arc;

use crate::error::Error;
use crate::node::Handle;

/// The state of one auth fid: the client writes its secret and reads its token.
pub trait AuthHandle: Handle {
    /// Whether a secret was accepted on this auth fid.
    fn authenticated(&self) -> bool;
}

/// The server's authentication policy.
pub trait Auth: Send + Sync + 'static {
    /// Start an authentication for `Tauth uname aname`. `Err` is the `Rerror`
    /// (e.g. `authentication not required`).
    fn start(&self, uname: &str, aname: &str) -> Result<Arc<dyn AuthHandle>, Error>;
    /// Whether `Tattach` with `NOFID` is allowed.
    fn allows_anonymous(&self) -> bool;
}

/// No authentication: `Tauth` is refused, anonymous attach allowed.
pub struct NoAuth;

impl Auth for NoAuth {
    fn start(&self, _: &str, _: &str) -> Result<Arc<dyn AuthHandle>, Error> {
        Err(Error::new("authentication not required"))
    }
    fn allows_anonymous(&self) -> bool {
        true
    }
}
