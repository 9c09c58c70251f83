//! Turning a tool plus an argument object into a process to spawn.

use std::collections::HashSet;
use std::ffi::OsString;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use serde_json::{Map, Value};

use crate::error::MetaError;
use crate::quote::sh_join;
use crate::template::value_text;
use crate::tool::{Tool, ToolKind};

/// Everything needed to spawn one tool run (the server adds its own
/// environment, working directory and sandbox).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Invocation {
    /// The program to execute, absolute when it came from a bare name
    /// (resolved through `PATH`).
    pub program: PathBuf,
    /// The argument vector, `argv[0]` first.
    pub argv: Vec<String>,
    /// Tool-specific environment: `TOOL_ARGS` (the argument object as
    /// compact JSON) and `ARG_<NAME>` for each scalar argument.
    pub env: Vec<(String, String)>,
    /// `argv` shell-quoted and joined with spaces (for display and
    /// validation).
    pub display: String,
    /// The values of the `file: true` arguments given, each to be passed as
    /// the open file [`ArgFile::fd`] of the tool (docs/metadata.md, "Large
    /// values").
    pub files: Vec<ArgFile>,
}

/// One `file: true` argument: the tool finds its value in the file open as
/// its descriptor `fd`, named `/proc/self/fd/<fd>` in `argv` and the
/// environment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ArgFile {
    /// The argument's name.
    pub name: String,
    /// The descriptor number the tool has it on: 3 for the first file
    /// argument given, 4 for the next, …
    pub fd: i32,
    /// The value.
    pub value: String,
}

impl ArgFile {
    /// The path the tool opens: `/proc/self/fd/<fd>`.
    pub fn path(&self) -> String {
        file_path(self.fd)
    }
}

/// `/proc/self/fd/<fd>`: a path every process of the tool can open while it
/// holds the descriptor (children inherit it), whatever its sandbox grants.
fn file_path(fd: i32) -> String {
    format!("/proc/self/fd/{fd}")
}

/// The first descriptor number of the file arguments.
pub const FIRST_FILE_FD: i32 = 3;

/// The longest string Linux passes in an argument vector or environment:
/// `MAX_ARG_STRLEN`, 32 pages of 4 KiB, its terminating NUL included.
pub const MAX_ARG_STRLEN: usize = 32 * 4096;

impl Tool {
    /// Builds the invocation for `args` (already converted and validated
    /// against the schema by the caller).
    ///
    /// Command tools run `/bin/sh -c <rendered template>`; executables get
    /// `--name value` pairs in schema declaration order, then further
    /// arguments in name order; interpreted scripts run
    /// `<interpreter> <script> --name value ...`. Every shape also gets
    /// `TOOL_ARGS` and `ARG_<NAME>` in `env`.
    pub fn invocation(&self, args: &Map<String, Value>) -> Result<Invocation, MetaError> {
        let files = self.arg_files(args);
        // What argv and the environment say of the arguments: a file
        // argument by its file's path.
        let mut shown = args.clone();
        for name in &self.file_params {
            shown.remove(name);
        }
        let (program, argv) = match &self.kind {
            ToolKind::Command { template } => {
                let mut render = shown.clone();
                for name in &self.file_params {
                    let path = files
                        .iter()
                        .find(|f| f.name == *name)
                        .map_or_else(String::new, ArgFile::path);
                    render.insert(name.clone(), Value::String(path));
                }
                let rendered = template.render(&render, &self.input_schema);
                self.check_length("the command", &rendered, args, &files)?;
                (
                    PathBuf::from("/bin/sh"),
                    vec!["sh".to_string(), "-c".to_string(), rendered],
                )
            }
            ToolKind::Executable { program } => {
                let program = self.resolve_program(program, None, false)?;
                let mut argv = vec![program.to_string_lossy().into_owned()];
                argv.extend(self.flag_args(&shown, &files));
                (program, argv)
            }
            ToolKind::Interpreted {
                interpreter,
                script,
            } => {
                let mut words = interpreter.split_whitespace();
                let first = words.next().unwrap_or_default();
                let program = self.resolve_program(Path::new(first), script.parent(), true)?;
                let mut argv = vec![program.to_string_lossy().into_owned()];
                argv.extend(words.map(str::to_string));
                argv.push(script.to_string_lossy().into_owned());
                argv.extend(self.flag_args(&shown, &files));
                (program, argv)
            }
        };
        self.check_sizes(&shown)?;
        let mut env = arg_env(&shown);
        for f in &files {
            env.push((format!("{}_FILE", env_name(&f.name)), f.path()));
        }
        for (name, value) in &shown {
            if has_raw_nul(value) {
                return Err(MetaError::NulByte {
                    tool: self.name.clone(),
                    name: name.clone(),
                });
            }
        }
        let display = sh_join(&argv);
        Ok(Invocation {
            program,
            argv,
            env,
            display,
            files,
        })
    }

