//! The codec's integration tests: round trips, an independent codec to
//! differ from, hostile and mutated frames. One test binary, a module per
//! subject.

// Test code: an unexpected failure is a panic that names it.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

mod differential;
mod hostile;
mod mutation_fuzz;
mod roundtrip;
