//! A run's proxy: the server's side of a network namespace made for runs
//! (docs/network.md). The listeners were made inside the namespace; this
//! serves them from the server's tasks, which dial upstreams from the
//! server's own namespace: the explicit proxy (with the run's
//! credentials), a capture listener per listed port, the DNS stub.
//!
//! The proxy outlives a run: the namespace serves one run after another,
//! each with a [`Gate`] of its own (its credentials, names, secrets and
//! denials) put in the slot as it starts and taken out as it ends. With no
//! run in the slot, a connection is closed and a query unanswered. All of
//! it stops when the value is dropped.

use std::sync::{Arc, Mutex};

use tokio::net::TcpStream;
use tokio_util::sync::CancellationToken;

use crate::allow::Allowlist;
use crate::denial::Denials;
use crate::door::Door;
use crate::gate::{Credentials, Gate};
use crate::names::Names;
use crate::proxy::{accept_loop, HEAD_TIMEOUT};
use crate::secret::Secrets;
use crate::tls::Interception;

/// The sockets of a run's namespace the server serves.
#[derive(Debug)]
pub struct RunListeners {
    /// The explicit proxy (HTTP and SOCKS5).
    pub proxy: std::net::TcpListener,
    /// The capture listeners, one per listed port.
    pub captures: Vec<std::net::TcpListener>,
    /// The DNS stub's sockets.
    pub dns: Vec<std::net::UdpSocket>,
}

/// The gate of the run the namespace serves now, if any.
#[derive(Default)]
pub(crate) struct Slot(Mutex<Option<Arc<Gate>>>);

impl Slot {
    pub(crate) fn gate(&self) -> Option<Arc<Gate>> {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    fn set(&self, gate: Option<Arc<Gate>>) {
        *self.0.lock().unwrap_or_else(|p| p.into_inner()) = gate;
    }
}

/// The run's proxy of a namespace, serving while it lives.
pub struct RunProxy {
    stop: CancellationToken,
    slot: Arc<Slot>,
}

impl std::fmt::Debug for RunProxy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("RunProxy(…)")
    }
}

impl RunProxy {
    /// Serves `listeners` on the current Tokio runtime, for no run yet
    /// ([`RunProxy::admit`]).
    pub fn start(listeners: RunListeners) -> std::io::Result<RunProxy> {
        let stop = CancellationToken::new();
        let slot = Arc::new(Slot::default());
        let tcp = |l: std::net::TcpListener| {
            l.set_nonblocking(true)?;
            tokio::net::TcpListener::from_std(l)
        };
        let proxy = tcp(listeners.proxy)?;
        let captures = listeners
            .captures
            .into_iter()
            .map(tcp)
            .collect::<std::io::Result<Vec<_>>>()?;
        let dns = listeners
            .dns
            .into_iter()
            .map(|u| {
                u.set_nonblocking(true)?;
                tokio::net::UdpSocket::from_std(u)
            })
            .collect::<std::io::Result<Vec<_>>>()?;
        tokio::spawn(accept_loop(
            proxy,
            Arc::new(Door::Slot(slot.clone())),
            stop.clone(),
            crate::proxy::handle,
        ));
        for l in captures {
            tokio::spawn(accept_loop(l, slot.clone(), stop.clone(), captured));
        }
        for u in dns {
            tokio::spawn(crate::dns::serve(u, slot.clone(), stop.clone()));
        }
        Ok(RunProxy { stop, slot })
    }

    /// Serves a run from now on, under `allow`: the explicit proxy takes
    /// only `credentials`; `secrets` are filled in for their hosts, over
    /// TLS made with `tls`. Its denials.
    pub fn admit(
        &self,
        allow: Allowlist,
        credentials: Credentials,
        secrets: Secrets,
        tls: Option<Interception>,
    ) -> Denials {
        let denials = Denials::default();
        self.slot.set(Some(Arc::new(Gate {
            allow,
            head_timeout: HEAD_TIMEOUT,
            // The listeners are in the run's namespace: no upstream dialled
            // from the server's can be one of them.
            own: Vec::new(),
            denials: denials.clone(),
            names: Arc::new(Names::default()),
            credentials: Some(credentials),
            secrets,
            tls,
        })));
        denials
    }

    /// Serves no run (the one it served is over).
    pub fn vacate(&self) {
        self.slot.set(None);
    }
}

/// A captured connection, under the gate of the run served now.
async fn captured(conn: TcpStream, slot: Arc<Slot>) -> std::io::Result<()> {
    match slot.gate() {
        Some(gate) => crate::capture::captured(conn, gate).await,
        None => Ok(()),
    }
}

impl Drop for RunProxy {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}
