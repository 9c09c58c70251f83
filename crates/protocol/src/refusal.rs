//! Refusals a client acts on, recognised in the error text it reads.
//!
//! Over 9P an error is its text (`Rerror`); the server's texts are the
//! `Display` of its typed errors. A client that must act on one kind of
//! refusal asks this module which kind it is, rather than matching the text
//! itself, so the wording lives in one place on the client side.

/// Why the server refused a request's working directory (docs/cli.md, "The client"),
/// when a client may retry without one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CwdRefusal {
    /// It lies outside the server's `--cwd`.
    OutsideServerCwd,
    /// The server cannot see it (nothing is there, for the server).
    Missing,
}

impl CwdRefusal {
    /// The kind of `message` when it is the server refusing a request's
    /// working directory as outside its `--cwd` or missing; `None` for any
    /// other error (a working directory that is a file is not retried).
    pub fn of_message(message: &str) -> Option<CwdRefusal> {
        let rest = message.strip_prefix("working directory ")?;
        if rest.contains("outside the server's --cwd") {
            Some(CwdRefusal::OutsideServerCwd)
        } else if rest.contains("does not exist") {
            Some(CwdRefusal::Missing)
        } else {
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_two_retryable_refusals_are_recognised() {
        assert_eq!(
            CwdRefusal::of_message(
                "working directory \"/x\" is outside the server's --cwd \"/srv\""
            ),
            Some(CwdRefusal::OutsideServerCwd)
        );
        assert_eq!(
            CwdRefusal::of_message("working directory \"/x\" does not exist"),
            Some(CwdRefusal::Missing)
        );
        assert_eq!(
            CwdRefusal::of_message("working directory \"/x\" is not a directory"),
            None
        );
        assert_eq!(CwdRefusal::of_message("tool \"t\" does not exist"), None);
    }
}
