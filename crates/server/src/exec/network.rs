//! A run's network under `network.domains` (docs/network.md). Where the
//! host allows it, a network namespace of the run's own, holding only
//! loopback and the server's listeners, served by the run's proxy from the
//! server's namespace. Elsewhere (or under `TOOLSRV_NETWORK=fallback`) the
//! fallback: the server's one shared proxy on its loopback, which admits
//! each run by its own credentials, with Landlock letting the tool connect
//! to that port alone and the seccomp filter letting it make plain TCP
//! sockets only. Either way the tool's environment points its proxy-aware
//! programs at the proxy with credentials of this run only. Dropped with
//! the run's plan: the proxy stops serving the run, its namespace goes with
//! its last descriptor.

use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

use toolsrv_netproxy::{
    Allowlist, Credentials, Denials, Interception, Registration, RunListeners, RunProxy, Secrets,
    SharedProxy,
};
use toolsrv_sandbox::{NetworkMechanism, NetworkPool, PROXY_PORT};

use super::secrets::RunSecrets;
use super::Refused;

/// The user name in a run's proxy URLs in its own namespace (the password
/// is the run's own).
const PROXY_USER: &str = "toolsrv";

/// The Landlock ABI that limits TCP connections by port (4): the fallback
/// stands on it.
const TCP_PORTS_ABI: i32 = 4;

/// A run's network, served.
pub(crate) struct RunNet {
    /// Its namespace; `None` under the fallback.
    ns: Option<OwnedFd>,
    served: Served,
    variables: Vec<(String, String)>,
}

/// Who serves a run's network.
enum Served {
    /// The run's own proxy, in its namespace.
    Own(RunProxy),
    /// The shared proxy of the fallback, on its port.
    Shared(Registration, u16),
}

impl std::fmt::Debug for RunNet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RunNet").finish_non_exhaustive()
    }
}

