//! Integration tests of the metadata crate: real tool files in temporary
//! directories, parsed, discovered and run. One test binary; each area in its
//! own module.

mod common;

mod builtin;
mod discover;
mod invocation;
mod parse;
