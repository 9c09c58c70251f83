//! A run's network under `network.domains` (docs/network.md): a network
//! namespace of the run's own, holding only loopback and the server's
//! listeners, served by the run's proxy from the server's namespace; and
//! the variables that point the tool's proxy-aware programs at it, with
//! credentials of this run only. Dropped with the run's plan: the proxy
//! stops, the namespace goes with its last descriptor.

use std::os::fd::{AsFd, BorrowedFd};

use toolsrv_netproxy::{Allowlist, Credentials, Denials, RunListeners, RunProxy};
use toolsrv_sandbox::{NetworkPool, PROXY_PORT};

use super::Refused;

/// The user name in a run's proxy URLs (the password is the run's own).
const PROXY_USER: &str = "toolsrv";

/// A run's own network, served.
pub(crate) struct RunNet {
    ns: std::os::fd::OwnedFd,
    proxy: RunProxy,
    variables: Vec<(String, String)>,
}

impl std::fmt::Debug for RunNet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RunNet").finish_non_exhaustive()
    }
}

/// What a refusal adds where the host gives this server no namespace.
const NO_NAMESPACE: &str = "; this server may not make network namespaces (it needs root), and the fallback without one is not built yet: run the server as root, or remove network.domains";

/// Why a run's network could not be had.
#[derive(Debug, thiserror::Error)]
pub(crate) enum NetError {
    /// The namespace or its listeners could not be made.
    #[error("sandbox: network.domains: {0}{hint}", hint = if .0.refused() { NO_NAMESPACE } else { "" })]
    Namespace(#[from] toolsrv_sandbox::NetworkError),
    /// The proxy could not serve them.
    #[error("sandbox: network.domains: cannot serve the run's proxy: {0}")]
    Serve(#[source] std::io::Error),
}

/// A policy's run networks: its allowlist, and networks made ahead.
pub(crate) struct Supply {
    allow: Allowlist,
    pool: NetworkPool,
}

impl Supply {
    /// The supply of `allow`, its pool filling from now on.
    pub(crate) fn new(allow: Allowlist) -> Supply {
        let pool = NetworkPool::new(&allow.ports());
        Supply { allow, pool }
    }

    /// A run's network: one made ahead, else one made now; served.
    pub(crate) async fn run_net(&self) -> Result<RunNet, Refused> {
        let made = match self.pool.take() {
            Some(n) => n,
            None => {
                let pool = self.pool.clone();
                tokio::task::spawn_blocking(move || pool.make_now())
                    .await
                    .map_err(|e| NetError::Serve(std::io::Error::other(e)))?
                    .map_err(NetError::Namespace)?
            }
        };
        let credentials = Credentials::fresh(PROXY_USER);
        let listeners = RunListeners {
            proxy: made.proxy,
            captures: made.captures.into_iter().map(|(_, l)| l).collect(),
            dns: made.dns,
        };
        let proxy = RunProxy::start(listeners, self.allow.clone(), credentials.clone())
            .map_err(NetError::Serve)?;
        Ok(RunNet {
            ns: made.ns,
            proxy,
            variables: variables(&credentials),
        })
    }
}

impl RunNet {
    /// The namespace the child enters.
    pub(crate) fn ns(&self) -> BorrowedFd<'_> {
        self.ns.as_fd()
    }

    /// The proxy variables, holding the run's credentials.
    pub(crate) fn variables(&self) -> &[(String, String)] {
        &self.variables
    }

    /// What the run's proxy refused so far.
    pub(crate) fn denials(&self) -> Denials {
        self.proxy.denials()
    }
}

/// `HTTP_PROXY`, `HTTPS_PROXY`, `ALL_PROXY` and their lower-case forms
/// pointing at the run's proxy with `creds`, and `NO_PROXY` empty.
fn variables(creds: &Credentials) -> Vec<(String, String)> {
    let at = format!("{}:{}@127.0.0.1:{PROXY_PORT}", creds.user, creds.password);
    let http = format!("http://{at}");
    let socks = format!("socks5h://{at}");
    let mut v = Vec::with_capacity(8);
    for (name, value) in [
        ("HTTP_PROXY", &http),
        ("HTTPS_PROXY", &http),
        ("ALL_PROXY", &socks),
        ("NO_PROXY", &String::new()),
    ] {
        v.push((name.to_string(), value.clone()));
        v.push((name.to_ascii_lowercase(), value.clone()));
    }
    v
}