    /// The `file: true` arguments given, numbered from [`FIRST_FILE_FD`] in
    /// declaration order.
    fn arg_files(&self, args: &Map<String, Value>) -> Vec<ArgFile> {
        self.file_params
            .iter()
            .filter_map(|name| match args.get(name) {
                None | Some(Value::Null) => None,
                Some(v) => Some((name, value_text(v))),
            })
            .zip(FIRST_FILE_FD..)
            .map(|((name, value), fd)| ArgFile {
                name: name.clone(),
                fd,
                value,
            })
            .collect()
    }

    /// Refuses, with the numbers, an argument that would not fit in one
    /// string of the argument vector or environment (each scalar is both
    /// `--name value` and `ARG_NAME=value`), and a `TOOL_ARGS` that would not.
    fn check_sizes(&self, shown: &Map<String, Value>) -> Result<(), MetaError> {
        for (name, v) in shown {
            let items: Vec<String> = match v {
                Value::Array(items) => items.iter().map(value_text).collect(),
                Value::String(_) | Value::Number(_) | Value::Bool(_) => vec![value_text(v)],
                _ => Vec::new(),
            };
            let prefix = env_name(name).len() + 1;
            for text in items {
                if prefix + text.len() + 1 > MAX_ARG_STRLEN {
                    return Err(self.too_large(name, text.len(), prefix));
                }
            }
        }
        let json = Value::Object(shown.clone()).to_string();
        self.check_length("TOOL_ARGS (the arguments as JSON)", &json, shown, &[])?;
        Ok(())
    }

    /// Refuses `text` (one string of the argument vector or environment,
    /// `what`) when it is longer than Linux passes, naming the largest
    /// argument in it.
    fn check_length(
        &self,
        what: &str,
        text: &str,
        args: &Map<String, Value>,
        files: &[ArgFile],
    ) -> Result<(), MetaError> {
        let overhead = if what.starts_with("TOOL_ARGS") {
            "TOOL_ARGS=".len()
        } else {
            0
        };
        if overhead + text.len() < MAX_ARG_STRLEN {
            return Ok(());
        }
        let largest = args
            .iter()
            .filter(|(name, _)| !files.iter().any(|f| f.name == **name))
            .map(|(name, v)| (name, value_text(v).len()))
            .max_by_key(|(_, len)| *len);
        Err(MetaError::TooLarge {
            tool: self.name.clone(),
            what: match largest {
                Some((name, len)) => {
                    format!("{what} is {} bytes ({name} is {len} of them)", text.len())
                }
                None => format!("{what} is {} bytes", text.len()),
            },
            limit: MAX_ARG_STRLEN - 1 - overhead,
        })
    }

    /// The error for argument `name` of `len` bytes (`prefix`: the bytes of
    /// `ARG_NAME=` before it).
    fn too_large(&self, name: &str, len: usize, prefix: usize) -> MetaError {
        MetaError::TooLarge {
            tool: self.name.clone(),
            what: format!("{name} is {len} bytes"),
            limit: MAX_ARG_STRLEN - 1 - prefix,
        }
    }

