//! The proxy over real loopback sockets: upstreams are listeners on
//! 127.0.0.1 that the policy pins names to (`network.hosts`), and each
//! test counts what reached them.

// Test code: an unexpected failure is a panic that names it.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod proxy;
mod secrets;
