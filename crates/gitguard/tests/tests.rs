//! Integration tests of the guard: the config reader against the real `git
//! config`, and the guard against real repositories. One test binary; each
//! area in its own module.

mod differential;
mod repos;
