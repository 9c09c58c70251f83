//! A run's proxy: the server's side of the run's own network namespace
//! (docs/network.md). The listeners were made inside the namespace; this
//! serves them from the server's tasks, which dial upstreams from the
//! server's own namespace: the explicit proxy (with the run's
//! credentials), a capture listener per listed port, the DNS stub. All of
//! it, connections in flight included, stops when the value is dropped.

use std::sync::Arc;

use tokio_util::sync::CancellationToken;

use crate::allow::Allowlist;
use crate::denial::Denials;
use crate::gate::{Credentials, Gate};
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

/// A run's proxy, serving while it lives.
#[derive(Debug)]
pub struct RunProxy {
    stop: CancellationToken,
    denials: Denials,
}

impl RunProxy {
    /// Serves `listeners` under `allow` on the current Tokio runtime; the
    /// explicit proxy takes only `credentials`; `secrets` are filled in
    /// for their hosts, over TLS made with `tls`.
    pub fn start(
        listeners: RunListeners,
        allow: Allowlist,
        credentials: Credentials,
        secrets: Secrets,
        tls: Option<Interception>,
    ) -> std::io::Result<RunProxy> {
        let stop = CancellationToken::new();
        let denials = Denials::default();
        let gate = Arc::new(Gate {
            allow,
            head_timeout: HEAD_TIMEOUT,
            // The listeners are in the run's namespace: no upstream dialled
            // from the server's can be one of them.
            own: Vec::new(),
            denials: denials.clone(),
            names: Arc::default(),
            credentials: Some(credentials),
            secrets,
            tls,
        });
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
            Arc::new(crate::door::Door::One(gate.clone())),
            stop.clone(),
            crate::proxy::handle,
        ));
        for l in captures {
            tokio::spawn(accept_loop(
                l,
                gate.clone(),
                stop.clone(),
                crate::capture::captured,
            ));
        }
        for u in dns {
            tokio::spawn(crate::dns::serve(u, gate.clone(), stop.clone()));
        }
        Ok(RunProxy { stop, denials })
    }

    /// What it refused so far.
    pub fn denials(&self) -> Denials {
        self.denials.clone()
    }
}

impl Drop for RunProxy {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}
