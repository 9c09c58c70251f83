//! The filtering network proxy of confined runs (issue 37, first part):
//! a run reaches only the hosts its policy lists by name, through this
//! proxy, which takes the destination from the request target (an HTTP
//! `CONNECT` authority, an absolute-form URL, a SOCKS5 `CONNECT` name),
//! never from a `Host` header; resolves the name itself and connects to
//! exactly the addresses it checked; refuses the loopback, private,
//! link-local, CGNAT and metadata addresses unless the policy pins the
//! name to them; and answers a refusal with the host and the line that
//! would allow it (HTTP 403, SOCKS reply 2), recorded as a [`Denial`].
//!
//! Not yet here (docs/network.md, "Status"): the per-run network namespace
//! that makes tools that ignore the proxy variables reach it, the DNS stub,
//! the policy's `network.domains` key, secrets and TLS interception.
//!
//! - [`address`]: what kind of address a name resolved to.
//! - [`allow`]: the `domains` lines and `hosts` pins.
//! - [`decide`]: a target to the addresses to connect to, or a [`Refusal`].
//! - [`proxy`]: the listener, HTTP; `socks`: SOCKS5; `relay`: the splice relay.

pub mod address;
pub mod allow;
pub mod decide;
pub mod proxy;
mod relay;
mod socks;

pub use address::{classify, AddressKind};
pub use allow::{AllowError, Allowlist, Entry};
pub use decide::{destination, Refusal, Target};
pub use proxy::{Denial, Denials, Proxy};
