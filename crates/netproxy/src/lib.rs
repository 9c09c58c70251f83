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
//! A run's proxy ([`RunProxy`]) serves the listeners of the run's own
//! network namespace: the explicit proxy with the run's [`Credentials`], a
//! capture listener per listed port (`capture`), and a DNS stub (`dns`)
//! that answers listed names with stand-in addresses ([`Names`]); or, in
//! the fallback, the server's [`SharedProxy`], which admits each run by its
//! credentials. A run's [`Secrets`] are filled in for their hosts
//! (`intercept`), over TLS made with the server's [`Authority`] and
//! verified upstream ([`Upstream`]).
//!
//! - [`address`]: what kind of address a name resolved to.
//! - [`allow`]: the `domains` lines and `hosts` pins.
//! - [`decide`]: a target to the addresses to connect to, or a [`Refusal`].
//! - `gate`: what every connection is decided by; `denial`: the records.
//! - [`proxy`]: the listener, HTTP; `socks`: SOCKS5; `relay`: the splice relay.

pub mod address;
pub mod allow;
mod capture;
pub mod decide;
mod denial;
mod dns;
mod door;
mod gate;
mod intercept;
mod names;
pub mod proxy;
mod relay;
mod run;
mod secret;
mod socks;
mod tls;

pub use address::{classify, AddressKind};
pub use allow::{AllowError, Allowlist, Entry};
pub use decide::{destination, Refusal, Target};
pub use denial::{Denial, DenialKind, Denials};
pub use door::{Registration, SharedProxy};
pub use gate::Credentials;
pub use names::Names;
pub use proxy::Proxy;
pub use run::{RunListeners, RunProxy};
pub use secret::{placeholder_for, Secret, Secrets};
pub use tls::{Authority, Interception, TlsError, Upstream};
