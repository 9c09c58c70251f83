//! Integration tests of the client library against the real `toolsrv serve`
//! (found in the target directory by the test kit). One test binary; each
//! area in its own module.

mod support;

mod reconnect;
mod server;
