//! From a request's target to the addresses the proxy connects to, or a
//! refusal that names the host and the line that would allow it. The
//! proxy resolves the name itself and connects to exactly the addresses it
//! checked: what a tool's own resolver says never counts.

use std::net::{IpAddr, SocketAddr};

use crate::address::{classify, AddressKind};
use crate::allow::{is_host_name, normalize, Allowlist};

/// Where a request asks to go: the request target or CONNECT authority,
/// never a `Host` header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    /// The host as asked (a name, or an address literal).
    pub host: String,
    /// The port.
    pub port: u16,
}

impl std::fmt::Display for Target {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.host.contains(':') {
            write!(f, "[{}]:{}", self.host, self.port)
        } else {
            write!(f, "{}:{}", self.host, self.port)
        }
    }
}

/// Why a target is refused. The text is what the tool reads.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    /// No `domains` line allows the name and port.
    #[error("toolsrv: {target} is not allowed by the sandbox's network.domains; the line \"{suggest}\" there would allow it")]
    NotListed {
        /// The target.
        target: Target,
        /// The line that would allow it.
        suggest: String,
    },
    /// The target is an address no address or range line allows.
    #[error("toolsrv: {target} is an address no network.domains line allows; the sandbox allows hosts by name, or an address or range listed as such (the line \"{target}\" would allow this one)")]
    Literal {
        /// The target.
        target: Target,
    },
    /// The target is not a host name at all.
    #[error("toolsrv: {host:?} is not a host name")]
    BadName {
        /// What was asked.
        host: String,
    },
    /// The name resolves only to addresses a tool may not reach.
    #[error("toolsrv: {target} resolves to {address}, {kind}, which the sandbox does not connect to; pin the name in network.hosts to allow it")]
    Unreachable {
        /// The target.
        target: Target,
        /// The first address it resolved to.
        address: IpAddr,
        /// What kind of address that is.
        kind: &'static str,
    },
    /// The name does not resolve.
    #[error("toolsrv: {target} does not resolve: {error}")]
    NoAddress {
        /// The target.
        target: Target,
        /// The resolver's error.
        error: String,
    },
    /// The target is the proxy itself (a CONNECT nested through it).
    #[error("toolsrv: {target} is this proxy; a request through it cannot come back to it")]
    Itself {
        /// The target.
        target: Target,
    },
}

impl Refusal {
    /// The target refused.
    pub fn target(&self) -> Option<&Target> {
        match self {
            Refusal::NotListed { target, .. }
            | Refusal::Literal { target }
            | Refusal::Unreachable { target, .. }
            | Refusal::NoAddress { target, .. }
            | Refusal::Itself { target } => Some(target),
            Refusal::BadName { .. } => None,
        }
    }
}

/// The addresses to connect to for `target` under `allow`: a pin's, else
/// the public ones the name resolves to (in the resolver's order). `own`
/// are the proxy's listening addresses, never a destination.
pub async fn destination(
    allow: &Allowlist,
    target: &Target,
    own: &[SocketAddr],
) -> Result<Vec<SocketAddr>, Refusal> {
    let host = normalize(&target.host);
    if let Ok(ip) = host
        .trim_start_matches('[')
        .trim_end_matches(']')
        .parse::<IpAddr>()
    {
        // An address goes only where an address or range line allows it.
        if allow.allows_address(ip, target.port).is_none() {
            return Err(Refusal::Literal {
                target: target.clone(),
            });
        }
        let a = SocketAddr::new(ip.to_canonical(), target.port);
        if is_own(&a, own) {
            return Err(Refusal::Itself {
                target: target.clone(),
            });
        }
        return Ok(vec![a]);
    }
    if !is_host_name(&host) {
        return Err(Refusal::BadName {
            host: target.host.clone(),
        });
    }
    if allow.allows(&host, target.port).is_none() {
        let suggest = if matches!(target.port, 80 | 443) {
            host.clone()
        } else {
            format!("{host}:{}", target.port)
        };
        return Err(Refusal::NotListed {
            target: target.clone(),
            suggest,
        });
    }
    let addrs: Vec<SocketAddr> = match allow.pinned(&host) {
        Some(pinned) => pinned
            .iter()
            .map(|ip| SocketAddr::new(*ip, target.port))
            .collect(),
        None => {
            let found: Vec<SocketAddr> = tokio::net::lookup_host((host.as_str(), target.port))
                .await
                .map_err(|e| Refusal::NoAddress {
                    target: target.clone(),
                    error: e.to_string(),
                })?
                .collect();
            let public: Vec<SocketAddr> = found
                .iter()
                .copied()
                .filter(|a| classify(a.ip()).is_public())
                .collect();
            if public.is_empty() {
                let Some(first) = found.first() else {
                    return Err(Refusal::NoAddress {
                        target: target.clone(),
                        error: "no address".to_string(),
                    });
                };
                return Err(Refusal::Unreachable {
                    target: target.clone(),
                    address: first.ip(),
                    kind: classify(first.ip()).describe(),
                });
            }
            public
        }
    };
    if addrs.iter().any(|a| is_own(a, own)) {
        return Err(Refusal::Itself {
            target: target.clone(),
        });
    }
    Ok(addrs)
}

/// Whether `a` is one of the proxy's own listening addresses (an
/// unspecified listening address stands for every local one).
fn is_own(a: &SocketAddr, own: &[SocketAddr]) -> bool {
    own.iter().any(|o| {
        o.port() == a.port()
            && (o.ip() == a.ip()
                || (o.ip().is_unspecified() && classify(a.ip()) != AddressKind::Public))
    })
}