/// Why a run's network could not be had.
#[derive(Debug, thiserror::Error)]
pub(crate) enum NetError {
    /// The namespace or its listeners could not be made.
    #[error("sandbox: network.domains: {0}")]
    Namespace(#[from] toolsrv_sandbox::NetworkError),
    /// The proxy could not serve them.
    #[error("sandbox: network.domains: cannot serve the run's proxy: {0}")]
    Serve(#[source] std::io::Error),
    /// The policy says `best_effort: false` and only the fallback is here.
    #[error("sandbox: network.domains: {0}; the policy says general.best_effort: false, which refuses it (set it to true to run with the fallback)")]
    FallbackRefused(String),
    /// The fallback needs Landlock's TCP rules, which this kernel lacks.
    #[error("sandbox: network.domains: {0}, and this kernel's Landlock (ABI {1}) cannot limit TCP connections to the proxy's port (ABI 4, Linux 6.7): the run would not be held to its domains")]
    FallbackUnenforced(String, i32),
}

/// How this server gives runs their network, and the fallback's shared
/// proxy once started.
#[derive(Default)]
pub(crate) struct Networks {
    mechanism: OnceLock<NetworkMechanism>,
    shared: tokio::sync::OnceCell<SharedProxy>,
    /// The authority and bundle of the secrets' TLS.
    pub(crate) tls: super::secrets::Tls,
}

impl Networks {
    /// Sets the mechanism (once, at start-up; until then: namespaces).
    pub(crate) fn set(&self, m: NetworkMechanism) {
        let _ = self.mechanism.set(m);
    }

    fn mechanism(&self) -> &NetworkMechanism {
        self.mechanism.get().unwrap_or(&NetworkMechanism::Namespace)
    }
}

/// A policy's run networks: its allowlist, and networks made ahead.
pub(crate) struct Supply {
    allow: Allowlist,
    networks: Arc<Networks>,
    /// Under namespaces: those made ahead.
    pool: Option<NetworkPool>,
}

impl Supply {
    /// The supply of `allow` on `networks`; under namespaces, its pool
    /// fills from now on.
    pub(crate) fn new(allow: Allowlist, networks: Arc<Networks>) -> Supply {
        let pool = match networks.mechanism() {
            NetworkMechanism::Namespace => Some(NetworkPool::new(&allow.ports())),
            NetworkMechanism::Fallback(_) => None,
        };
        Supply {
            allow,
            networks,
            pool,
        }
    }

    /// A run's network, served; a policy with `best_effort` false refuses
    /// the fallback.
    pub(crate) async fn run_net(
        &self,
        best_effort: bool,
        secrets: Option<&RunSecrets>,
    ) -> Result<RunNet, Refused> {
        let (secrets, tls) = match secrets {
            Some(s) => (s.secrets.clone(), Some(s.tls.clone())),
            None => (Secrets::default(), None),
        };
        match (&self.pool, self.networks.mechanism()) {
            (Some(pool), _) => self.own(pool, secrets, tls).await,
            (None, NetworkMechanism::Fallback(why)) => {
                self.fallback(why, best_effort, secrets, tls).await
            }
            (None, NetworkMechanism::Namespace) => {
                Err(NetError::Serve(std::io::Error::other("no pool")).into())
            }
        }
    }

    /// One made ahead, else one made now, served by a proxy of its own.
    async fn own(
        &self,
        pool: &NetworkPool,
        secrets: Secrets,
        tls: Option<Interception>,
    ) -> Result<RunNet, Refused> {
        let made = match pool.take() {
            Some(n) => n,
            None => {
                let pool = pool.clone();
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
        let proxy = RunProxy::start(
            listeners,
            self.allow.clone(),
            credentials.clone(),
            secrets,
            tls,
        )
        .map_err(NetError::Serve)?;
        Ok(RunNet {
            ns: Some(made.ns),
            served: Served::Own(proxy),
            variables: variables(&credentials, PROXY_PORT),
        })
    }

    /// The shared proxy (started on first use), admitting this run.
    async fn fallback(
        &self,
        why: &str,
        best_effort: bool,
        secrets: Secrets,
        tls: Option<Interception>,
    ) -> Result<RunNet, Refused> {
        if !best_effort {
            return Err(NetError::FallbackRefused(why.to_string()).into());
        }
        let abi = toolsrv_sandbox::landlock_abi();
        if abi < TCP_PORTS_ABI {
            return Err(NetError::FallbackUnenforced(why.to_string(), abi).into());
        }
        let shared = self
            .networks
            .shared
            .get_or_try_init(SharedProxy::start)
            .await
            .map_err(NetError::Serve)?;
        static RUNS: AtomicU64 = AtomicU64::new(1);
        let user = format!("run-{}", RUNS.fetch_add(1, Ordering::Relaxed));
        let credentials = Credentials::fresh(&user);
        let port = shared.local_addr().port();
        let registration = shared.register(self.allow.clone(), credentials.clone(), secrets, tls);
        Ok(RunNet {
            ns: None,
            served: Served::Shared(registration, port),
            variables: variables(&credentials, port),
        })
    }
}

impl RunNet {
    /// The namespace the child enters (none under the fallback).
    pub(crate) fn ns(&self) -> Option<BorrowedFd<'_>> {
        self.ns.as_ref().map(AsFd::as_fd)
    }

    /// Under the fallback, the shared proxy's port: the one TCP port the
    /// run may connect to.
    pub(crate) fn fallback_port(&self) -> Option<u16> {
        match &self.served {
            Served::Own(_) => None,
            Served::Shared(_, port) => Some(*port),
        }
    }

    /// The proxy variables, holding the run's credentials.
    pub(crate) fn variables(&self) -> &[(String, String)] {
        &self.variables
    }

    /// What the run's proxy refused so far.
    pub(crate) fn denials(&self) -> Denials {
        match &self.served {
            Served::Own(p) => p.denials(),
            Served::Shared(r, _) => r.denials(),
        }
    }
}

/// `HTTP_PROXY`, `HTTPS_PROXY`, `ALL_PROXY` and their lower-case forms
/// pointing at `127.0.0.1:port` with `creds`, and `NO_PROXY` empty.
fn variables(creds: &Credentials, port: u16) -> Vec<(String, String)> {
    let at = format!("{}:{}@127.0.0.1:{port}", creds.user, creds.password);
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
