//! The sandbox policy (`sandbox.yaml`): parsing with file-and-line errors, path
//! variables, resolution into [`crate::rules::ResolvedRules`], named profiles
//! with reload on change, and the embedded default policy.

mod env_paths;
mod error;
pub(crate) mod glob;
mod ldd;
mod model;
mod parse;
mod paths;
mod protected;
mod resolve;
mod store;
mod sys;

pub use error::PolicyError;
pub(crate) use model::Network;
pub use model::Policy;
pub use model::{SecretSource, SecretSpec};
pub use paths::PathContext;
pub use protected::carved_paths;
pub(crate) use protected::{anchor, name_matches};
pub(crate) use protected::{CREDENTIAL_STORES, PROTECTED, TOOLSRV_BINARIES, TOOLSRV_STATE};
pub use store::{write_default, PolicyStore};

/// The built-in default policy (written out by `toolsrv init`, used when no
/// policy file exists): default-deny with the system directories readable and
/// executable, the working directory and a private temporary directory writable.
pub const DEFAULT_POLICY: &str = include_str!("../default-sandbox.yaml");
