//! The sandbox crate's integration tests: policies, confinement, the
//! spawn path, the filesystem view and the doctor's report, through the
//! crate's public face. One test binary (each subject a module); the spawn
//! tests that look at the whole process (its zombies, its mappings, a
//! process-wide switch, a large heap) are binaries of their own.

// Test code: an unexpected failure is a panic that names it.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod spawn_support;

mod confine_caps;
mod confine_fs;
mod confine_net;
mod confine_prepare;
mod doctor_report;
mod policy_parse;
mod policy_resolve;
mod policy_store;
mod spawn;
mod spawn_detached;
mod spawn_files;
mod view;
mod view_tools;
