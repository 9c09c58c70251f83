//! The validator's integration tests: its rules and the rate limiter. One
//! test binary, a module per subject.

mod validate;
mod validate_rate;
