//! Integration tests of the protocol types: property tests and a bounded fuzz
//! loop of the payload parser. One test binary; each area in its own module.

// Test code: an unexpected failure is a panic that names it.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod fuzz_payload;
mod roundtrip;
