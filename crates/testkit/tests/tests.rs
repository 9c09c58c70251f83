//! The test kit's own tests: its helpers and the skip rule. One test
//! binary, a module per subject.

mod kit;
mod skip;
