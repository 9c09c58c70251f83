//! The codec's integration tests: round trips, an independent codec to
//! differ from, hostile and mutated frames. One test binary, a module per
//! subject.

mod common;

mod differential;
mod hostile;
mod mutation_fuzz;
mod roundtrip;
