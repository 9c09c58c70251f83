//! The integration tests' harness: the test kit's launcher, raw 9P client
//! and binaries (crates/testkit), shared by every module.

#![allow(unused_imports)]

pub use toolsrv_testkit::{cli, example, toolsrv_bin, wait_until, Launch, Raw, Server, WAIT};
