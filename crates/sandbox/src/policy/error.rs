//! Errors of policy loading.

use std::path::PathBuf;

/// Why a policy or profile could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum PolicyError {
    /// The file is not a valid policy; `line` is 1-based when known.
    #[error("{}{}: {message}", file.display(), line.map(|l| format!(":{l}")).unwrap_or_default())]
    Parse {
        /// The policy file.
        file: PathBuf,
        /// The line of the problem, when the YAML parser knows it.
        line: Option<usize>,
        /// What is wrong.
        message: String,
    },
    /// The file exists but cannot be read.
    #[error("cannot read sandbox policy {}: {source}", file.display())]
    Io {
        /// The policy file.
        file: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// No `<name>.yaml` in the profile directory.
    #[error("unknown sandbox profile \"{0}\"")]
    UnknownProfile(String),
    /// The profile name is not `[A-Za-z0-9._-]+` or starts with `.`.
    #[error("invalid sandbox profile name \"{0}\": names are letters, digits, '.', '_' and '-', not starting with '.'")]
    InvalidProfileName(String),
}