    /// Argument names in argv order: declared order first, then the rest by
    /// name.
    fn ordered_names<'a>(
        &'a self,
        args: &'a Map<String, Value>,
        files: &[ArgFile],
    ) -> Vec<&'a str> {
        let mut seen = HashSet::new();
        let mut names: Vec<&str> = self
            .param_order
            .iter()
            .map(String::as_str)
            .filter(|n| {
                (args.contains_key(*n) || files.iter().any(|f| f.name == *n)) && seen.insert(*n)
            })
            .collect();
        let mut rest: Vec<&str> = args
            .keys()
            .map(String::as_str)
            .filter(|n| !seen.contains(n))
            .collect();
        rest.sort_unstable();
        names.extend(rest);
        names
    }

    /// `--name value` pairs for executables and interpreted scripts, and
    /// `--name-file /proc/self/fd/N` for the file arguments.
    fn flag_args(&self, args: &Map<String, Value>, files: &[ArgFile]) -> Vec<String> {
        let mut out = Vec::new();
        for name in self.ordered_names(args, files) {
            if let Some(f) = files.iter().find(|f| f.name == name) {
                out.push(format!("--{name}-file"));
                out.push(f.path());
                continue;
            }
            let flag = format!("--{name}");
            match args.get(name) {
                None | Some(Value::Null) | Some(Value::Bool(false)) => {}
                Some(Value::Bool(true)) => out.push(flag),
                Some(Value::Array(items)) => {
                    for item in items {
                        out.push(flag.clone());
                        out.push(value_text(item));
                    }
                }
                Some(v) => {
                    out.push(flag);
                    out.push(value_text(v));
                }
            }
        }
        out
    }

    /// Makes `program` absolute: bare names through `PATH`, relative paths
    /// against `base` (the tools directory) when given. An interpreter
    /// (`interpreter_lookup`) is the first real program of that name in
    /// `PATH`, passing over version-manager shims (scripts such as pyenv's
    /// `~/.pyenv/shims/python3`, which exec things the sandbox does not grant).
    fn resolve_program(
        &self,
        program: &Path,
        base: Option<&Path>,
        interpreter_lookup: bool,
    ) -> Result<PathBuf, MetaError> {
        if program.is_absolute() {
            return Ok(program.to_path_buf());
        }
        if program.components().count() > 1 {
            return Ok(match base {
                Some(base) => base.join(program),
                None => program.to_path_buf(),
            });
        }
        let path = std::env::var_os("PATH").unwrap_or_else(|| OsString::from("/usr/bin:/bin"));
        let found = if interpreter_lookup {
            find_interpreter_in_path(program, &path)
        } else {
            find_in_path(program, &path)
        };
        found.ok_or_else(|| MetaError::ProgramNotFound {
            tool: self.name.clone(),
            program: program.to_string_lossy().into_owned(),
        })
    }
}

/// Looks `name` up in the colon-separated directory list `path`, returning
/// the first regular file with an execute bit.
pub fn find_in_path(name: &Path, path: &std::ffi::OsStr) -> Option<PathBuf> {
    candidates_in_path(name, path).next()
}

/// Every regular file with an execute bit named `name` in `path`, in order.
fn candidates_in_path<'a>(
    name: &'a Path,
    path: &'a std::ffi::OsStr,
) -> impl Iterator<Item = PathBuf> + 'a {
    std::env::split_paths(path)
        .filter(|dir| dir.is_absolute())
        .map(move |dir| dir.join(name))
        .filter(|candidate| {
            candidate
                .metadata()
                .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        })
}

/// Like [`find_in_path`], but the first candidate that is not a script (`#!`)
/// wins: a shim of a version manager is a script that execs the real
/// interpreter through files the sandbox does not grant. With only scripts of
/// that name, the first one.
pub fn find_interpreter_in_path(name: &Path, path: &std::ffi::OsStr) -> Option<PathBuf> {
    let mut first = None;
    for c in candidates_in_path(name, path) {
        if !is_script(&c) {
            return Some(c);
        }
        first.get_or_insert(c);
    }
    first
}

/// Whether `file` starts with `#!`.
fn is_script(file: &Path) -> bool {
    use std::io::Read;
    let mut head = [0u8; 2];
    std::fs::File::open(file)
        .and_then(|mut f| f.read_exact(&mut head))
        .is_ok_and(|()| &head == b"#!")
}

/// `TOOL_ARGS` plus `ARG_<NAME>` for each scalar (string, number, boolean)
/// argument, in name order.
fn arg_env(args: &Map<String, Value>) -> Vec<(String, String)> {
    let mut env = vec![(
        "TOOL_ARGS".to_string(),
        Value::Object(args.clone()).to_string(),
    )];
    let mut scalars: Vec<(String, String)> = args
        .iter()
        .filter(|(_, v)| matches!(v, Value::String(_) | Value::Number(_) | Value::Bool(_)))
        .map(|(k, v)| (env_name(k), value_text(v)))
        .collect();
    scalars.sort();
    env.extend(scalars);
    env
}

/// `ARG_` plus the name upper-cased, non-alphanumerics as `_`.
pub fn env_name(name: &str) -> String {
    let mut out = String::from("ARG_");
    out.extend(name.chars().map(|c| {
        if c.is_ascii_alphanumeric() {
            c.to_ascii_uppercase()
        } else {
            '_'
        }
    }));
    out
}

/// Whether the text given to the process for `v` would hold a NUL byte
/// (strings, directly or as array elements; JSON text escapes NUL).
fn has_raw_nul(v: &Value) -> bool {
    match v {
        Value::String(s) => s.contains('\0'),
        Value::Array(items) => items
            .iter()
            .any(|i| matches!(i, Value::String(s) if s.contains('\0'))),
        _ => false,
    }
}
