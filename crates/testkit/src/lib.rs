//! The toolsrv test kit: what every integration test and the bench share.
//!
//! - [`Launch`] / [`Server`]: the real `toolsrv serve` on a socket in a temp
//!   directory, killed on drop; one launcher for every test and bench.
//! - [`Raw`]: a blocking raw 9P2000 client built on the project's wire codec
//!   (`toolsrv_wire::read_frame`, `encode`), which allocates its own fids.
//! - [`Frames`]: the asynchronous raw 9P2000 peer, over any byte stream
//!   (the in-process suites' peers build on it).
//! - [`Sshd`]: a throwaway OpenSSH server on loopback for the remote tests.
//! - [`cli`]: the `toolsrv` CLI pointed at a socket.
//! - [`toolsrv_bin`], [`example`]: the binaries `cargo test` built; nothing
//!   here builds anything.
//! - [`skip`]: honest skips (a test that could not run is recorded, or fails
//!   under `CI=true` when `.ci/run` should have installed what it lacks).
//!
//! Every wait is bounded ([`WAIT`]) and polls a condition ([`wait_until`]).

// Test code: an unexpected failure is a panic that names it.
#![allow(clippy::unwrap_used, clippy::expect_used)]
#![warn(missing_docs)]

mod frames;
mod paths;
pub mod pids;
mod raw;
mod server;
pub mod skip;
mod sshd;
mod sys;

use std::time::{Duration, Instant};

pub use frames::{read_frame, Frames};
pub use paths::{cli, example, toolsrv_bin};
pub use raw::Raw;
pub use server::{write_tool, Launch, LaunchError, Server};
pub use sshd::Sshd;

/// How long any single wait in a test may take.
pub const WAIT: Duration = Duration::from_secs(10);

/// Poll `cond` every few milliseconds until it holds or `limit` passes; the
/// last answer of `cond`.
pub fn wait_until(limit: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let start = Instant::now();
    while start.elapsed() < limit {
        if cond() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    cond()
}
