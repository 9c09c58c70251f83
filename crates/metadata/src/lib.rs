//! Tool metadata for toolsrv: parsing tool files (executables with sidecar or
//! header-block metadata, metadata-only command tools, interpreted scripts),
//! host variants, argument rendering into process invocations, discovery of
//! the tools directory with a stat-keyed cache, and the embedded built-in
//! tool set.
//!
//! The format is specified in `TOOLS.md` ("Tool metadata"); the design
//! decisions this crate makes where the spec is open are in
//! `docs/metadata.md`.

#![warn(missing_docs)]

pub mod builtin;
pub mod discover;
pub mod error;
pub mod header;
pub mod host;
pub mod info;
pub mod invocation;
pub mod parse;
pub mod quote;
pub mod raw;
pub mod template;
pub mod tool;

pub use builtin::{builtin_files, install_builtin, write_builtin, BuiltinFile};
pub use discover::Catalog;
pub use error::MetaError;
pub use host::Host;
pub use invocation::Invocation;
pub use quote::sh_quote;
pub use template::Template;
pub use tool::{OutputMode, Tool, ToolKind};
