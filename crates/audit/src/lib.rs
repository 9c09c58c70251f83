//! The audit log (docs/audit.md): with `serve --audit <file>` the server
//! appends one JSON object per line for every run start and end, bypass
//! approval and rejection (with the approving client's uid and pid) and
//! denial. Each record carries `seq` (1, 2, … across restarts) and `prev`,
//! the SHA-256 (hex) of the previous record's line as written (64 zeros
//! for the first record of a new file), so [`verify`] finds a record that
//! was edited, removed, inserted or reordered.
//!
//! - `chain`: the hash of a line, and checking a whole file ([`verify`]).
//! - `log`: the writer ([`AuditLog`]): `0600`, opened for appending, never
//!   truncated; it goes on from the file's last record.
//! - `show`: a record for a person ([`human`]).

mod chain;
mod log;
mod show;

pub use chain::{line_hash, verify, Broken, GENESIS};
pub use log::{AuditError, AuditLog};
pub use show::human;
