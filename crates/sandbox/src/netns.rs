//! A run's own network namespace (docs/network.md, "A run's own network"):
//! made by a thread of the server that `unshare`s into a new one, brings
//! its loopback up, routes every address to it (`local default dev lo`,
//! IPv4 and IPv6), opens there the listeners the server serves (the
//! explicit proxy on `127.0.0.1:PROXY_PORT`, a capture listener on each
//! listed port, a DNS stub on port 53) and keeps the namespace by a
//! descriptor. The child enters it with `setns` before its confinement.
//!
//! Inside, a TCP connection to any address lands on a capture listener
//! (whose local address is the destination the tool dialled) or is refused;
//! UDP reaches only the DNS stub; nothing inside has a route out. The
//! server's sockets stay in the namespace they were made in, and the server
//! dials upstreams from its own. No helper process runs in the sandbox and
//! no packet filter is set.

mod netlink;
mod pool;

pub use pool::{start_maker, NetworkPool, DEPTH};

use std::io;
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, TcpListener, UdpSocket};
use std::os::fd::OwnedFd;

use socket2::{Domain, Protocol, Socket, Type};

/// The server environment variable that forces the fallback
/// (`TOOLSRV_NETWORK=fallback`): runs under `network.domains` then get no
/// namespace of their own even where one could be had.
pub const FORCE_ENV: &str = "TOOLSRV_NETWORK";

/// How runs under `network.domains` get their network on this host.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NetworkMechanism {
    /// Each run in a network namespace of its own.
    Namespace,
    /// No namespace can be had (the reason): the fallback, a proxy on the
    /// server's loopback that Landlock lets the tool reach alone, plain TCP
    /// only; a tool that ignores the proxy variables fails.
    Fallback(String),
}

impl NetworkMechanism {
    /// The mechanism here: the fallback when `force` (`TOOLSRV_NETWORK`)
    /// says `fallback` or when this process may not make a network
    /// namespace (probed on a thread of its own, which then ends).
    pub fn choose(force: Option<&str>) -> NetworkMechanism {
        if force.is_some_and(|v| v.trim().eq_ignore_ascii_case("fallback")) {
            return NetworkMechanism::Fallback(format!("{FORCE_ENV}=fallback"));
        }
        let probe = std::thread::Builder::new()
            .name("toolsrv-netns-probe".into())
            .spawn(|| {
                // Safety: no pointers; changes only this thread's namespace.
                if unsafe { libc::unshare(libc::CLONE_NEWNET) } == 0 {
                    Ok(())
                } else {
                    Err(io::Error::last_os_error())
                }
            })
            .map_err(|e| e.to_string())
            .and_then(|t| t.join().map_err(|_| "the probe panicked".to_string()));
        match probe {
            Ok(Ok(())) => NetworkMechanism::Namespace,
            Ok(Err(e)) => NetworkMechanism::Fallback(format!(
                "this server may not make network namespaces (unshare(CLONE_NEWNET): {e})"
            )),
            Err(e) => {
                NetworkMechanism::Fallback(format!("cannot probe for network namespaces: {e}"))
            }
        }
    }

    /// One line saying what runs under `network.domains` get.
    pub fn describe(&self) -> String {
        match self {
            NetworkMechanism::Namespace => "each run under network.domains in a network namespace of its own (loopback and the server's listeners only)".to_string(),
            NetworkMechanism::Fallback(why) => format!(
                "the fallback for network.domains ({why}): runs reach only the server's proxy on its loopback, by plain TCP; tools that ignore the proxy variables fail"
            ),
        }
    }
}

/// The explicit proxy's port on the run's `127.0.0.1`.
pub const PROXY_PORT: u16 = 3128;

/// How many connections a listener queues.
const BACKLOG: i32 = 128;

/// A run's network namespace, made and holding the server's listeners.
#[derive(Debug)]
pub struct RunNetwork {
    /// The namespace (`setns` with `CLONE_NEWNET`).
    pub ns: OwnedFd,
    /// The explicit proxy's listener, `127.0.0.1:`[`PROXY_PORT`].
    pub proxy: TcpListener,
    /// A listener on every address for each listed port, with the port.
    pub captures: Vec<(u16, TcpListener)>,
    /// The DNS stub's sockets, port 53 on every address.
    pub dns: Vec<UdpSocket>,
}

