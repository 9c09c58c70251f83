//! A run's network under `network.domains` (docs/network.md). Where the
//! host allows it, a network namespace of the run's own, holding only
//! loopback and the server's listeners, served by the run's proxy from the
//! server's namespace. Elsewhere (or under `TOOLSRV_NETWORK=fallback`) the
//! fallback: the server's one shared proxy on its loopback, which admits
//! each run by its own credentials, with Landlock letting the tool connect
//! to that port alone and the seccomp filter letting it make plain TCP
//! sockets only. Either way the tool's environment points its proxy-aware
//! programs at the proxy with credentials of this run only. Dropped with
//! the run's plan: the proxy stops serving the run; its namespace serves
//! the next run of the policy (where the run's processes are sure to be
//! gone), or goes with its last descriptor.

use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use toolsrv_base::LockUnpoisoned;

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
    served: Served,
    variables: Vec<(String, String)>,
}

/// Who serves a run's network.
enum Served {
    /// A namespace of the server's, serving this run alone until it ends
    /// (its proxy, its denials); then kept for the next run, or dropped.
    Own(Option<Lent>, Denials),
    /// The shared proxy of the fallback, on its port.
    Shared(Registration, u16),
}

impl std::fmt::Debug for RunNet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RunNet").finish_non_exhaustive()
    }
}

/// A namespace and its proxy, serving runs one after another.
struct Idle {
    ns: OwnedFd,
    proxy: RunProxy,
}

/// An [`Idle`] lent to a run, and where it goes back.
struct Lent {
    idle: Idle,
    supply: Arc<Kept>,
}

/// A policy's namespaces between runs, and the pool new ones come from.
struct Kept {
    idle: Mutex<Vec<Idle>>,
    pool: NetworkPool,
    /// Whether a namespace may serve another run once its run is over:
    /// only where the run's processes are sure to be gone by then (its
    /// kernel group is killed whole).
    reuse: bool,
}

impl Drop for RunNet {
    fn drop(&mut self) {
        let Served::Own(lent, _) = &mut self.served else {
            return;
        };
        let Some(Lent { idle, supply }) = lent.take() else {
            return;
        };
        idle.proxy.vacate();
        let mut kept = supply.idle.lock_unpoisoned();
        if supply.reuse && kept.len() < toolsrv_sandbox::NETWORK_POOL_DEPTH {
            kept.push(idle);
        } else {
            drop(kept);
            drop(idle);
            supply.pool.forget();
        }
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
    /// Whether a run's namespace serves later runs ([`Kept::reuse`]).
    reuse: OnceLock<bool>,
    shared: tokio::sync::OnceCell<SharedProxy>,
    /// The authority and bundle of the secrets' TLS.
    pub(crate) tls: super::secrets::Tls,
}

impl Networks {
    /// Sets the mechanism (once, at start-up; until then: namespaces).
    pub(crate) fn set(&self, m: NetworkMechanism) {
        let _ = self.mechanism.set(m);
    }

    /// Whether runs' namespaces serve later runs (once, at start-up).
    pub(crate) fn set_reuse(&self, reuse: bool) {
        let _ = self.reuse.set(reuse);
    }

    fn mechanism(&self) -> &NetworkMechanism {
        self.mechanism.get().unwrap_or(&NetworkMechanism::Namespace)
    }
}

/// A policy's run networks: its allowlist, and networks made ahead.
pub(crate) struct Supply {
    allow: Allowlist,
    networks: Arc<Networks>,
    /// Under namespaces: those made ahead and those between runs.
    kept: Option<Arc<Kept>>,
}

impl Supply {
    /// The supply of `allow` on `networks`; under namespaces, its pool
    /// fills from now on.
    pub(crate) fn new(allow: Allowlist, networks: Arc<Networks>) -> Supply {
        let kept = match networks.mechanism() {
            NetworkMechanism::Namespace => Some(Arc::new(Kept {
                idle: Mutex::new(Vec::new()),
                pool: NetworkPool::new(&allow.ports()),
                reuse: networks.reuse.get().copied().unwrap_or(false),
            })),
            NetworkMechanism::Fallback(_) => None,
        };
        Supply {
            allow,
            networks,
            kept,
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
        match (&self.kept, self.networks.mechanism()) {
            (Some(kept), _) => self.own(kept, secrets, tls).await,
            (None, NetworkMechanism::Fallback(why)) => {
                self.fallback(why, best_effort, secrets, tls).await
            }
            (None, NetworkMechanism::Namespace) => {
                Err(NetError::Serve(std::io::Error::other("no pool")).into())
            }
        }
    }

    /// One kept from an earlier run, else one made ahead, else one made
    /// now; served for this run alone.
    async fn own(
        &self,
        kept: &Arc<Kept>,
        secrets: Secrets,
        tls: Option<Interception>,
    ) -> Result<RunNet, Refused> {
        let idle = kept.idle.lock_unpoisoned().pop();
        let idle = match idle {
            Some(i) => i,
            None => {
                let made = match kept.pool.take() {
                    Some(n) => n,
                    None => {
                        let pool = kept.pool.clone();
                        tokio::task::spawn_blocking(move || pool.make_now())
                            .await
                            .map_err(|e| NetError::Serve(std::io::Error::other(e)))?
                            .map_err(NetError::Namespace)?
                    }
                };
                let listeners = RunListeners {
                    proxy: made.proxy,
                    captures: made.captures.into_iter().map(|(_, l)| l).collect(),
                    dns: made.dns,
                };
                let proxy = RunProxy::start(listeners).map_err(|e| {
                    kept.pool.forget();
                    NetError::Serve(e)
                })?;
                Idle { ns: made.ns, proxy }
            }
        };
        let credentials = Credentials::fresh(PROXY_USER);
        let denials = idle
            .proxy
            .admit(self.allow.clone(), credentials.clone(), secrets, tls);
        Ok(RunNet {
            served: Served::Own(
                Some(Lent {
                    idle,
                    supply: kept.clone(),
                }),
                denials,
            ),
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
            served: Served::Shared(registration, port),
            variables: variables(&credentials, port),
        })
    }
}

impl RunNet {
    /// The namespace the child enters (none under the fallback).
    pub(crate) fn ns(&self) -> Option<BorrowedFd<'_>> {
        match &self.served {
            Served::Own(Some(lent), _) => Some(lent.idle.ns.as_fd()),
            _ => None,
        }
    }

    /// Under the fallback, the shared proxy's port: the one TCP port the
    /// run may connect to.
    pub(crate) fn fallback_port(&self) -> Option<u16> {
        match &self.served {
            Served::Own(..) => None,
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
            Served::Own(_, d) => d.clone(),
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
