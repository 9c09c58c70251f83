//! Tool metadata for toolsrv: parsing tool files (executables with sidecar or
//! header-block metadata, metadata-only command tools, interpreted scripts),
//! host variants, argument rendering into process invocations, discovery of
//! the tools directory with a stat-keyed cache, and the embedded built-in
//! tool set.
//!
//! The format is specified in `docs/tools.md`; the design
//! decisions this crate makes where the spec is open are in
//! `docs/metadata.md`.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod builtin;
mod discover;
mod error;
mod header;
mod host;
mod info;
mod invocation;
mod parse;
mod quote;
mod raw;
mod template;
mod tool;

pub use builtin::{builtin_files, install_builtin, write_builtin, BuiltinFile};
pub use discover::Catalog;
pub use error::MetaError;
pub use host::{go_arch, go_os, Host};
pub use invocation::{ArgFile, Invocation, FIRST_FILE_FD, MAX_ARG_STRLEN};
pub use parse::MAX_FILE_PARAMS;
pub use quote::{sh_join, sh_quote, single_quote};
pub use template::{Segment, Template, TemplateError};
pub use tool::{OutputMode, Tool, ToolKind};
