//! Integration tests of the protocol types: property tests and a bounded fuzz
//! loop of the payload parser. One test binary; each area in its own module.

mod fuzz_payload;
mod roundtrip;
