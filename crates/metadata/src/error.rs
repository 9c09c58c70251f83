//! The error type of this crate.

use std::fmt;
use std::path::PathBuf;

/// Everything that can go wrong reading, resolving or invoking a tool.
///
/// Values are plain data (`Clone`), so errors can be cached beside the
/// metadata they came from.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MetaError {
    /// A tool file is malformed: the file, the line when known, the reason.
    #[error("{}", Located { path, line: *line, reason })]
    Invalid {
        /// The file the bad metadata is in.
        path: PathBuf,
        /// 1-based line in that file, when the YAML parser reported one.
        line: Option<usize>,
        /// What is wrong, as a lowercase sentence.
        reason: String,
    },
    /// No tool of that name exists in the tools directory.
    #[error("unknown tool \"{name}\"")]
    UnknownTool {
        /// The requested name.
        name: String,
    },
    /// The tool declares variants but none matches this host.
    #[error("tool \"{name}\" has no variant for {platform}/{arch}")]
    NoVariant {
        /// The tool.
        name: String,
        /// This host's platform (Go name).
        platform: String,
        /// This host's architecture (Go name).
        arch: String,
    },
    /// A file could not be read or inspected.
    #[error("cannot read {}: {reason}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The operating system's explanation.
        reason: String,
    },
    /// An argument value contains a NUL byte, which no process can receive.
    #[error("argument \"{name}\" of tool \"{tool}\" contains a NUL byte, which cannot be passed to a process")]
    NulByte {
        /// The tool being invoked.
        tool: String,
        /// The argument (or environment variable) name.
        name: String,
    },
    /// An argument (or the arguments together) would not fit in one string
    /// of a process's argument vector or environment.
    #[error("{what}; tool \"{tool}\" receives its arguments on its command line and in its environment, where Linux takes at most {limit} bytes per value: a tool receives a larger value in a file when its metadata declares the parameter with \"file: true\" (docs/metadata.md, \"Large values\")")]
    TooLarge {
        /// The tool being invoked.
        tool: String,
        /// What is too large and how large (`content is 140000 bytes`).
        what: String,
        /// The most that fits.
        limit: usize,
    },
    /// A bare program name was not found in any `PATH` directory.
    #[error("program \"{program}\" of tool \"{tool}\" was not found in PATH")]
    ProgramNotFound {
        /// The tool being invoked.
        tool: String,
        /// The bare program name.
        program: String,
    },
}

impl MetaError {
    /// Builds an [`MetaError::Invalid`] without a line number.
    pub fn invalid(path: impl Into<PathBuf>, reason: impl Into<String>) -> MetaError {
        MetaError::Invalid {
            path: path.into(),
            line: None,
            reason: reason.into(),
        }
    }

    /// Builds an [`MetaError::Io`] from an I/O error.
    pub fn io(path: impl Into<PathBuf>, err: &std::io::Error) -> MetaError {
        MetaError::Io {
            path: path.into(),
            reason: err.to_string(),
        }
    }
}

struct Located<'a> {
    path: &'a PathBuf,
    line: Option<usize>,
    reason: &'a str,
}

impl fmt::Display for Located<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.line {
            Some(line) => write!(f, "{}:{}: {}", self.path.display(), line, self.reason),
            None => write!(f, "{}: {}", self.path.display(), self.reason),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_names_file_line_reason() {
        let e = MetaError::Invalid {
            path: "/t/x.yaml".into(),
            line: Some(3),
            reason: "bad".into(),
        };
        assert_eq!(e.to_string(), "/t/x.yaml:3: bad");
        assert_eq!(MetaError::invalid("/t/x", "bad").to_string(), "/t/x: bad");
        let e = MetaError::NoVariant {
            name: "t".into(),
            platform: "linux".into(),
            arch: "amd64".into(),
        };
        assert_eq!(e.to_string(), "tool \"t\" has no variant for linux/amd64");
    }
}
