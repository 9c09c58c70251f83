//! Who may use a proxy listener, and under which run's rules: a run's own
//! listener has one [`Gate`] (in the run's namespace, with the run's
//! credentials); the fallback's shared listener holds every live run's
//! gate by the credentials in its proxy variables ([`SharedProxy`]). A
//! client that shows no live run's credentials gets no gate at all.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, Weak};

use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use crate::allow::Allowlist;
use crate::denial::Denials;
use crate::gate::{Credentials, Gate};
use crate::names::Names;
use crate::proxy::{accept_loop, HEAD_TIMEOUT};
use crate::secret::Secrets;
use crate::tls::Interception;

/// The gates a listener admits by.
pub(crate) enum Door {
    /// One gate; its credentials, if it has any, must be shown.
    One(Arc<Gate>),
    /// Live runs' gates, by user name (the fallback's shared listener).
    Many(Arc<Registry>),
    /// The gate of the run a namespace serves now, if any.
    Slot(Arc<crate::run::Slot>),
}

/// Live runs' gates by user name, each with its password.
#[derive(Default)]
pub(crate) struct Registry(Mutex<HashMap<String, Arc<Gate>>>);

impl Door {
    /// How long a client may take to say where it goes.
    pub(crate) fn head_timeout(&self) -> std::time::Duration {
        match self {
            Door::One(g) => g.head_timeout,
            Door::Many(_) | Door::Slot(_) => HEAD_TIMEOUT,
        }
    }

    /// The gate of a client that showed no credentials: only a listener of
    /// one gate without credentials has one.
    pub(crate) fn open(&self) -> Option<Arc<Gate>> {
        match self {
            Door::One(g) if g.credentials.is_none() => Some(g.clone()),
            _ => None,
        }
    }

    /// The gate `user` and `password` open, if they are a live run's.
    pub(crate) fn admit(&self, user: &[u8], password: &[u8]) -> Option<Arc<Gate>> {
        let gate = match self {
            Door::One(g) => g.clone(),
            Door::Slot(s) => s.gate()?,
            Door::Many(r) => {
                let user = std::str::from_utf8(user).ok()?;
                r.0.lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .get(user)?
                    .clone()
            }
        };
        let creds = gate.credentials.as_ref()?;
        creds.matches(user, password).then_some(gate)
    }
}

/// The fallback's proxy (docs/network.md, "Where no namespace can be
/// had"): one listener on the server's loopback for every run under
/// `network.domains`, each run admitted by its own credentials and held to
/// its own policy. It serves until dropped.
pub struct SharedProxy {
    registry: Arc<Registry>,
    addr: SocketAddr,
    stop: CancellationToken,
}

impl std::fmt::Debug for SharedProxy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "SharedProxy({})", self.addr)
    }
}

impl SharedProxy {
    /// Listens on `127.0.0.1`, a port the kernel picks, and serves on the
    /// current Tokio runtime.
    pub async fn start() -> std::io::Result<SharedProxy> {
        let listener = TcpListener::bind((std::net::Ipv4Addr::LOCALHOST, 0)).await?;
        let addr = listener.local_addr()?;
        let registry = Arc::new(Registry::default());
        let stop = CancellationToken::new();
        tokio::spawn(accept_loop(
            listener,
            Arc::new(Door::Many(registry.clone())),
            stop.clone(),
            crate::proxy::handle,
        ));
        Ok(SharedProxy {
            registry,
            addr,
            stop,
        })
    }

    /// Where it listens.
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// Admits a run by `credentials` (their user name must be unique among
    /// live runs) under `allow`, until the registration is dropped.
    pub fn register(
        &self,
        allow: Allowlist,
        credentials: Credentials,
        secrets: Secrets,
        tls: Option<Interception>,
    ) -> Registration {
        let denials = Denials::default();
        let user = credentials.user.clone();
        let gate = Arc::new(Gate {
            allow,
            head_timeout: HEAD_TIMEOUT,
            own: vec![self.addr],
            denials: denials.clone(),
            names: Arc::new(Names::default()),
            credentials: Some(credentials),
            secrets,
            tls,
        });
        self.registry
            .0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(user.clone(), gate);
        Registration {
            registry: Arc::downgrade(&self.registry),
            user,
            denials,
        }
    }
}

impl Drop for SharedProxy {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

/// A run admitted by the [`SharedProxy`]; dropping it shuts the run out.
#[derive(Debug)]
pub struct Registration {
    registry: Weak<Registry>,
    user: String,
    denials: Denials,
}

impl Registration {
    /// What the proxy refused the run so far.
    pub fn denials(&self) -> Denials {
        self.denials.clone()
    }
}

impl Drop for Registration {
    fn drop(&mut self) {
        if let Some(r) = self.registry.upgrade() {
            r.0.lock()
                .unwrap_or_else(|p| p.into_inner())
                .remove(&self.user);
        }
    }
}
