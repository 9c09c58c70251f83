//! Integration tests: the real `toolsrv` binary on a temp socket, driven over
//! the wire. One test binary; each feature in its own module.

mod util;

mod auth;
mod interop;
mod malformed;
mod namespace;
mod requests;
mod socket;
mod tools;
mod sandbox;
mod sandbox_fs;
