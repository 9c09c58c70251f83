//! What every connection of one proxy is decided by: its allowlist, its
//! own addresses (never a destination), the names its DNS stub gave out,
//! the credentials a client must show, and where refusals are recorded.
//! Connecting goes through here, so each way in (HTTP, SOCKS, a captured
//! connection) is checked the same way.

use std::net::SocketAddr;
use std::sync::Arc;

use tokio::net::TcpStream;

use crate::allow::Allowlist;
use crate::decide::{destination, Refusal, Target};
use crate::denial::{Denial, Denials};
use crate::names::Names;

/// What a client shows the explicit proxy: the user-info of the proxy URL
/// in its environment.
#[derive(Clone, PartialEq, Eq)]
pub struct Credentials {
    /// The user name.
    pub user: String,
    /// The password.
    pub password: String,
}

impl std::fmt::Debug for Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Credentials({}:…)", self.user)
    }
}

impl Credentials {
    /// A user name and a fresh random password (128 bits, hex).
    pub fn fresh(user: &str) -> Credentials {
        let bytes: [u8; 16] = rand::random();
        Credentials {
            user: user.to_string(),
            password: hex::encode(bytes),
        }
    }

    /// Whether `user` and `password` are these, compared in time that does
    /// not depend on where they differ.
    pub fn matches(&self, user: &[u8], password: &[u8]) -> bool {
        let same = |a: &[u8], b: &[u8]| {
            a.len() == b.len() && a.iter().zip(b).fold(0u8, |d, (x, y)| d | (x ^ y)) == 0
        };
        same(self.user.as_bytes(), user) & same(self.password.as_bytes(), password)
    }
}

/// The decisions of one proxy.
pub(crate) struct Gate {
    pub(crate) allow: Allowlist,
    pub(crate) head_timeout: std::time::Duration,
    pub(crate) own: Vec<SocketAddr>,
    pub(crate) denials: Denials,
    pub(crate) names: Arc<Names>,
    pub(crate) credentials: Option<Credentials>,
    /// The run's secrets, filled in for their hosts.
    pub(crate) secrets: crate::secret::Secrets,
    /// How their hosts' TLS is terminated and re-made (none: no secret
    /// goes over TLS).
    pub(crate) tls: Option<crate::tls::Interception>,
}

impl Gate {
    /// Records a refusal that is not a connection's (a request that did
    /// not parse) with the text the tool read.
    pub(crate) fn record_malformed(&self, target: String, reason: String) {
        self.denials.push(Denial {
            time: std::time::SystemTime::now(),
            kind: crate::denial::DenialKind::Domain,
            access: "connect",
            target,
            reason,
            allow: String::new(),
        });
    }

    /// The upstream for `target`, connected, or the refusal (recorded).
    pub(crate) async fn connect(&self, target: &Target) -> Result<TcpStream, Refusal> {
        let addrs = match destination(&self.allow, target, &self.own).await {
            Ok(a) => a,
            Err(r) => {
                self.denials.push(Denial::of(&r, target.to_string()));
                return Err(r);
            }
        };
        let mut last = None;
        for a in addrs {
            match TcpStream::connect(a).await {
                Ok(s) => {
                    let _ = s.set_nodelay(true);
                    return Ok(s);
                }
                Err(e) => last = Some(e),
            }
        }
        Err(Refusal::NoAddress {
            target: target.clone(),
            error: last.map_or_else(|| "no address".to_string(), |e| e.to_string()),
        })
    }
}