/// Why a run's network could not be made.
#[derive(Debug, thiserror::Error)]
#[error("cannot make the run's network namespace ({step}): {source}")]
pub struct NetworkError {
    /// The step that failed.
    pub step: &'static str,
    /// Why.
    #[source]
    pub source: io::Error,
}

impl NetworkError {
    /// Whether the host refused a namespace to this server (no privilege
    /// for it), rather than failing to make one.
    pub fn refused(&self) -> bool {
        self.step == "unshare" && matches!(self.source.raw_os_error(), Some(libc::EPERM))
    }
}

fn at(step: &'static str) -> impl Fn(io::Error) -> NetworkError {
    move |source| NetworkError { step, source }
}

/// `ports` in order, each once, without 0 and [`PROXY_PORT`].
fn capture_ports(ports: &[u16]) -> Vec<u16> {
    let mut p: Vec<u16> = ports
        .iter()
        .copied()
        .filter(|&p| p != 0 && p != PROXY_PORT)
        .collect();
    p.sort_unstable();
    p.dedup();
    p
}

/// A new namespace with the listeners of `ports` (the capture ports), made
/// on the calling thread, which is in it from then on (until the next
/// call): only the maker thread calls it (`pool.rs`).
fn make(ports: &[u16]) -> Result<RunNetwork, NetworkError> {
    // Safety: no pointers; changes only this thread's namespace.
    if unsafe { libc::unshare(libc::CLONE_NEWNET) } != 0 {
        return Err(at("unshare")(io::Error::last_os_error()));
    }
    let ns = std::fs::File::open("/proc/thread-self/ns/net")
        .map(OwnedFd::from)
        .map_err(at("open the namespace"))?;
    netlink::loopback_up().map_err(at("bring loopback up"))?;
    netlink::route_all_to_loopback(libc::AF_INET as u8).map_err(at("route IPv4 to loopback"))?;
    // IPv6 may be off on the host: then it has nowhere to go at all.
    let v6 = netlink::route_all_to_loopback(libc::AF_INET6 as u8).is_ok();
    let proxy =
        TcpListener::bind((Ipv4Addr::LOCALHOST, PROXY_PORT)).map_err(at("listen for the proxy"))?;
    let mut captures = Vec::with_capacity(ports.len());
    for &port in ports {
        captures.push((
            port,
            tcp_any(port, v6).map_err(at("listen on a listed port"))?,
        ));
    }
    let dns = vec![udp_any(53, v6).map_err(at("listen for DNS"))?];
    Ok(RunNetwork {
        ns,
        proxy,
        captures,
        dns,
    })
}

/// The address that means every address: IPv6's, taking IPv4 as mapped
/// addresses too, where IPv6 is on.
fn any(port: u16, v6: bool) -> (Domain, SocketAddr) {
    if v6 {
        (
            Domain::IPV6,
            SocketAddr::from((Ipv6Addr::UNSPECIFIED, port)),
        )
    } else {
        (
            Domain::IPV4,
            SocketAddr::from((Ipv4Addr::UNSPECIFIED, port)),
        )
    }
}

fn tcp_any(port: u16, v6: bool) -> io::Result<TcpListener> {
    let (domain, addr) = any(port, v6);
    let s = Socket::new(domain, Type::STREAM.cloexec(), Some(Protocol::TCP))?;
    if v6 {
        s.set_only_v6(false)?;
    }
    s.set_reuse_address(true)?;
    s.set_nonblocking(true)?;
    s.bind(&addr.into())?;
    s.listen(BACKLOG)?;
    Ok(s.into())
}

fn udp_any(port: u16, v6: bool) -> io::Result<UdpSocket> {
    let (domain, addr) = any(port, v6);
    let s = Socket::new(domain, Type::DGRAM.cloexec(), Some(Protocol::UDP))?;
    if v6 {
        s.set_only_v6(false)?;
    }
    s.set_nonblocking(true)?;
    s.bind(&addr.into())?;
    Ok(s.into())
}
