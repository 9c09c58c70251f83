//! Integration tests of the guard: the config reader against the real `git
//! config`, and the guard against real repositories. One test binary; each
//! area in its own module.

// Test code: an unexpected failure is a panic that names it.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod differential;
mod repos;
