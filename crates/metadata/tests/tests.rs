//! Integration tests of the metadata crate: real tool files in temporary
//! directories, parsed, discovered and run. One test binary; each area in its
//! own module.

// Test code: an unexpected failure is a panic that names it.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

mod builtin;
mod discover;
mod invocation;
mod parse;
